"""Scenario files: built-ins load, every kind of mistake names the file and the dotted field."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import rlsched
from rlsched.hardware import device_models, gpu_model
from rlsched.scenarios.data_paths import find_data_dir, packaged_data_dir
from rlsched.scenarios.loader import ScenarioError, builtin_dir, list_scenarios, load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.traces import POD_COLUMNS, POD_TIME_COLUMNS

POD_HEADER = ",".join((*POD_COLUMNS, "gpu_spec", "qos", "pod_phase", *POD_TIME_COLUMNS))
BUILTINS = (
    "alibaba",
    "alibaba-full",
    "alibaba-dense",
    "hetero-saturated",
    "dynamic",
    "interference",
    "interference-gavel",
    "interference-saturated",
    "large",
    "paper",
    "priority-saturated",
)
DATA = packaged_data_dir()

MINIMAL = """\
name = "mini"
seed = 3

[cluster]
[[cluster.nodes]]
name = "gpu"
count = 2
cpu_cores = 8
host_mem_gib = 32
gpu_model = "T4"
gpu_count = 2

[[cluster.nodes]]
name = "mixed"
cpu_cores = 4
host_mem_gib = 16
gpus = ["V100", "P100"]
streams_per_gpu = 8
net_gbps = 10

[workload]
tasks = 20
apps = { matmul = 2, fft = 1 }

[workload.arrival]
process = "poisson"
rate_per_min = 40
"""

COLO_CSV = """\
device,kind,partner,norm_throughput
v100,A,A,0.5
v100,A,B,0.7
v100,B,A,0.9
p100,A,A,0.6
p100,B,B,0
"""
SOLO_CSV = "device,kind,solo_throughput\nv100,A,10\nv100,B,5\np100,A,8\np100,B,4\n"

GAVEL_LIKE = """\
[cluster]
[[cluster.nodes]]
name = "v"
cpu_cores = 8
host_mem_gib = 32
gpus = ["V100M16", "V100M32", "P100"]

[workload]
apps = "colocation"

