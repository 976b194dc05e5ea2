"""``auto``'s second decision: keep the running pair, or switch, from how the run is going.

The first decision (:mod:`rlsched.policies.recogniser`) is made from the fleet and the first
tasks; some cases look alike there and want different pairs (BENCHMARKS.md, "A second decision
is worth building": switching to the right pair after 100-200 tasks recovers most of its
throughput). The second looks at what the first pair did with the work
(:mod:`rlsched.policies.run_features`) and, by nearest neighbours over training runs of the same
running pair, predicts each target pair's gain from switching now; it switches to the best when
that clears ``margin``, and otherwise keeps the running pair.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from models.checkpoint import META, CheckpointError, check_meta_seal, sha256, verify_listed, write_meta
from rlsched.policies.recogniser import SHIPPED_DIR, _field, _read_json, _replace
from rlsched.policies.run_features import RUN_FEATURES


@dataclass(frozen=True)
class SecondChoice:
    """What the second decision decided.

    :param pair: the pair that runs from now on (the running one when it kept it).
    :param running: the pair that was running.
    :param predicted: each target's predicted throughput ratio to keeping ``running``.
    :param features: the run's :data:`~rlsched.policies.run_features.RUN_FEATURES`.
    """

    pair: str
    running: str
    predicted: dict[str, float]
    features: tuple[float, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``/v1/models`` shows it; the service's checkpoint keeps it)."""
        return {
            "pair": self.pair,
            "running": self.running,
            "predicted": {p: round(v, 4) for p, v in self.predicted.items()},
            "features": {n: round(v, 4) for n, v in zip(RUN_FEATURES, self.features, strict=False)},
        }

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SecondChoice:
        """The choice :meth:`to_dict` wrote (a service checkpoint keeps it across restarts).

        :raises ValueError: a document that is not one.
        """
        try:
            feats = doc.get("features") or {}
            return cls(
                pair=str(doc["pair"]),
                running=str(doc["running"]),
                predicted={str(k): float(v) for k, v in dict(doc["predicted"]).items()},
                features=tuple(float(feats[n]) for n in RUN_FEATURES if n in feats),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"not a second decision: {e}") from None


class SecondDecision(Protocol):
    """What ``auto``'s switchboard asks a second time."""

    @property
    def at(self) -> int:
        """Arrivals after which it decides."""
        ...

    @property
    def targets(self) -> tuple[str, ...]:
        """The pairs it may switch to."""
        ...

    def decide(self, x: np.ndarray, running: str) -> SecondChoice:
        """The pair to run from now on, given the run's features ``x`` under ``running``."""
        ...


@dataclass(frozen=True)
class Revisit:
    """Nearest neighbours over training runs: keep or switch.

    :param at: arrivals after which it decides.
    :param targets: the pairs it may switch to.
    :param k: training runs averaged per decision (of the same running pair).
    :param margin: predicted gain (log throughput ratio) a switch needs.
    :param center: per-feature mean of the training rows.
    :param scale: per-feature spread of the training rows.
    :param rows: (R, F) run features of the training rows.
    :param running: the pair running in each row when it decided.
    :param gains: (R, T) log throughput of switching to each target over keeping the running
        pair, measured (0 where the target is the running pair).
    """

    at: int
    targets: tuple[str, ...]
    k: int
    margin: float
    center: np.ndarray
    scale: np.ndarray
    rows: np.ndarray
    running: tuple[str, ...]
    gains: np.ndarray

    def __post_init__(self) -> None:
        f, r = len(RUN_FEATURES), len(self.running)
        if self.rows.shape != (r, f) or self.gains.shape != (r, len(self.targets)):
            raise ValueError(f"rows and gains: expected shapes ({r}, {f}) and ({r}, {len(self.targets)})")
        if self.center.shape != (f,) or self.scale.shape != (f,) or (self.scale <= 0).any():
            raise ValueError(f"center and scale: expected {f} numbers each, scales positive")
        if self.k < 1 or self.at < 2:
            raise ValueError(f"k must be >= 1 and at >= 2, got k={self.k}, at={self.at}")

    def decide(self, x: np.ndarray, running: str) -> SecondChoice:
        """Switch to the target with the best mean gain over the ``k`` nearest rows that ran
        ``running``, if it clears ``margin``; keep ``running`` with fewer than ``k`` such rows."""
        same = np.flatnonzero(np.asarray(self.running) == running)
        feats = tuple(float(v) for v in x)
        if len(same) < self.k:
            return SecondChoice(running, running, {}, feats)
        z = (self.rows[same] - self.center) / self.scale
        d = np.linalg.norm(z - (np.asarray(x, dtype=float) - self.center) / self.scale, axis=1)
        near = same[np.argsort(d, kind="stable")[: self.k]]
        predicted = self.gains[near].mean(axis=0)
        best = int(np.argmax(predicted))
        pair = self.targets[best] if predicted[best] > self.margin else running
        ratios = {t: float(np.exp(v)) for t, v in zip(self.targets, predicted, strict=True)}
        return SecondChoice(pair, running, ratios, feats)

    def with_choice_rule(self, k: int, margin: float) -> Revisit:
        """The same rows with another ``k`` and ``margin`` (tuned on validation runs)."""
        return dataclasses.replace(self, k=k, margin=margin)

    # ---- plain-data file (beside the recogniser's, in the same folder) --------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "feature_version": FEATURE_VERSION,
            "features": list(RUN_FEATURES),
            "at": self.at,
            "targets": list(self.targets),
            "k": self.k,
            "margin": self.margin,
            "center": self.center.tolist(),
            "scale": self.scale.tolist(),
            "rows": self.rows.tolist(),
            "running": list(self.running),
            "gains": self.gains.tolist(),
        }

    def save(self, directory: str | Path) -> Path:
        """Write ``revisit.json`` into a recogniser's folder and record its checksum in that
        folder's ``meta.json`` (the model first, the checksum last, each by rename)."""
        d = Path(directory)
        meta = _read_json(d / META)
        _replace(d / REVISIT_FILE, json.dumps(self.to_json(), indent=1))
        meta.setdefault("files", {})[REVISIT_FILE] = sha256(d / REVISIT_FILE)
        write_meta(d, meta)
        return d / REVISIT_FILE


