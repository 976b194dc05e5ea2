"""``rlsched demo --live`` and ``rlsched finetune --live`` as a user runs them."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.cli import main
from models.checkpoint import load_checkpoint
from rlsched.features import READABLE_FEATURE_VERSIONS
from rlsched.policies.ldwp import PRETRAINED
from tests.conftest import ctrl_c_able, interrupt_rlsched


def test_live_demo_prints_the_comparison(capsys: pytest.CaptureFixture[str]) -> None:
    specs = "ldwp+iawp,mct+mlsm,mct+iawp-rl"  # the learned placer runs unchanged on real kernels
    rc = main(["demo", "--live", "--tasks", "24", "--seeds", "1", "--schedulers", specs])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "| ldwp+iawp |" in out and "| mct+mlsm |" in out and "| mct+iawp-rl |" in out
    assert "cache hit rate" in out and "every result checked against its ground truth" in out
    assert "host load before the runs:" in out


def test_live_tasks_that_can_run_nowhere_are_warned_of_and_strict_exits_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A GPU of 1 MiB and no cores: every task ends with the runtime's reason; the demo says so on
    stderr as the simulated one does, and --strict exits 3 (it exited 0 in silence)."""
    cluster = tmp_path / "tiny.toml"
    cluster.write_text(
        '[[nodes]]\nname = "n"\ncpu_cores = 0\nhost_mem_gib = 1\n[[nodes.gpus]]\nmodel = "T4"\nmem_mib = 1\n'
    )
    args = ["demo", "--live", "--cluster", str(cluster), "--tasks", "6", "--streams", "1", "--seeds", "1"]
    args += ["--schedulers", "mct+mlsm"]
    assert main([*args, "--strict"]) == 3
    said = capsys.readouterr()
    assert "rlsched: warning: 6 of 6 tasks were unschedulable: 6 tasks: no feasible node" in said.err, (
        said.err
    )
    assert "no task completed: no result to check" in said.out and "every result" not in said.out
    assert main(args) == 0 and "were unschedulable" in capsys.readouterr().err


