"""The case recogniser: which scheduling pair a case wants, from what the case looks like.

No pair wins everywhere: across unlike fleets and workloads the best of the heuristic and
learned pairs changes from case to case (BENCHMARKS.md, "Generated cases"). The recogniser is a
nearest-neighbour model over :mod:`rlsched.policies.case_features`: it stores, for each training
case, its features and every candidate pair's log throughput ratio to the best candidate on that
case (measured on training seeds), and for a new case averages those ratios over the ``k``
nearest training cases (standardised features) and picks the pair with the highest. It keeps its
``default`` pair unless another is predicted better by more than ``margin``. A case farther than
``far_distance`` from every training row is of a kind it has not seen: there it may run a
``far_pair`` chosen for robustness across kinds instead (:mod:`experiments.recogniser_far`).
With latency labels, among the candidates predicted to tie the chosen pair's throughput within
:data:`LATENCY_TIE` it runs the one of least predicted mean latency.

It is plain data: saved as ``recogniser.json`` beside a ``meta.json`` that records its sha256,
which loading verifies (nothing is unpickled).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models import PRETRAINED_RECOGNISER
from models.checkpoint import (
    META,
    CheckpointError,
    check_kind,
    check_meta_seal,
    sha256,
    verify_listed,
    write_meta,
)
from rlsched.policies.case_features import FEATURES

#: The file that holds the model; ``meta.json`` beside it holds its checksum.
MODEL_FILE = "recogniser.json"
#: Bumped when :data:`FEATURES` or their meaning change (a model of other features is refused).
FEATURE_VERSION = 1
#: ``etc_version`` of a file whose labels were measured with the ``mct`` pairs' ETC costing a task
#: on one device (every file before the key existed), and with subtasks side by side.
ETC_ONE_DEVICE, ETC_PARALLEL = 1, 2
#: Predicted log-throughput gap within which latency labels decide (the report's 1 % tie).
LATENCY_TIE = -math.log(0.99)
#: Where the shipped recogniser lives.
SHIPPED_DIR = PRETRAINED_RECOGNISER


@dataclass(frozen=True)
class Choice:
    """What the recogniser decided for one case.

    :param pair: the chosen ``SELECTOR+PLACER``.
    :param predicted: each candidate's predicted throughput ratio to the case's best candidate.
    :param neighbours: the training cases it was judged by, nearest first.
    :param features: the case's features (:data:`~rlsched.policies.case_features.FEATURES`).
    :param distance: to the nearest training row (standardised, weighted); ``None``: not recorded.
    :param far: whether the case lay beyond the recogniser's far distance (``pair`` is its far pair).
    :param latency: each candidate's predicted mean-latency ratio to the least (recognisers with
        latency labels; empty otherwise).
    """

    pair: str
    predicted: dict[str, float]
    neighbours: tuple[str, ...]
    features: tuple[float, ...] = ()
    distance: float | None = None
    far: bool = False
    latency: dict[str, float] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the service shows it at ``/v1/models``)."""
        return {
            "pair": self.pair,
            "predicted": {p: round(v, 4) for p, v in self.predicted.items()},
            "neighbours": list(self.neighbours),
            "features": {n: round(v, 4) for n, v in zip(FEATURES, self.features, strict=False)},
            "distance": None if self.distance is None else round(self.distance, 4),
            "far": self.far,
        } | ({"latency": {p: round(v, 4) for p, v in self.latency.items()}} if self.latency else {})

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> Choice:
        """The choice :meth:`to_dict` wrote (a service checkpoint keeps it across restarts).

        :raises ValueError: a document that is not one.
        """
        try:
            feats = doc.get("features") or {}
            return cls(
                pair=str(doc["pair"]),
                predicted={str(k): float(v) for k, v in dict(doc["predicted"]).items()},
                neighbours=tuple(str(n) for n in doc.get("neighbours", ())),
                features=tuple(float(feats[n]) for n in FEATURES if n in feats),
                distance=None if doc.get("distance") is None else float(doc["distance"]),
                far=bool(doc.get("far", False)),
                latency={str(k): float(v) for k, v in dict(doc.get("latency") or {}).items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"not a recogniser's choice: {e}") from None


@dataclass(frozen=True)
class Recogniser:
    """A nearest-neighbour choice among scheduling pairs.

    :param candidates: the pairs it chooses among (``SELECTOR+PLACER``).
    :param default: the pair it runs before deciding, and keeps unless another clears ``margin``.
    :param window: tasks it observes before deciding.
    :param k: training cases averaged per decision.
    :param margin: predicted gain (log throughput ratio) another pair needs over ``default``.
    :param center: per-feature mean of the training rows.
    :param scale: per-feature spread of the training rows (standardisation).
    :param rows: (R, F) features of the training rows.
    :param scores: (R, C) log throughput ratio of each candidate to its case's best candidate.
    :param row_cases: the case of each row.
    :param weights: per-feature weight in the distance (0: the feature is not used; default: 1
        each). Files without it weigh every feature 1.
    :param parallel_etc: the ETC form of the ``mct`` pairs its labels were measured with, which
        ``auto`` then runs: ``True``, subtasks side by side (fits since 2026-12-05, file key
        ``etc_version`` 2); ``False``, the whole task on one device (files without the key).
    :param far_pair: the pair for a case of a kind not seen (``None``: no fallback; files
        without the key).
    :param far_distance: beyond this distance to the nearest training row a case is far
        (standardised, weighted features; ``inf``: never).
    :param latency: (R, C) log mean-latency ratio of each candidate to its case's least-latency
        candidate (``None``: throughput alone decides; files without the key).
    """

    candidates: tuple[str, ...]
    default: str
    window: int
    k: int
    margin: float
    center: np.ndarray
    scale: np.ndarray
    rows: np.ndarray
    scores: np.ndarray
    row_cases: tuple[str, ...]
    weights: np.ndarray | None = None
    parallel_etc: bool = True
    far_pair: str | None = None
    far_distance: float = math.inf
    latency: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.weights is None:
            object.__setattr__(self, "weights", np.ones(len(FEATURES)))
        w = np.asarray(self.weights, dtype=float)
        if w.shape != (len(FEATURES),) or (w < 0).any() or not np.isfinite(w).all():
            raise ValueError(f"weights: expected {len(FEATURES)} finite non-negative numbers")
        if self.default not in self.candidates:
            raise ValueError(f"default {self.default!r} is not a candidate ({', '.join(self.candidates)})")
        if self.far_pair is not None and self.far_pair not in self.candidates:
            raise ValueError(f"far_pair {self.far_pair!r} is not a candidate ({', '.join(self.candidates)})")
        if not self.far_distance > 0:
            raise ValueError(f"far_distance must be positive, got {self.far_distance!r}")
        if self.window < 2:
            raise ValueError(f"window must be at least 2 tasks, got {self.window}")
        if not 1 <= self.k <= len(self.rows):
            raise ValueError(f"k must be 1..{len(self.rows)} (training rows), got {self.k}")
        if self.rows.shape != (len(self.row_cases), len(FEATURES)):
            raise ValueError(
                f"rows: expected shape ({len(self.row_cases)}, {len(FEATURES)}), got {self.rows.shape}"
            )
        if (
            self.center.shape != (len(FEATURES),)
            or self.scale.shape != (len(FEATURES),)
            or (self.scale <= 0).any()
        ):
            raise ValueError(f"center and scale: expected {len(FEATURES)} numbers each, scales positive")
        want = (len(self.row_cases), len(self.candidates))
        if self.scores.shape != want:
            raise ValueError(f"scores: expected shape {want}, got {self.scores.shape}")
        if self.latency is not None and (self.latency.shape != want or not np.isfinite(self.latency).all()):
            raise ValueError(f"latency: expected shape {want} of finite numbers, got {self.latency.shape}")

    def distances(self, x: np.ndarray) -> np.ndarray:
        """Distance of ``x`` to each training row (standardised, weighted features)."""
        w = self.weights / self.scale
        z = (self.rows - self.center) * w
        return np.asarray(np.linalg.norm(z - (np.asarray(x, dtype=float) - self.center) * w, axis=1))

    def nearest(self, x: np.ndarray) -> np.ndarray:
        """Indices of the ``k`` training rows nearest ``x`` (ties: the earlier row)."""
        return np.argsort(self.distances(x), kind="stable")[: self.k]

    def choose(self, x: np.ndarray) -> Choice:
        """The pair for a case with features ``x`` (:func:`~rlsched.policies.case_features.case_features`)."""
        d = self.distances(x)
        near = np.argsort(d, kind="stable")[: self.k]
        predicted = self.scores[near].mean(axis=0)
        best = int(np.argmax(predicted))
        default = self.candidates.index(self.default)
        pick = best if predicted[best] - predicted[default] > self.margin else default
        nearest = float(d[near[0]])
        far = self.far_pair is not None and nearest > self.far_distance
        latency: dict[str, float] = {}
        if far:
            pick = self.candidates.index(str(self.far_pair))
        elif self.latency is not None:
            lat = self.latency[near].mean(axis=0)
            tied = np.flatnonzero(predicted >= predicted[pick] - LATENCY_TIE)
            pick = int(min(tied, key=lambda i: (lat[i], i != pick)))
            latency = {c: float(np.exp(v)) for c, v in zip(self.candidates, lat, strict=True)}
        cases = tuple(dict.fromkeys(self.row_cases[i] for i in near))
        return Choice(
            self.candidates[pick],
            {c: float(np.exp(v)) for c, v in zip(self.candidates, predicted, strict=True)},
            cases,
            tuple(float(v) for v in x),
            nearest,
            far,
            latency,
        )

    def with_choice_rule(self, k: int, margin: float) -> Recogniser:
        """The same training rows with another ``k`` and ``margin`` (tuned on validation cases)."""
        return dataclasses.replace(self, k=k, margin=margin)

    def with_far(self, pair: str | None, distance: float) -> Recogniser:
        """The same recogniser with another far pair and distance (``None``: no fallback)."""
        return dataclasses.replace(self, far_pair=pair, far_distance=distance)

    @property
    def used_features(self) -> tuple[str, ...]:
        """The features with a non-zero weight in the distance."""
        return tuple(n for n, w in zip(FEATURES, np.asarray(self.weights), strict=True) if w > 0)

    def with_weights(self, weights: np.ndarray) -> Recogniser:
        """The same recogniser measuring distance with other per-feature ``weights``."""
        return dataclasses.replace(self, weights=np.asarray(weights, dtype=float))

    # ---- plain-data file ------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "feature_version": FEATURE_VERSION,
            "features": list(FEATURES),
            "candidates": list(self.candidates),
            "default": self.default,
            "window": self.window,
            "k": self.k,
            "margin": self.margin,
            "center": self.center.tolist(),
            "scale": self.scale.tolist(),
            "rows": self.rows.tolist(),
            "scores": self.scores.tolist(),
            "row_cases": list(self.row_cases),
            "weights": np.asarray(self.weights, dtype=float).tolist(),
            "etc_version": ETC_PARALLEL if self.parallel_etc else ETC_ONE_DEVICE,
        } | self._optional_json()

    def _optional_json(self) -> dict[str, Any]:
        # The far fallback and the latency labels are written only when set, so a recogniser
        # without them keeps its file (and checksum).
        out: dict[str, Any] = {}
        if self.far_pair is not None:
            out |= {"far_pair": self.far_pair, "far_distance": self.far_distance}
        if self.latency is not None:
            out["latency"] = self.latency.tolist()
        return out

    def save(self, directory: str | Path, meta: dict[str, Any] | None = None) -> Path:
        """Write ``recogniser.json`` and ``meta.json`` (its checksum and ``meta``) into ``directory``.

        Each file is written under a temporary name and renamed, the checksum last, so a crash
        never leaves a model whose checksum matches a half-written file.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        _replace(d / MODEL_FILE, json.dumps(self.to_json(), indent=1))
        full = {**(meta or {}), "kind": "recogniser", "feature_version": FEATURE_VERSION,
                "files": {MODEL_FILE: sha256(d / MODEL_FILE)}}  # fmt: skip
        write_meta(d, full)
        return d


def model_sha256(directory: str | Path | None = None) -> str:
    """The sha256 of the model file that the recogniser's ``meta.json`` records (its version).

    :param directory: its folder; ``None`` for the shipped one.
    """
    d = Path(directory) if directory is not None else SHIPPED_DIR
    return str(json.loads((d / META).read_text(encoding="utf-8"))["files"][MODEL_FILE])


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise CheckpointError(path, "<file>", "an existing file", hint="is this a recogniser folder?")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(path, "<syntax>", f"valid JSON ({e})") from None
    if not isinstance(data, dict):
        raise CheckpointError(path, "<syntax>", "a JSON object", type(data).__name__)
    return data


def _field(data: dict[str, Any], path: Path, key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise CheckpointError(path, key, what, value)
    return value


def _far_fields(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """``far_pair`` and ``far_distance`` of a file (absent in files without a fallback)."""
    if "far_pair" not in data:
        return {}
    pair = _field(data, path, "far_pair", str, "one of the candidates")
    distance = float(_field(data, path, "far_distance", (int, float), "a positive number"))
    if not distance > 0:  # NaN too
        raise CheckpointError(path, "far_distance", "a positive number", distance)
    return {"far_pair": pair, "far_distance": distance}


def load_recogniser(directory: str | Path | None = None) -> Recogniser:
    """Verify and load a recogniser written by :meth:`Recogniser.save`.

    :param directory: its folder; ``None`` for the shipped one.
    :raises CheckpointError: naming the file and the field at fault (missing file, checksum,
        feature version, a field of the wrong shape).
    """
    d = Path(directory) if directory is not None else SHIPPED_DIR
    meta = _read_json(d / META)
    check_meta_seal(meta, d / META)
    check_kind(meta, d / META, "recogniser")  # another kind's files say less of what is wrong
    files = meta.get("files")
    if not isinstance(files, dict) or not isinstance(files.get(MODEL_FILE), str):
        raise CheckpointError(d / META, "files", f"the sha256 checksum of {MODEL_FILE}", files)
    path = d / MODEL_FILE
    verify_listed(path, files[MODEL_FILE])
    data = _read_json(path)
    if data.get("feature_version") != FEATURE_VERSION or data.get("features") != list(FEATURES):
        raise CheckpointError(
            path,
            "feature_version",
            f"{FEATURE_VERSION} with this build's features",
            data.get("feature_version"),
            hint="refit it (rlsched fit-recogniser) with this build",
        )
    candidates = tuple(_field(data, path, "candidates", list, "a list of SELECTOR+PLACER names"))
    if not candidates or not all(isinstance(c, str) and "+" in c for c in candidates):
        raise CheckpointError(
            path, "candidates", "a non-empty list of SELECTOR+PLACER names", list(candidates)
        )
    row_cases = tuple(str(c) for c in _field(data, path, "row_cases", list, "a list of case names"))
    etc_version = data.get("etc_version", ETC_ONE_DEVICE)
    if etc_version not in (ETC_ONE_DEVICE, ETC_PARALLEL) or isinstance(etc_version, bool):
        raise CheckpointError(path, "etc_version", f"{ETC_ONE_DEVICE} or {ETC_PARALLEL}", etc_version)
    try:
        return Recogniser(
            candidates=candidates,
            default=_field(data, path, "default", str, "one of the candidates"),
            window=_field(data, path, "window", int, "a task count"),
            k=_field(data, path, "k", int, "a count of training cases"),
            margin=float(_field(data, path, "margin", (int, float), "a number")),
            center=np.asarray(_field(data, path, "center", list, "a list of numbers"), dtype=float),
            scale=np.asarray(_field(data, path, "scale", list, "a list of numbers"), dtype=float),
            rows=np.asarray(_field(data, path, "rows", list, "a list of feature rows"), dtype=float),
            scores=np.asarray(_field(data, path, "scores", list, "a list of score rows"), dtype=float),
            row_cases=row_cases,
            weights=None if "weights" not in data else np.asarray(data["weights"], dtype=float),
            parallel_etc=etc_version == ETC_PARALLEL,
            **_far_fields(data, path),
            latency=None if "latency" not in data else np.asarray(data["latency"], dtype=float),
        )
    except (ValueError, TypeError) as e:
        raise CheckpointError(path, "<model>", "a consistent recogniser", hint=str(e)) from None
