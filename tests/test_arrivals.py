"""Arrival processes: Poisson, bursty MMPP and trace replay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlsched.scenarios.arrivals import arrival_times, mean_rate_per_min, read_trace_times
from rlsched.scenarios.data_paths import packaged_data_dir
from rlsched.scenarios.spec import ArrivalSpec

ALIBABA_PODS = packaged_data_dir() / "traces" / "alibaba-gpu-v2023"


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _rate_per_min(t: np.ndarray) -> float:
    return 60.0 * len(t) / t[-1]


def _dispersion(t: np.ndarray, window_s: float) -> float:
    counts = np.bincount((t // window_s).astype(int))[:-1]  # drop the partial last window
    return float(counts.var() / counts.mean())


@pytest.mark.parametrize("process", ["poisson", "bursty"])
def test_sorted_float64_near_zero(process: str) -> None:
    t = arrival_times(ArrivalSpec(process=process), 500, _rng())
    assert t.dtype == np.float64 and t.shape == (500,)
    assert np.all(np.diff(t) >= 0)
    assert 0 <= t[0] < 60


@pytest.mark.parametrize("process", ["poisson", "bursty"])
def test_deterministic_for_a_seed(process: str) -> None:
    spec = ArrivalSpec(process=process)
    assert np.array_equal(arrival_times(spec, 1000, _rng(7)), arrival_times(spec, 1000, _rng(7)))
    assert not np.array_equal(arrival_times(spec, 1000, _rng(7)), arrival_times(spec, 1000, _rng(8)))


def test_zero_arrivals() -> None:
    for process in ("poisson", "bursty"):
        assert arrival_times(ArrivalSpec(process=process), 0, _rng()).shape == (0,)


@pytest.mark.parametrize("rate", [10.0, 50.0, 600.0])
def test_poisson_mean_rate(rate: float) -> None:
    t = arrival_times(ArrivalSpec(rate_per_min=rate), 20_000, _rng(1))
    assert _rate_per_min(t) == pytest.approx(rate, rel=0.03)  # sd of the estimate is 0.7%
    assert mean_rate_per_min(ArrivalSpec(rate_per_min=rate)) == rate
    # Poisson counts are not overdispersed
    assert _dispersion(t, 600.0 / rate) == pytest.approx(1.0, abs=0.15)


def test_bursty_mean_rate_and_burstiness() -> None:
    spec = ArrivalSpec(process="bursty")
    expected = (120 * 90 + 240 * 20) / 360
    assert mean_rate_per_min(spec) == pytest.approx(expected)
    rates = [_rate_per_min(arrival_times(spec, 20_000, _rng(s))) for s in range(10)]
    # ~80 high/low cycles per run leave ~6% sampling error in each estimate, ~2% in the mean of 10
    assert np.mean(rates) == pytest.approx(expected, rel=0.05)
    t = arrival_times(spec, 20_000, _rng(3))
    assert _dispersion(t, 60.0) > 1.5


def test_bursty_on_off_has_gaps_of_silence() -> None:
    spec = ArrivalSpec(
        process="bursty", high_rate_per_min=120, low_rate_per_min=0, mean_high_s=5, mean_low_s=50
    )
    t = arrival_times(spec, 5000, _rng(2))
    assert mean_rate_per_min(spec) == pytest.approx(120 * 5 / 55)
    assert np.diff(t).max() > 100  # long off periods exist
    assert _dispersion(t, 60.0) > 1.5


@pytest.mark.parametrize(
    "spec",
    [
        ArrivalSpec(process="poisson", rate_per_min=0),
        ArrivalSpec(process="bursty", high_rate_per_min=0, low_rate_per_min=0),
        ArrivalSpec(process="bursty", mean_high_s=0),
        ArrivalSpec(process="bursty", low_rate_per_min=-1),
        ArrivalSpec(process="weekly"),
        ArrivalSpec(process="trace"),
    ],
)
def test_invalid_specs(spec: ArrivalSpec) -> None:
    with pytest.raises(ValueError):
        arrival_times(spec, 10, _rng())


def test_trace_replay_from_arrival_s(tmp_path: Path) -> None:
    path = tmp_path / "arrivals.csv"
    path.write_text("task,arrival_s\na,100\nb,103.5\nc,101\nd,110\n")
    spec = ArrivalSpec(process="trace", trace_path=str(path), time_scale=2.0)
    assert arrival_times(spec, 3, _rng()).tolist() == [0.0, 2.0, 7.0]
    assert arrival_times(spec, 4, _rng()).tolist() == [0.0, 2.0, 7.0, 20.0]
    assert mean_rate_per_min(spec) == pytest.approx(60 * 3 / 20)
    with pytest.raises(
        ValueError, match=r"arrivals\.csv: <file>: expected at least the 5 arrivals of workload.tasks, got 4"
    ):
        arrival_times(spec, 5, _rng())


def test_trace_replay_from_an_alibaba_pod_list(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,1000,1024,1,1000,,LS,Running,500,900,500\n"
        "p1,1000,1024,1,500,,BE,Succeeded,800,900,800\n"
    )
    t = arrival_times(ArrivalSpec(process="trace", trace_path=str(path), time_scale=0.1), 2, _rng())
    assert t.tolist() == pytest.approx([0.0, 30.0])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("task,when\na,1\n", r"line 1: expected a header with an arrival column"),
        ("arrival_s\n1\nsoon\n", r"line 3 \(arrival_s\): expected a number, got 'soon'"),
        ("arrival_s\n", "<file>: expected at least one data row"),
    ],
)
def test_bad_traces_name_the_file(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as e:
        read_trace_times(path)
    assert "bad.csv" in str(e.value)


def test_real_alibaba_pod_list_is_sorted() -> None:
    spec = ArrivalSpec(process="trace", trace_path=str(ALIBABA_PODS / "openb_pod_list_gpushare40.csv"))
    t = arrival_times(spec, 8000, _rng())
    assert t[0] == 0.0 and np.all(np.diff(t) >= 0)
