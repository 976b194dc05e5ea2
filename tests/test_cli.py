"""The ``rlsched`` command line as a user runs it: the installed console script, in a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.cli import main

ROOT = Path(__file__).resolve().parents[1]

REQUIRED_KEYS = {
    "throughput",
    "makespan_s",
    "tasks_total",
    "tasks_completed",
    "tasks_lost",
    "gpu_util",
    "load_balance",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "queue_wait_mean_s",
    "deadline_miss_rate",
    "wall_s",
    "decisions_per_s",
}
SMALL = """name = "small"
seed = 1
[[cluster.nodes]]
name = "p4"
count = 2
cpu_cores = 8
host_mem_gib = 32
gpu_model = "P4"
gpu_count = 2
[[cluster.nodes]]
name = "t4"
cpu_cores = 8
host_mem_gib = 32
gpu_model = "T4"
gpu_count = 1
[workload]
tasks = 120
apps = { intrusion_detection = 1, matmul = 1, kmeans = 1 }
deadline_s = 120
[workload.arrival]
process = "poisson"
rate_per_min = 30
"""


def rlsched(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    p = tmp_path / "small.toml"
    p.write_text(SMALL)
    return p


def test_simulate_json_has_every_metric(small: Path) -> None:
    r = rlsched("simulate", "--scenario", str(small), "--scheduler", "mct+mlsm", "--seed", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out.keys() >= REQUIRED_KEYS
    assert out["tasks_total"] == out["tasks_completed"] == 120
    assert out["tasks_lost"] == 0 and out["seed"] == 4 and out["scheduler"] == "mct+mlsm"
    assert out["throughput"] > 0 and 0 <= out["gpu_util"] <= 1
    assert out["throughput_per_min"] == out["throughput"] * 60


def test_simulate_table_is_the_default(small: Path) -> None:
    r = rlsched("simulate", "--scenario", str(small), "--scheduler", "random")
    assert r.returncode == 0, r.stderr
    assert "tasks_lost" in r.stdout and "latency_p95_s" in r.stdout
    # One unit across commands: tasks per minute, named as such.
    assert "throughput_per_min" in r.stdout and "throughput " not in r.stdout


def test_simulate_takes_the_entries_evaluate_takes(small: Path, tmp_path: Path) -> None:
    """``NAME[@RATE][#TASKS]`` on a file, as ``evaluate --scenarios`` reads it; a file whose own
    name holds ``@`` is still that file."""
    r = rlsched("simulate", "--scenario", f"{small}@60#30", "--scheduler", "mct", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks_total"] == 30
    at = tmp_path / "a@b.toml"
    at.write_text(SMALL)
    r = rlsched("simulate", "--scenario", str(at), "--scheduler", "mct", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks_total"] == 120
    r = rlsched("simulate", "--scenario", f"{small}#0")
    assert r.returncode == 2 and "--scenario" in r.stderr and "task count after '#'" in r.stderr


def test_version_names_the_package_and_the_shipped_models() -> None:
    """``rlsched --version``: what a bug report quotes, the installed version and each shipped
    model's sha256 (as its meta.json lists it), read without torch."""
    import importlib.metadata

    from models import PRETRAINED_IAWP_RL, PRETRAINED_LDWP, PRETRAINED_RECOGNISER

    r = rlsched("--version")
    assert r.returncode == 0, r.stderr
    first, models = r.stdout.splitlines()
    assert first.startswith(f"rlsched {importlib.metadata.version('rlsched')} (Python ")
    for name, folder in (
        ("ldwp", PRETRAINED_LDWP),
        ("iawp-rl", PRETRAINED_IAWP_RL),
        ("recogniser", PRETRAINED_RECOGNISER),
    ):
        digest = next(iter(json.loads((folder / "meta.json").read_text())["files"].values()))
        assert f"{name} {digest[:12]}" in models


def test_bad_scenario_exits_2_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(SMALL.replace('gpu_model = "T4"', 'gpu_model = "X100"'))
    r = rlsched("simulate", "--scenario", str(bad))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and str(bad) in line and "cluster.nodes[1].gpu_model" in line and "X100" in line


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("simulate", "--scheduler", "nope"), "--scheduler: selector: expected a known selector ("),
        (("simulate", "--scheduler", "mct+nope"), "--scheduler: placer: expected a known placer after '+' ("),
        (("simulate", "--rate", "100"), "paper.toml: --rate/@RATE: expected an arrival rate from 10 to 60"),
        (("simulate", "--scenario", "no-such-scenario"), "no-such-scenario: <scenario>: expected"),
        # --rate beside an entry's own rate or load was ignored without a word
        (
            ("simulate", "--scenario", "paper@30#100", "--rate", "60"),
            "expected either the entry's @RATE or --rate",
        ),
        (
            ("simulate", "--scenario", "paper~0.9#100", "--rate", "30"),
            "expected either the entry's ~LOAD or --rate",
        ),
    ],
)
def test_user_errors_exit_2_without_traceback(args: tuple[str, ...], fragment: str) -> None:
    r = rlsched(*args)
    assert r.returncode == 2
    assert r.stderr.startswith("rlsched: error: ") and r.stderr.count("\n") == 1, r.stderr
    assert fragment in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ("train", "--pretrain", "oracle"),
            "--pretrain: selector: expected a teacher that reads only what a real",
        ),
        (("train", "--pretrain", "auto"), "'best' or 'none', got 'auto'"),
        (("train", "--stage", "2", "--selector", "auto"), "round-robin), got 'auto'"),
    ],
)
def test_a_teacher_or_selector_train_cannot_use_is_refused(
    args: tuple[str, ...], fragment: str, tmp_path: Path
) -> None:
    """The oracle as teacher crashed after set-up (exit 1); 'auto' was refused by a message that
    listed 'auto' among what the flag takes."""
    r = rlsched(*args, "--scenario", "paper#100", "--steps", "0", "--out", str(tmp_path / "out"))
    errors = [x for x in r.stderr.splitlines() if x.startswith("rlsched: error: ")]
    assert r.returncode == 2 and len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert fragment in errors[0] and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (
            ("--scheduler", "mct+iawp-rl", "--placer-model", "models/pretrained/ldwp"),
            "<kind>: expected a checkpoint of a learned placer (rlsched train --stage 2), got 'ldwp'; "
            "the folder holds an LDWP network (rlsched train), which --model takes",
        ),
        (
            ("--scheduler", "ldwp+mlsm", "--model", "models/pretrained/iawp-rl"),
            "got 'iawp-rl'; the folder holds a learned placer (rlsched train --stage 2), which --placer",
        ),
        (("--scheduler", "ldwp+mlsm", "--model", "models/pretrained/recogniser"), "which --recogniser takes"),
        (
            ("--scheduler", "auto", "--recogniser", "models/pretrained/ldwp"),
            "<kind>: expected a checkpoint of auto's recogniser (rlsched fit-recogniser), got 'ldwp'",
        ),
    ],
)
def test_a_checkpoint_of_another_kind_is_refused_by_its_kind(args: tuple[str, ...], fragment: str) -> None:
    """A placer's checkpoint given as --model was refused for its feature version, and a
    recogniser for lacking weights.pt: true, but not what the user got wrong."""
    r = rlsched("simulate", *(str(ROOT / a) if a.startswith("models/") else a for a in args))
    assert r.returncode == 2 and fragment in r.stderr, r.stderr


