"""The ensemble of interference models, and rebuilding any model from its class name.

:func:`build` maps the class names a checkpoint records (``NeuMF``, ``BiasedMF``, ``MeanModel``,
``Ensemble``) to the classes; an ensemble rebuilds its members with it, so both live here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from models.interference.biased_mf import BiasedMF
from models.interference.mean_model import MeanModel
from models.interference.neumf import NeuMF

if TYPE_CHECKING:
    from models.interference.rows import Rows


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


Model = NeuMF | BiasedMF | MeanModel | Ensemble


def build(kind: str, config: dict[str, Any]) -> Model:
    """Rebuild a model from its class name and ``config()`` (e.g. to load a state_dict).

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