[interference]
model = "csv"
colocation_csv = "colo.csv"
solo_csv = "solo.csv"
"""


def _write(folder: Path, text: str, name: str = "s.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _error(path: Path, **kw: object) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(path), **kw)  # type: ignore[arg-type]
    err = info.value
    assert "\n" not in str(err)
    where = path if err.line is None else f"{path}:{err.line}"
    assert str(err).startswith(f"{where}: {err.field}: expected ")
    return err


# --- built-in scenarios ------------------------------------------------------------------------


def test_builtins_are_listed() -> None:
    assert set(BUILTINS) <= set(list_scenarios())


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_loads(name: str) -> None:
    s = load_scenario(name)
    assert isinstance(s, Scenario) and s.name == name
    assert s.path == str((builtin_dir() / f"{name}.toml").resolve())
    assert len(s.cluster) > 0 and s.workload.tasks > 0
    names = [n.name for n in s.cluster.nodes]
    assert len(set(names)) == len(names)


def test_paper_platform() -> None:
    s = load_scenario("paper")
    nodes = s.cluster.nodes
    assert len(nodes) == 11
    assert sum(len(n.gpus) for n in nodes) == 2 * 2 + 4 * 4 + 4 * 4 + 1 * 2
    assert {g.name for n in nodes for g in n.gpus} == {"K80", "P4"}
    assert all(n.cpu_cores == 16 and n.net_gbps == 1.0 and n.join_s == 0 for n in nodes)
    assert s.workload.tasks == 1500
    assert s.workload.apps == {"intrusion_detection": 1.0, "video_synopsis": 1.0, "face_recognition": 1.0}
    assert (s.workload.arrival.process, s.workload.arrival.rate_per_min) == ("poisson", 50.0)
    assert (s.drift.sigma, s.drift.interval_s) == (0.02, 60.0)
    assert s.interference.model == "contention"


def test_dynamic_churn_8_11_9() -> None:
    nodes = load_scenario("dynamic").cluster.nodes

    def alive(t: float) -> int:
        return sum(n.join_s <= t and (n.leave_s is None or t < n.leave_s) for n in nodes)

    assert (alive(0), alive(600), alive(1200)) == (8, 11, 9)


def test_rate_override() -> None:
    assert load_scenario("paper", rate_per_min=30).workload.arrival.rate_per_min == 30
    bursty = load_scenario("dynamic", rate_per_min=25).workload.arrival
    assert bursty.rate_per_min == pytest.approx(25)
    assert bursty.high_rate_per_min == pytest.approx(45) and bursty.low_rate_per_min == pytest.approx(15)
    for bad in (5, 61, float("nan")):
        with pytest.raises(
            ScenarioError, match=r"--rate/@RATE: expected an arrival rate from 10 to 60"
        ) as info:
            load_scenario("paper", rate_per_min=bad)
        assert info.value.field == "--rate/@RATE"
    # The paper's range binds only on `paper`: other scenarios take any rate up to the limit.
    assert load_scenario("interference", rate_per_min=3000).workload.arrival.rate_per_min == 3000
    with pytest.raises(ScenarioError, match=r"--rate/@RATE: expected an arrival rate > 0"):
        load_scenario("interference", rate_per_min=0)
    own = load_scenario("interference").workload.arrival.rate_per_min
    with pytest.raises(ScenarioError, match=rf"up to {100 * own:g} tasks/min \(100x the scenario's own"):
        load_scenario("interference", rate_per_min=100 * own + 1)
    assert load_scenario("dynamic", rate_per_min=100).workload.arrival.rate_per_min == pytest.approx(100)


def test_node_total_is_bounded_across_groups(tmp_path: Path) -> None:
    text = MINIMAL.replace("count = 2", "count = 10000", 1)
    err = _error(_write(tmp_path, text))
    assert err.field.startswith("cluster.nodes[") and "at most 10,000 nodes in all" in str(err)


def test_unknown_builtin_name() -> None:
    with pytest.raises(ScenarioError, match=r"built-in scenario .*paper") as info:
        load_scenario("papr")
    assert info.value.field == "<scenario>"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(str(tmp_path / "none.toml"))
    assert info.value.field == "<file>"


# --- a valid file --------------------------------------------------------------------------------


def test_minimal_file(tmp_path: Path) -> None:
    s = load_scenario(str(_write(tmp_path, MINIMAL)))
    assert (s.name, s.seed, s.cluster.name) == ("mini", 3, "mini")
    assert [n.name for n in s.cluster.nodes] == ["gpu-0", "gpu-1", "mixed-0"]
    assert s.cluster.nodes[0].gpus == (gpu_model("T4"),) * 2
    assert s.cluster.nodes[2].gpus == (gpu_model("V100M16"), gpu_model("P100"))
    assert (s.cluster.nodes[0].streams_per_gpu, s.cluster.nodes[0].net_gbps) == (4, 1.0)
    assert (s.cluster.nodes[2].streams_per_gpu, s.cluster.nodes[2].net_gbps) == (8, 10.0)
    assert s.workload.apps == {"matmul": 2.0, "fft": 1.0}
    assert s.workload.tenants == ("default",) and s.workload.input_mb is None
    assert s.drift.sigma == 0.0


def test_events_set_join_and_leave(tmp_path: Path) -> None:
    join = '[[dynamics.events]]\nat_s = 60\njoin = ["gpu-1"]\n'
    text = MINIMAL + join + '[[dynamics.events]]\nat_s = 90\nleave = ["gpu-1"]\n'
    nodes = load_scenario(str(_write(tmp_path, text))).cluster.nodes
    assert (nodes[1].join_s, nodes[1].leave_s) == (60.0, 90.0)
    assert (nodes[0].join_s, nodes[0].leave_s) == (0.0, None)


# --- bad files: each error names the file and the dotted field ------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "field", "fragment"),
    [
        ("seed = 3", "sede = 3", "sede", "one of the keys (name, description, seed"),
        ('gpu_model = "T4"', 'gpu_modl = "T4"', "cluster.nodes[0].gpu_modl", "gpu_model"),
        ("rate_per_min = 40", "rate = 40", "workload.arrival.rate", "of process 'poisson'"),
        (
            "cpu_cores = 8",
            'cpu_cores = "8"',
            "cluster.nodes[0].cpu_cores",
            "an integer from 1 to 1,024, got '8'",
        ),
        ("cpu_cores = 8", "cpu_cores = true", "cluster.nodes[0].cpu_cores", "from 1 to 1,024, got True"),
        ("cpu_cores = 8", "cpu_cores = 4096", "cluster.nodes[0].cpu_cores", "from 1 to 1,024, got 4096"),
        ("count = 2", "count = 1000000000", "cluster.nodes[0].count", "from 1 to 10,000, got 1000000000"),
        ("tasks = 20", "tasks = 1000000000", "workload.tasks", "from 1 to 1,000,000"),
        ("gpu_count = 2", "gpu_count = 17", "cluster.nodes[0].gpu_count", "from 1 to 16"),
        ("seed = 3", "seed = 5000000000", "seed", "from 0 to 4,294,967,295"),
        ("rate_per_min = 40", "rate_per_min = 1e9", "workload.arrival.rate_per_min", "<= 1e+06"),
        ("host_mem_gib = 32", "host_mem_gib = 0", "cluster.nodes[0].host_mem_gib", "a number > 0, got 0"),
        ("count = 2", "count = -2", "cluster.nodes[0].count", "an integer from 1 to 10,000, got -2"),
        ("tasks = 20", "tasks = 0", "workload.tasks", "an integer from 1 to 1,000,000"),
        (
            'gpu_model = "T4"',
            'gpu_model = "X100"',
            "cluster.nodes[0].gpu_model",
            "from the catalog (P4, K80,",
        ),
        (
            'gpus = ["V100", "P100"]',
            'gpus = ["V100", 3]',
            "cluster.nodes[1].gpus",
            "a list of non-empty strings",
        ),
        ('gpus = ["V100", "P100"]', 'gpus = ["V100", "P1000"]', "cluster.nodes[1].gpus[1]", "got 'P1000'"),
        ("matmul = 2", "matmull = 2", "workload.apps.matmull", "a known app (face_recognition, fft,"),
        ("matmul = 2", "matmul = -2", "workload.apps.matmul", "a number >= 0, got -2"),
        ("matmul = 2, fft = 1", "matmul = 0, fft = 0", "workload.apps", "a positive sum"),
        ('process = "poisson"', 'process = "poison"', "workload.arrival.process", '"poisson", "bursty"'),
        ("cpu_cores = 4", 'cpu_cores = 4\ngpu_model = "T4"', "cluster.nodes[1].gpus", "not both"),
        ('name = "mixed"', 'name = "gpu"', "cluster.nodes[1].name", "unique"),
        ("tasks = 20", "tasks = 20\ninput_mb = [5, 1]", "workload.input_mb", "0 < low <= high"),
        ("tasks = 20", 'tasks = 20\ntenants = ["a", "a"]', "workload.tenants", "distinct"),
        ("[workload]", "[workload]\nalibaba = 3", "workload.alibaba", "a table, got 3"),
        ("tasks = 20", "tasks = 20\nclasses = 3", "workload.classes", "1 to 16 [[workload.classes]]"),
        ("tasks = 20", "tasks = 20\nclasses = [{ share = 1 }]", "workload.classes[0].name", "required"),
        (
            "tasks = 20",
            'tasks = 20\nclasses = [{ name = "a", share = 0 }]',
            "workload.classes[0].share",
            "a number > 0",
        ),
        (
            "tasks = 20",
            'tasks = 20\nclasses = [{ name = "a", share = 1 }, { name = "a", share = 1 }]',
            "workload.classes[1].name",
            "no other class has",
        ),
        (
            "tasks = 20",
            'tasks = 20\nclasses = [{ name = "a", share = 1, priority = 1.5 }]',
            "workload.classes[0].priority",
            "an integer from -1,000 to 1,000",
        ),
        (
            "tasks = 20",
            'tasks = 20\nclasses = [{ name = "a", share = 1, deadline = 3 }]',
            "workload.classes[0].deadline",
            "one of the keys (name, share, priority, deadline_s)",
        ),
        (
            "tasks = 20",
            'tasks = 20\ndeadline_s = 5\nclasses = [{ name = "a", share = 1 }]',
            "workload.deadline_s",
            "no workload deadline with [[workload.classes]]",
        ),
    ],
)
def test_bad_value(tmp_path: Path, old: str, new: str, field: str, fragment: str) -> None:
    assert old in MINIMAL
    path = _write(tmp_path, MINIMAL.replace(old, new, 1))
    err = _error(path)
    assert err.field == field
    assert fragment in str(err)


def test_unknown_gpu_model_message(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL.replace('gpu_model = "T4"', 'gpu_model = "X100"'))
    msg = str(_error(path))
    line = MINIMAL.splitlines().index('gpu_model = "T4"') + 1
    assert msg.startswith(
        f"{path}:{line}: cluster.nodes[0].gpu_model: expected a GPU model name from the catalog (P4, K80, "
    )
    assert msg.endswith("got 'X100'")


def test_syntax_error_names_line(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL.replace("tasks = 20", "tasks = = 20"))
    err = _error(path)
    assert err.field == "<syntax>"
    assert err.line == MINIMAL.splitlines().index("tasks = 20") + 1
    assert f"line {err.line}" in str(err)


def test_events_errors(tmp_path: Path) -> None:
    cases = {
        'at_s = 5\njoin = ["gpu-7"]': ("dynamics.events[0].join[0]", "a node name of the cluster"),
        'at_s = 5\nleave = ["gpu-0"]\njoin = ["gpu-0"]': (
            "dynamics.events[0].leave[0]",
            "to leave after it joins",
        ),
        'at_s = 5\njoin = ["gpu-0", "gpu-1", "mixed-0"]': ("dynamics.events", "at least one node present"),
        'at_s = -1\njoin = ["gpu-0"]': ("dynamics.events[0].at_s", "a number >= 0"),
        'at_s = 5\nspawn = ["gpu-0"]': ("dynamics.events[0].spawn", "one of the keys (at_s, join, leave)"),
    }
    for body, (field, fragment) in cases.items():
        err = _error(_write(tmp_path, MINIMAL + f"[[dynamics.events]]\n{body}\n"))
        assert err.field == field and fragment in str(err), str(err)
    twice = (
        '[[dynamics.events]]\nat_s = 1\njoin = ["gpu-0"]\n[[dynamics.events]]\nat_s = 2\njoin = ["gpu-0"]\n'
    )
    assert _error(_write(tmp_path, MINIMAL + twice)).field == "dynamics.events[1].join[0]"


def test_drift_bounds(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, MINIMAL + "[dynamics.drift]\nsigma = 0.1\nmin_factor = 1.5\n"))
    assert err.field == "dynamics.drift.min_factor"


def test_a_span_of_arrivals_no_run_can_finish_is_refused_naming_its_field(tmp_path: Path) -> None:
    """Each value valid alone, together a run that never ends (10^12 drift steps) or times beyond
    float seconds' resolution (a kernel's duration rounded to 0 divided by): refused at load."""
    slow = MINIMAL.replace("rate_per_min = 40", "rate_per_min = 1e-6")
    err = _error(_write(tmp_path, slow))
    assert err.field == "workload.arrival.rate_per_min" and err.line == 27, err
    assert "the 20 tasks arrive within 1,000,000,000 s: >= 1.2e-06 tasks/min" in str(err)
    assert _error(_write(tmp_path, MINIMAL), rate_per_min=1e-13).field == "--rate/@RATE"
    assert load_scenario(str(_write(tmp_path, slow)), max_tasks=1).workload.tasks == 1  # #TASKS counts
    load_scenario(str(_write(tmp_path, MINIMAL.replace("rate_per_min = 40", "rate_per_min = 1.3e-6"))))
    # 20 tasks at 40/min arrive in ~30 s: drift every 1e-9 s would step 3e10 times.
    drift = MINIMAL + "[dynamics.drift]\nsigma = 0.1\ninterval_s = 1e-9\n"
    err = _error(_write(tmp_path, drift))
    assert err.field == "dynamics.drift.interval_s" and "at most 100,000 drift steps" in str(err), err
    load_scenario(str(_write(tmp_path, drift.replace("sigma = 0.1", "sigma = 0"))))  # no drift: no steps
    # A rate override that makes the file's own drift step too often is the override's fault.
    drift = MINIMAL + "[dynamics.drift]\nsigma = 0.1\ninterval_s = 60\n"
    err = _error(_write(tmp_path, drift), rate_per_min=1e-4)
    assert err.field == "--rate/@RATE" and "within 100,000 drift steps (interval_s = 60)" in str(err), err
    load_scenario(str(_write(tmp_path, drift)), rate_per_min=1e-4, max_tasks=2)
    err = _error(_write(tmp_path, MINIMAL + "[dynamics.drift]\nsigma = 1e6\n"))
    assert err.field == "dynamics.drift.sigma", err
    bursty = MINIMAL.replace(
        'process = "poisson"\nrate_per_min = 40',
        'process = "bursty"\nhigh_rate_per_min = 60\nlow_rate_per_min = 10\n'
        "mean_high_s = 30\nmean_low_s = 1e-300",
    )
    err = _error(_write(tmp_path, bursty))
    assert err.field == "workload.arrival.mean_low_s" and "bursts and lulls" in str(err), err
    (tmp_path / "far.csv").write_text("arrival_s\n0\n1e300\n2e300\n")
    trace = MINIMAL.replace(
        'process = "poisson"\nrate_per_min = 40', 'process = "trace"\ntrace_path = "far.csv"'
    ).replace("tasks = 20", "tasks = 3")
    err = _error(_write(tmp_path, trace))
    assert err.field == "workload.arrival.time_scale", err
    load_scenario(str(_write(tmp_path, trace.replace('"far.csv"', '"far.csv"\ntime_scale = 1e-292'))))


def test_a_trace_row_at_fault_is_named_under_the_field_that_names_the_trace(tmp_path: Path) -> None:
    """As a co-location CSV's rows are: the scenario, its line and field, then the CSV's path and
    line (a trace's row errors named only the CSV, and a short trace failed at the first run)."""
    trace = MINIMAL.replace(
        'process = "poisson"\nrate_per_min = 40', 'process = "trace"\ntrace_path = "t.csv"'
    )
    (tmp_path / "t.csv").write_text("arrival_s\n0\nx\n")
    err = _error(_write(tmp_path, trace))
    assert err.field == "workload.arrival.trace_path" and err.line == 27, err
    assert f"expected a number at {tmp_path / 't.csv'} line 3 (arrival_s), got 'x'" in str(err), err
    (tmp_path / "t.csv").write_text("arrival_s\n0\n5\n")
    err = _error(_write(tmp_path, trace))
    assert "expected a trace of at least the 20 arrivals of workload.tasks, got 2" in str(err), err
    assert load_scenario(str(_write(tmp_path, trace)), max_tasks=2).workload.tasks == 2


def test_overrides_that_do_not_apply(tmp_path: Path) -> None:
    path = _write(tmp_path, MINIMAL)
    assert _error(path, trace_dir=str(tmp_path)).field == "trace_dir"
    assert _error(path, rate_per_min=2e6).field == "--rate/@RATE"


# --- data files ------------------------------------------------------------------------------------


def _colo_files(folder: Path, colo: str = COLO_CSV, solo: str = SOLO_CSV) -> None:
    (folder / "colo.csv").write_text(colo)
    (folder / "solo.csv").write_text(solo)


def test_colocation_apps_from_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = tmp_path / "scen"
    sub.mkdir()
    _colo_files(sub)
    path = _write(sub, GAVEL_LIKE)
    monkeypatch.chdir(tmp_path)  # relative CSV paths resolve against the file, not the cwd
    s = load_scenario(str(path))
    assert s.workload.apps == {"colo:A": 1.0, "colo:B": 1.0}
    assert s.interference.model == "csv"
    assert s.interference.colocation_csv == str(sub / "colo.csv")
    assert s.interference.solo_csv == str(sub / "solo.csv")


def test_csv_with_a_byte_order_mark_is_read_and_non_utf8_is_named(tmp_path: Path) -> None:
    (tmp_path / "colo.csv").write_bytes(b"\xef\xbb\xbf" + COLO_CSV.encode())  # an Excel export
    (tmp_path / "solo.csv").write_text(SOLO_CSV)
    path = _write(tmp_path, GAVEL_LIKE)
    assert load_scenario(str(path)).interference.model == "csv"
    (tmp_path / "colo.csv").write_bytes(COLO_CSV.encode().replace(b"0.7", b"0.7\xff"))
    err = _error(path)
    assert err.field == "interference.colocation_csv"
    assert "UTF-8 CSV file (save it as UTF-8) at " in str(err) and "got 'byte 0xff at offset" in str(err)
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_scenario(str(tmp_path / "bom.toml")).name == "mini"
    (tmp_path / "latin1.toml").write_bytes(MINIMAL.encode().replace(b"mini", b"m\xe9ni", 1))
    err = _error(tmp_path / "latin1.toml")
    assert err.field == "<syntax>" and "byte 0xe9" in str(err)


def test_colocation_csv_errors(tmp_path: Path) -> None:
    path = _write(tmp_path, GAVEL_LIKE)
    field = "interference.colocation_csv"
    cases = [
        (COLO_CSV.replace("0.7", "3.5"), "line 3 (norm_throughput)", "'3.5'"),
        (COLO_CSV.replace("0.7", "fast"), "line 3 (norm_throughput)", "'fast'"),
        (
            COLO_CSV.replace("norm_throughput", "tput"),
            "a CSV header device,kind,partner,norm_throughput",
            "tput",
        ),
        (COLO_CSV.replace("v100", "k80"), "every GPU model of the cluster", "'V100M16'"),
    ]
    for colo, fragment, fragment2 in cases:
        _colo_files(tmp_path, colo=colo)
        msg = str(_error(path))
        line = GAVEL_LIKE.splitlines().index('colocation_csv = "colo.csv"') + 1
        assert msg.startswith(f"{path}:{line}: {field}: expected "), msg
        assert fragment in msg and fragment2 in msg and str(tmp_path / "colo.csv") in msg, msg


def test_solo_csv_must_cover_kinds(tmp_path: Path) -> None:
    _colo_files(tmp_path, solo=SOLO_CSV.replace("p100,B,4\n", ""))
    err = _error(_write(tmp_path, GAVEL_LIKE))
    assert err.field == "interference.solo_csv" and "on p100" in str(err)


def test_missing_csv_names_path_tried(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, GAVEL_LIKE))
    assert err.field == "interference.colocation_csv"
    assert str(err).endswith(f"expected an existing file, got '{tmp_path / 'colo.csv'}'")


