"""What ``iawp`` knows about interference: its model's calibration, online learning and table.

The model is fitted from the cluster's survey before a run (sparse pairs, never the simulator's
parameters) and keeps learning online from subtasks the executor sees finish; its predictions are
kept as a table of slowdowns by (GPU model, kind, partner) that placement reads
(:class:`~rlsched.policies.iawp.IawpPlacer`). The error of its predicted speeds is tracked per GPU
model (:mod:`rlsched.interference.prediction_error`).
"""

from __future__ import annotations

import copy
from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from rlsched.interference import fit_store
from rlsched.interference.calibration import Survey, SurveyRequest
from rlsched.interference.predictor import ColocationData, InterferencePredictor
from rlsched.view import ClusterView

if TYPE_CHECKING:
    from rlsched.interference.prediction_error import PredictionErrors
    from rlsched.policies.placers import SpeedupPlacer

#: Slowdown (1/n - 1) assumed for a pair predicted unable to share a GPU: time-slicing at best.
NO_SHARE_SLOWDOWN = 4.0

#: Normalised throughputs below this are read as "cannot share".
NO_SHARE_BELOW = 0.05

#: Online samples gathered before one SGD update of the model.
ONLINE_BATCH = 256

#: A run whose partners' shares sum to less than this counts as a solo run.
SOLO_BELOW = 0.05

#: Least sum of shares a co-run is learnt from: a run that overlapped its partners only briefly
#: measures their slowdown mostly as timing noise.
MIN_TOGETHER = 0.25

#: EMA weight of one solo-speed observation.
SOLO_EMA = 0.2

# Fitted models by (survey key, method, fraction, seed): profiling a cluster is a one-off
# calibration, so runs over many seeds of one scenario share it (each run gets its own copy).
_CALIBRATED: dict[Hashable, InterferencePredictor] = {}


def slowdown(norm: float) -> float:
    """Extra time per unit of solo time that a partner of normalised throughput ``norm`` causes."""
    return NO_SHARE_SLOWDOWN if norm < NO_SHARE_BELOW else max(1.0 / norm - 1.0, 0.0)


