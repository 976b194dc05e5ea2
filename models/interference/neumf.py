"""NeuMF (He et al., 2017) over (kind, partner, device) with side features and a wide part."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from models.interference.tables import grown, lookup, lookup2

if TYPE_CHECKING:
    from models.interference.rows import Rows


class NeuMF(nn.Module):
    """NeuMF over (kind, partner, device) with side features and a linear ("wide") part.

    Each entity's embedding is ``E[id] + W f`` — an id embedding plus a linear map of its side
    features — so entities never seen (or seen in a handful of rows) still get a representation
    from what they share with the others (model family, batch size, device specs). The GMF tower
    multiplies kind and partner embeddings modulated by the device, ``k * p * (1 + d)``, so a
    zero device embedding means "the interaction shared by all devices". With ``symmetric`` the
    kind and partner roles share one GMF table, so that term is the same for (a, b) and (b, a):
    contention between two jobs is one phenomenon that slows both (on the Gavel data, what the
    additive part leaves over for (a, b) and for (b, a) correlates at 0.4-0.7). The MLP tower sees the
    concatenated MLP embeddings. A linear layer over both towers gives (feasibility logit,
    throughput), to which the wide part adds biases: per kind and partner, shared and per
    device, and per-device linear effects of the side features. On a few hundred measurements
    most of the signal is additive (how sensitive a kind is, how aggressive a partner is, on
    this device); the biases carry it with few parameters and leave the towers the interaction.

    :param n_kinds: kind vocabulary size (shared by the kind and partner roles).
    :param n_devices: device vocabulary size.
    :param kind_dim: side features per kind (0 = none).
    :param device_dim: side features per device (0 = none).
    :param dim: GMF embedding size.
    :param mlp_dim: MLP embedding size.
    :param hidden: MLP hidden layer sizes.
    :param dropout: dropout after each hidden layer.
    :param wide: include the linear part.
    :param symmetric: one GMF table for both roles (a symmetric interaction term).
    :param seed: initialisation seed.
    """

    gmf_kind: nn.Parameter

    def __init__(
        self,
        n_kinds: int,
        n_devices: int,
        kind_dim: int = 0,
        device_dim: int = 0,
        dim: int = 8,
        mlp_dim: int = 16,
        hidden: Sequence[int] = (64, 32),
        dropout: float = 0.0,
        wide: bool = True,
        symmetric: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self._cfg: dict[str, Any] = {
            "n_kinds": n_kinds,
            "n_devices": n_devices,
            "kind_dim": kind_dim,
            "device_dim": device_dim,
            "dim": dim,
            "mlp_dim": mlp_dim,
            "hidden": list(hidden),
            "dropout": dropout,
            "wide": wide,
            "symmetric": symmetric,
            "seed": seed,
        }
        g = torch.Generator().manual_seed(seed)
        k, d = n_kinds, n_devices
        # Id tables and the vocabulary axes ("k" kinds, "d" devices) of their leading dimensions.
        self.axes: dict[str, tuple[str, ...]] = {}
        for role, n, ax in (("kind", k, "k"), ("partner", k, "k"), ("device", d, "d")):
            if not (symmetric and role == "partner"):
                self._table(f"gmf_{role}", (ax,), torch.randn(n, dim, generator=g) * 0.1)
            self._table(f"mlp_{role}", (ax,), torch.randn(n, mlp_dim, generator=g) * 0.1)
        if wide:
            self._table("b_kind", ("k",), torch.zeros(k, 2))
            self._table("b_partner", ("k",), torch.zeros(k, 2))
            self._table("b_device", ("d",), torch.zeros(d, 2))
            self._table("b_dev_kind", ("d", "k"), torch.zeros(d, k, 2))
            self._table("b_dev_partner", ("d", "k"), torch.zeros(d, k, 2))
            self._table("w_dev_kind", ("d",), torch.zeros(d, kind_dim, 2))
            self._table("w_dev_partner", ("d",), torch.zeros(d, kind_dim, 2))
        # nn.Linear initialises from the global generator: seed it here (and leave the caller's
        # state alone) so a fit is reproducible.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            # Side features map into both towers; no bias, so a zero feature vector adds nothing.
            self.side_kind = nn.Linear(kind_dim, 2 * dim + 2 * mlp_dim, bias=False) if kind_dim else None
            self.side_device = nn.Linear(device_dim, dim + mlp_dim, bias=False) if device_dim else None
            self.wide_kind = nn.Linear(kind_dim, 4, bias=False) if kind_dim and wide else None
            layers: list[nn.Module] = []
            width = 3 * mlp_dim
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ReLU()]
                if dropout:
                    layers.append(nn.Dropout(dropout))
                width = h
            self.mlp = nn.Sequential(*layers)
            self.out = nn.Linear(dim + width, 2)
        with torch.no_grad():
            # Start near "shares, at a typical throughput" rather than at a coin flip.
            self.out.bias.copy_(torch.tensor([2.0, 0.6]))

    def _table(self, name: str, axes: tuple[str, ...], value: torch.Tensor) -> None:
        self.axes[name] = axes
        setattr(self, name, nn.Parameter(value))

    def config(self) -> dict[str, Any]:
        """JSON-able constructor arguments (with the current vocabulary sizes)."""
        return dict(self._cfg)

    def grow(self, kinds: int = 0, devices: int = 0) -> None:
        """Add vocabulary entries; their id embeddings and biases start at zero, so a new entity
        begins as its side features' prediction and moves from there with its own samples.

        :param kinds: new kinds.
        :param devices: new devices.
        """
        for name, axes in self.axes.items():
            for dim, ax in enumerate(axes):
                extra = kinds if ax == "k" else devices
                if extra:
                    setattr(self, name, grown(getattr(self, name), dim, extra))
        self._cfg["n_kinds"] += kinds
        self._cfg["n_devices"] += devices

    def table_index(
        self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor
    ) -> dict[str, list[tuple[torch.Tensor, ...]]]:
        """Per id table, the cells (index tuples over its leading axes) each sample reads; the
        shared GMF table of a symmetric model is read twice, as kind and as partner."""
        idx = {"kind": kind, "partner": partner, "device": device}
        out: dict[str, list[tuple[torch.Tensor, ...]]] = {}
        for name, axes in self.axes.items():
            role = name.split("_")[-1]
            if axes == ("d", "k"):
                out[name] = [(device, idx[role])]
            else:
                out[name] = [(device,) if axes == ("d",) else (idx[role],)]
        if self._cfg["symmetric"]:
            out["gmf_kind"].append((partner,))
        return out

    def _used(
        self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The id-table rows each sample uses (as the kind, for the shared GMF table)."""
        out = {}
        for name, cells in self.table_index(kind, partner, device).items():
            t, ix = getattr(self, name), cells[0]
            out[name] = lookup2(t, *ix) if len(ix) == 2 else lookup(t, ix[0])
        return out

    def regulariser(self, rows: Rows | None = None) -> torch.Tensor:
        """Sum of squares of the id tables: of the rows the samples use, per sample, or (``None``)
        of all of them."""
        if rows is None:
            return sum((getattr(self, n).pow(2).sum() for n in self.axes), torch.zeros(()))
        used = self._used(rows.kind, rows.partner, rows.device)
        return sum((v.pow(2).sum() for v in used.values()), torch.zeros(())) / max(len(rows), 1)

    def forward(
        self,
        kind: torch.Tensor,
        partner: torch.Tensor,
        device: torch.Tensor,
        kind_x: torch.Tensor | None = None,
        partner_x: torch.Tensor | None = None,
        device_x: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(feasibility logit, throughput), each (B,), from indices (B,) and side features
        (B, kind_dim) / (B, device_dim); -1 marks a cold-start entity."""
        d, m = self._cfg["dim"], self._cfg["mlp_dim"]
        u = self._used(kind, partner, device)
        sym = self._cfg["symmetric"]
        gk, gd = u["gmf_kind"], u["gmf_device"]
        gp = lookup(self.gmf_kind, partner) if sym else u["gmf_partner"]
        mk, mp, md = u["mlp_kind"], u["mlp_partner"], u["mlp_device"]
        sides = self.side_kind is not None and kind_x is not None and partner_x is not None
        if sides:
            assert self.side_kind is not None and kind_x is not None and partner_x is not None
            sk, sp = self.side_kind(kind_x), self.side_kind(partner_x)
            gk, mk = gk + sk[:, :d], mk + sk[:, 2 * d : 2 * d + m]
            gp, mp = gp + (sp[:, :d] if sym else sp[:, d : 2 * d]), mp + sp[:, 2 * d + m :]
        if self.side_device is not None and device_x is not None:
            sd = self.side_device(device_x)
            gd, md = gd + sd[:, :d], md + sd[:, d:]
        gmf = gk * gp * (1.0 + gd)
        h = self.mlp(torch.cat((mk, mp, md), dim=1))
        o = self.out(torch.cat((gmf, h), dim=1))
        if self._cfg["wide"]:
            o = o + u["b_kind"] + u["b_partner"] + u["b_device"] + u["b_dev_kind"] + u["b_dev_partner"]
            if sides and self.wide_kind is not None:
                assert kind_x is not None and partner_x is not None
                o = o + self.wide_kind(kind_x)[:, :2] + self.wide_kind(partner_x)[:, 2:]
                o = o + torch.einsum("bf,bfo->bo", kind_x, u["w_dev_kind"])
                o = o + torch.einsum("bf,bfo->bo", partner_x, u["w_dev_partner"])
        return o[:, 0], o[:, 1]
