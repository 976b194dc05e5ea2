"""Interference models over (kind, partner, device) triples: NeuMF and its classic baselines.

Every model maps a batch of index tensors (kind, partner, device) plus per-row side features to
two outputs: a *feasibility logit* (can ``kind`` share the device with ``partner`` at all?) and
the *normalised co-located throughput* when it can. Measurements code "cannot share" as a
throughput of 0; regressing through that cliff would smear it into small positive numbers that
are wrong both ways, so feasibility is a classification head and the throughput head learns from
feasible rows only. A prediction is 0 where the feasibility probability is below one half: with
probability ``q`` of sharing, answering the throughput ``v`` costs an expected ``(1 - q) v`` of
absolute error and answering 0 costs ``q v``, so one half is the threshold that minimises it.

Index ``-1`` stands for an entity outside the vocabulary (cold start): its id embeddings, factors
and biases are zero, so a model answers from what it shares across entities (side features,
global and device terms).

- :class:`NeuMF` — GMF + MLP towers (He et al., 2017) over embeddings of kind, partner and
  device, each the sum of an id embedding and a linear map of side features.
- :class:`BiasedMF` — the Paragon/Quasar baseline: SVD-style matrix factorisation with global,
  device, row and column biases, trained by SGD.
- :class:`MeanModel` — the kind's mean throughput on the device, whoever the partner is.

State is a plain ``state_dict`` (tensors only) plus :meth:`~NeuMF.config`, a JSON-able dict that
rebuilds the module; nothing is pickled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

#: Factor layouts of :class:`BiasedMF`: rows ``(device, kind)`` x columns ``partner``, or rows
#: ``kind`` x columns ``(device, partner)`` (Quasar's applications x platform-and-interference).
MF_LAYOUTS = ("dk-p", "k-dp")


def _lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` (leading dimension indexed), zeros where ``idx`` is -1 (cold start)."""
    if len(idx) and int(idx.min()) >= 0:
        return table[idx]  # the common case, and the training loop's: skip the masking
    rows = table[idx.clamp(min=0)]
    known = (idx >= 0).reshape(-1, *([1] * (rows.dim() - 1)))
    return torch.where(known, rows, torch.zeros_like(rows))


