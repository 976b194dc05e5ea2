"""A training set of the interference models as tensors: indices, side features, targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


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
