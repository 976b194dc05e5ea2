"""The models a service schedules with: read from the files other commands write, checked at
start, and named by version.

- ``selector_model``: an LDWP checkpoint (``rlsched train``, ``finetune``, ``finetune --live``);
  the scheduler's selector must be ``ldwp``. Default: the shipped one.
- ``placer_model``: a placer checkpoint (``rlsched train --stage 2``); the placer must be
  ``iawp-rl``. Default: the shipped one.
- ``interference_model``: an interference model (``rlsched interference fit``, a folder) or the
  co-location CSV ``rlsched profile`` writes (fitted at start); the placer must be
  interference-aware (``iawp``, ``iawp-rl``). Default: none; the service surveys its cluster
  (:mod:`runtime.service.calibration`).
- ``recogniser_model``: the case recogniser of ``scheduler = "auto"`` (``rlsched fit-recogniser``).
  Default: the shipped one.

A missing, corrupt or mismatched file is an :class:`~rlsched.errors.InputError` naming the key
(``rlsched serve`` exits 2). A model's version is the sha256 of its weights file as its
checkpoint records it; a model that learns online is named by the digest of its current weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.checkpoint import META, WEIGHTS, CheckpointError
from rlsched.errors import InputError
from rlsched.interference.measurements import read_colocation_csv
from rlsched.policies import PolicyOptions, make_placer, make_selector
from rlsched.policies.registry import AUTO, parse_scheduler, recogniser_version, revisit_version
from rlsched.scheduler import TwoStageScheduler
from runtime.service.preflight import check_model_keys

if TYPE_CHECKING:  # torch: imported only where an interference model is read or fitted
    from rlsched.interference.predictor import InterferencePredictor


@dataclass(frozen=True)
class ModelVersion:
    """One model in use.

    :param role: ``selector``, ``placer`` or ``interference``.
    :param name: the policy or model family.
    :param source: the file or folder it was read from, ``shipped``, or ``survey`` (fitted on
        the cluster).
    :param sha256: its version (weights digest).
    """

    role: str
    name: str
    source: str
    sha256: str


def checkpoint_sha256(folder: str | Path) -> str:
    """The weights digest a checkpoint's ``meta.json`` records (verified when it was loaded)."""
    meta = json.loads((Path(folder) / META).read_text(encoding="utf-8"))
    return str(meta["files"][WEIGHTS])


def _auto(options: PolicyOptions, where: str) -> tuple[TwoStageScheduler, list[ModelVersion]]:
    """``auto`` over the recogniser of ``options``, and the versions of its models."""
    folder = options.recogniser_model
    try:
        digest = recogniser_version(folder)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, f"recogniser_model ({where})") from None
    try:
        sched = parse_scheduler(AUTO, options)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, f"selector_model ({where})") from None
    versions = [ModelVersion("recogniser", "auto", folder or "shipped", digest)]
    second = revisit_version(folder)
    if second is not None:
        versions.append(ModelVersion("revisit", "auto", folder or "shipped", second))
    ldwp = sched.selector.board.selectors.get("ldwp")  # type: ignore[attr-defined]
    if ldwp is not None:
        versions.append(
            ModelVersion(
                "selector", "ldwp", options.selector_model or "shipped", checkpoint_sha256(ldwp.model_dir)
            )
        )
    return sched, versions


def build_scheduler(
    spec: str,
    selector_model: str | None,
    placer_model: str | None,
    where: str,
    active_profiling: bool = False,
    prediction_fallback: float = 0.0,
    recogniser_model: str | None = None,
) -> tuple[TwoStageScheduler, list[ModelVersion]]:
    """The scheduler ``spec`` with the configured checkpoints, and the versions of its learned
    parts.

    :param spec: ``SELECTOR+PLACER``.
    :param selector_model: LDWP checkpoint folder, or ``None`` for the shipped one.
    :param placer_model: ``iawp-rl`` checkpoint folder, or ``None`` for the shipped one.
    :param where: the config file (named in errors).
    :param active_profiling: the placer calibrates from an active survey
        (:mod:`rlsched.interference.active`) instead of a random one.
    :param prediction_fallback: the placer's ``fallback`` line (``IawpPlacer``); 0 = off.
    :param recogniser_model: the recogniser folder of ``auto`` (``None``: the shipped one).
    :raises InputError: naming ``selector_model``, ``placer_model``, ``recogniser_model``,
        ``active_profiling`` or ``prediction_fallback``.
    """
    check_model_keys(spec, where, selector_model, placer_model, recogniser_model)
    auto = spec == AUTO
    sel, _, plc = spec.partition("+")
    options = PolicyOptions(selector_model, placer_model, recogniser_model)
    versions: list[ModelVersion] = []
    if auto:
        sched, versions = _auto(options, where)
        placer = sched.placer
    else:
        try:
            selector = make_selector(sel, options)
        except CheckpointError as e:
            raise InputError.from_checkpoint(e, f"selector_model ({where})") from None
        try:
            placer = make_placer(plc or "speedup", options)
        except CheckpointError as e:
            raise InputError.from_checkpoint(e, f"placer_model ({where})") from None
        sched = TwoStageScheduler(selector, placer)
    if active_profiling:
        if not hasattr(placer, "active"):
            raise InputError(
                where, "active_profiling", "a scheduler whose placer calibrates from a survey", spec
            )
        placer.active = True
    if prediction_fallback > 0:
        if not hasattr(placer, "fallback"):
            raise InputError(
                where,
                "prediction_fallback",
                "a scheduler whose placer predicts interference (iawp, ...)",
                spec,
            )
        placer.fallback = prediction_fallback
    folder = getattr(sched.selector, "model_dir", None)
    if folder is not None:
        versions.append(ModelVersion("selector", sel, selector_model or "shipped", checkpoint_sha256(folder)))
    src = getattr(placer, "model_dir", None)
    if src is not None:
        versions.append(ModelVersion("placer", plc, placer_model or "shipped", checkpoint_sha256(src)))
    return sched, versions


def load_interference(path: str, spec: str, where: str) -> InterferencePredictor:
    """The interference model ``interference_model`` names: a folder of ``interference fit`` or
    a co-location CSV of ``profile`` (fitted here, NCF, seed 0).

    :param spec: the scheduler that would use it (its placer must be interference-aware).
    :raises InputError: naming ``interference_model``.
    """
    from rlsched.interference.predictor import InterferencePredictor, fit_interference

    check_model_keys(spec, where, interference_model=path)
    p = Path(path)
    if p.is_dir():
        try:
            return InterferencePredictor.load(p)
        except CheckpointError as e:
            raise InputError.from_checkpoint(e, f"interference_model ({where})") from None
    if not p.is_file():
        raise InputError(
            where, "interference_model", "a folder of 'rlsched interference fit' or a co-location CSV", path
        )
    try:
        data = read_colocation_csv(p)
    except InputError as e:
        raise e.with_hint(f"the co-location CSV of interference_model ({where})") from None
    if not len(data):
        raise InputError(
            str(p), "<rows>", "at least one co-location row", hint=f"interference_model ({where})"
        )
    return fit_interference(data, "ncf", 0)


def describe(versions: list[ModelVersion]) -> dict[str, dict[str, Any]]:
    """Versions by role, as ``/v1/cluster`` shows them."""
    return {v.role: {"name": v.name, "source": v.source, "sha256": v.sha256} for v in versions}
