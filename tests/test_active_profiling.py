"""The interference model's uncertainty, active profiling (both worlds' instruments) and the
placer's use of the uncertainty (``doubt``)."""

from __future__ import annotations

import numpy as np
import pytest

from envs.simulated_instrument import SimulatedProfiler
from envs.simulator import Simulator
from rlsched.interference.active import active_colocation, budget, pick
from rlsched.interference.calibration import SurveyRequest, run_survey
from rlsched.interference.predictor import fit_interference
from rlsched.policies.iawp import IawpPlacer
from rlsched.policies.registry import parse_scheduler
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.world import hand_over
from runtime.profiler import LiveProfiler
from tests.conftest import node, small_scenario
from tests.test_runtime_profiler import APP, two_models


def _instrument() -> SimulatedProfiler:
    sc = small_scenario(
        nodes=(node("a", cores=4, gpus=("V100M16", "T4"), streams=4), node("b", gpus=("P100", "K80"))),
        apps={"matmul": 1.0, "fft": 1.0, "kmeans": 1.0},
        tasks=20,
    )
    return SimulatedProfiler(Simulator(sc, generate_tasks(sc, 0), parse_scheduler("mct").placer).testbed())


@pytest.fixture(scope="module")
def instrument() -> SimulatedProfiler:
    return _instrument()


def _triples(data: object) -> list[tuple[str, str, str]]:
    return list(zip(data.device, data.kind, data.partner, strict=True))  # type: ignore[attr-defined]


def test_spread_is_larger_where_the_model_was_not_measured(instrument: SimulatedProfiler) -> None:
    # Every triple of three GPU models, but a single co-run on the fourth (K80).
    full = instrument.colocation(1.0, 0)
    keep = [i for i, d in enumerate(full.device) if d != "K80"] + [full.device.index("K80")]
    pred = fit_interference(full.take(keep), "ncf", 0)
    mean, spread = pred.predict_spread(full.device, full.kind, full.partner)
    np.testing.assert_allclose(mean, pred.predict(full.device, full.kind, full.partner))
    on_k80 = np.array([d == "K80" for d in full.device])
    assert spread[on_k80].mean() > 2.0 * spread[~on_k80].mean()
    one = fit_interference(full, "mean", 0)
    assert np.all(one.predict_spread(full.device, full.kind, full.partner)[1] == 0.0)


def test_active_survey_spends_exactly_the_budget_and_covers_every_device_and_kind(
    instrument: SimulatedProfiler,
) -> None:
    data = active_colocation(instrument, 0.4, 1)
    kinds = [k.name for k in instrument.kinds()]
    devices = instrument.devices()
    assert len(data) == budget(len(devices), len(kinds), 0.4)
    assert len(set(_triples(data))) == len(data)  # nothing measured twice
    assert {(d, k) for d, k, _ in _triples(data)} == {(d, k) for d in devices for k in kinds}
    # An iawp placer asks for it and is handed the same survey by the world.
    placer = IawpPlacer(active=True, profile_fraction=0.4)
    placer.survey_seed = 1
    assert placer.survey_request() == SurveyRequest(colocation_fraction=0.4, seed=1, active=True)
    survey = run_survey(instrument, placer.survey_request())
    assert survey.colocation is not None and _triples(survey.colocation) == _triples(data)
    placer.calibrate(survey)
    assert placer.predictor is not None and placer.predictor.info["n_seen"] == len(data)


def test_pick_takes_the_most_valuable_and_spreads_over_pairs() -> None:
    cands = [("a", "x", "y"), ("a", "y", "x"), ("a", "x", "z"), ("b", "x", "y")]
    rng = np.random.default_rng(0)
    # The mirror of the first pick is discounted below the next-best pair.
    assert pick(cands, np.array([1.0, 0.9, 0.6, 0.1]), 2, rng) == [("a", "x", "y"), ("a", "x", "z")]
    assert pick(cands, np.array([1.0, 0.9, 0.6, 0.1]), 9, rng)[-1] == ("b", "x", "y")


def test_the_live_profiler_takes_the_same_active_survey() -> None:
    with LiveProfiler(two_models(), "numpy", apps=(APP,), reps=2) as prof:
        data = run_survey(prof, SurveyRequest(colocation_fraction=0.3, seed=0, active=True)).colocation
        assert data is not None
        n = budget(len(prof.devices()), len(prof.kinds()), 0.3)
        assert len(data) == n == prof.measured_pairs
        assert np.all(data.y > 0)


def test_doubt_lowers_slowdowns_by_their_spread_and_only_makes_holding_rarer(
    instrument: SimulatedProfiler,
) -> None:
    data = instrument.colocation(0.3, 0)
    pred = fit_interference(data, "ncf", 0)
    trusting, doubting = IawpPlacer(predictor=pred), IawpPlacer(predictor=pred, doubt=2.0)
    for p in (trusting, doubting):
        hand_over(p, instrument)
    kinds = [k.name for k in instrument.kinds()]
    lowered = 0
    for d in instrument.devices():
        for k in kinds:
            for q in kinds:
                s = trusting._pair_slowdown(d, k, q)
                assert doubting._pair_slowdown(d, k, q) == pytest.approx(s)  # placement reads the same
                low = doubting._pair_slowdown_low(d, k, q)
                assert 0.0 <= low <= s
                lowered += low < s
                assert trusting._pair_slowdown_low(d, k, q) == s  # doubt 0: nothing lowered
    assert lowered > len(kinds) ** 2  # the spread is not zero
