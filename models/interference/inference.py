"""Predictions of a trained interference model: 0 where sharing is less likely than not."""

from __future__ import annotations

import numpy as np
import torch

from models.interference.ensemble import Ensemble, Model
from models.interference.rows import Rows


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