def _lookup2(table: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """``table[i, j]`` with zeros where either index is -1."""
    if len(i) and min(int(i.min()), int(j.min())) >= 0:
        return table[i, j]
    rows = table[i.clamp(min=0), j.clamp(min=0)]
    known = ((i >= 0) & (j >= 0)).reshape(-1, *([1] * (rows.dim() - 1)))
    return torch.where(known, rows, torch.zeros_like(rows))


def _grown(p: torch.Tensor, dim: int, extra: int, scale: float = 0.0) -> nn.Parameter:
    """``p`` with ``extra`` new slices along ``dim``: zeros, or small noise when ``scale`` > 0."""
    shape = list(p.shape)
    shape[dim] = extra
    new = torch.randn(shape, dtype=p.dtype) * scale
    return nn.Parameter(torch.cat((p.detach(), new), dim=dim))


# --- NeuMF -----------------------------------------------------------------------------------


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
                    setattr(self, name, _grown(getattr(self, name), dim, extra))
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
            out[name] = _lookup2(t, *ix) if len(ix) == 2 else _lookup(t, ix[0])
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
        gp = _lookup(self.gmf_kind, partner) if sym else u["gmf_partner"]
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


# --- SVD-style matrix factorisation (Paragon / Quasar) ------------------------------------------


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
                setattr(self, name, _grown(getattr(self, name), 0, kinds))
            for name in ("b_dk", "b_dp"):
                setattr(self, name, _grown(getattr(self, name), 1, kinds))
            self.f_dev = _grown(self.f_dev, 1, kinds, 0.1)
            self._cfg["n_kinds"] += kinds
        if devices:
            for name in ("b_d", "b_dk", "b_dp"):
                setattr(self, name, _grown(getattr(self, name), 0, devices))
            self.f_dev = _grown(self.f_dev, 0, devices, 0.1)
            self._cfg["n_devices"] += devices

    def terms(self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor) -> list[torch.Tensor]:
        """The per-row parameters a prediction uses (for Koren-style per-sample L2)."""
        if self._cfg["layout"] == "dk-p":
            row, col = _lookup2(self.f_dev, device, kind), _lookup(self.f_shared, partner)
        else:
            row, col = _lookup(self.f_shared, kind), _lookup2(self.f_dev, device, partner)
        return [
            _lookup(self.b_d, device),
            _lookup(self.b_k, kind),
            _lookup(self.b_p, partner),
            _lookup2(self.b_dk, device, kind),
            _lookup2(self.b_dp, device, partner),
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


# --- kind mean ------------------------------------------------------------------------------------


class MeanModel(nn.Module):
    """The kind's mean on the device, whoever the partner is.

    Per (device, kind): the share of feasible rows (feasibility) and the mean throughput of the
    feasible ones. A (device, kind) never measured falls back to the kind on all devices, then to
    the device, then to everything. Counts are buffers, so "learning" is adding samples.

    :param n_kinds: kind vocabulary size.
    :param n_devices: device vocabulary size.
    """

    stats: torch.Tensor

    def __init__(self, n_kinds: int, n_devices: int) -> None:
        super().__init__()
        self._cfg: dict[str, Any] = {"n_kinds": n_kinds, "n_devices": n_devices}
        # [rows, feasible rows, sum of feasible throughputs] per (device, kind).
        self.register_buffer("stats", torch.zeros(n_devices, n_kinds, 3, dtype=torch.float64))

    def config(self) -> dict[str, Any]:
        """JSON-able constructor arguments (with the current vocabulary sizes)."""
        return dict(self._cfg)

    def grow(self, kinds: int = 0, devices: int = 0) -> None:
        """Add vocabulary entries (with no samples yet)."""
        s = self.stats
        self.stats = torch.cat((s, s.new_zeros(s.shape[0], kinds, 3)), 1)
        self.stats = torch.cat((self.stats, s.new_zeros(devices, self.stats.shape[1], 3)), 0)
        self._cfg["n_kinds"] += kinds
        self._cfg["n_devices"] += devices

    def add(self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor, y: torch.Tensor) -> None:
        """Accumulate samples (the partner is ignored by construction)."""
        feasible = (y > 0).double()
        vals = torch.stack((torch.ones_like(feasible), feasible, y.double() * feasible), 1)
        self.stats.index_put_((device, kind), vals, accumulate=True)

    def forward(
        self, kind: torch.Tensor, partner: torch.Tensor, device: torch.Tensor, *_: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(feasibility logit, throughput), each (B,), with the fallbacks above."""
        s = self.stats
        levels = [
            _lookup2(s, device, kind),
            _lookup(s.sum(0), kind),
            _lookup(s.sum(1), device),
            s.sum((0, 1)),
        ]
        pick = levels[-1].expand(len(kind), 3)
        for lv in reversed(levels[:-1]):
            pick = torch.where(lv[:, :1] > 0, lv, pick)
        share = pick[:, 1] / pick[:, 0].clamp(min=1)
        value = pick[:, 2] / pick[:, 1].clamp(min=1)
        # An all-infeasible group gives share 0: a large negative logit, never -inf.
        logit = torch.logit(share.clamp(1e-6, 1 - 1e-6))
        return logit.float(), value.float()


# --- ensembles ------------------------------------------------------------------------------------


class Ensemble(nn.Module):
    """The average (of feasibility logits and of throughputs) of several models, e.g. NeuMFs
    trained with different regularisation: on a few hundred rows no single strength suits both
    dense data and a device seen a few dozen times, and averaging beats choosing one on a small
    validation split.

    :param members: ``{"class": ..., "config": ...}`` of each member (see :func:`build`).
    """

    def __init__(self, members: Sequence[dict[str, Any]]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        self.members = nn.ModuleList(build(m["class"], m["config"]) for m in members)

    def config(self) -> dict[str, Any]:
        """JSON-able constructor arguments."""
        return {"members": [{"class": type(m).__name__, "config": m.config()} for m in self.parts]}

    @property
    def parts(self) -> list[Model]:
        """The members, typed."""
        return [cast("Model", m) for m in self.members]

    def grow(self, kinds: int = 0, devices: int = 0) -> None:
        """Add vocabulary entries to every member."""
        for m in self.parts:
            m.grow(kinds, devices)

    def regulariser(self, rows: Rows | None = None) -> torch.Tensor:
        """The members' regularisers, summed (each member's loss is its own)."""
        out = torch.zeros(())
        for m in self.parts:
            if not isinstance(m, MeanModel):
                out = out + m.regulariser(rows)
        return out

    def forward(self, *inputs: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean feasibility logit and mean throughput of the members."""
        outs = [m(*inputs) for m in self.members]
        return torch.stack([o[0] for o in outs]).mean(0), torch.stack([o[1] for o in outs]).mean(0)


# --- training -------------------------------------------------------------------------------------


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block, then restore the previous count.

    These models are tiny: each step is a few hundred small ops, and spreading them over
    threads only adds synchronisation — on a busy 2-core machine, fitting with 2 threads took
    ten times as long as with one.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


Model = NeuMF | BiasedMF | MeanModel | Ensemble


@dataclass
class NetTrainConfig:
    """How a model is trained.

    :param epochs: passes over the data.
    :param lr: learning rate.
    :param weight_decay: decoupled weight decay of every parameter (AdamW; SGD: plain L2).
    :param l2: L2 on the id embeddings, factors and biases.
    :param prior: how ``l2`` applies: ``False`` — Koren-style, on what each sample uses, per
        sample (an entity's penalty grows with its samples); ``True`` — once on every table,
        divided by the training-set size, a Gaussian prior: an entity seen in two rows is pulled
        towards the shared part far harder than one seen in fifty.
    :param batch_size: rows per step; 0 = the whole set (full batch).
    :param optimizer: ``"adam"`` or ``"sgd"``.
    :param loss: throughput loss, ``"l1"``, ``"huber"`` or ``"mse"``.
    :param feasible_weight: weight of the feasibility (binary cross-entropy) loss.
    :param momentum: SGD momentum (0 = plain SGD, as for online updates).
    :param tables_only: train only the id embeddings, factors and biases (see
        :func:`table_parameters`), keeping the shared network fixed.
    :param cosine: decay the learning rate to 0 over ``epochs`` on a cosine; full-batch Adam on
        a few hundred rows otherwise keeps oscillating instead of settling.
    """

    epochs: int = 300
    lr: float = 0.01
    weight_decay: float = 1e-4
    l2: float = 0.0
    prior: bool = False
    batch_size: int = 0
    optimizer: str = "adam"
    loss: str = "huber"
    feasible_weight: float = 0.5
    momentum: float = 0.9
    cosine: bool = False
    tables_only: bool = False


@dataclass
class Rows:
    """A training set as tensors: indices, side features per row, targets.

    :param kind: kind indices (B,).
    :param partner: partner indices (B,).
    :param device: device indices (B,).
    :param y: normalised throughputs (B,), 0 = cannot share.
    :param kind_x: side features of the kind (B, kind_dim), or ``None``.
    :param partner_x: side features of the partner (B, kind_dim), or ``None``.
    :param device_x: side features of the device (B, device_dim), or ``None``.
    :param value_known: per row, whether ``y`` is a measured throughput (``False``: only whether
        the pair can share is known, see :meth:`mirrored`); ``None`` = all known.
    """

    kind: torch.Tensor
    partner: torch.Tensor
    device: torch.Tensor
    y: torch.Tensor
    kind_x: torch.Tensor | None = None
    partner_x: torch.Tensor | None = None
    device_x: torch.Tensor | None = None
    value_known: torch.Tensor | None = None

    def __len__(self) -> int:
        return len(self.kind)

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Rows:
        def opt(x: torch.Tensor | None) -> torch.Tensor | None:
            return None if x is None else fn(x)

        return Rows(
            fn(self.kind),
            fn(self.partner),
            fn(self.device),
            fn(self.y),
            opt(self.kind_x),
            opt(self.partner_x),
            opt(self.device_x),
            opt(self.value_known),
        )

    def take(self, idx: torch.Tensor) -> Rows:
        """The subset at ``idx``."""
        return self._map(lambda x: x[idx])

    def known(self) -> torch.Tensor:
        """``value_known`` as a tensor (all true when unset)."""
        return torch.ones(len(self), dtype=torch.bool) if self.value_known is None else self.value_known

    def cat(self, other: Rows) -> Rows:
        """These rows followed by ``other``'s (side features are kept only when both have them)."""

        def both(a: torch.Tensor | None, b: torch.Tensor | None) -> torch.Tensor | None:
            return None if a is None or b is None else torch.cat((a, b))

        return Rows(
            torch.cat((self.kind, other.kind)),
            torch.cat((self.partner, other.partner)),
            torch.cat((self.device, other.device)),
            torch.cat((self.y, other.y)),
            both(self.kind_x, other.kind_x),
            both(self.partner_x, other.partner_x),
            both(self.device_x, other.device_x),
            torch.cat((self.known(), other.known())),
        )

    def mirrored(self) -> Rows:
        """Feasibility-only rows for the swapped pairs: whether *a* can share a device with *b*
        is a property of the pair, so a row (d, a, b) also says whether (d, b, a) can share — not
        how fast b runs, hence ``value_known`` false."""
        y = (self.y > 0).to(self.y.dtype)
        no = torch.zeros(len(self), dtype=torch.bool)
        return Rows(self.partner, self.kind, self.device, y, self.partner_x, self.kind_x, self.device_x, no)

    def inputs(self) -> tuple[torch.Tensor | None, ...]:
        """Positional arguments of a model's forward."""
        return (self.kind, self.partner, self.device, self.kind_x, self.partner_x, self.device_x)


def combine(logit: torch.Tensor, value: torch.Tensor, y_max: float) -> torch.Tensor:
    """Final predictions: the throughput clipped to ``[0, y_max]``, 0 where sharing is less
    likely than not.

    :param logit: feasibility logits.
    :param value: throughputs.
    :param y_max: the largest throughput a prediction may take.
    """
    return torch.where(logit > 0, value.clamp(0.0, y_max), torch.zeros_like(value))


@torch.no_grad()
def predict(model: Model, rows: Rows, y_max: float) -> np.ndarray:
    """Predictions (float64) for ``rows``, in evaluation mode.

    :param model: a trained model.
    :param rows: what to predict (``y`` is ignored).
    :param y_max: the largest throughput a prediction may take.
    """
    was = model.training
    model.eval()
    logit, value = model(*rows.inputs())
    model.train(was)
    return combine(logit, value, y_max).double().numpy()


@torch.no_grad()
def member_predictions(model: Model, rows: Rows, y_max: float) -> np.ndarray:
    """Each ensemble member's predictions for ``rows`` (members x rows, float64), in evaluation
    mode; one row for a model that is not an ensemble.

    :param model: a trained model.
    :param rows: what to predict (``y`` is ignored).
    :param y_max: the largest throughput a prediction may take.
    """
    parts = model.parts if isinstance(model, Ensemble) else [model]
    was = model.training
    model.eval()
    out = []
    for m in parts:
        logit, value = m(*rows.inputs())
        out.append(combine(logit, value, y_max).double().numpy())
    model.train(was)
    return np.stack(out)


def _loss(model: Model, rows: Rows, cfg: NetTrainConfig, n_total: int) -> torch.Tensor:
    if isinstance(model, Ensemble):
        # The sum of the members' own losses: each learns on its own, as when fitted alone.
        return sum((_loss(m, rows, cfg, n_total) for m in model.parts), torch.zeros(()))
    logit, value = model(*rows.inputs())
    feasible = rows.y > 0
    loss = cfg.feasible_weight * F.binary_cross_entropy_with_logits(logit, feasible.float())
    has_value = feasible if rows.value_known is None else feasible & rows.value_known
    if bool(has_value.any()):
        v, y = value[has_value], rows.y[has_value]
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = {
            "l1": F.l1_loss,
            "mse": F.mse_loss,
            "huber": lambda a, b: F.huber_loss(a, b, delta=0.1),
        }[cfg.loss]
        loss = loss + fn(v, y)
    if cfg.l2 and not isinstance(model, MeanModel):
        reg = model.regulariser(None) / n_total if cfg.prior else model.regulariser(rows)
        loss = loss + cfg.l2 * reg
    return loss


def _leaves(model: Model, prefix: str = "") -> list[tuple[str, NeuMF | BiasedMF]]:
    """(state_dict prefix, model) of the models with id tables inside ``model``."""
    if isinstance(model, Ensemble):
        return [leaf for i, m in enumerate(model.parts) for leaf in _leaves(m, f"{prefix}members.{i}.")]
    return [] if isinstance(model, MeanModel) else [(prefix, model)]


def usage(model: Model, rows: Rows) -> dict[str, torch.Tensor]:
    """How many of ``rows`` read each cell of each id table, by parameter name (as in the
    model's ``state_dict``); cells are indexed over the table's vocabulary axes.

    :param model: any model of this module (a :class:`MeanModel` has none).
    :param rows: the samples.
    """
    out = {}
    for prefix, m in _leaves(model):
        for name, cells in m.table_index(rows.kind, rows.partner, rows.device).items():
            table = getattr(m, name)
            count = torch.zeros(table.shape[: len(m.axes[name])], dtype=torch.float64)
            for ix in cells:
                known = torch.stack([i >= 0 for i in ix]).all(0)
                count.index_put_(
                    tuple(i[known] for i in ix),
                    torch.ones(int(known.sum()), dtype=count.dtype),
                    accumulate=True,
                )
            out[prefix + name] = count
    return out


def resize_counts(model: Model, counts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``counts`` (see :func:`usage`) padded with zeros to the model's grown tables.

    :param model: the model after :meth:`grow`.
    :param counts: counts for its tables before growing.
    """
    out = {}
    params = dict(model.named_parameters())
    for name, c in counts.items():
        grown = torch.zeros(params[name].shape[: c.dim()], dtype=c.dtype)
        grown[tuple(slice(0, n) for n in c.shape)] = c
        out[name] = grown
    return out


@contextmanager
def count_scaled(model: Model, counts: dict[str, torch.Tensor]) -> Iterator[None]:
    """Inside the block, the gradient of each id-table cell is divided by ``1 + n``, where ``n``
    counts the samples it has learnt from (see :func:`usage`).

    That is the running-mean step of stochastic approximation: a device bias fitted on 700
    rows barely moves for a batch of new rows, while a kind seen for the first time learns at
    the full rate. Without it, a batch of samples of one new kind on a device drags the
    device's own parameters — and every prediction on that device — towards that kind.

    :param model: the model to train.
    :param counts: per table parameter, samples per cell.
    """
    handles = []
    for name, p in model.named_parameters():
        c = counts.get(name)
        if c is None:
            continue
        scale = (1.0 / (1.0 + c)).to(p.dtype).reshape(*c.shape, *([1] * (p.dim() - c.dim())))
        handles.append(p.register_hook(lambda g, s=scale: g * s))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def table_parameters(model: Model) -> list[nn.Parameter]:
    """The per-entity parameters of a model: id embeddings, factors and biases (not the shared
    network, side-feature maps or global offsets).

    :param model: any model of this module.
    """
    if isinstance(model, Ensemble):
        return [p for m in model.parts for p in table_parameters(m)]
    if isinstance(model, NeuMF):
        return [getattr(model, n) for n in model.axes]
    return [p for n, p in model.named_parameters() if n != "mu"]


def _optimizer(model: Model, cfg: NetTrainConfig) -> torch.optim.Optimizer:
    params = table_parameters(model) if cfg.tables_only else list(model.parameters())
    if cfg.optimizer == "adam":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, foreach=True
        )
    raise ValueError(f"optimizer must be 'adam' or 'sgd', got {cfg.optimizer!r}")


def train(
    model: Model,
    rows: Rows,
    cfg: NetTrainConfig,
    seed: int = 0,
    on_epoch: Callable[[int], None] | None = None,
    n_total: int | None = None,
) -> None:
    """Train ``model`` on ``rows`` (a :class:`MeanModel` just counts them).

    :param model: the model, trained in place.
    :param rows: the training set.
    :param cfg: optimiser, epochs, loss.
    :param seed: shuffling and dropout seed.
    :param on_epoch: called with the epoch number (1-based) after each epoch, e.g. to validate.
    :param n_total: rows the model has learnt from in all, for the ``prior`` L2 (default: these
        rows); online updates pass what it saw before plus the new rows.
    """
    if isinstance(model, MeanModel):
        if rows.value_known is not None:
            rows = rows.take(torch.nonzero(rows.value_known).squeeze(1))
        model.add(rows.kind, rows.partner, rows.device, rows.y)
        return
    if not list(model.parameters()) or len(rows) == 0:
        return
    opt = _optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs) if cfg.cosine else None
    g = torch.Generator().manual_seed(seed)
    n = len(rows)
    bs = cfg.batch_size if 0 < cfg.batch_size < n else n
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout draws from the global generator
        for epoch in range(1, cfg.epochs + 1):
            order = torch.randperm(n, generator=g) if bs < n else torch.arange(n)
            for start in range(0, n, bs):
                opt.zero_grad()
                _loss(model, rows.take(order[start : start + bs]), cfg, n_total or n).backward()
                opt.step()
            if sched is not None:
                sched.step()
            if on_epoch is not None:
                on_epoch(epoch)
    model.eval()


def online_update(
    model: Model,
    rows: Rows,
    base: NetTrainConfig,
    counts: dict[str, torch.Tensor],
    steps: int,
    lr: float,
    tables_only: bool = True,
    n_total: int | None = None,
    seed: int = 0,
) -> None:
    """Keep learning from new samples: plain SGD (no momentum) with the fit's loss and L2, each
    id-table cell's step scaled by ``1 / (1 + samples it has seen)`` (:func:`count_scaled`).

    No weight decay: it would shrink every weight a little at each update and wash the
    pretrained model out over a long run.

    :param model: a trained model (grown to cover the rows' vocabulary).
    :param rows: the new samples.
    :param base: the configuration the model was fitted with (loss, L2).
    :param counts: samples per table cell so far (see :func:`usage`).
    :param steps: SGD steps, each on a mini-batch of up to 64 rows.
    :param lr: SGD learning rate.
    :param tables_only: update only the per-entity parameters.
    :param n_total: rows learnt from in all, including these (for the prior L2).
    :param seed: shuffling seed.
    """
    bs = min(len(rows), 64)
    cfg = NetTrainConfig(
        epochs=max(1, round(steps * bs / max(len(rows), 1))),
        lr=lr,
        weight_decay=0.0,
        l2=base.l2,
        prior=base.prior,
        batch_size=bs,
        optimizer="sgd",
        loss=base.loss,
        feasible_weight=base.feasible_weight,
        momentum=0.0,
        tables_only=tables_only,
    )
    with count_scaled(model, counts):
        train(model, rows, cfg, seed=seed, n_total=n_total)


def build(kind: str, config: dict[str, Any]) -> Model:
    """Rebuild a model from its class name and :meth:`config` (e.g. to load a state_dict).

    :param kind: ``"NeuMF"``, ``"BiasedMF"``, ``"MeanModel"`` or ``"Ensemble"``.
    :param config: the model's ``config()``.
    """
    classes: dict[str, Callable[..., Model]] = {
        "NeuMF": NeuMF,
        "BiasedMF": BiasedMF,
        "MeanModel": MeanModel,
        "Ensemble": Ensemble,
    }
    if kind not in classes:
        raise ValueError(f"unknown interference model class {kind!r}; known: {', '.join(classes)}")
    return classes[kind](**config)
