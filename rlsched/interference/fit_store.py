"""Fitted interference models shared between processes: a placer's calibration fits the same
model from the same survey in every run of a case and seed (an NCF ensemble, ~2-3 s on one core:
in ``rlsched evaluate`` grids about half of a run's time), so a store installed by the caller
(``experiments/fit_cache.py``: a folder of checkpoints) hands back the model another process
fitted. Off unless installed: the service fits what it surveys.

A model is stored under :func:`fit_key`: the measurements themselves, the method and seed, the
source of every module the fit runs and torch's version — a fit is a pure function of them, so a
stored model is the one this process would fit (the same weights, bit for bit).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rlsched.interference.predictor import ColocationData, InterferencePredictor

#: Packages and modules whose code decides a fitted model (a package: each of its modules).
_SOURCES = (
    "rlsched.interference",
    "models.interference",
    "models.checkpoint",
    "rlsched.hardware",
    "rlsched.workloads",
)


class FitStore(Protocol):
    """Where fitted models are kept between processes."""

    def get(self, key: str) -> InterferencePredictor | None:
        """The model stored under ``key``, or ``None`` (absent, or unreadable: it is fitted again)."""
        ...

    def put(self, key: str, predictor: InterferencePredictor) -> None:
        """Keep ``predictor`` under ``key`` (a store that cannot write skips it)."""
        ...


_STORE: FitStore | None = None


def use_store(store: FitStore | None) -> None:
    """Install ``store`` for this process (``None``: fit every time)."""
    global _STORE
    _STORE = store


def fit_key(data: ColocationData, method: str, seed: int) -> str:
    """The key of the default fit of ``data`` by ``method`` with ``seed`` (hex sha256)."""
    import torch

    h = hashlib.sha256(json.dumps([method, seed, torch.__version__]).encode())
    h.update(json.dumps([data.device, data.kind, data.partner]).encode())
    h.update(data.y.astype("<f8").tobytes())
    for f in _source_files():
        h.update(f.read_bytes())
    return h.hexdigest()


@functools.cache
def _source_files() -> tuple[Path, ...]:
    out: list[Path] = []
    for mod in _SOURCES:
        spec = importlib.util.find_spec(mod)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cannot locate {mod} to key the fit store")
        origin = Path(spec.origin)
        out += sorted(origin.parent.glob("*.py")) if origin.name == "__init__.py" else [origin]
    return tuple(out)


def fit(data: ColocationData, method: str, seed: int) -> InterferencePredictor:
    """``fit_interference(data, method, seed)``, from the installed store when it holds it."""
    from rlsched.interference.predictor import fit_interference

    if _STORE is None:
        return fit_interference(data, method, seed)
    key = fit_key(data, method, seed)
    hit = _STORE.get(key)
    if hit is not None:
        return hit
    fitted = fit_interference(data, method, seed)
    _STORE.put(key, fitted)
    return fitted