def test_csv_only_with_csv_model(tmp_path: Path) -> None:
    _colo_files(tmp_path)
    err = _error(_write(tmp_path, GAVEL_LIKE.replace('model = "csv"', 'model = "contention"')))
    assert err.field == "interference.colocation_csv"
    err = _error(_write(tmp_path, GAVEL_LIKE.replace("solo_csv", "solo")))
    assert err.field == "interference.solo"
    text = GAVEL_LIKE.replace('model = "csv"\n', "").replace(
        'colocation_csv = "colo.csv"\nsolo_csv = "solo.csv"\n', ""
    )
    err = _error(_write(tmp_path, text))
    assert err.field == "workload.apps" and 'interference.model = "csv"' in str(err)


def test_data_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _colo_files(data)
    text = GAVEL_LIKE.replace('"colo.csv"', '"${RLSCHED_DATA}/colo.csv"').replace(
        '"solo.csv"', '"${RLSCHED_DATA}/solo.csv"'
    )
    path = _write(tmp_path, text)
    monkeypatch.setenv("RLSCHED_DATA", str(data))
    assert find_data_dir() == data
    assert load_scenario(str(path)).interference.colocation_csv == str(data / "colo.csv")
    err = _error(_write(tmp_path, text.replace("${RLSCHED_DATA}", "${DATA}")))
    assert err.field == "interference.colocation_csv" and "only variable" in str(err)