class InterferenceModelUse:
    """Calibration, online learning and the prediction table of an interference-aware placer
    (the state is set up by :class:`~rlsched.policies.iawp.IawpPlacer`'s constructor)."""

    _given: InterferencePredictor | None
    predictor: InterferencePredictor | None
    method: str
    profile_fraction: float
    online: bool
    doubt: float
    active: bool
    survey_seed: int
    online_batch: int
    updates: int
    seen: dict[str, int]
    _plain: SpeedupPlacer
    _errors: PredictionErrors
    _held: dict[int, tuple[int, int, int]]
    _slow: dict[tuple[str, str], dict[str, float]]
    _slow_low: dict[tuple[str, str], dict[str, float]]
    _solo: dict[tuple[str, str], float]
    #: Sums of predicted slowdowns by (device, kind, co-runners), valid for one table version.
    _terms: dict[tuple[str, str, tuple[str, ...]], tuple[float, float]]
    #: Gains of joining co-runners by (device, kind, co-runners, optimistic), likewise.
    _gains: dict[tuple[str, str, tuple[str, ...], bool], float]
    _table_version: int
    _batch: list[tuple[str, str, str, float]]

    # ---- calibration and learning ------------------------------------------------------------
    def survey_request(self) -> SurveyRequest:
        """Co-runs of ``profile_fraction`` of the pairs; none when a fitted model was given (it
        then needs only the cluster's devices and kinds)."""
        fraction = None if self._given is not None else self.profile_fraction
        active = self.active and fraction is not None
        return SurveyRequest(colocation_fraction=fraction, seed=self.survey_seed, active=active)

    def calibrate(self, survey: Survey) -> None:
        """Fit (or reuse) the interference model from the survey's co-location measurements.

        :param survey: the cluster's survey (:meth:`survey_request`); its seed seeds the fit.
        """
        kinds, devices = [k.name for k in survey.kinds], list(survey.devices)
        if self._given is None:
            data = survey.colocation
            if data is None or not len(data):  # no GPU or no GPU kind: nothing to co-locate, nothing to learn
                self._fill(kinds, devices)
                return
            seed = survey.request.seed
            key = (survey.key, self.method, survey.request.colocation_fraction, survey.request.active, seed)
            fitted = _CALIBRATED.get(key)
            if fitted is None:
                fitted = _CALIBRATED[key] = fit_store.fit(data, self.method, seed)
            self.predictor = copy.deepcopy(fitted) if self.online else fitted
        self._fill(kinds, devices)

    def extend(self, survey: Survey, predictor: InterferencePredictor | None) -> InterferencePredictor | None:
        """``predictor`` (a copy of this placer's model, which keeps placing meanwhile) after
        learning the GPU models of ``survey`` (nodes that joined), by an online update on its
        co-runs; fitted from the survey alone when there is no model yet. Hand the result to
        :meth:`adopt`.

        :param survey: a survey of the new GPU models.
        :param predictor: the model to extend (changed in place), or ``None``.
        """
        data = survey.colocation
        if data is None or not len(data):
            return predictor
        if predictor is None:
            return fit_store.fit(data, self.method, survey.request.seed)
        predictor.update(data)
        return predictor

    def adopt(self, predictor: InterferencePredictor | None, devices: list[str]) -> None:
        """Place with ``predictor`` from now on; the predictions table is rebuilt for the GPU
        models it had and ``devices`` (catalog names, as the view names them)."""
        if predictor is None:
            return
        kinds = sorted({k for _, k in self._slow} | set(predictor.kinds))
        known = sorted({d for d, _ in self._slow} | set(devices))
        self.predictor = predictor
        self._slow.clear()
        self._slow_low.clear()
        self._table_changed()
        self._fill(kinds, known)

    def predictions(self) -> dict[str, dict[str, dict[str, float]]]:
        """Predicted normalised throughput by GPU model, kind and partner, as the placer uses
        them (``/v1/cluster`` shows these)."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (device, kind), row in sorted(self._slow.items()):
            out.setdefault(device, {})[kind] = {p: round(1.0 / (1.0 + s), 4) for p, s in sorted(row.items())}
        return out

    def reset(self, view: ClusterView, seed: int) -> None:
        """Forget run-time observations; keep the calibrated model."""
        self._solo.clear()
        self._held.clear()
        self._batch.clear()
        self._errors.clear()
        self._plain.reset(view, seed)

    def observe(
        self,
        device: str,
        kind: str,
        partners: tuple[str, ...],
        speed: float,
        shares: tuple[float, ...] | None = None,
    ) -> None:
        """Learn from a finished GPU subtask: solo runs set the reference speed; a run with
        partners measured its total slowdown, which is shared out over the partners in proportion
        to their predicted slowdowns times their shares (exact for one partner the whole time) as
        samples for the model.

        :param shares: average number of subtasks of each partner kind that ran beside it (the
            live runtime's co-runners change during a run); ``None``: one each, the whole time.
        """
        key = (device, kind)
        weights = shares if shares is not None else (1.0,) * len(partners)
        together = sum(weights)
        if together < SOLO_BELOW:
            self.seen["solo"] += 1
            old = self._solo.get(key)
            self._solo[key] = speed if old is None else old + SOLO_EMA * (speed - old)
            return
        solo = self._solo.get(key)
        if together < MIN_TOGETHER:
            self.seen["brief"] += 1
            return
        self.seen["co_run" if solo is not None else "no_reference"] += 1
        if self.predictor is None:
            return
        pred = [self._pair_slowdown(device, kind, p) for p in partners]
        predicted = sum(w * s for w, s in zip(weights, pred, strict=True))
        # The error of the speed the placer predicted, from the solo speed it assumed (the
        # roofline's when it has seen no solo run: see _solo_seconds).
        self._errors.track(device, speed * (1.0 + predicted) / (solo if solo is not None else 1.0))
        if not self.online or solo is None:
            return
        measured = max(solo / max(speed, 1e-9) - 1.0, 0.0)
        scale = measured / max(predicted, 1e-6)
        for p, s in zip(partners, pred, strict=True):
            self._batch.append((device, kind, p, 1.0 / (1.0 + s * scale)))
        if len(self._batch) >= self.online_batch:
            self._learn()

    def prediction_error(self) -> dict[str, dict[str, float | int | bool]]:
        """Per GPU model: the co-runs' prediction error (EMA), how many were seen, and whether the
        placer has fallen back to ``speedup``'s rule there (``/v1/models`` shows these)."""
        return self._errors.report()

    def _learn(self) -> None:
        assert self.predictor is not None
        d, k, p, y = zip(*self._batch, strict=True)
        self._batch.clear()
        self.predictor.update(ColocationData(list(d), list(k), list(p), np.array(y, dtype=np.float64)))
        self.updates += 1
        kinds = sorted({kk for _, kk in self._slow} | set(k) | set(p))
        self._fill(kinds, sorted({dd for dd, _ in self._slow} | set(d)))

    def _fill(self, kinds: list[str], devices: list[str]) -> None:
        """Predict every (device, kind, partner) triple of these kinds and devices into the table."""
        self._table_changed()
        if self.predictor is None or not kinds or not devices:
            return
        dev, kind, part = [], [], []
        for d in devices:
            for k in kinds:
                for p in kinds:
                    dev.append(d)
                    kind.append(k)
                    part.append(p)
        bad = set(self.predictor.unknown(ColocationData(dev, kind, part, np.zeros(len(dev)))))
        if bad:
            keep = [i for i in range(len(dev)) if not bad & {dev[i], kind[i], part[i]}]
            dev, kind, part = [dev[i] for i in keep], [kind[i] for i in keep], [part[i] for i in keep]
        if not dev:
            return
        if self.doubt <= 0.0:
            norms = self.predictor.predict(dev, kind, part)
            for d, k, p, n in zip(dev, kind, part, norms.tolist(), strict=True):
                self._slow.setdefault((d, k), {})[p] = slowdown(n)
            return
        norms, spread = self.predictor.predict_spread(dev, kind, part)
        for d, k, p, n, sd in zip(dev, kind, part, norms.tolist(), spread.tolist(), strict=True):
            s = self._slow.setdefault((d, k), {})[p] = slowdown(n)
            # First order: a throughput n +- sd gives a slowdown 1/n - 1 +- sd / n^2.
            low = s - self.doubt * sd / max(n, NO_SHARE_BELOW) ** 2
            self._slow_low.setdefault((d, k), {})[p] = max(low, 0.0)

    # ---- the prediction table ----------------------------------------------------------------
    def _table_changed(self) -> None:
        """Forget the sums and gains taken from the prediction table (it is being changed)."""
        self._table_version += 1
        self._terms.clear()
        self._gains.clear()

    def _pair_slowdown_low(self, device: str, kind: str, partner: str) -> float:
        """The predicted slowdown lowered by ``doubt`` times its uncertainty (never above the
        prediction itself)."""
        s = self._pair_slowdown(device, kind, partner)
        row = self._slow_low.get((device, kind))
        low = None if row is None else row.get(partner)
        return s if low is None else min(low, s)

    def _pair_slowdown(self, device: str, kind: str, partner: str) -> float:
        row = self._slow.get((device, kind))
        s = None if row is None else row.get(partner)
        if s is None:
            self._fill(sorted({kind, partner}), [device])
            row = self._slow.setdefault((device, kind), {})
            # Unpredictable (a kind the model cannot place): assume a typical co-runner.
            s = row.setdefault(partner, 0.25)
        return s
