"""Property test of the one error path: mutated scenario files, CSVs and checkpoints fed to the
``rlsched`` commands end in exit 0 (the input still made sense) or exit 2 with a one-line error of
the documented shape ``rlsched: error: SOURCE: FIELD: expected ...`` naming one of the files the
test wrote — never a traceback and never an "internal error".

And the boundary itself: exit 2 comes only from the input layer (``InputError``); a
``ValueError`` raised inside a run is a bug, exit 1.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.cli import main
from models.checkpoint import META, WEIGHTS, sha256

SCENARIO = b"""name = "fuzz"
seed = 3
[[cluster.nodes]]
name = "gpu"
count = 2
cpu_cores = 4
host_mem_gib = 16
gpu_model = "T4"
gpu_count = 1
[[cluster.nodes]]
name = "cpu"
cpu_cores = 4
host_mem_gib = 16
[workload]
tasks = 12
apps = { matmul = 2, fft = 1 }
[workload.arrival]
process = "poisson"
rate_per_min = 40
"""
COLO_SCENARIO = b"""name = "fuzz-colo"
[[cluster.nodes]]
name = "v"
count = 2
cpu_cores = 4
host_mem_gib = 16
gpu_model = "V100M16"
[workload]
tasks = 10
apps = { "colo:A" = 1, "colo:B" = 1 }
[interference]
model = "csv"
colocation_csv = "colo.csv"
solo_csv = "solo.csv"
"""
COLO = b"device,kind,partner,norm_throughput\nv100,A,B,0.7\nv100,B,A,0.8\nv100,A,A,0.5\nv100,B,B,0.6\n"
SOLO = b"device,kind,solo_throughput\nv100,A,10\nv100,B,20\n"
NUMBERS = [b"0", b"-1", b"1e9", b"nan", b"inf", b"10000000000", b"0.0", b'"x"', b"true", b"[]", b"{}"]


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` after a few random edits: byte flips, cuts, inserted bytes or lines, odd numbers."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "number", "dup", "bom"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if op == "flip" and out:
            out[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del out[at : at + draw(st.integers(1, 40))]
        elif op == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "number":
            nums = [m.span() for m in re.finditer(rb"\d+(\.\d+)?", bytes(out))]
            if nums:
                a, b = draw(st.sampled_from(nums))
                out[a:b] = draw(st.sampled_from(NUMBERS))
        elif op == "dup":
            lines = bytes(out).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            out = bytearray(b"\n".join([*lines[: i + 1], lines[i], *lines[i + 1 :]]))
        else:
            out[0:0] = b"\xef\xbb\xbf"
    return bytes(out)


def run_cli(*args: str) -> tuple[int, str]:
    """Run ``rlsched ARGS`` in-process: (exit code, stderr)."""
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's own usage errors
            rc = e.code if isinstance(e.code, int) else 2
    return rc, err.getvalue()


#: The one shape of exit 2 (README "Exit codes"): the file (or flag), the field, what was expected.
ERROR = re.compile(r"rlsched: error: (?P<source>[^:\n]+)(?::\d+)?: (?P<field>[^\n]+?): expected \S[^\n]*")


def assert_clean(rc: int, err: str, written: Path) -> None:
    """Exit 0, or exit 2 with exactly one line of :data:`ERROR`'s shape whose source is a file the
    test wrote (one under ``written``).

    :param rc: the exit code.
    :param err: stderr.
    :param written: the folder holding every file the test fed to the command.
    """
    assert rc in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == 2:
        m = ERROR.fullmatch(err.strip())
        assert m is not None, f"not one line of the documented shape: {err!r}"
        source = Path(m["source"]).resolve()
        assert source == written.resolve() or written.resolve() in source.parents, err


FUZZ = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,  # the same inputs on every run: CI never flakes on a new example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FUZZ
@given(text=mutated(SCENARIO))
def test_mutated_scenario_files(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_bytes(text)
    assert_clean(*run_cli("simulate", "--scenario", str(path), "--scheduler", "mct", "--json"), tmp_path)


@FUZZ
@given(colo=mutated(COLO), solo=st.one_of(st.just(SOLO), mutated(SOLO)))
def test_mutated_colocation_csvs(tmp_path: Path, colo: bytes, solo: bytes) -> None:
    (tmp_path / "colo.csv").write_bytes(colo)
    (tmp_path / "solo.csv").write_bytes(solo)
    (tmp_path / "s.toml").write_bytes(COLO_SCENARIO)
    rc, err = run_cli("simulate", "--scenario", str(tmp_path / "s.toml"), "--scheduler", "mct", "--json")
    assert_clean(rc, err, tmp_path)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small trained-shape LDWP checkpoint (the shipped one's format)."""
    from models.checkpoint import save_checkpoint
    from models.qnet import NodeScorer
    from rlsched.features import CLUSTER_FEATURES, FEATURE_VERSION, NODE_FEATURES, TASK_FEATURES

    d = tmp_path_factory.mktemp("ck")
    net = NodeScorer(len(NODE_FEATURES), len(TASK_FEATURES), len(CLUSTER_FEATURES), [8])
    meta = {
        "feature_version": FEATURE_VERSION,
        "node_dim": len(NODE_FEATURES),
        "task_dim": len(TASK_FEATURES),
        "cluster_dim": len(CLUSTER_FEATURES),
        "net_arch": [8],
    }
    save_checkpoint(d, net.state_dict(), meta)
    return d


