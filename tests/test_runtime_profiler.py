"""The live runtime's profiler: co-run measurements on emulated devices, CSVs, CLI, IAWP calibration."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from experiments.cli import main
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.interference.measurements import SOLO_COLUMNS, read_colocation_csv
from rlsched.policies.iawp import IawpPlacer
from rlsched.policies.iawp_cosine import IawpCosinePlacer
from rlsched.tasks import Device
from rlsched.world import hand_over
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.profiler import NORM_MAX, LiveProfiler, profile_to_csv

FRACTION = 0.5
APP = "intrusion_detection"


def two_models(concurrency: int = 2, mem_mib: float = 256.0) -> LiveClusterSpec:
    """Two nodes of different GPU models (one V100 and one T4, each listed twice)."""
    return LiveClusterSpec(
        nodes=(
            LiveNode("a", gpus=(LiveGpu("V100M16", 0, mem_mib), LiveGpu("V100M16", 1, mem_mib))),
            LiveNode("b", gpus=(LiveGpu("T4", 0, mem_mib),)),
        ),
        device_concurrency=concurrency,
    )


@pytest.fixture(scope="module")
def profiled() -> Iterator[LiveProfiler]:
    """One profile of half the triples of the two-model cluster, shared by the module's tests."""
    with LiveProfiler(two_models(), "numpy", apps=(APP,), reps=3) as prof:
        prof.colocation(FRACTION, 0)
        yield prof


def test_devices_and_kinds_are_the_clusters_models_and_the_apps_gpu_kinds(profiled: LiveProfiler) -> None:
    assert isinstance(profiled, ProfilingInstrument)
    assert profiled.devices() == ["T4", "V100M16"]
    names = [k.name for k in profiled.kinds()]
    assert names == ["dog_pyramid", "extrema_detection", "frame_diff", "gaussian_pyramid", "gmm"]
    assert all(k.device is not Device.CPU for k in profiled.kinds())  # tracking is CPU-only


def test_colocation_measures_a_fraction_with_a_partner_per_device_and_kind(profiled: LiveProfiler) -> None:
    data = profiled.colocation(FRACTION, 0)  # cached: measured by the fixture
    n_kinds, n_dev = len(profiled.kinds()), len(profiled.devices())
    total = n_dev * n_kinds * n_kinds
    assert len(data) == profiled.measured_pairs
    assert 0.3 * total <= len(data) <= 0.7 * total
    assert len(set(zip(data.device, data.kind, data.partner, strict=True))) == len(data)
    assert {(d, k) for d, k in zip(data.device, data.kind, strict=True)} == {
        (d, k.name) for d in profiled.devices() for k in profiled.kinds()
    }
    assert np.all((data.y > 0) & (data.y <= NORM_MAX))


def test_repeated_calls_do_not_measure_again(profiled: LiveProfiler) -> None:
    first = profiled.colocation(FRACTION, 0)
    again = profiled.colocation(FRACTION, 0)
    np.testing.assert_array_equal(first.y, again.y)
    assert profiled.measured_pairs == len(first)


def test_solo_table_covers_every_device_and_kind(profiled: LiveProfiler) -> None:
    rows = profiled.solo_table()
    assert {(d, k) for d, k, _ in rows} == {(d, k.name) for d in profiled.devices() for k in profiled.kinds()}
    assert all(t > 0 for _, _, t in rows)
    solo = {(d, k): t for d, k, t in rows}
    # The emulated T4 (8.1 TFLOP/s) is slower than the V100 (15.7): the slowest kind shows it.
    assert solo[("T4", "gaussian_pyramid")] < solo[("V100M16", "gaussian_pyramid")]


def test_csvs_round_trip(profiled: LiveProfiler, tmp_path: Path) -> None:
    colo, solo = profile_to_csv(profiled, tmp_path / "out", FRACTION, 0)
    back = read_colocation_csv(colo)
    data = profiled.colocation(FRACTION, 0)
    assert (back.device, back.kind, back.partner) == (data.device, data.kind, data.partner)
    np.testing.assert_array_equal(back.y, data.y)
    with solo.open(newline="") as f:
        reader = csv.reader(f)
        assert tuple(next(reader)) == SOLO_COLUMNS
        rows = [(d, k, float(t)) for d, k, t in reader]
    assert rows == profiled.solo_table()


def test_iawp_calibrates_from_the_live_profiler(profiled: LiveProfiler) -> None:
    placer = IawpPlacer()
    hand_over(placer, profiled)  # the live world's hand-over: the survey's data, never the profiler
    assert placer.predictor is not None
    pred = placer.predictor.predict(["T4"], ["gmm"], ["dog_pyramid"])
    assert 0.0 <= float(pred[0]) <= 2.0


def test_kind_profiles_measure_the_speedup_of_every_kind(profiled: LiveProfiler) -> None:
    samples = profiled.kind_profiles(2, 0)
    assert samples.kinds == [k.name for k in profiled.kinds()]
    assert set(samples.metric) == {"speedup"}
    assert np.all(samples.value > 0)
    hand_over(IawpCosinePlacer(), profiled)  # completes the unmeasured metrics from nominal stand-ins


