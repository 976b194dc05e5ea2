"""The service's placer and what it learns: calibration on the live cluster, online updates of
the interference model, and their checkpoints.

At start (and when an admin switches schedulers), an interference-aware placer gets, in order of
preference: the model of the learned-state checkpoint (what it learnt before a restart), the
configured ``interference_model``, or none. GPU models of the cluster that model does not cover
are surveyed in the background (:mod:`runtime.service.calibration`); tasks are placed by
:data:`~runtime.service.calibration.FALLBACK_PLACER` until the placer has a model. The placer then
keeps learning from the co-runs the agents observe, and the model is checkpointed every
``checkpoint_interval_s`` (:mod:`runtime.service.learned_state`).
"""

from __future__ import annotations

import copy
import logging
import time
from typing import TYPE_CHECKING, Any

from rlsched.policies.registry import auto_choice, auto_second, is_auto, restore_auto_choice
from rlsched.scheduler import TwoStageScheduler
from rlsched.world import hand_over
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec
from runtime.service.calibration import FALLBACK_PLACER, Calibrator, ModelState
from runtime.service.config import ServiceConfig
from runtime.service.learned_state import Learned, LearnedState
from runtime.service.models import ModelVersion, describe, load_interference

if TYPE_CHECKING:  # torch: imported only when a model learns (the selector, or interference)
    from rlsched.interference.predictor import InterferencePredictor
    from runtime.service.selector_learning import SelectorLearning

log = logging.getLogger(__name__)


