"""``rlsched train`` end to end on a small scenario, then the result used by ``simulate``."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from experiments.cli import main
from experiments.cloning import behaviour_clone, collect_teacher
from experiments.train import TrainConfig, train
from experiments.train_evaluation import TEACHERS, evaluate_selector, pick_teacher, score
from models.checkpoint import load_checkpoint, save_checkpoint, write_meta
from models.qnet import NodeScorer
from rlsched.features import FEATURE_VERSION, READABLE_FEATURE_VERSIONS
from rlsched.policies.ldwp import PRETRAINED
from rlsched.policies.registry import make_selector
from rlsched.scenarios.loader import load_scenario
from tests.conftest import interrupt_rlsched

SMALL = """name = "tiny"
seed = 0
[[cluster.nodes]]
name = "p4"
count = 2
cpu_cores = 8
host_mem_gib = 32
gpu_model = "P4"
gpu_count = 2
[[cluster.nodes]]
name = "k80"
cpu_cores = 8
host_mem_gib = 16
gpu_model = "K80"
gpu_count = 1
[workload]
tasks = 80
apps = { intrusion_detection = 1, face_recognition = 1 }
input_mb = [200, 600]
[workload.arrival]
process = "poisson"
rate_per_min = 20
"""


def quick(scenario: str, **kw: object) -> TrainConfig:
    """A run of a few hundred steps with one validation seed."""
    base: dict = dict(
        steps=200, pretrain_episodes=1, bc_epochs=2, learning_starts=50, eval_every=100, eval_seeds=(10_101,)
    )
    return TrainConfig(scenario=scenario, net_arch=(16,), **{**base, **kw})


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    p = tmp_path / "tiny.toml"
    p.write_text(SMALL)
    return p


def test_behaviour_cloning_learns_the_teacher(tiny: Path) -> None:
    cfg = TrainConfig(
        scenario=str(tiny), rate_per_min=None, pretrain="mct", pretrain_episodes=2, bc_epochs=30
    )
    data = collect_teacher(cfg, [load_scenario(cfg.scenario)], ["mct"])
    assert len(data) == 160 and data.widths == [3]
    assert data.mask[0][range(160), data.action].all()  # the teacher only picks feasible nodes
    torch.manual_seed(0)
    net = NodeScorer(data.nodes[0].shape[-1], data.task.shape[-1], data.cluster.shape[-1], [64, 32])
    acc = behaviour_clone(net, data, cfg)
    # Three nodes: chance is about a third; cloning must clearly beat it.
    assert acc > 0.6


def test_cloning_keeps_each_decision_at_its_own_cluster_width(tiny: Path, tmp_path: Path) -> None:
    """Beside a bigger cluster, the 3-node decisions are stored 3 nodes wide (padded to the biggest,
    80 cases beside `large` took 30 GB), and a minibatch padded to its widest decision gives each
    decision the Q-values and loss it has at its own width."""
    wide = tmp_path / "wide.toml"
    wide.write_text(SMALL.replace('name = "tiny"', 'name = "wide"').replace("count = 2", "count = 9"))
    cfg = TrainConfig(scenario=str(tiny), rate_per_min=None, pretrain="mct", pretrain_episodes=1)
    data = collect_teacher(cfg, [load_scenario(str(tiny)), load_scenario(str(wide))], ["mct", "mct"])
    assert data.widths == [3, 10] and len(data) == 160
    assert [len(g) for g in data.nodes] == [80, 80]
    torch.manual_seed(0)
    net = NodeScorer(data.nodes[0].shape[-1], data.task.shape[-1], data.cluster.shape[-1], [16])
    mixed = np.array([0, 100, 1, 150])  # two of each width
    alone = np.array([0, 1])
    with torch.no_grad():
        nodes, task, cluster, mask, action = data.batch(mixed)
        assert nodes.shape[1] == 10 and not mask[[0, 2], 3:].any()
        q_mixed = net(nodes, task, cluster, mask)
        q_alone = net(*data.batch(alone)[:4])
        loss_mixed = torch.nn.functional.cross_entropy(q_mixed, action, reduction="none")
        loss_alone = torch.nn.functional.cross_entropy(q_alone, data.batch(alone)[4], reduction="none")
    assert torch.allclose(q_mixed[[0, 2], :3], q_alone, atol=1e-5)
    assert torch.allclose(loss_mixed[[0, 2]], loss_alone, atol=1e-5)


def test_the_best_teacher_is_chosen_from_every_strong_heuristic(tmp_path: Path) -> None:
    """On the generated training case generations-5, mct-drain completes ~1.3x the best of mct,
    mct-mem, least-loaded and mlsm: the per-case teacher (and the validation reference) is it."""
    assert main(["scenarios", "generate", "--family", "generations", "--count", "1", "--seed", "5",
                 "--out", str(tmp_path / "g")]) == 0  # fmt: skip
    sc = load_scenario(str(tmp_path / "g" / "generations-5.toml"))
    cfg = TrainConfig(scenario=str(tmp_path / "g" / "generations-5.toml"), pretrain="best")
    seeds = [4, 5]  # the trainer's teacher trials for one scenario and four cloning episodes
    thr = {n: evaluate_selector(make_selector(n), sc, cfg, seeds)["throughput_per_min"] for n in TEACHERS}
    assert pick_teacher(sc, cfg, seeds) == "mct-drain"
    assert thr["mct-drain"] > 1.2 * max(thr[n] for n in ("mct", "mct-mem", "least-loaded", "mlsm"))


def test_train_writes_verified_checkpoints_used_by_simulate(tiny: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    cfg = TrainConfig(
        scenario=str(tiny),
        rate_per_min=None,
        steps=400,
        pretrain_episodes=1,
        bc_epochs=5,
        learning_starts=100,
        eval_every=200,
        eval_seeds=(10_101,),
        net_arch=(32, 16),
    )
    summary = train(cfg, out)
    for sub in ("best", "last"):
        _, meta = load_checkpoint(out / sub, FEATURE_VERSION)
        assert meta["feature_version"] == FEATURE_VERSION and meta["net_arch"] == [32, 16]
        assert meta["config"]["scenario"] == str(tiny) and meta["seed"] == 0
    history = json.loads((out / "history.json").read_text())
    assert [h["step"] for h in history] == [0.0, 200.0, 400.0]
    _, pre = load_checkpoint(out / "pretrained", FEATURE_VERSION)
    assert pre["dqn_steps"] == 0 and pre["bc_accuracy"] is not None
    assert summary["after_dqn"]["throughput_per_min"] > 0
    assert list((out / "tb").rglob("events.out.tfevents.*")), "no TensorBoard event file"
    # The trained network as stage-1 selector, through the CLI.
    assert (
        main(
            [
                "simulate",
                "--scenario",
                str(tiny),
                "--scheduler",
                "ldwp+mlsm",
                "--model",
                str(out / "best"),
                "--json",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert res["tasks_lost"] == 0 and res["tasks_completed"] == 80


def test_simulate_with_a_bad_model_exits_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["simulate", "--scheduler", "ldwp", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"rlsched: error: {tmp_path / 'meta.json'}: <file>: expected a checkpoint's meta.json"
    )
    assert "not found" in err and err.strip().endswith("the checkpoint of --model")


def test_training_from_an_earlier_versions_network_keeps_its_features(tiny: Path, tmp_path: Path) -> None:
    """A network of an earlier feature version (2, the one shipped until 2026-12-05): fine-tuning or
    resuming it feeds it version 2 and its checkpoints say so (a later build still reads them)."""
    state, shipped = load_checkpoint(PRETRAINED, READABLE_FEATURE_VERSIONS)
    older = tmp_path / "v2"
    save_checkpoint(
        older, state, {**{k: v for k, v in shipped.items() if k != "files"}, "feature_version": 2}
    )
    assert FEATURE_VERSION != 2
    cfg = TrainConfig(
        scenario=str(tiny),
        rate_per_min=None,
        steps=200,
        learning_starts=100,
        eval_every=200,
        eval_seeds=(10_101,),
        net_arch=tuple(shipped["net_arch"]),
    )
    train(cfg, tmp_path / "ft", start_weights=older)
    for sub in ("best", "last"):
        _, meta = load_checkpoint(tmp_path / "ft" / sub, READABLE_FEATURE_VERSIONS)
        assert meta["feature_version"] == 2


def test_finetune_reports_zero_shot_and_fine_tuned_on_a_bigger_cluster(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.finetune import finetune
    from experiments.train_summary import finetune_lines

    src = tmp_path / "src"
    train(
        TrainConfig(
            scenario=str(tiny),
            rate_per_min=None,
            steps=0,
            pretrain_episodes=1,
            bc_epochs=5,
            eval_seeds=(10_101,),
            net_arch=(32, 16),
        ),
        src,
    )
    bigger = tmp_path / "bigger.toml"
    bigger.write_text(SMALL.replace("count = 2", "count = 6").replace('name = "tiny"', 'name = "bigger"'))
    # The source ran 400 DQN steps: fine-tuning still runs its own 300 (it counted the source's
    # steps once, and then did nothing).
    meta_path = src / "best" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["dqn_steps"] = 400
    write_meta(meta_path.parent, meta)
    import torch

    import experiments.finetune as ft

    threads: list[int] = []

    def evaluate(*a: object, **k: object) -> dict:  # the real one, noting the thread count it ran on
        threads.append(torch.get_num_threads())
        return evaluate_network(*a, **k)

    evaluate_network, host = ft.evaluate, torch.get_num_threads()
    (tmp_path / "ft").mkdir()
    (tmp_path / "ft" / "notes.txt").write_text("the user's, before the run")
    os.utime(tmp_path / "ft" / "notes.txt", (time.time() - 3600,) * 2)  # written an hour before
    started = time.time()
    torch.set_num_threads(3)  # a host with more cores than training uses
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ft, "evaluate", evaluate)
            report = finetune(src / "best", str(bigger), tmp_path / "ft", steps=300, seed=1)
    finally:
        torch.set_num_threads(host)
    # The zero-shot figures are taken on the thread count training evaluates step 0 on.
    assert threads == [TrainConfig.threads], threads
    assert [h["step"] for h in report["history"]] == [0.0, 300.0]
    assert report["target_nodes"] == 7 and report["source_scenario"] == str(tiny)
    for key in ("zero_shot", "mct", "fine_tuned_last", "fine_tuned_best"):
        assert report[key]["throughput_per_min"] > 0
    assert json.loads((tmp_path / "ft" / "transfer.json").read_text())["target_nodes"] == 7
    # The figures called best are those of the network best/ holds, chosen by training's own rule.
    best = json.loads((tmp_path / "ft" / "best" / "meta.json").read_text())
    assert report["fine_tuned_best"]["step"] == best["dqn_steps"]
    lines = finetune_lines(report, tmp_path / "ft", started)
    # The "wrote" line names what the run wrote, not the note the folder held (it listed it).
    assert (
        lines[-1].startswith(f"wrote {tmp_path / 'ft'}: best/, history.json, last/, ")
        and "notes" not in lines[-1]
    )
    assert lines[0] == f"finetune: {bigger} (7 nodes), validation seeds 10001, 10002, 10003 for each", lines
    assert lines[-2].lstrip().startswith(f"fine-tuned best/ (step {best['dqn_steps']:,})"), lines
    # Progress from the first second: the evaluations before training say what they do.
    err = capsys.readouterr().err
    assert err.index("finetune: zero-shot evaluation of") < err.index("finetune: mct ")


@pytest.mark.serial  # a signal at a moment of the run: timed against the clock
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_the_weights_learnt_so_far(tiny: Path, tmp_path: Path, sig: int) -> None:
    """SIGINT during DQN: exit 130, last/ holds the current (unevaluated) weights, and the
    message says how to resume from them. SIGTERM (timeout, systemd, Slurm) the same: it saved
    nothing and said nothing (exit 143)."""
    out = tmp_path / "run"
    args = ["train", "--scenario", str(tiny), "--steps", "1000000", "--out", str(out)]
    # pretrained/ is written when cloning is done and DQN starts.
    rc, err = interrupt_rlsched(args, out / "pretrained" / "meta.json", 3.0, sig)
    assert rc == 130, err
    assert f"continue with --resume {out / 'last'}" in err and "Traceback" not in err
    _, meta = load_checkpoint(out / "last", FEATURE_VERSION)
    assert meta["dqn_steps"] > 0 and meta["evaluation"] is None


def test_resume_continues_the_step_count_and_keeps_earlier_evaluations(tiny: Path, tmp_path: Path) -> None:
    """A run stopped at 200 of 400 steps and resumed from last/: steps go on from 200, history
    keeps the first evaluations, and best/ is replaced only by a better evaluation."""
    out = tmp_path / "run"
    base = dict(
        scenario=str(tiny),
        rate_per_min=None,
        pretrain_episodes=1,
        bc_epochs=5,
        learning_starts=50,
        eval_every=100,
        eval_seeds=(10_101,),
        net_arch=(32, 16),
    )
    train(TrainConfig(steps=200, **base), out)  # type: ignore[arg-type]
    first = json.loads((out / "history.json").read_text())
    best_before = load_checkpoint(out / "best", FEATURE_VERSION)[1]
    summary = train(TrainConfig(steps=400, **base), out, resume=out / "last")  # type: ignore[arg-type]
    history = json.loads((out / "history.json").read_text())
    assert [e["step"] for e in history] == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert history[:3] == first
    assert load_checkpoint(out / "last", FEATURE_VERSION)[1]["dqn_steps"] == 400
    best = load_checkpoint(out / "best", FEATURE_VERSION)[1]
    best_score = max(score(e) for e in history)
    assert score(best["evaluation"]) == pytest.approx(best_score)
    assert best["dqn_steps"] >= best_before["dqn_steps"]
    assert summary["after_dqn"]["step"] == 400.0
    # The summary's first row is the resumed network at its own step, not "cloned (step 0)".
    from experiments.train_summary import stage1_lines

    assert summary["started_from"] == "resumed"
    rows = [ln.split("  ")[1] for ln in stage1_lines(summary, out, "throughput", 0.0)[3:6]]
    assert rows == ["resumed (step 200)", f"best/ (step {best['dqn_steps']:,})", "last/ (step 400)"], rows
    # --steps is the total even when the rest is no multiple of train_freq (4): 402, not 404.
    train(TrainConfig(steps=402, **base), out, resume=out / "last")  # type: ignore[arg-type]
    assert load_checkpoint(out / "last", FEATURE_VERSION)[1]["dqn_steps"] == 402


@pytest.mark.serial  # a signal at a moment of the run: timed against the clock
def test_ctrl_c_in_finetune_names_the_command_that_goes_on(tiny: Path, tmp_path: Path) -> None:
    """finetune has no --resume: its Ctrl-C line gives the train command that continues from the
    weights it saved, which runs."""
    src = tmp_path / "src"
    cfg = dict(scenario=str(tiny), rate_per_min=None, pretrain_episodes=1, bc_epochs=5, eval_seeds=(10_101,))
    train(TrainConfig(steps=0, **cfg), src)  # type: ignore[arg-type]
    out = tmp_path / "ft"
    args = ["finetune", "--from", str(src / "best"), "--scenario", str(tiny), "--steps", "1000000"]
    rc, err = interrupt_rlsched([*args, "--out", str(out)], out / "best" / "meta.json", 2.0)
    assert rc == 130, err
    go_on = f"rlsched train --scenario {tiny} --resume {out / 'last'} --out {out} --steps 1000000"
    assert go_on in err and "continue with --resume" not in err and "Traceback" not in err, err
    done = load_checkpoint(out / "last", FEATURE_VERSION)[1]["dqn_steps"]
    assert done > 0
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    cmd = [*go_on.split()[1:-1], str(done + 20)]
    r = subprocess.run([exe, *cmd], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"resumed (step {done:,})" in r.stdout, r.stderr[-2000:]


@pytest.mark.serial  # a signal at a moment of the run: timed against the clock
def test_a_run_killed_with_sigkill_resumes_to_the_same_final_step_count(tiny: Path, tmp_path: Path) -> None:
    """kill -9 after the first evaluations (no handler runs), then --resume from last/: the run
    ends at the configured total with one history, not a second count from zero."""
    out = tmp_path / "run"
    kw = (
        f"scenario={str(tiny)!r}, rate_per_min=None, steps=1200, pretrain_episodes=1, bc_epochs=5, "
        "learning_starts=50, eval_every=200, eval_seeds=(10_101,), net_arch=(32, 16)"
    )
    code = f"from experiments.train import TrainConfig, train; train(TrainConfig({kw}), {str(out)!r})"
    log = (tmp_path / "stderr.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            alive = proc.poll() is None and time.monotonic() < deadline
            assert alive, (tmp_path / "stderr.log").read_text()[-2000:]
            try:
                if json.loads((out / "last" / "meta.json").read_text())["dqn_steps"] >= 400:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        log.close()
    killed_at = load_checkpoint(out / "last", FEATURE_VERSION)[1]["dqn_steps"]
    assert 400 <= killed_at < 1200
    cfg = TrainConfig(
        scenario=str(tiny),
        rate_per_min=None,
        steps=1200,
        pretrain_episodes=1,
        bc_epochs=5,
        learning_starts=50,
        eval_every=200,
        eval_seeds=(10_101,),
        net_arch=(32, 16),
    )
    train(cfg, out, resume=out / "last")
    steps = [e["step"] for e in json.loads((out / "history.json").read_text())]
    assert steps == [float(s) for s in range(0, 1201, 200)]
    assert load_checkpoint(out / "last", FEATURE_VERSION)[1]["dqn_steps"] == 1200


def test_one_network_trains_on_several_scenarios(tiny: Path, tmp_path: Path) -> None:
    """Comma-separated entries: one network, episodes from each, best/ chosen on the mean over
    scenarios of throughput relative to the teacher (so a scenario's scale does not weigh)."""
    big = tmp_path / "bigger.toml"
    big.write_text(SMALL.replace('name = "tiny"', 'name = "bigger"').replace("count = 2", "count = 5"))
    cfg = quick(f"{tiny},{big}")
    summary = train(cfg, tmp_path / "run")
    names = (str(tiny), str(big))  # figures are keyed by the entries as written
    assert set(summary["reference"]) == {"selector", *names}
    assert summary["reference"]["selector"] == "mct-mem"
    for h in summary["best"]:
        assert set(h["scenarios"]) == set(names)
        rel = np.mean(
            [
                h["scenarios"][s]["throughput_per_min"] / summary["reference"][s]["throughput_per_min"]
                for s in names
            ]
        )
        assert h["relative_throughput"] == pytest.approx(rel)
    with pytest.raises(ValueError, match="scenario"):
        train(TrainConfig(scenario=" , "), tmp_path / "none")


def test_the_latency_objective_chooses_on_latency_but_never_on_completing_less() -> None:
    fast_but_short = {"relative_throughput": 0.95, "relative_p95": 0.5, "relative_latency": 0.5}
    slower_complete = {"relative_throughput": 1.0, "relative_p95": 0.9, "relative_latency": 0.8}
    quicker = {"relative_throughput": 0.995, "relative_p95": 0.8, "relative_latency": 0.7}
    assert score(quicker, "latency") > score(slower_complete, "latency") > score(fast_but_short, "latency")
    # The throughput objective ranks by throughput whatever the latency.
    assert score(slower_complete) > score(quicker) > score(fast_but_short)


def test_train_with_the_latency_objective_records_relative_latency(tiny: Path, tmp_path: Path) -> None:
    cfg = quick(str(tiny), objective="latency")
    summary = train(cfg, tmp_path / "run")
    ref = summary["reference"][str(tiny)]["latency_mean_s"]
    for h in summary["best"]:
        assert h["relative_latency"] == pytest.approx(h["latency_mean_s"] / ref)
    best = max(summary["best"], key=lambda h: score(h, "latency"))
    meta = json.loads((tmp_path / "run" / "best" / "meta.json").read_text())
    assert meta["config"]["objective"] == "latency"
    assert meta["evaluation"]["step"] == best["step"]  # best/ is the latency-best evaluation


def test_the_best_teacher_is_the_heuristic_with_the_most_throughput_on_the_scenario(tiny: Path) -> None:
    """``pretrain = "best"``: each scenario is taught by (and measured against) the heuristic
    selector that completes the most there, not one fixed heuristic."""
    sc = load_scenario(str(tiny))
    cfg = quick(str(tiny), pretrain="best")
    seeds = [3, 4]
    thr = {n: evaluate_selector(make_selector(n), sc, cfg, seeds)["throughput_per_min"] for n in TEACHERS}
    assert thr[pick_teacher(sc, cfg, seeds)] == max(thr.values())
    assert pick_teacher(sc, quick(str(tiny), pretrain="mct"), seeds) == "mct"


def test_validation_scenarios_choose_best_and_training_never_sees_them(tiny: Path, tmp_path: Path) -> None:
    """With ``validation_scenario`` the evaluations that choose ``best/`` (and the reference they
    are measured against) run on those cases only; the training cases are not evaluated."""
    other = tmp_path / "other.toml"
    other.write_text(SMALL.replace('name = "tiny"', 'name = "other"').replace("count = 2", "count = 4"))
    cfg = quick(str(tiny), validation_scenario=str(other), pretrain="best", steps=100)
    summary = train(cfg, tmp_path / "run")
    assert set(summary["reference"]) == {"selector", str(other)}
    assert summary["reference"][str(other)]["selector"] in TEACHERS
    first = summary["best"][0]
    ref = summary["reference"][str(other)]["throughput_per_min"]
    assert first["relative_throughput"] == pytest.approx(first["throughput_per_min"] / ref)


def test_train_on_generated_cases_obeys_the_seed_and_family_rules(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``--scenario DIR`` trains on a generated training set and ``--validation-scenario DIR``
    chooses best/ on a validation set; a test set (or test seeds) in either place is refused
    before anything runs, naming the flag."""
    from experiments.scenario_gen.generate import generate_set

    train_dir, val_dir, test_dir = tmp_path / "tr", tmp_path / "va", tmp_path / "te"
    generate_set(train_dir, 1, 5, "generations", "test")
    generate_set(val_dir, 1, 10_005, "generations", "test")
    generate_set(test_dir, 1, 20_005, "generations", "test")
    common = ["train", "--steps", "0", "--pretrain", "none", "--seed", "1"]
    bad = main([*common, "--scenario", f"{test_dir}#30", "--out", str(tmp_path / "x")])
    assert bad == 2 and "--scenario" in capsys.readouterr().err
    bad = main(
        [
            *common,
            "--scenario",
            f"{train_dir}#30",
            "--validation-scenario",
            f"{train_dir}#30",
            "--out",
            str(tmp_path / "y"),
        ]
    )
    assert bad == 2 and "--validation-scenario" in capsys.readouterr().err
    cfg = quick(f"{train_dir}#30", validation_scenario=f"{val_dir}#30", steps=0)
    summary = train(cfg, tmp_path / "run")
    (val_case,) = [k for k in summary["reference"] if k != "selector"]
    assert val_case.startswith(str(val_dir))


def test_an_out_that_holds_a_run_is_refused_unless_the_run_is_resumed(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second ``train`` into the folder of a finished run overwrote its ``best/`` and
    ``history.json`` without a word; now it is refused before anything is written, and
    ``--resume RUN/last`` still continues the run there."""
    out = tmp_path / "run"
    args = ["train", "--scenario", str(tiny), "--pretrain", "none", "--out", str(out)]
    assert main([*args, "--steps", "100"]) == 0
    history = (out / "history.json").read_bytes()
    capsys.readouterr()
    assert main([*args, "--steps", "200"]) == 2
    err = capsys.readouterr().err
    assert f"--out: value: expected a folder without an earlier run, got '{out}'; it holds best/" in err, err
    assert (out / "history.json").read_bytes() == history
    assert main([*args, "--steps", "200", "--resume", str(out / "last")]) == 0
    assert json.loads((out / "history.json").read_text())[-1]["step"] == 200


def test_resume_without_scenario_goes_on_with_the_checkpoints_run(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``train --resume DIR/last`` as the interrupt message says it (no ``--scenario``) trained on
    the default ``paper``: ``history.json`` and ``best/`` then compared evaluations of two cases."""
    from experiments.cli import main

    out = tmp_path / "run"
    assert (
        main(["train", "--scenario", f"{tiny}#40", "--steps", "200", "--pretrain", "none", "--out", str(out)])
        == 0
    )
    capsys.readouterr()
    assert main(["train", "--resume", str(out / "last"), "--steps", "300", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"going on with its run's --scenario {tiny}#40" in err
    # Without a terminal there is no bar: each evaluation is a line (a log file stayed empty).
    assert "DQN step 300 of 300: validation " in err, err
    assert load_checkpoint(out / "last", FEATURE_VERSION)[1]["config"]["scenario"] == f"{tiny}#40"