def test_the_data_ship_with_the_package_with_their_licences(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``RLSCHED_DATA`` (and from anywhere), ``${RLSCHED_DATA}`` is the packaged folder,
    which holds every file a built-in names, each source's licence and the provenance note."""
    monkeypatch.delenv("RLSCHED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    assert find_data_dir() == DATA == Path(rlsched.__file__).resolve().parent / "data"
    named = set()
    for toml in builtin_dir().glob("*.toml"):
        named |= {m.group(1) for m in re.finditer(r"\$\{RLSCHED_DATA\}/([^\"]+)", toml.read_text())}
    assert {"traces/alibaba-gpu-v2023/openb_pod_list_default.csv", "colocation/gavel-v100-p100.csv"} <= named
    for rel in named:
        assert (DATA / rel).is_file(), rel
    for licence in (
        "traces/alibaba-gpu-v2023/LICENSE-kubernetes-scheduler-simulator-apache-2.0",
        "colocation/LICENSE-gavel",
    ):
        assert "Permission" in (DATA / licence).read_text() or "Apache" in (DATA / licence).read_text()
    assert "Gavel" in (DATA / "PROVENANCE.md").read_text()
    for name in list_scenarios():
        load_scenario(name)  # every built-in loads from the packaged data


def test_device_models() -> None:
    assert device_models("v100") == {"V100M16", "V100M32"}
    assert device_models("P100") == {"P100"}
    assert device_models("a10") == {"A10"}
    assert device_models("a100") == {"A100", "A100-80"}
    assert device_models("x1") == set()


def test_error_pickles() -> None:
    err = ScenarioError("x.toml", "cluster.nodes[0].gpus", "a list", 3)
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.field, back.expected, back.got, str(back)) == (
        "x.toml",
        "cluster.nodes[0].gpus",
        "a list",
        3,
        str(err),
    )


# --- Alibaba section (generated trace files; the real sample is tested in test_traces) ---------------

ALIBABA = """\
name = "ali"
[workload]
tasks = 3
[workload.alibaba]
node_csv = "trace/nodes.csv"
pod_csv = "trace/pods.csv"
nodes = 2
time_scale = 0.5
"""


def _trace(folder: Path) -> Path:
    trace = folder / "trace"
    trace.mkdir(exist_ok=True)
    (trace / "nodes.csv").write_text(
        "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,8192,2,T4\nn1,8000,8192,1,P100\n"
    )
    (trace / "pods.csv").write_text(f"{POD_HEADER}\np0,1000,1024,1,500,,LS,Running,0,100,1\n")
    return trace


def test_alibaba_section(tmp_path: Path) -> None:
    _trace(tmp_path)
    s = load_scenario(str(_write(tmp_path, ALIBABA)))
    assert [n.name for n in s.cluster.nodes] == ["n0", "n1"]
    assert s.cluster.name == "ali"
    ali = s.workload.alibaba
    assert ali is not None and (ali.nodes, ali.time_scale) == (2, 0.5)
    assert ali.pod_csv == str(tmp_path / "trace" / "pods.csv")
    assert s.workload.arrival.process == "trace" and s.workload.apps == {}
    assert s.workload.tasks == 3


def test_alibaba_node_groups_add_nodes_after_the_sample(tmp_path: Path) -> None:
    _trace(tmp_path)
    extra = "[[cluster.nodes]]\nname = 'cpu'\ncount = 2\ncpu_cores = 64\nhost_mem_gib = 128\n"
    s = load_scenario(str(_write(tmp_path, ALIBABA + extra)))
    names = [n.name for n in s.cluster.nodes]
    assert names[:2] == ["n0", "n1"] and len(names) == 4
    assert all(not n.gpus and n.cpu_cores == 64 for n in s.cluster.nodes[2:])
    nodes_csv = tmp_path / "trace" / "nodes.csv"
    nodes_csv.write_text(nodes_csv.read_text().replace("n1,", "cpu-1,"))
    err = _error(_write(tmp_path, ALIBABA + extra))
    assert err.field == "cluster.nodes[0].name" and "cpu-1" in str(err)


def test_alibaba_section_errors(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    path = _write(tmp_path, ALIBABA.replace("nodes = 2", "nodes = 3"))
    assert _error(path).field == "workload.alibaba.nodes"
    path = _write(tmp_path, ALIBABA.replace("tasks = 3", "tasks = 3\napps = { fft = 1 }"))
    assert _error(path).field == "workload.apps"
    group = "[[cluster.nodes]]\nname = 'x'\ncpu_cores = 1\nhost_mem_gib = 1\n"
    path = _write(tmp_path, ALIBABA + group + group)
    assert _error(path).field == "cluster.nodes[1].name"
    path = _write(tmp_path, ALIBABA + "[cluster]\nnodes = 3\n")
    assert _error(path).field == "cluster.nodes"
    path = _write(tmp_path, ALIBABA)
    assert _error(path, rate_per_min=30).field == "--rate/@RATE"
    err = _error(path, trace_dir=str(tmp_path / "elsewhere"))
    assert err.field == "workload.alibaba.node_csv" and "elsewhere" in str(err)
    moved = tmp_path / "moved"
    trace.rename(moved)
    assert load_scenario(str(path), trace_dir=str(moved)).workload.alibaba.pod_csv == str(moved / "pods.csv")  # type: ignore[union-attr]
    (moved / "pods.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1,1,1,1000\n")
    err = _error(path, trace_dir=str(moved))
    assert err.field == "workload.alibaba.pod_csv" and "creation_time" in str(err)


def test_task_classes_load_with_their_priorities_and_deadlines(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "tasks = 20",
        'tasks = 20\nclasses = [{ name = "hi", share = 1, priority = 2, deadline_s = 30 }, '
        '{ name = "lo", share = 3 }]',
    )
    wl = load_scenario(str(_write(tmp_path, text))).workload
    assert [(c.name, c.share, c.priority, c.deadline_s) for c in wl.classes] == [
        ("hi", 1.0, 2, 30.0),
        ("lo", 3.0, 0, None),
    ]
    assert wl.deadline_s is None


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_round_trips_through_the_writer(name: str, tmp_path: Path) -> None:
    """The writer is the loader's inverse: written, every built-in loads back equal."""
    import dataclasses

    from rlsched.scenarios.writer import write_scenario

    sc = load_scenario(name)
    write_scenario(sc, tmp_path / "out.toml")
    back = load_scenario(str(tmp_path / "out.toml"))
    assert dataclasses.replace(back, path=None) == dataclasses.replace(sc, path=None)


def test_a_changed_scenario_round_trips_and_an_inexpressible_one_is_named(tmp_path: Path) -> None:
    import dataclasses

    from rlsched.scenarios.writer import dump_scenario, write_scenario

    sc = load_scenario("dynamic", rate_per_min=None)
    sc = dataclasses.replace(sc, seed=7, workload=dataclasses.replace(sc.workload, tasks=99))
    write_scenario(sc, tmp_path / "x.toml")
    back = load_scenario(str(tmp_path / "x.toml"))
    assert back.seed == 7 and back.workload.tasks == 99 and back.cluster == sc.cluster
    odd = dataclasses.replace(sc.cluster.nodes[0], name="lonely")
    bad = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=(odd,)))
    with pytest.raises(ValueError, match="'lonely'"):
        dump_scenario(bad)