#: The file beside ``recogniser.json`` that holds the second decision (optional).
REVISIT_FILE = "revisit.json"
#: Bumped when :data:`RUN_FEATURES` or their meaning change.
FEATURE_VERSION = 1


def revisit_sha256(directory: str | Path | None = None) -> str | None:
    """The sha256 ``meta.json`` records for the second decision's file, or ``None`` without one.

    :param directory: the recogniser's folder; ``None`` for the shipped one.
    """
    d = Path(directory) if directory is not None else SHIPPED_DIR
    meta = _read_json(d / META)
    check_meta_seal(meta, d / META)
    files = meta.get("files")
    value = files.get(REVISIT_FILE) if isinstance(files, dict) else None
    return value if isinstance(value, str) else None


def load_revisit(directory: str | Path | None = None) -> Revisit | None:
    """Verify and load the second decision in a recogniser's folder; ``None`` when its
    ``meta.json`` lists none (``auto`` then decides once).

    :param directory: the recogniser's folder; ``None`` for the shipped one.
    :raises CheckpointError: naming the file and the field at fault.
    """
    d = Path(directory) if directory is not None else SHIPPED_DIR
    want = revisit_sha256(d)
    if want is None:
        return None
    path = d / REVISIT_FILE
    verify_listed(path, want)
    data = _read_json(path)
    if data.get("feature_version") != FEATURE_VERSION or data.get("features") != list(RUN_FEATURES):
        raise CheckpointError(
            path, "feature_version", f"{FEATURE_VERSION} with this build's run features",
            data.get("feature_version"), hint="refit it with this build",
        )  # fmt: skip
    targets = tuple(_field(data, path, "targets", list, "a list of SELECTOR+PLACER names"))
    if not targets or not all(isinstance(t, str) and "+" in t for t in targets):
        raise CheckpointError(path, "targets", "a non-empty list of SELECTOR+PLACER names", list(targets))
    try:
        return Revisit(
            at=_field(data, path, "at", int, "a task count"),
            targets=targets,
            k=_field(data, path, "k", int, "a count of training runs"),
            margin=float(_field(data, path, "margin", (int, float), "a number")),
            center=np.asarray(_field(data, path, "center", list, "a list of numbers"), dtype=float),
            scale=np.asarray(_field(data, path, "scale", list, "a list of numbers"), dtype=float),
            rows=np.asarray(_field(data, path, "rows", list, "a list of feature rows"), dtype=float),
            running=tuple(str(r) for r in _field(data, path, "running", list, "a list of pairs")),
            gains=np.asarray(_field(data, path, "gains", list, "a list of gain rows"), dtype=float),
        )
    except (ValueError, TypeError) as e:
        raise CheckpointError(path, "<model>", "a consistent second decision", hint=str(e)) from None