@FUZZ
@given(data=st.data(), which=st.sampled_from([META, WEIGHTS]), rehash=st.booleans())
def test_mutated_checkpoints(
    tmp_path: Path, checkpoint: Path, data: st.DataObject, which: str, rehash: bool
) -> None:
    d = tmp_path / "ck"
    d.mkdir(exist_ok=True)
    for name in (META, WEIGHTS):
        (d / name).write_bytes((checkpoint / name).read_bytes())
    (d / which).write_bytes(data.draw(mutated((checkpoint / which).read_bytes())))
    if rehash and which == WEIGHTS:  # a matching checksum over bad bytes: the loader must still refuse
        meta = json.loads((d / META).read_text())
        meta["files"][WEIGHTS] = sha256(d / WEIGHTS)
        (d / META).write_text(json.dumps(meta))
    scenario = tmp_path / "s.toml"
    scenario.write_bytes(SCENARIO)
    rc, err = run_cli(
        "simulate", "--scenario", str(scenario), "--scheduler", "ldwp", "--model", str(d), "--json"
    )
    assert_clean(rc, err, tmp_path)


LIVE = b"""device_concurrency = 1
[[nodes]]
name = "box"
cpu_cores = 1
streams_per_gpu = 2
[[nodes.gpus]]
model = "V100M16"
mem_mib = 512
"""


