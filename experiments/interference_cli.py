"""``rlsched interference fit`` and ``rlsched interference evaluate``: the co-location model from
CSV files, as a user runs it.

Errors a user can cause — a bad CSV, a missing or corrupt model, rows with kinds or devices the
model has never seen — raise :class:`~rlsched.errors.InputError` (one line naming the file and
the field) where the file is read; the CLI prints it and exits 2.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.checkpoint import CheckpointError
from rlsched.errors import InputError
from rlsched.interference.measurements import ColocationData, read_colocation_csv
from rlsched.interference.predictor import InterferencePredictor, evaluate, fit_interference


def _read(paths: Sequence[str]) -> ColocationData:
    """The pooled rows of ``paths`` (``--data``).

    :raises InputError: for a file that does not exist, or a row that breaks a rule
        (:class:`~rlsched.interference.measurements.MeasurementError`).
    """
    for p in paths:
        if not Path(p).is_file():
            raise InputError(p, "<file>", "an existing co-location CSV (--data)")
    return ColocationData.concat([read_colocation_csv(p) for p in paths])


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
    :raises InputError: for a bad CSV or model, or kinds/devices the model cannot predict (named).
    """
    try:
        pred = InterferencePredictor.load(model)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, "--model") from None
    rows = _read([data])
    bad = pred.unknown(rows)
    if bad:
        raise InputError(
            data,
            "kind/device",
            f"kinds and devices the model in {model} has seen (it cannot cold-start these)",
            ", ".join(bad),
        )
    return dict(evaluate(pred, rows))


def format_scores(scores: dict[str, Any]) -> str:
    """A short two-column table of :func:`score`'s result."""
    w = max(len(k) for k in scores)
    return "\n".join(
        f"{k:<{w}}  {v:.4f}" if isinstance(v, float) else f"{k:<{w}}  {v}" for k, v in scores.items()
    )


def fit_lines(summary: dict[str, Any]) -> list[str]:
    """What ``interference fit`` prints: what it fitted, its error on its own rows, where it went
    and the commands that use it.

    :param summary: :func:`fit`'s result.
    """
    out = summary["out"]
    devices = ", ".join(summary["devices"])
    return [
        f"fitted {summary['method']} on {summary['rows']:,} rows ({summary['kinds']} kinds; "
        f"devices {devices}) in {summary['fit_s']:.1f} s",
        f"mean absolute error on its own rows: {summary['train_mae']:.4f} (on other rows: "
        f"rlsched interference evaluate --model {out} --data CSV)",
        # The service reads the key relative to its config's folder: a full path works anywhere.
        f"saved to {out}; the service uses it with "
        f'interference_model = "{Path(out).resolve()}" in its config',
    ]
