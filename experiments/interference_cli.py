"""``rlsched interference fit`` and ``rlsched interference evaluate``: the co-location model from
CSV files, as a user runs it.

Errors a user can cause — a bad CSV, a missing or corrupt model, rows with kinds or devices the
model has never seen — raise :class:`InterferenceCliError` with one line naming the file and
what is wrong; the CLI prints it and exits 2.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.checkpoint import CheckpointError
from rlsched.interference.measurements import ColocationData, ColocationError, read_colocation_csv
from rlsched.interference.predictor import InterferencePredictor, evaluate, fit_interference


class InterferenceCliError(Exception):
    """A user error of the interference commands (one line)."""


def _read(paths: Sequence[str]) -> ColocationData:
    try:
        return ColocationData.concat([read_colocation_csv(p) for p in paths])
    except ColocationError as e:
        raise InterferenceCliError(str(e)) from None
    except FileNotFoundError:
        missing = next(p for p in paths if not Path(p).is_file())
        raise InterferenceCliError(f"{missing}: no such file") from None


def fit(data: Sequence[str], method: str, seed: int, out: str) -> dict[str, Any]:
    """Fit a model on the rows of ``data`` and save it to ``out``.

    :param data: co-location CSV files (their rows are pooled).
    :param method: ``ncf``, ``svd`` or ``mean``.
    :param seed: fitting seed.
    :param out: checkpoint directory to write.
    :returns: a summary (method, rows, kinds, devices, fit seconds, error on the training rows).
    """
    rows = _read(data)
    t0 = time.perf_counter()
    pred = fit_interference(rows, method, seed)
    seconds = time.perf_counter() - t0
    pred.save(out)
    train = evaluate(pred, rows)
    return {
        "method": method,
        "rows": len(rows),
        "kinds": len(pred.kinds),
        "devices": pred.devices,
        "fit_s": round(seconds, 2),
        "train_mae": train["mae"],
        "out": str(out),
    }


def score(model: str, data: str) -> dict[str, Any]:
    """Error of a saved model on the rows of ``data``.

    :param model: checkpoint directory written by :func:`fit`.
    :param data: a co-location CSV.
    :returns: ``mae``, ``rmse``, ``n``, ``feasible_accuracy``.
    :raises InterferenceCliError: for a bad CSV or model, or kinds/devices the model cannot
        predict (named).
    """
    try:
        pred = InterferencePredictor.load(model)
    except (CheckpointError, FileNotFoundError) as e:
        raise InterferenceCliError(str(e)) from None
    rows = _read([data])
    bad = pred.unknown(rows)
    if bad:
        names = ", ".join(bad)
        raise InterferenceCliError(
            f"{data}: kinds/devices the model in {model} has never seen and cannot cold-start: {names}"
        )
    return dict(evaluate(pred, rows))


def format_scores(scores: dict[str, Any]) -> str:
    """A short two-column table of :func:`score`'s result."""
    w = max(len(k) for k in scores)
    return "\n".join(
        f"{k:<{w}}  {v:.4f}" if isinstance(v, float) else f"{k:<{w}}  {v}" for k, v in scores.items()
    )