def test_live_only_flags_are_refused_without_live(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A flag that only sets up the live runtime, given to a simulated run, was ignored in silence."""
    assert main(["demo", "--tasks", "5", "--seeds", "1"]) == 2
    assert "rlsched: error: --tasks: value: expected none without --live" in capsys.readouterr().err
    assert main(["demo", "--live", "--scenario", "paper"]) == 2
    assert "rlsched: error: --scenario: value: expected none with --live" in capsys.readouterr().err
    ft = ["finetune", "--from", str(PRETRAINED), "--scenario", "paper#20", "--out", str(tmp_path / "ft")]
    assert main([*ft, "--backend", "ray"]) == 2
    assert "rlsched: error: --backend: value: expected none without --live" in capsys.readouterr().err
    cpu = tmp_path / "cpu.toml"
    cpu.write_text('[[nodes]]\nname = "cpu"\ncpu_cores = 2\n')
    live = [
        "finetune",
        "--from",
        str(PRETRAINED),
        "--live",
        "--cluster",
        str(cpu),
        "--out",
        str(tmp_path / "l"),
    ]
    assert main(live) == 2  # it failed with an internal error after its evaluations
    assert (
        f"rlsched: error: {cpu}: nodes: expected a cluster with at least one GPU" in capsys.readouterr().err
    )


def test_a_busy_host_is_named_as_a_warning_for_emulated_gpus() -> None:
    from experiments.live_demo import BUSY_HOST, host_busy, host_load_note

    busy = host_busy(0.2)
    assert busy is None or 0.0 <= busy <= 1.0
    assert "WARNING" in host_load_note(BUSY_HOST + 0.1, "numpy")
    assert "WARNING" not in host_load_note(BUSY_HOST - 0.1, "numpy")
    assert "WARNING" not in host_load_note(0.9, "cupy")  # real GPUs do not run on the host's cores


def test_live_demo_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", "--live", "--tasks", "0"])
    assert exit_info.value.code == 2
    assert "argument --tasks: expected an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["demo", "--live", "--tasks", "4", "--schedulers", "mct+nope"]) == 2
    assert "--schedulers: placer: expected a known placer after '+' (" in capsys.readouterr().err


def test_finetune_live_writes_models_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a two-GPU cluster file (``--cluster``): the live co-location survey, most of the run,
    grows with the square of the devices' kinds times the devices; the embedded cluster has four."""
    out = tmp_path / "ft"
    cluster = tmp_path / "live.toml"
    cluster.write_text(
        "".join(
            f'[[nodes]]\nname = "{m}"\ncpu_cores = 1\n[[nodes.gpus]]\nmodel = "{m}"\n\n'
            for m in ("V100M16", "T4")
        )
    )
    args = ["--from", str(PRETRAINED), "--live", "--steps", "24", "--tasks", "12", "--eval-tasks", "12"]
    args += ["--cluster", str(cluster)]
    rc = main(["finetune", *args, "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    said = capsys.readouterr().out.splitlines()
    assert said[0] == "finetune --live: 2 live nodes, held-out workloads", said
    tuned = next(x.split() for x in said if x.lstrip().startswith("fine-tuned last/"))
    assert tuned[-1] == "0", said  # tasks lost
    report = json.loads((out / "transfer.json").read_text())
    assert report["fine_tuned"]["tasks_lost"] == 0 and report["zero_shot"]["throughput_per_s"] > 0
    ix = report["interference"]
    assert ix["live_rows"] > 0 and 0 <= ix["sim_pretrained_then_live_update"]["mae"] < 1
    _, meta = load_checkpoint(out / "last", READABLE_FEATURE_VERSIONS)  # checksummed, loadable
    # fine-tuned on the features it was trained on, and says so
    source = json.loads((PRETRAINED / "meta.json").read_text())["feature_version"]
    assert meta["feature_version"] == source
    # Its own figures are live ones: not the source's simulated evaluation, nor its date.
    shipped = json.loads((PRETRAINED / "meta.json").read_text())
    assert meta["evaluation"] is None and meta["live_evaluation"] == report["fine_tuned"]
    assert meta["created"] != shipped["created"] and meta["source"] == str(PRETRAINED)
    assert (out / "interference").is_dir() and (out / "colocation.csv").is_file()


def test_finetune_from_shipped_starts_from_the_shipped_network(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--from shipped``, as ``fit-recogniser`` takes it: it was "shipped/meta.json: not found".
    200 steps end before DQN's first gradient step: said (it printed "fine-tuning for 200 steps"
    and wrote the source's weights as the result)."""
    out = tmp_path / "ft"
    args = ["finetune", "--from", "shipped", "--scenario", "paper#30", "--steps", "200"]
    assert main([*args, "--out", str(out)]) == 0
    assert json.loads((out / "transfer.json").read_text())["source"] == str(PRETRAINED)
    assert "--steps 200 is not above the 1,000 steps DQN gathers" in capsys.readouterr().err


def test_finetune_writes_over_no_profile_and_into_no_checkpoint_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A live fine-tune replaced a profile's colocation.csv (beside its solo.csv) without a word;
    a fine-tune filled the shipped model's folder with its run."""
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "colocation.csv").write_text("kept\n")
    live = ["finetune", "--from", "shipped", "--live", "--steps", "5", "--tasks", "4", "--out", str(prof)]
    assert main(live) == 2
    assert "expected a folder without measurements" in capsys.readouterr().err
    assert (prof / "colocation.csv").read_text() == "kept\n" and len(list(prof.iterdir())) == 1
    before = sorted(p.name for p in PRETRAINED.iterdir())
    sim = ["finetune", "--from", "shipped", "--scenario", "paper#30", "--out", str(PRETRAINED)]
    assert main(sim) == 2
    assert "it holds meta.json, weights.pt" in capsys.readouterr().err
    assert sorted(p.name for p in PRETRAINED.iterdir()) == before


# Slow (24 s; `make test-all` runs it): `make test` keeps `train`'s Ctrl-C and SIGTERM tests, the
# same saving on the simulated path.
@pytest.mark.slow
@pytest.mark.serial  # a signal at a moment of the run: timed against the clock
def test_ctrl_c_in_a_live_finetune_keeps_the_weights_learnt_so_far(tmp_path: Path) -> None:
    """Live steps are real task runs: Ctrl-C said only "rlsched: interrupted" and kept nothing."""
    out = tmp_path / "ft"
    args = [
        "finetune",
        "--from",
        "shipped",
        "--live",
        "--steps",
        "100000",
        "--tasks",
        "10",
        "--eval-tasks",
        "4",
    ]
    # interference/ is written after the profiling; DQN starts two short evaluations later.
    rc, err = interrupt_rlsched([*args, "--out", str(out)], (out / "interference").is_dir, 4.0)
    assert rc == 130, err
    assert f"weights saved in {out / 'last'}; rlsched finetune --from {out / 'last'} --live" in err, err
    meta = load_checkpoint(out / "last", READABLE_FEATURE_VERSIONS)[1]
    assert meta["live_steps"] > 0 and meta["evaluation"] is None


def test_finetune_live_argument_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["finetune", "--from", str(PRETRAINED), "--out", str(tmp_path)]
    assert main([*args, "--live", "--scenario", "paper"]) == 2
    assert "rlsched: error: --scenario: value: expected none with --live" in capsys.readouterr().err
    assert main(args) == 2
    assert "rlsched: error: --scenario: value: expected a target scenario" in capsys.readouterr().err


# Slow (11 s; `make test-all` runs it): `make test` keeps `train`'s Ctrl-C test, the same
# handler on the simulated path.
@pytest.mark.slow
def test_ctrl_c_stops_a_live_demo_promptly() -> None:
    """Lanes are daemon threads: an interrupted live run exits at once with 130, no traceback."""
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    proc = subprocess.Popen(
        [exe, "demo", "--live", "--tasks", "3000", "--seeds", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_able,
    )
    try:
        time.sleep(10.0)  # imports, data generation, agents running (the run itself takes minutes)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "rlsched: interrupted" in err and "Traceback" not in err


def test_live_demo_refuses_a_ground_truth_scheduler_before_any_run() -> None:
    from experiments.live_demo import check_live_schedulers

    check_live_schedulers(["mct+iawp", "least-loaded+first-free"])
    with pytest.raises(ValueError, match="'oracle' reads the simulator's ground truth"):
        check_live_schedulers(["mct+iawp", "least-loaded+first-free", "oracle"])


def _finetune_on_ray(out: Path) -> list[str]:
    """``rlsched finetune --live --backend ray`` of the shipped network into ``out``."""
    return ["finetune", "--from", str(PRETRAINED), "--live", "--backend", "ray", "--out", str(out)]


def test_a_ray_address_nothing_answers_at_is_unavailable_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ray.init retried for minutes at an address nobody listens on (6.5 were seen), after the
    profiling's; now the command says so before any work (exit 4)."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    args = _finetune_on_ray(tmp_path / "ft")
    t0 = time.monotonic()
    assert main(args) == 4
    err = capsys.readouterr().err
    said = "rlsched: unavailable: RAY_ADDRESS 127.0.0.1:1: no Ray cluster answers there (Connection refused)"
    assert err == said + "\n", err
    assert time.monotonic() - t0 < 10 and not (tmp_path / "ft").exists()


def test_a_ray_address_of_no_form_ray_takes_is_bad_input_naming_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ray.init`` raised "Invalid address format": an internal error (exit 1), "a bug"."""
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1")
    args = _finetune_on_ray(tmp_path / "ft")
    assert main(args) == 2
    said = (
        "rlsched: error: RAY_ADDRESS: value: expected auto, local, HOST:PORT or ray://HOST:PORT, "
        "got '127.0.0.1'"
    )
    assert capsys.readouterr().err == said + "\n"


def test_joining_by_address_names_the_token_when_it_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray start`` (Ray 2.60) asks for a token; a machine without it is refused like a wrong
    address, so the one line said "Failed to connect" and nothing else."""
    from runtime.cluster.ray_address import _auth_hint

    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert "RAY_AUTH_MODE=token" in _auth_hint("10.0.0.5:6379")
    assert _auth_hint("auto") == ""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _auth_hint("10.0.0.5:6379") == ""