@settings(FUZZ, max_examples=25)
@given(text=mutated(LIVE))
def test_mutated_live_cluster_files(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "live.toml"
    path.write_bytes(text)
    args = (
        "demo",
        "--live",
        "--cluster",
        str(path),
        "--tasks",
        "2",
        "--seeds",
        "1",
        "--schedulers",
        "mct+mlsm",
    )
    assert_clean(*run_cli(*args), tmp_path)


@pytest.fixture(scope="module")
def interference_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fitted ``mean`` interference model (the fastest to fit) and the CSV it was fitted on."""
    d = tmp_path_factory.mktemp("ix")
    (d / "colo.csv").write_bytes(COLO)
    rc, err = run_cli(
        "interference", "fit", "--data", str(d / "colo.csv"), "--method", "mean", "--out", str(d / "m")
    )
    assert rc == 0, err
    return d


@FUZZ
@given(data=st.data(), which=st.sampled_from([META, WEIGHTS, "colo.csv"]))
def test_mutated_interference_models_and_csvs(
    tmp_path: Path, interference_model: Path, data: st.DataObject, which: str
) -> None:
    d = tmp_path / "m"
    d.mkdir(exist_ok=True)
    for name in (META, WEIGHTS):
        (d / name).write_bytes((interference_model / "m" / name).read_bytes())
    (tmp_path / "colo.csv").write_bytes(COLO)
    target = tmp_path / "colo.csv" if which == "colo.csv" else d / which
    target.write_bytes(data.draw(mutated(target.read_bytes())))
    assert_clean(
        *run_cli("interference", "evaluate", "--model", str(d), "--data", str(tmp_path / "colo.csv")),
        tmp_path,
    )


@settings(FUZZ, max_examples=12)
@given(text=mutated(SCENARIO))
def test_mutated_scenarios_for_evaluate_and_train(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_bytes(text)
    evaluate = ("evaluate", "--scenarios", str(path), "--schedulers", "mct", "--seeds", "1", "--jobs", "1")
    assert_clean(*run_cli(*evaluate, "--out", str(tmp_path / "ev")), tmp_path)
    train = (
        "train",
        "--scenario",
        str(path),
        "--steps",
        "0",
        "--pretrain",
        "none",
        "--out",
        str(tmp_path / "tr"),
    )
    assert_clean(*run_cli(*train), tmp_path)


# --- the boundary -----------------------------------------------------------------------------

#: What a planted bug raises: a ValueError, which the old CLI took for bad input.
PLANTED = "planted: a ValueError from inside the run"
#: Decisions the run makes before the planted bug fires (it is raised mid-run, not up front).
AFTER = 3


class _RaisesMidRun:
    """A stage-1 policy whose ``select`` raises ``ValueError`` on its fourth decision."""

    name = "raises-value-error"

    def __init__(self) -> None:
        self.calls = 0

    def reset(self, view: Any, seed: int) -> None:
        self.calls = 0

    def select(self, task: Any, view: Any, mask: Any) -> int:
        self.calls += 1
        if self.calls > AFTER:
            raise ValueError(PLANTED)
        return int(mask.argmax())


@pytest.fixture
def raising_selector() -> Iterator[str]:
    """The policy above, registered as a plug-in is (the registry's table), for this test only."""
    from rlsched.policies import registry

    registry.register_selector(_RaisesMidRun.name, _RaisesMidRun)
    yield _RaisesMidRun.name
    registry.SELECTORS.pop(_RaisesMidRun.name, None)


def _simulator_raises_mid_run(monkeypatch: pytest.MonkeyPatch) -> str:
    """Make the simulator's own ``assign`` raise ``ValueError`` after a few decisions."""
    from envs.simulator import Simulator

    original = Simulator.assign
    calls = {"n": 0}

    def assign(self: Simulator, task: Any, node: int) -> None:
        calls["n"] += 1
        if calls["n"] > AFTER:
            raise ValueError(PLANTED)
        original(self, task, node)

    monkeypatch.setattr(Simulator, "assign", assign)
    return "mct"


@pytest.mark.parametrize("where", ["simulator", "plug-in policy"])
def test_a_value_error_inside_the_run_is_an_internal_error_not_bad_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raising_selector: str, where: str
) -> None:
    """A ``ValueError`` raised inside ``simulate``'s run — by the simulator, or by a policy the
    registry hands it — ends in exit 1 "internal error" (a bug), not exit 2 (bad input); with
    ``--debug`` the ValueError itself propagates, traceback and all.

    Mutation check, done by hand once: with the old broad catch restored in
    ``experiments.commands.simulate.run`` (``try: m = simulate(...) except ValueError as e:
    print(f"rlsched: error: {e}"); return 2``), both cases of this test fail (exit 2,
    "rlsched: error: planted: ..."); without it they pass.
    """
    scheduler = _simulator_raises_mid_run(monkeypatch) if where == "simulator" else raising_selector
    scenario = tmp_path / "s.toml"
    scenario.write_bytes(SCENARIO)
    args = ("simulate", "--scenario", str(scenario), "--scheduler", scheduler, "--json")
    rc, err = run_cli(*args)
    assert rc == 1, err
    assert err.strip() == (
        f"rlsched: internal error: ValueError: {PLANTED} (a bug; rerun with --debug for the traceback)"
    )
    with pytest.raises(ValueError, match=PLANTED):
        run_cli(*args, "--debug")
