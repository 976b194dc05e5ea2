"""Stage 2, IAWP: interference-aware placement of ready subtasks on GPU streams and CPU cores.

``iawp`` places each ready subtask where it is predicted to finish soonest: its predicted solo time
on the unit, stretched by the interference a learned model (NCF, :mod:`rlsched.interference.predictor`)
predicts with the subtasks already running there, plus the slowdown it would inflict on them.
The model is fitted from the cluster's profiler before the run (sparse pairs, never the
simulator's parameters) and keeps learning online from subtasks the executor sees finish
(:mod:`rlsched.policies.iawp_model`: calibration, online learning and the prediction table).

Co-runners compose additively in slowdown: with normalised throughputs ``n_p`` against each
partner ``p``, a subtask runs at ``1 / (1 + sum_p (1/n_p - 1))`` of its solo speed — exact for one
partner, and the usual first-order model for several.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlsched.estimates import subtask_gpu_seconds
from rlsched.interference.prediction_error import PredictionErrors
from rlsched.interference.predictor import InterferencePredictor
from rlsched.policies.iawp_model import (
    ONLINE_BATCH,
    InterferenceModelUse,
)
from rlsched.policies.placers import (
    MlsmPlacer,
    SpeedupPlacer,
    core_free,
    cpu_seconds,
    fitting_gpus,
    gpus_ever_fitting,
)
from rlsched.scheduler import CPU
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView

#: Share of (device, kind, partner) triples the profiler co-runs before a run (sparse profiling).
PROFILE_FRACTION = 0.5
#: Least predicted growth of a GPU's total progress rate (in solo-subtask units) for which a
#: subtask joins its co-runners rather than wait. Chosen on seeds 0-1 (training seeds) of the
#: saturated ``interference-saturated`` scenario (0.2-0.4 all beat never waiting there; 0 never
#: waits); with ``HOLD = "line"`` it kept the best mean throughput over six built-ins on
#: validation seeds 10001-10003 against ``pass`` at 0.2-0.5 (BENCHMARKS.md, "Stage 2").
MIN_GAIN = 0.3
#: What a held subtask does to younger ones (see :class:`IawpPlacer`).
HOLD = "line"
#: How far ``iawp`` doubts its model by default (see :class:`IawpPlacer`'s ``doubt``).
DOUBT = 0.0
#: Sums of predicted slowdowns, and gains, a placer keeps at most (:meth:`IawpPlacer._keep`).
TERMS_KEPT = 100_000


class IawpPlacer(InterferenceModelUse, MlsmPlacer):
    """Interference-aware placement by predicted finish time.

    :param predictor: a fitted model to use (updated in place when ``online``); ``None`` fits one
        from the profiler (a copy of a cached calibration per run).
    :param method: model family fitted from the profiler (``ncf``, ``svd`` or ``mean``).
    :param profile_fraction: share of pairs the profiler measures.
    :param online: keep learning from observed co-runs during the run.
    :param harm_weight: weight of the slowdown a placement inflicts on co-runners (in units of the
        subtask's own solo time); 0 = the subtask's own finish time only.
    :param min_gain: wait for another GPU rather than join co-runners when the GPU's predicted
        total progress rate would grow by less than this (in solo-subtask units); 0 = never wait.
    :param hold: what a held subtask does to the subtasks behind it. ``"pass"``: younger ones
        may take the stream it refused (so a complementary partner can join the co-runners, which
        is what holding back is for); ``"line"``: they wait behind it until it is admitted.
    :param doubt: hold a subtask back only when the gain is below ``min_gain`` even with every
        predicted slowdown lowered by ``doubt`` times the model's uncertainty about it (the
        ensemble's spread, :meth:`InterferencePredictor.predict_spread`): where the model is
        unsure, the placer holds less and falls back toward never waiting, which needs no
        prediction. 0 = trust the predictions as they are.
    :param active: calibrate from an active survey of the same budget
        (:mod:`rlsched.interference.active`) rather than a random one.
    :param fallback: on a node with a GPU model whose predicted speeds were off by more than this
        (:mod:`rlsched.interference.prediction_error`; solo speed as measured, else the
        roofline's) place by ``speedup``'s rule, which needs no prediction, until they come
        right again. 0 (default) = always trust the model: on generated validation cases no line
        of 0.1-0.5 beat it (BENCHMARKS.md, "Generated cases: training on them").
    """

    name = "iawp"

    def __init__(
        self,
        predictor: InterferencePredictor | None = None,
        method: str = "ncf",
        profile_fraction: float = PROFILE_FRACTION,
        online: bool = True,
        harm_weight: float = 1.0,
        min_gain: float = MIN_GAIN,
        hold: str = HOLD,
        doubt: float = DOUBT,
        active: bool = False,
        fallback: float = 0.0,
    ) -> None:
        if hold not in ("pass", "line"):
            raise ValueError(f"hold must be 'pass' or 'line', not {hold!r}")
        self._given = predictor
        self.predictor = predictor
        self.method = method
        self.profile_fraction = profile_fraction
        self.online = online
        self.harm_weight = harm_weight
        self.min_gain = min_gain
        self.hold = hold
        self.doubt = doubt
        self.active = active
        self._plain = SpeedupPlacer()
        self._errors = PredictionErrors(fallback)
        #: Seed of the survey asked for (which triples; the fit): one calibration per seed.
        self.survey_seed = 0
        self._held: dict[int, tuple[int, int, int]] = {}  # node -> (task id, subtask index, priority)
        self._slow: dict[tuple[str, str], dict[str, float]] = {}
        # The same slowdowns lowered by ``doubt`` spreads (only kept when doubt > 0).
        self._slow_low: dict[tuple[str, str], dict[str, float]] = {}
        self._solo: dict[tuple[str, str], float] = {}
        self._terms: dict[tuple[str, str, tuple[str, ...]], tuple[float, float]] = {}
        self._gains: dict[tuple[str, str, tuple[str, ...], bool], float] = {}
        self._table_version = 0
        self._batch: list[tuple[str, str, str, float]] = []
        #: Online samples gathered before one update (the service sets its own).
        self.online_batch = ONLINE_BATCH
        self.updates = 0
        #: Observed GPU runs: alone, with co-runners, with co-runners but no solo reference for
        #: their (GPU model, kind) yet, and with too little overlap to learn from.
        self.seen = {"solo": 0, "co_run": 0, "no_reference": 0, "brief": 0}

    @property
    def fallback(self) -> float:
        """The ``fallback`` line (settable: the service sets it from its config)."""
        return self._errors.line

    @fallback.setter
    def fallback(self, line: float) -> None:
        self._errors.line = line

    # ---- placement ---------------------------------------------------------------------------
    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        dev = sub.kind.device
        if dev is Device.CPU:
            return CPU if core_free(node, view) else None
        if self._falls_back(node, view):
            return self._plain.place(task, sub, node, view)
        cpu_ok = dev is Device.BOTH and core_free(node, view)
        if not cpu_ok and self._behind_the_held(task, sub, node, view):
            return None
        gpus = fitting_gpus(task, sub, node, view)
        if gpus:
            g, t_gpu = self._best_gpu(sub, node, gpus, view)
            if cpu_ok and cpu_seconds(sub, node, view) < t_gpu:
                return self._release(node, task, sub)
            return g if self.min_gain <= 0 else self._admit(task, sub, node, g, view)
        return self._when_streams_full(task, sub, node, view) if cpu_ok else None

    def _falls_back(self, node: int, view: ClusterView) -> bool:
        """Whether the node has a GPU model over the ``fallback`` line, so ``speedup``'s rule
        places there (it holds nothing back, so the node's held subtask is let go)."""
        out = self._errors.distrusted_models
        names = view.model_names
        if not out or not any(m >= 0 and names[m] in out for m in view.fast.gpu_model[node]):
            return False
        self._held.pop(node, None)
        return True

    def _behind_the_held(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> bool:
        """Whether ``sub``, which may not take a core, waits in line behind the subtask held on
        its node (``hold="line"``): :meth:`_admit` would refuse it whichever GPU it scored best,
        so its GPUs are not scored. In a saturated run most offers end here: the node's whole
        queue is offered again after every completion, and the line refuses it all. It restates
        ``_admit``'s line: a subclass that changes one changes both."""
        if self.hold != "line" or self.min_gain <= 0:
            return False
        held = self._held.get(node)
        if held is None or view.fast.node_gpu_running[node] == 0:  # _admit lets it go then
            return False
        return held[:2] != (task.id, sub.index) and held[2] >= task.priority

    def _when_streams_full(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        """A core, or ``None`` to wait for a stream, for a subtask that may run on either side.

        Every stream is taken. Predict the time on the best GPU as if the subtask joined its
        present co-runners once a stream frees, plus the wait behind the older ready subtasks
        queued for the node's streams; take the core only if it still finishes sooner.
        """
        able = gpus_ever_fitting(task, sub, node, view)
        if not able:
            return self._release(node, task, sub)
        _, t_gpu = self._best_gpu(sub, node, able, view)
        f = view.fast
        wait = t_gpu * float(view.ready_waiting[node]) / max(f.node_streams[node], 1)
        return self._release(node, task, sub) if cpu_seconds(sub, node, view) < t_gpu + wait else None

    def _release(self, node: int, task: Task, sub: Subtask) -> int:
        """A core for the subtask; if it was the one held back on the node, the line moves on."""
        held = self._held.get(node)
        if held is not None and held[:2] == (task.id, sub.index):
            del self._held[node]
        return CPU

    def _admit(self, task: Task, sub: Subtask, node: int, g: int, view: ClusterView) -> int | None:
        """``g``, or ``None`` to hold the subtask back while joining would add too little.

        With ``hold="line"`` a held subtask keeps its place in line: younger GPU subtasks of the
        node wait behind it (without that, kinds that interfere badly would starve behind kinds
        that pass), until it is admitted or the node's GPUs run nothing. Subtasks of a higher
        priority are not in its line: holding back looks for a partner, it must not reorder task
        classes (it did: 24 % of ``priority-saturated``'s interactive tasks missed their deadline
        behind held batch subtasks). With ``hold="pass"`` each subtask is judged alone, so a
        younger complementary one may take the stream.
        """
        if self.hold == "pass":
            busy = view.fast.node_gpu_running[node] > 0
            return None if busy and self._hold_gain(sub.kind.name, node, g, view) < self.min_gain else g
        me = (task.id, sub.index)
        held = self._held.get(node)
        if held is not None and view.fast.node_gpu_running[node] == 0:
            del self._held[node]  # nothing runs: nothing to protect, and nothing would wake it
            held = None
        if held is not None and held[:2] != me and held[2] >= task.priority:
            return None
        if (
            self._hold_gain(sub.kind.name, node, g, view) < self.min_gain
            and view.fast.node_gpu_running[node] > 0
        ):
            self._held[node] = (*me, task.priority)
            return None
        if held is not None and held[:2] == me:
            del self._held[node]
        return g

    def _hold_gain(self, kind: str, node: int, g: int, view: ClusterView) -> float:
        """The gain a hold is judged on: :meth:`_gain`, with doubted slowdowns when ``doubt`` > 0."""
        return self._gain(kind, node, g, view, optimistic=self.doubt > 0.0)

    def _gain(self, kind: str, node: int, g: int, view: ClusterView, optimistic: bool = False) -> float:
        """Predicted change of the GPU's total progress rate (in solo-subtask units) if ``kind``
        joins the subtasks running on it; ``optimistic``: from slowdowns lowered by their
        doubt (:meth:`_pair_slowdown_low`)."""
        running = view.gpu_kinds[node][g]
        if not running:
            return 1.0
        device = view.model_names[view.fast.gpu_model[node][g]]
        key = (device, kind, tuple(running), optimistic)
        kept = self._gains.get(key)
        if kept is not None:  # kept as _corun_terms keeps its sums (iawp-pass asks per offer)
            return kept
        version = self._table_version
        ps = self._pair_slowdown_low if optimistic else self._pair_slowdown
        before = after = 0.0
        own = 0.0
        for i, a in enumerate(running):
            s_a = sum(ps(device, a, b) for j, b in enumerate(running) if j != i)
            before += 1.0 / (1.0 + s_a)
            after += 1.0 / (1.0 + s_a + ps(device, a, kind))
            own += ps(device, kind, a)
        gain = after + 1.0 / (1.0 + own) - before
        self._keep(self._gains, key, gain, version)
        return gain

    def _best_gpu(self, sub: Subtask, node: int, gpus: list[int], view: ClusterView) -> tuple[int, float]:
        """The GPU with the smallest predicted cost, and the subtask's predicted time there."""
        f = view.fast
        names, models, kinds = view.model_names, f.gpu_model[node], view.gpu_kinds[node]
        kind = sub.kind.name
        best, best_cost, best_t = gpus[0], float("inf"), float("inf")
        for g in gpus:
            device = names[models[g]]
            solo = self._solo_seconds(sub, node, g, device, view)
            own, harm = self._corun_terms(device, kind, kinds[g])
            t = solo * (1.0 + own)
            cost = t + self.harm_weight * solo * harm
            if cost < best_cost:
                best, best_cost, best_t = g, cost, t
        return best, best_t

    def _corun_terms(self, device: str, kind: str, running: list[str]) -> tuple[float, float]:
        """The predicted slowdowns ``kind`` would suffer beside ``running`` on ``device``, summed,
        and those it would inflict on them (0 without ``harm_weight``).

        Kept per (device, kind, co-runners) until the prediction table changes: a saturated
        node's queue is offered to the placer again after every completion, so the same sums
        were taken millions of times a run (half of ``mct+iawp``'s time on
        ``interference-saturated``). A sum taken while a lazy fill changed the table is not kept,
        so a kept sum is the one the table gives now, bit for bit.
        """
        key = (device, kind, tuple(running))
        kept = self._terms.get(key)
        if kept is not None:
            return kept
        version = self._table_version
        own = harm = 0.0
        for p in running:
            own += self._pair_slowdown(device, kind, p)
            if self.harm_weight:
                harm += self._pair_slowdown(device, p, kind)
        self._keep(self._terms, key, (own, harm), version)
        return own, harm

    def _keep(self, kept: dict[Any, Any], key: Any, value: Any, version: int) -> None:
        """Keep ``value`` under ``key`` unless the prediction table changed since ``version``
        (a lazy fill while it was computed); at most :data:`TERMS_KEPT` (a service runs for ever)."""
        if self._table_version != version:
            return
        if len(kept) >= TERMS_KEPT:
            kept.clear()
        kept[key] = value

    def _solo_seconds(self, sub: Subtask, node: int, g: int, device: str, view: ClusterView) -> float:
        """Predicted seconds of ``sub`` alone on GPU ``g``: roofline time over the measured solo
        speed of its kind on that model."""
        f = view.fast
        nominal = subtask_gpu_seconds(sub, f.gpu_tflops[node][g], f.gpu_bw[node][g])
        return nominal / max(self._solo.get((device, sub.kind.name), 1.0), 1e-3)


class IawpPassPlacer(IawpPlacer):
    """``iawp`` whose held subtasks let younger ones pass (``hold="pass"``), at the threshold
    that was best for that rule on validation seeds (0.4 of 0.2-0.5; BENCHMARKS.md, "Stage 2").

    :param predictor: as :class:`IawpPlacer`.
    :param method: as :class:`IawpPlacer`.
    """

    name = "iawp-pass"

    def __init__(self, predictor: InterferencePredictor | None = None, method: str = "ncf") -> None:
        super().__init__(predictor=predictor, method=method, min_gain=0.4, hold="pass")


class ColocGreedyPlacer(IawpPlacer):
    """Co-location-aware greedy placement: the GPU where joining adds the most predicted progress.

    For a ready GPU subtask, every fitting GPU is scored by the predicted change of its total
    progress rate — each co-runner's rate relative to running alone, the newcomer's included
    (:meth:`IawpPlacer._gain`) — from the same NCF model, calibration and online learning as
    ``iawp``. The best gain wins, ties going to the faster solo time; a subtask that may also run
    on a core takes a free core when its predicted GPU time is longer, and when every stream is
    taken, only if the core beats the predicted wait for a stream as well (as ``iawp``). It never
    holds a subtask back, so it has no threshold to tune: a greedy baseline for learned placers.
    """

    name = "coloc-greedy"

    def __init__(self, predictor: InterferencePredictor | None = None, method: str = "ncf") -> None:
        super().__init__(predictor=predictor, method=method, min_gain=0.0)

    def _best_gpu(self, sub: Subtask, node: int, gpus: list[int], view: ClusterView) -> tuple[int, float]:
        """The GPU whose predicted total progress rises most (ties: the faster solo time), and the
        subtask's predicted time there; ``iawp``'s ``place`` does the rest (core or GPU)."""
        models, kind = view.fast.gpu_model[node], sub.kind.name
        best, best_key, best_t = gpus[0], (-np.inf, -np.inf), np.inf
        for g in gpus:
            device = view.model_names[models[g]]
            solo = self._solo_seconds(sub, node, g, device, view)
            key = (self._gain(kind, node, g, view), -solo)
            if key > best_key:
                own = sum(self._pair_slowdown(device, kind, p) for p in view.gpu_kinds[node][g])
                best, best_key, best_t = g, key, solo * (1.0 + own)
        return best, best_t
