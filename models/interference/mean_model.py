"""The kind's mean throughput on the device: the simplest interference baseline."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from models.interference.tables import lookup, lookup2


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
            lookup2(s, device, kind),
            lookup(s.sum(0), kind),
            lookup(s.sum(1), device),
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