def test_an_interference_model_as_model_names_what_takes_it(tmp_path: Path) -> None:
    """simulate has no --interference-model: the hint names what does take one."""
    model = tmp_path / "ix"
    data = ROOT / "rlsched" / "data" / "colocation" / "gavel-v100-p100.csv"
    assert (
        rlsched(
            "interference", "fit", "--data", str(data), "--method", "mean", "--out", str(model)
        ).returncode
        == 0
    )
    r = rlsched("simulate", "--scheduler", "ldwp+mlsm", "--model", str(model))
    hint = "which rlsched interference evaluate --model or the service's interference_model key takes"
    assert r.returncode == 2 and hint in r.stderr and "--interference-model" not in r.stderr, r.stderr


def test_unschedulable_tasks_are_a_warning_saying_how_many_and_why(small: Path, tmp_path: Path) -> None:
    cpu_only = tmp_path / "cpu-only.toml"
    cpu_only.write_text(
        'name = "cpu-only"\n[[cluster.nodes]]\nname = "c"\ncpu_cores = 8\nhost_mem_gib = 32\n'
        "[workload]\ntasks = 20\napps = { kmeans = 1 }\n"
    )
    r = rlsched("simulate", "--scenario", str(cpu_only), "--scheduler", "mct", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert "warning: 20 of 20 tasks were unschedulable: 20 tasks have a GPU-only subtask" in r.stderr
    assert json.loads(r.stdout)["tasks_unschedulable"] == 20  # the figures are still shown
    strict = rlsched("simulate", "--scenario", str(cpu_only), "--scheduler", "mct", "--strict")
    assert strict.returncode == 3 and "unschedulable" in strict.stderr
    ok = rlsched("simulate", "--scenario", str(small), "--scheduler", "mct", "--strict")
    assert ok.returncode == 0 and "unschedulable" not in ok.stderr
    # demo's table over a bound of 0 (it divided by it: exit 1)
    demo = rlsched("demo", "--scenario", str(cpu_only), "--seeds", "1", "--schedulers", "mct,random")
    assert demo.returncode == 0 and "Traceback" not in demo.stderr, demo.stderr
    assert "| mct | 0.0 ± 0.0 | — |" in demo.stdout and "the capacity bound is 0" in demo.stdout
    assert "warning: 20 of 20 tasks were unschedulable" in demo.stderr
    strict = rlsched("demo", "--scenario", str(cpu_only), "--seeds", "1", "--schedulers", "mct", "--strict")
    assert strict.returncode == 3, strict.stderr


def test_rate_range_of_the_paper_binds_only_on_paper() -> None:
    r = rlsched("simulate", "--scenario", "interference", "--scheduler", "mct", "--rate", "100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["tasks_completed"] > 0


def test_scenarios_lists_the_builtins() -> None:
    r = rlsched("scenarios")
    assert r.returncode == 0
    assert {"paper", "dynamic", "interference", "large"} <= set(r.stdout.split())


def test_token_prints_a_new_token_and_its_config_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from runtime.service.config import hash_token

    monkeypatch.chdir(tmp_path)  # works from anywhere, not only the repository root
    tokens = []
    for _ in range(2):
        assert main(["token"]) == 0
        first, second = capsys.readouterr().out.splitlines()
        token = first.split()[1]
        assert len(token) >= 43 and f'token_sha256 = "{hash_token(token)}"' in second
        tokens.append(token)
    assert tokens[0] != tokens[1]


@pytest.mark.parametrize(("flag", "scheduler"), [("--model", "mct+speedup"), ("--placer-model", "ldwp+iawp")])
def test_a_checkpoint_no_policy_of_the_run_uses_is_an_error(
    flag: str, scheduler: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["simulate", "--scenario", "paper", "--scheduler", scheduler, flag, "models/pretrained/ldwp"])
        == 2
    )
    err = capsys.readouterr().err
    assert flag in err and len(err.strip().splitlines()) == 1


def test_demo_prints_a_table_over_seeds(small: Path) -> None:
    r = rlsched(
        "demo", "--scenario", str(small), "--rate", "30", "--seeds", "2", "--schedulers", "random,mct"
    )
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| ")]
    assert rows[0].startswith("| scheduler") and len(rows) == 3
    assert rows[1].startswith("| random") and rows[2].startswith("| mct")
    assert "±" in rows[2] and "seeds [0, 1]" in r.stdout
    # Each scheduler's fraction of the capacity bound, and what the offered load means.
    assert "| of bound |" in rows[0]
    frac = float(rows[2].split(" | ")[2])
    assert 0.0 < frac <= 1.0
    assert "Offered load" in r.stdout and ("arrival-bound" in r.stdout or "can serve" in r.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["demo", "--seeds", "0"], "argument --seeds: expected an integer >= 1, got 0"),
        (["demo", "--live", "--streams", "0"], "argument --streams: expected an integer >= 1, got 0"),
        (["train", "--steps", "-5", "--out", "x"], "argument --steps: expected an integer >= 0, got -5"),
        (["simulate", "--seed", "-1"], "argument --seed: expected an integer from 0 to 4294967295, got -1"),
        # A scenario file's seed stops at numpy's range; the flags took any size.
        (["simulate", "--seed", str(2**32)], "argument --seed: expected an integer from 0 to 4294967295"),
        # The API's own ranges, checked before anything is sent (a service's 422 was exit 5).
        (
            ["submit", "--app", "fft", "--priority", "5000"],
            "argument --priority: expected an integer from -1000",
        ),
        (
            ["submit", "--app", "fft", "--stream", "2000000"],
            "argument --stream: expected an integer from 0 to",
        ),
        # A port the system picks (0) was served on, and the banner said :0; 70000 was an internal error.
        (
            ["serve", "--config", "x.toml", "--port", "0"],
            "argument --port: expected an integer from 1 to 65535",
        ),
        (
            ["serve", "--config", "x.toml", "--port", "70000"],
            "argument --port: expected an integer from 1 to",
        ),
        # A port out of range was "cannot reach the service" (exit 4: try again later).
        (
            ["status", "1", "--url", "http://127.0.0.1:99999"],
            "--url: value: expected a URL whose port is from 1",
        ),
        (["simulate", "--rate", "fast"], "argument --rate: expected a number, got 'fast'"),
        (["demo", "--rate", "-3"], "argument --rate: expected a positive number, got -3"),
        (["profile", "--fraction", "2", "--out", "x"], "argument --fraction: expected a share in (0, 1]"),
        (
            ["train", "--steps", "1", "--out", "/proc/no/such"],
            "--out: value: expected a folder that can be created",
        ),
    ],
)
def test_bad_numbers_are_refused_naming_the_flag(args: list[str], message: str) -> None:
    r = rlsched(*args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_demo_runs_another_scenario_at_its_own_rate(small: Path) -> None:
    """Only the default ``paper`` demo is pinned to 60 tasks/min; a given scenario keeps its rate."""
    r = rlsched("demo", "--scenario", str(small), "--seeds", "1", "--schedulers", "mct")
    assert r.returncode == 0, r.stderr
    assert "## small at 30 tasks/min" in r.stdout and "over 1 seed;" in r.stdout
    # `paper` with a task count is still the demo's paper, at its rate; with its own rate, at that.
    for entry, head in (
        ("paper#20", "## paper at 60 tasks/min: 20 tasks"),
        ("paper@20#20", "## paper at 20"),
    ):
        r = rlsched("demo", "--scenario", entry, "--seeds", "1", "--schedulers", "mct")
        assert r.returncode == 0 and head in r.stdout, (entry, r.stdout, r.stderr)


@pytest.mark.parametrize("name", ["paper", "dynamic", "interference", "interference-gavel", "alibaba"])
def test_every_builtin_runs_to_completion(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--scenario", name, "--scheduler", "mct", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tasks_lost"] == 0
    assert out["tasks_completed"] + out["tasks_unschedulable"] == out["tasks_total"]


def test_an_os_error_is_bad_input_only_on_a_path_the_user_named(
    tmp_path: Path, small: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path under ``--out`` that the system refuses (here a folder where the model's meta.json
    is first written) is exit 2 naming the path and the flag; the same kind of OSError on a
    path nobody named is an internal error (exit 1)."""
    colo = tmp_path / "colo.csv"
    colo.write_text("device,kind,partner,norm_throughput\nv100,A,B,0.7\nv100,B,A,0.8\n")
    out = tmp_path / "model"
    (out / "meta.json.tmp").mkdir(parents=True)
    args = ["interference", "fit", "--data", str(colo), "--method", "mean", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlsched: error: {out / 'meta.json.tmp'}") and err.count("\n") == 1, err
    assert ": <file>: expected a path this command can use (given by --out)" in err

    def refused(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied", "/var/lib/rlsched-nobody-named-this")

    monkeypatch.setattr("experiments.simulate.simulate_run", refused)
    assert main(["simulate", "--scenario", str(small), "--scheduler", "mct"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rlsched: internal error: PermissionError") and "--debug" in err


def test_a_backend_that_cannot_run_here_exits_4(tmp_path: Path) -> None:
    from runtime.backends.select import cupy_unavailable_reason

    if cupy_unavailable_reason() is None:
        pytest.skip("CuPy runs on this machine")
    r = rlsched("profile", "--backend", "cupy", "--out", str(tmp_path / "p"))
    assert r.returncode == 4, r.stderr
    assert r.stderr.startswith("rlsched: unavailable: --backend cupy: the cupy backend cannot run here")
    assert r.stderr.count("\n") == 1 and not (tmp_path / "p").exists()


def test_the_readme_lists_every_exit_code() -> None:
    """The README's exit-code table is the CLI's (``exit_codes.EXIT_MEANING``), no more, no less."""
    import re

    from experiments.commands.exit_codes import EXIT_MEANING

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("- Exit codes", 1)[1].split("\n\n", 2)[1]
    assert {int(c) for c in re.findall(r"^  \| (\d+) \|", section, re.MULTILINE)} == set(EXIT_MEANING)


def test_an_unknown_action_and_a_flag_set_twice_are_named_once(tmp_path: Path) -> None:
    """argparse named the action by its internal dest (``argument _interference``), and a flag
    error said the flag twice (``--k: --k:``)."""
    r = rlsched("interference", "fitt")
    assert r.returncode == 2 and "argument ACTION: invalid choice: 'fitt'" in r.stderr, r.stderr
    assert "_interference" not in r.stderr
    k = rlsched("fit-recogniser", "--from", str(ROOT / "models/pretrained/recogniser"), "--k", "5",
                "--out", str(tmp_path / "x"))  # fmt: skip
    assert k.returncode == 2, k.stderr
    assert "rlsched: error: --k: value: expected unset with --from" in k.stderr, k.stderr
