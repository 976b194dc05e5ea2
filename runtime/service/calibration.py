"""Calibrating the service's placer on the live cluster, in the background.

An interference-aware placer (``iawp``, ``iawp-rl``) needs a survey of how kinds co-run on each
GPU model before its predictions mean anything. ``rlsched serve`` takes that survey on its own
cluster, as ``rlsched profile`` does (the same :class:`runtime.profiler.LiveProfiler` and the same
co-location selection), but without holding tasks back: until the survey is done, tasks are
placed by :data:`FALLBACK_PLACER`; then the calibrated placer takes over. A GPU model that joins
later (a node added, a Ray node discovered) is surveyed the same way, and the placer's model
learns it from that survey while the placer keeps running.

States of a GPU model: ``pending`` (not surveyed yet), ``surveying``, ``calibrated``,
``restored`` (from the learned-state checkpoint), ``loaded`` (covered by the configured
``interference_model``), ``failed`` (the survey raised or ran past its
time budget: the placer predicts that model from its features, or its fallback, and the reason is
logged).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rlsched.interference.calibration import CalibratingPlacer, Survey, SurveyRequest, run_survey
from rlsched.world import Observe
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec

log = logging.getLogger(__name__)

#: The placer tasks get while the interference-aware placer waits for its survey.
FALLBACK_PLACER = "mlsm"


@dataclass
class ModelState:
    """Calibration of one GPU model.

    :param state: ``pending``, ``surveying``, ``calibrated``, ``restored`` or ``failed``.
    :param pairs: co-runs measured on it.
    :param seconds: how long its survey took.
    :param error: why it failed.
    """

    state: str = "pending"
    pairs: int = 0
    seconds: float = 0.0
    error: str | None = None


#: Builds the profiling instrument for the GPU models of a cluster (a LiveProfiler) with a
#: deadline (``time.monotonic()``).
MakeInstrument = Callable[[LiveClusterSpec, float], object]


class Calibrator:
    """Surveys the cluster's GPU models for one calibrating placer and hands it the data.

    :param cluster: the service's started cluster.
    :param placer: the placer to calibrate (it does not run until its first survey is done).
    :param observe: the placer's online-learning hook, handed to the agents with it.
    :param make_instrument: the profiling instrument of a cluster spec, with a deadline.
    :param budget_s: seconds one survey may take.
    :param known: GPU models the placer's model already covers (restored from a checkpoint or
        loaded from a file): not surveyed again.
    :param known_state: their state (``restored``, ``loaded``, ``calibrated``).
    """

    def __init__(
        self,
        cluster: ClusterBackend,
        placer: CalibratingPlacer,
        observe: Observe | None,
        make_instrument: MakeInstrument,
        budget_s: float,
        known: Sequence[str] = (),
        known_state: str = "restored",
    ) -> None:
        self.cluster, self.placer, self.observe = cluster, placer, observe
        self.make_instrument, self.budget_s = make_instrument, budget_s
        self.models: dict[str, ModelState] = {m: ModelState(known_state) for m in known}
        self.live = bool(known)  # the placer runs on the cluster (not the fallback)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def carry_over(self, before: dict[str, ModelState]) -> None:
        """Keep, for the GPU models this placer starts knowing, how an earlier placer's survey
        calibrated them (an admin's switch takes that placer's model, and its figures with it)."""
        with self._lock:
            for m, s in before.items():
                if m in self.models and s.state != "surveying":
                    self.models[m] = s

    def snapshot(self) -> dict[str, ModelState]:
        """Each GPU model's calibration as it stands."""
        with self._lock:
            return dict(self.models)

    def states(self) -> dict[str, dict[str, object]]:
        """Each GPU model's calibration, for ``/v1/cluster`` and ``/metrics``."""
        with self._lock:
            return {m: dict(vars(s)) for m, s in sorted(self.models.items())}

    def check(self) -> None:
        """Start a survey of GPU models of alive nodes not surveyed yet (none while one runs)."""
        if self._thread is not None and self._thread.is_alive():
            return
        new = sorted(set(self._cluster_models()) - set(self.models))
        if not new:
            return
        with self._lock:
            for m in new:
                self.models[m] = ModelState("surveying")
        self._thread = threading.Thread(
            target=self._survey, args=(new,), name="rlsched-calibrate", daemon=True
        )
        self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        """Until the running survey (if any) ends."""
        if self._thread is not None:
            self._thread.join(timeout)

    def _cluster_models(self) -> list[str]:
        c = self.cluster
        with c.lock:
            alive = [bool(a) for a in c.view.alive]
            nodes = list(c.spec.nodes)
        return [g.model for n, ok in zip(nodes, alive, strict=False) if ok for g in n.gpus]

    def _spec_of(self, models: list[str]) -> LiveClusterSpec:
        """The cluster's spec cut to the nodes with GPUs of ``models`` (one device per model is
        opened by the profiler)."""
        spec = self.cluster.spec
        nodes = tuple(n for n in spec.nodes if any(g.model in models for g in n.gpus))
        return replace(spec, nodes=nodes)

    def _survey(self, new: list[str]) -> None:
        t0 = time.monotonic()
        try:
            survey = self._take(new, t0 + self.budget_s)
            self._hand(survey)
        except Exception as e:  # the service keeps running on what it has
            log.warning("rlsched serve: calibrating %s failed: %s", ", ".join(new), e)
            with self._lock:
                for m in new:
                    self.models[m] = ModelState(
                        "failed", 0, round(time.monotonic() - t0, 2), str(e) or type(e).__name__
                    )
            return
        took = time.monotonic() - t0
        rows = list(survey.colocation.device) if survey.colocation is not None else []
        with self._lock:
            for m in new:
                self.models[m] = ModelState("calibrated", rows.count(m), round(took, 2))
        log.info("rlsched serve: calibrated %s from %d co-runs in %.1f s", ", ".join(new), len(rows), took)

    def _take(self, models: list[str], deadline: float) -> Survey:
        instrument = self.make_instrument(self._spec_of(models), deadline)
        try:
            request = self.placer.survey_request()
            if request.colocation_fraction is None:  # a loaded model: new GPU models still need co-runs
                request = SurveyRequest(colocation_fraction=1.0, seed=request.seed)
            return run_survey(instrument, request)  # type: ignore[arg-type]
        finally:
            close = getattr(instrument, "close", None)
            if close is not None:
                close()

    def _hand(self, survey: Survey) -> None:
        """Calibrate the placer from its first survey and give it to the agents; later surveys
        (GPU models that joined) extend its model while it runs."""
        if not self.live:
            self.placer.calibrate(survey)
            self.cluster.set_placer(self.placer, self.observe)  # type: ignore[arg-type]
            self.live = True
            return
        extend = getattr(self.placer, "extend", None)
        if extend is None:
            return
        with self.cluster.lock:  # agents read the placer's model under this lock
            snapshot = copy.deepcopy(getattr(self.placer, "predictor", None))
        learnt = extend(survey, snapshot)  # the fit runs outside the lock
        with self.cluster.lock:
            self.placer.adopt(learnt, list(survey.devices))  # type: ignore[attr-defined]