def test_a_serialising_device_slows_co_located_kinds() -> None:
    spec = LiveClusterSpec(nodes=(LiveNode("n", gpus=(LiveGpu("T4", 0, 256),)),), device_concurrency=1)
    with LiveProfiler(spec, "numpy", apps=("video_synopsis",), reps=3) as prof:
        data = prof.colocation(1.0, 0)
    # One engine: A waits for the partner's kernel before each of its runs.
    assert len(data) == 9  # gmm, frame_diff, tube_extraction with each other
    assert float(data.y.mean()) < 0.75, data.y


def test_a_pair_that_does_not_fit_together_cannot_share() -> None:
    # 5 MiB holds dog_pyramid's ~4 MiB working set, but not two of them.
    spec = LiveClusterSpec(nodes=(LiveNode("n", gpus=(LiveGpu("T4", 0, 5.0),)),))
    with LiveProfiler(spec, "numpy", apps=(APP,), reps=1) as prof:
        assert prof.solo("T4", "dog_pyramid") > 0
        assert prof.corun("T4", "dog_pyramid", "dog_pyramid") == 0.0
        assert prof.corun("T4", "gmm", "frame_diff") > 0


def test_selection_matches_the_simulators_instrument(monkeypatch: pytest.MonkeyPatch) -> None:
    from envs.simulated_instrument import SimulatedProfiler
    from envs.simulator import Simulator
    from rlsched.policies.registry import parse_scheduler
    from rlsched.scenarios.taskgen import generate_tasks
    from tests.conftest import node, small_scenario

    sc = small_scenario(nodes=(node("a", gpus=("V100M16",)), node("b", gpus=("T4",))), apps={APP: 1.0})
    sim = SimulatedProfiler(Simulator(sc, generate_tasks(sc, 0), parse_scheduler("mct").placer).testbed())
    monkeypatch.setattr(LiveProfiler, "corun", lambda self, d, k, p: 1.0)  # selection only: no timing
    live = LiveProfiler(two_models(), "numpy", apps=(APP,))
    assert live.devices() == sim.devices()
    assert [k.name for k in live.kinds()] == [k.name for k in sim.kinds()]
    for seed in (0, 3):
        a, b = live.colocation(0.4, seed), sim.colocation(0.4, seed)
        assert (a.device, a.kind, a.partner) == (b.device, b.kind, b.partner)


def test_unknown_app_is_refused() -> None:
    with pytest.raises(ValueError, match="'nope'"):
        LiveProfiler(two_models(), "numpy", apps=("nope",))


def test_cli_profile_writes_both_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "prof"
    argv = ["profile", "--backend", "numpy", "--apps", "video_synopsis", "--fraction", "0.25"]
    argv += ["--out", str(out)]
    assert main([*argv, "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert Path(line["colocation"]) == out / "colocation.csv"
    assert Path(line["solo"]) == out / "solo.csv"
    data = read_colocation_csv(out / "colocation.csv")
    assert len(data) == line["rows"] > 0
    assert set(data.device) == {"K80", "P4", "T4", "V100M16"}  # the default live cluster
    assert line["solo_rows"] == 4 * 3  # gmm, frame_diff, tube_extraction on four models
    assert line["seconds"] > 0
    # Measurements are never replaced without a word: the same --out again is refused.
    before = (out / "colocation.csv").read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"rlsched: error: --out: value: expected a folder without measurements, got '{out}'"
    )
    assert "it holds colocation.csv, solo.csv" in err and (out / "colocation.csv").read_bytes() == before
    # Without --json: lines a person reads, naming the files and the command that fits on them.
    out = tmp_path / "prof2"
    argv[-1] = str(out)
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"measured {len(read_colocation_csv(out / 'colocation.csv'))} kernel pairs and 12 kernels" in text
    assert f"co-location: {out / 'colocation.csv'}" in text and f"solo: {out / 'solo.csv'}" in text
    assert f"rlsched interference fit --data {out / 'colocation.csv'} --out DIR" in text


def test_cli_profile_names_a_bad_app(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["profile", "--backend", "numpy", "--apps", "video_synopsis,nope", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlsched: error:") and "'nope'" in err
    assert not (tmp_path / "colocation.csv").exists()


def test_a_kind_that_cannot_run_even_alone_is_warned_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU of 1 MiB: matmul never ran there, and its pair was counted measured and written as 0
    (cannot share) without a word."""
    cluster = tmp_path / "small.toml"
    cluster.write_text('[[nodes]]\nname = "n"\n[[nodes.gpus]]\nmodel = "T4"\nmem_mib = 1\n')
    argv = ["profile", "--backend", "numpy", "--apps", "matmul", "--cluster", str(cluster)]
    assert main([*argv, "--out", str(tmp_path / "p")]) == 0
    err = capsys.readouterr().err
    assert "rlsched: warning: 1 kind(s) could not run even alone (too little device memory): " in err, err
    assert "on T4; their pairs are written as 0 (cannot share)" in err, err
