"""Id-table reads and growth shared by the interference models; index -1 is a cold start."""

from __future__ import annotations

import torch
from torch import nn


def lookup(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Rows of ``table`` (leading dimension indexed), zeros where ``idx`` is -1 (cold start).

    :param table: the table.
    :param idx: indices (B,) into its leading dimension.
    """
    if len(idx) and int(idx.min()) >= 0:
        return table[idx]  # the common case, and the training loop's: skip the masking
    rows = table[idx.clamp(min=0)]
    known = (idx >= 0).reshape(-1, *([1] * (rows.dim() - 1)))
    return torch.where(known, rows, torch.zeros_like(rows))


def lookup2(table: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
    """``table[i, j]`` with zeros where either index is -1.

    :param table: the table.
    :param i: indices (B,) into its first dimension.
    :param j: indices (B,) into its second dimension.
    """
    if len(i) and min(int(i.min()), int(j.min())) >= 0:
        return table[i, j]
    rows = table[i.clamp(min=0), j.clamp(min=0)]
    known = ((i >= 0) & (j >= 0)).reshape(-1, *([1] * (rows.dim() - 1)))
    return torch.where(known, rows, torch.zeros_like(rows))


def grown(p: torch.Tensor, dim: int, extra: int, scale: float = 0.0) -> nn.Parameter:
    """``p`` with ``extra`` new slices along ``dim``: zeros, or small noise when ``scale`` > 0.

    :param p: the parameter to grow.
    :param dim: the dimension that grows.
    :param extra: new slices.
    :param scale: standard deviation of the new slices' noise (0 = zeros).
    """
    shape = list(p.shape)
    shape[dim] = extra
    new = torch.randn(shape, dtype=p.dtype) * scale
    return nn.Parameter(torch.cat((p.detach(), new), dim=dim))