class Learning:
    """The placer's calibration, online learning and checkpoints for one service.

    :param config: the service's configuration.
    :param cluster: its cluster (not started yet).
    :param versions: versions of the scheduler's checkpoints (:func:`runtime.service.models.build_scheduler`).
    :raises InputError: an ``interference_model`` or learned state that cannot be read (naming it).
    """

    def __init__(self, config: ServiceConfig, cluster: ClusterBackend, versions: list[ModelVersion]) -> None:
        self.config, self.cluster, self.versions = config, cluster, versions
        self.state = LearnedState(config.state_dir)
        self.calibrator: Calibrator | None = None
        self.placer: Any = None
        self.source = "survey"
        self.loaded_sha: str | None = None
        self._saved_updates = -1
        self._saved_key: tuple[object, ...] | None = None
        #: The selector's online learner (``selector_learning``), set by the service.
        self.selector: SelectorLearning | None = None
        self._last_save = time.monotonic()
        #: Checkpoints that failed since the start (a full disk), and the last one while failing.
        self.save_failures = 0
        self.last_save_failure: dict[str, Any] | None = None
        #: The scheduler when it is ``auto`` (its decision is checkpointed).
        self.auto: TwoStageScheduler | None = None
        #: The last interference model (and its updates) of a placer that was switched away from.
        self._kept: tuple[InterferencePredictor, int] | None = None
        #: How the GPU models of that model were calibrated (``/v1/cluster`` keeps showing it).
        self._kept_calibration: dict[str, ModelState] = {}
        self.learned = self.state.load_at_start(config.source)
        self.configured: InterferencePredictor | None = None
        if config.interference_model is not None:
            self.configured = load_interference(config.interference_model, config.scheduler, config.source)
            self.loaded_sha = self.configured.digest()

    # ---- installing a placer ------------------------------------------------------------------
    def install(self, sched: TwoStageScheduler, started: bool) -> None:
        """Give the cluster ``sched``'s placer (starting the cluster unless ``started``), with its
        calibration under way in the background when it needs one."""
        self.auto = sched if is_auto(sched) else None
        if not started:
            self._restore_choice()
        self._keep_model()
        placer: Any = sched.placer
        observe = hand_over(placer, None)
        if not callable(getattr(placer, "adopt", None)):  # not interference-aware: nothing to learn here
            self.placer, self.calibrator = placer, None
            self._give(placer, observe, started)
            return
        placer.online_batch = self.config.online_batch
        predictor, updates, known_state = self._initial_model()
        models = self._models()
        known: list[str] = []
        if predictor is not None:
            known = [m for m in models if predictor.covers(m)]
            placer.adopt(predictor, known)
            placer.updates = updates
        self.placer = placer
        self.calibrator = Calibrator(
            self.cluster,
            placer,
            observe,
            self._instrument,
            self.config.calibration_budget_s,
            known,
            known_state,
        )
        if known_state == "calibrated":  # the model of the placer an admin switched away from
            self.calibrator.carry_over(self._kept_calibration)
        if known:
            self._give(placer, observe, started)
        else:
            self._give(FALLBACK_PLACER, None, started)
        self.calibrator.check()

    def _keep_model(self) -> None:
        """Keep the model of the placer being replaced: an admin who switches to a placer that
        predicts nothing and back gets it again (not a new survey, and no checkpoint without it)."""
        predictor = getattr(self.placer, "predictor", None) if self.placer is not None else None
        if predictor is not None:
            with self.cluster.lock:
                self._kept = (copy.deepcopy(predictor), int(getattr(self.placer, "updates", 0)))
            if self.calibrator is not None:
                self._kept_calibration = self.calibrator.snapshot()

    def _recogniser_sha(self) -> str | None:
        return next((v.sha256 for v in self.versions if v.role == "recogniser"), None)

    def _revisit_sha(self) -> str | None:
        return next((v.sha256 for v in self.versions if v.role == "revisit"), None)

    def _restore_choice(self) -> None:
        """``auto`` takes the decision of the checkpoint when the same recogniser made it (the
        same cluster and stream of work: no new window of tasks on the default pair)."""
        saved = self.learned.auto if self.learned is not None else None
        if self.auto is None or saved is None:
            return
        where = self.state.folder
        if saved.get("recogniser_sha256") != self._recogniser_sha():
            log.warning(
                "rlsched serve: auto's decision in %s was made by another recogniser: deciding again", where
            )
            return
        second = saved.get("second")
        if second is not None and saved.get("revisit_sha256") != self._revisit_sha():
            log.warning(
                "rlsched serve: auto's second decision in %s was made by another model: deciding again", where
            )
            second = None
        try:
            pair = restore_auto_choice(self.auto, saved["choice"], second)
        except ValueError as e:
            log.warning("rlsched serve: auto's decision in %s is unreadable (%s): deciding again", where, e)
            return
        if pair is not None:
            log.info("rlsched serve: auto runs %s, the pair it chose before the restart", pair)

    def _auto_decision(self) -> dict[str, Any] | None:
        choice = auto_choice(self.auto) if self.auto is not None else None
        if choice is None:
            return None
        out = {"recogniser_sha256": self._recogniser_sha(), "choice": choice}
        second = auto_second(self.auto) if self.auto is not None else None
        if second is not None:
            out |= {"revisit_sha256": self._revisit_sha(), "second": second}
        return out

    def _initial_model(self) -> tuple[InterferencePredictor | None, int, str]:
        """(model, its online updates so far, the calibration state of the GPU models it covers)."""
        current = getattr(self.placer, "predictor", None) if self.placer is not None else None
        if current is not None:  # an admin switched schedulers: the cluster is the same
            return copy.deepcopy(current), int(getattr(self.placer, "updates", 0)), "calibrated"
        if self._kept is not None:  # ... by way of one that predicts nothing
            return copy.deepcopy(self._kept[0]), self._kept[1], "calibrated"
        learned = self.learned
        if learned is not None and self.configured is not None and learned.origin != self.loaded_sha:
            log.warning(
                "rlsched serve: %s was learnt from another interference model than %s: starting from the "
                "configured one (the next checkpoint replaces the state)",
                self.state.folder,
                self.config.interference_model,
            )
            learned = None
        if learned is not None and learned.interference is not None:
            self.source = str(self.state.folder)
            self._saved_updates = learned.interference_updates
            self._saved_key = (
                learned.interference_updates,
                sorted(learned.models),
                learned.selector_updates,
                learned.promoted is not None,
                (learned.auto or {}).get("choice", {}).get("pair"),
                (learned.auto or {}).get("second", {}).get("pair"),
            )
            return learned.interference, learned.interference_updates, "restored"
        if self.configured is not None:
            self.source = str(self.config.interference_model)
            return copy.deepcopy(self.configured), 0, "loaded"
        return None, 0, "calibrated"

    def _give(self, placer: Any, observe: Any, started: bool) -> None:
        if started:
            self.cluster.set_placer(placer, observe)
        else:
            self.cluster.start(placer, 0, observe)

    def _models(self) -> list[str]:
        c = self.cluster
        with c.lock:
            alive = [bool(a) for a in c.view.alive]
        return sorted({g.model for n, ok in zip(c.spec.nodes, alive, strict=False) if ok for g in n.gpus})

    def _instrument(self, spec: LiveClusterSpec, deadline: float) -> object:
        from runtime.profiler import LiveProfiler

        backend = "cupy" if self.cluster.backend_name == "cupy" else "numpy"
        return LiveProfiler(spec, backend, apps=self.config.calibration_apps, deadline=deadline)

    # ---- running ------------------------------------------------------------------------------
    @property
    def updates(self) -> int:
        """Online updates of the interference model (restored ones included)."""
        return int(getattr(self.placer, "updates", 0)) if self.calibrator is not None else 0

    def tick(self) -> None:
        """Survey GPU models that joined; checkpoint when the interval has passed."""
        if self.calibrator is not None:
            self.calibrator.check()
        elif self.selector is None and self.auto is None:
            return
        if time.monotonic() - self._last_save >= self.config.checkpoint_interval_s:
            self.checkpoint()

    def checkpoint(self) -> int | None:
        """Save the learned state if it changed since the last save; the checkpoint's number."""
        self._last_save = time.monotonic()
        predictor, updates, models = None, 0, []
        if self.calibrator is not None:
            with self.cluster.lock:  # the agents update the model under this lock
                predictor = copy.deepcopy(getattr(self.placer, "predictor", None))
                updates = self.updates
            models = [
                m
                for m, s in self.calibrator.states().items()
                if s["state"] in ("calibrated", "restored", "loaded")
            ]
        elif self._kept is not None:  # running a placer that predicts nothing: keep what was learnt
            predictor, updates = copy.deepcopy(self._kept[0]), self._kept[1]
            models = [m for m in self._models() if predictor.covers(m)]
        learned = Learned(predictor, updates, models, origin=self.loaded_sha)
        if self.selector is not None:
            learned.selector, learned.selector_updates, learned.promoted = self.selector.state()
            learned.selector_origin = self.selector.origin
        learned.auto = self._auto_decision()
        if predictor is None and learned.selector is None and learned.auto is None:
            return None
        pair = learned.auto["choice"]["pair"] if learned.auto is not None else None
        second = (learned.auto or {}).get("second", {}).get("pair")
        key = (updates, models, learned.selector_updates, learned.promoted is not None, pair, second)
        if key == self._saved_key:
            return None
        try:
            version = self.state.save(learned)
        except OSError as e:  # a full disk must not stop scheduling; the next interval tries again
            log.warning("rlsched serve: checkpointing the learned state failed: %s", e)
            self.save_failures += 1
            self.last_save_failure = {"at": time.time(), "error": str(e)}
            return None
        self.last_save_failure = None
        self._saved_key = key
        self._saved_updates = updates
        log.info(
            "rlsched serve: learned state checkpointed: %s, version %d (%d interference updates)",
            self.state.folder,
            version,
            updates,
        )
        return version

    def describe(self) -> dict[str, Any]:
        """Models in use, calibration per GPU model, online updates, checkpoints."""
        models = describe(self.versions)
        predictor = getattr(self.placer, "predictor", None) if self.calibrator is not None else None
        if predictor is not None:
            with self.cluster.lock:
                digest = predictor.digest()
            models["interference"] = {"name": predictor.method, "source": self.source, "sha256": digest}
        return {
            "models": models,
            "calibration": self.calibrator.states() if self.calibrator is not None else {},
            "placer": self._placer_in_use(),
            "online_updates": {"interference": self.updates}
            | ({"selector": self.selector.dqn.updates} if self.selector is not None else {}),
            "observed_runs": dict(getattr(self.placer, "seen", {})) if self.calibrator is not None else {},
            "selector_learning": self.selector.describe() if self.selector is not None else None,
            "checkpoint": {
                "version": self.state.saved_version,
                "saved_at": self.state.saved_at,
                "failures": self.save_failures,
                "failing": self.last_save_failure,
                "saved_updates": max(self._saved_updates, 0),
                "saved_selector_updates": self._saved_key[2] if self._saved_key is not None else 0,
            },
        }

    def _placer_in_use(self) -> str | None:
        if self.placer is None:
            return None
        if self.calibrator is not None and not self.calibrator.live:
            return f"{FALLBACK_PLACER} (until the survey calibrates {self.placer.name})"
        return str(getattr(self.placer, "name", type(self.placer).__name__))

    def predictions(self) -> dict[str, Any]:
        """The placer's predicted co-location table (``/v1/models``)."""
        table = getattr(self.placer, "predictions", None)
        if table is None:
            return {}
        with self.cluster.lock:
            return table()

    def prediction_error(self) -> dict[str, Any]:
        """Per GPU model, how far the placer's predictions were from the co-runs it saw finish,
        and whether it has fallen back to a rule without predictions there (``/v1/models``)."""
        report = getattr(self.placer, "prediction_error", None)
        if report is None:
            return {}
        with self.cluster.lock:
            return report()
