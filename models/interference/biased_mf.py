"""SVD-style biased matrix factorisation (Paragon / Quasar), the NeuMF baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from models.interference.tables import grown, lookup, lookup2

if TYPE_CHECKING:
    from models.interference.rows import Rows

#: Factor layouts of :class:`BiasedMF`: rows ``(device, kind)`` x columns ``partner``, or rows
#: ``kind`` x columns ``(device, partner)`` (Quasar's applications x platform-and-interference).
MF_LAYOUTS = ("dk-p", "k-dp")


class BiasedMF(nn.Module):
    """Biased matrix factorisation of the (device, kind, partner) tensor, one per output head.

    ``out = mu + b_d + b_k + b_dk + b_p + b_dp + <P_row, Q_col>`` for each of the two heads
    (feasibility logit, throughput), with rows and columns chosen by ``layout``: ``"dk-p"`` puts
    (device, kind) in rows and partners in columns (partner factors shared by all devices);
    ``"k-dp"`` puts kinds in rows (shared by all devices) and (device, partner) in columns. The
    additive part carries both shared and per-device kind and partner biases in either layout:
    it is the classic "baseline predictor" of Koren's SVD, so the factors only explain the
    interaction left over.

    :param n_kinds: kind vocabulary size.
    :param n_devices: device vocabulary size.
    :param rank: factors per head.
    :param layout: one of :data:`MF_LAYOUTS`.
    :param seed: initialisation seed.
    """

    def __init__(self, n_kinds: int, n_devices: int, rank: int = 4, layout: str = "dk-p", seed: int = 0):
        super().__init__()
        if layout not in MF_LAYOUTS:
            raise ValueError(f"layout must be one of {MF_LAYOUTS}, got {layout!r}")
        self._cfg: dict[str, Any] = {
            "n_kinds": n_kinds,
            "n_devices": n_devices,
            "rank": rank,
            "layout": layout,
            "seed": seed,
        }
        g = torch.Generator().manual_seed(seed)
        self.mu = nn.Parameter(torch.tensor([2.0, 0.6]))
        self.b_d = nn.Parameter(torch.zeros(n_devices, 2))
        self.b_k = nn.Parameter(torch.zeros(n_kinds, 2))
        self.b_p = nn.Parameter(torch.zeros(n_kinds, 2))
        self.b_dk = nn.Parameter(torch.zeros(n_devices, n_kinds, 2))
        self.b_dp = nn.Parameter(torch.zeros(n_devices, n_kinds, 2))
        # The per-device side of the layout has a device axis; the shared side does not.
        self.f_dev = nn.Parameter(torch.randn(n_devices, n_kinds, 2, rank, generator=g) * 0.1)
        self.f_shared = nn.Parameter(torch.randn(n_kinds, 2, rank, generator=g) * 0.1)
        self.axes: dict[str, tuple[str, ...]] = {
            "b_d": ("d",),
            "b_k": ("k",),
            "b_p": ("k",),
            "b_dk": ("d", "k"),
            "b_dp": ("d", "k"),
            "f_dev": ("d", "k"),
            "f_shared": ("k",),
        }

    def table_index(
        self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor
    ) -> dict[str, list[tuple[torch.Tensor, ...]]]:
        """Per table, the cells (index tuples over its leading axes) each sample reads."""
        row_kind = self._cfg["layout"] == "dk-p"
        return {
            "b_d": [(device,)],
            "b_k": [(kind,)],
            "b_p": [(partner,)],
            "b_dk": [(device, kind)],
            "b_dp": [(device, partner)],
            "f_dev": [(device, kind if row_kind else partner)],
            "f_shared": [(partner if row_kind else kind,)],
        }

    def config(self) -> dict[str, Any]:
        """JSON-able constructor arguments (with the current vocabulary sizes)."""
        return dict(self._cfg)

    def grow(self, kinds: int = 0, devices: int = 0) -> None:
        """Add vocabulary entries: zero biases, small random factors (zero factors would never
        receive a gradient, since each factor's gradient is the other factor).

        :param kinds: new kinds.
        :param devices: new devices.
        """
        if kinds:
            for name in ("b_k", "b_p", "f_shared"):
                setattr(self, name, grown(getattr(self, name), 0, kinds))
            for name in ("b_dk", "b_dp"):
                setattr(self, name, grown(getattr(self, name), 1, kinds))
            self.f_dev = grown(self.f_dev, 1, kinds, 0.1)
            self._cfg["n_kinds"] += kinds
        if devices:
            for name in ("b_d", "b_dk", "b_dp"):
                setattr(self, name, grown(getattr(self, name), 0, devices))
            self.f_dev = grown(self.f_dev, 0, devices, 0.1)
            self._cfg["n_devices"] += devices

    def terms(self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor) -> list[torch.Tensor]:
        """The per-row parameters a prediction uses (for Koren-style per-sample L2)."""
        if self._cfg["layout"] == "dk-p":
            row, col = lookup2(self.f_dev, device, kind), lookup(self.f_shared, partner)
        else:
            row, col = lookup(self.f_shared, kind), lookup2(self.f_dev, device, partner)
        return [
            lookup(self.b_d, device),
            lookup(self.b_k, kind),
            lookup(self.b_p, partner),
            lookup2(self.b_dk, device, kind),
            lookup2(self.b_dp, device, partner),
            row,
            col,
        ]

    def regulariser(self, rows: Rows | None = None) -> torch.Tensor:
        """Sum of squares of the biases and factors: of those the samples use, per sample
        (Koren's SGD), or (``None``) of all of them."""
        if rows is None:
            return sum((p.pow(2).sum() for n, p in self.named_parameters() if n != "mu"), torch.zeros(()))
        terms = self.terms(rows.kind, rows.partner, rows.device)
        return sum((t.pow(2).sum() for t in terms), torch.zeros(())) / max(len(rows), 1)

    def forward(
        self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor, *_: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(feasibility logit, throughput), each (B,); side features are ignored."""
        bd, bk, bp, bdk, bdp, row, col = self.terms(kind, partner, device)
        o = self.mu + bd + bk + bp + bdk + bdp + (row * col).sum(-1)
        return o[:, 0], o[:, 1]
