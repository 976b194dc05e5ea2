"""The ``rlsched`` command line."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.configs import (
    DemoConfig,
    EvalConfig,
    FinetuneConfig,
    LiveFinetuneConfig,
    PlacerTrainConfig,
    TrainConfig,
    default,
)
from experiments.suites import SUITE_NAMES, TEST_SEED_BASE
from models.checkpoint import CheckpointError
from rlsched.footprint import RunTooLarge, check_fits
from rlsched.scenarios.loader import ScenarioError, list_scenarios, load_scenario
from rlsched.textfile import TextFileError

if TYPE_CHECKING:
    from rlsched.metrics import RunMetrics
    from rlsched.policies.registry import PolicyOptions
    from rlsched.scenarios.spec import Scenario
    from runtime.cluster.config import LiveClusterSpec

#: The simulated demo's scenario; at 60 tasks/min unless ``--rate`` says otherwise.
DEMO = DemoConfig()
DEMO_SCENARIO = "paper"
DEMO_SCHEDULERS = (
    "random+speedup",
    "round-robin+speedup",
    "least-loaded+speedup",
    "pats+speedup",
    "mlsm+mlsm",
    "mct+speedup",
    "oracle+speedup",
)


def _int_at_least(low: int) -> Callable[[str], int]:
    """argparse type: an integer >= ``low`` (argparse names the flag in its error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value

    return parse


def _positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def _nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    if text.strip() in ("0", "0.0"):
        return 0.0
    return _positive_float(text)


def _fraction(text: str) -> float:
    """argparse type: a share in (0, 1]."""
    value = _positive_float(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text}")
    return value


_SEED = _int_at_least(0)
_COUNT = _int_at_least(1)
_STEPS = _int_at_least(0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlsched", description="Learning scheduler for heterogeneous GPU clusters."
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("simulate", help="run a scenario in the simulator with one scheduler")
    s.add_argument(
        "--scenario", default="paper", help="built-in name or path of a TOML file (default: paper)"
    )
    s.add_argument(
        "--scheduler", default="mct", help="SELECTOR[+PLACER], e.g. mct+mlsm; a bare selector uses 'speedup'"
    )
    s.add_argument(
        "--seed", type=_SEED, default=None, help="seed for tasks and drift (default: the scenario's)"
    )
    s.add_argument("--rate", type=_positive_float, default=None, help="arrival rate override, tasks/min")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    s.add_argument("--strict", action="store_true", help="exit 3 when any task was unschedulable")
    s.add_argument(
        "--model", default=None, help="checkpoint directory for the ldwp selector (default: shipped)"
    )
    s.add_argument(
        "--placer-model",
        default=None,
        help="placer checkpoint for iawp-rl (rlsched train --stage 2; default: shipped)",
    )

    t = sub.add_parser(
        "train",
        help="train LDWP (stage 1: cloning, then masked DQN) and/or the learned placer iawp-rl (stage 2)",
    )
    t.add_argument(
        "--stage",
        choices=("1", "2", "both"),
        default="1",
        help="1: the LDWP network; 2: the placer iawp-rl (random search); both: stage 1, then stage 2 "
        "with the new network as selector, into OUT/stage1 and OUT/stage2 (default: 1)",
    )
    t.add_argument(
        "--scenario",
        default=None,
        help="built-in name or path, or several comma-separated NAME[@RATE][#TASKS] entries to train "
        f"on all of them (default: {default(TrainConfig, 'scenario')} for stage 1; "
        f"{default(PlacerTrainConfig, 'scenarios')} for stage 2)",
    )
    t.add_argument(
        "--iterations",
        type=_COUNT,
        default=None,
        help=f"stage 2: random-search iterations (default: {default(PlacerTrainConfig, 'iterations')})",
    )
    t.add_argument(
        "--selector",
        default=None,
        help="stage 2: node selector while the placer trains "
        f"(default: {default(PlacerTrainConfig, 'selector')}; "
        "with --stage both: the new LDWP)",
    )
    t.add_argument(
        "--jobs",
        type=_COUNT,
        default=None,
        help=f"stage 2: worker processes (default: {default(PlacerTrainConfig, 'jobs')})",
    )
    t.add_argument(
        "--rate",
        type=_positive_float,
        default=None,
        help="arrival rate override, tasks/min (default: the scenario's)",
    )
    t.add_argument(
        "--steps",
        type=_STEPS,
        default=default(TrainConfig, "steps"),
        help=f"stage 1: DQN environment steps (default: {default(TrainConfig, 'steps')})",
    )
    t.add_argument("--seed", type=_SEED, default=default(TrainConfig, "seed"))
    t.add_argument(
        "--pretrain",
        default=default(TrainConfig, "pretrain"),
        help="teacher selector for behaviour cloning, or 'none' "
        f"(default: {default(TrainConfig, 'pretrain')})",
    )
    t.add_argument("--out", required=True, help="output directory (best/, last/, history.json, summary.json)")
    t.add_argument(
        "--resume",
        default=None,
        help="checkpoint directory to start from (stage 1: skips cloning; stage 2: the placer's parameters)",
    )
    t.add_argument(
        "--half-life",
        type=_nonneg_float,
        default=default(TrainConfig, "half_life_s"),
        help="semi-MDP discount: simulated seconds after which a reward counts half "
        f"(default: {default(TrainConfig, 'half_life_s'):g}); "
        f"0 = discount per decision (gamma {default(TrainConfig, 'gamma')})",
    )
    t.add_argument(
        "--n-steps",
        type=_COUNT,
        default=default(TrainConfig, "n_steps"),
        help="decisions per return (n-step targets, discounted by elapsed time; "
        f"default: {default(TrainConfig, 'n_steps')})",
    )
    t.add_argument(
        "--double-q",
        action=argparse.BooleanOptionalAction,
        default=default(TrainConfig, "double_q"),
        help="double DQN targets (default: on)",
    )
    t.add_argument(
        "--learning-rate",
        type=_positive_float,
        default=default(TrainConfig, "learning_rate"),
        help=f"DQN learning rate (default: {default(TrainConfig, 'learning_rate'):g})",
    )

    d = sub.add_parser(
        "demo",
        help="compare schedulers over several seeds: in the simulator, or on the live runtime (--live)",
    )
    d.add_argument("--scenario", default=DEMO_SCENARIO, help="simulated scenario (default: paper)")
    d.add_argument("--strict", action="store_true", help="exit 3 when any task was unschedulable")
    d.add_argument(
        "--rate",
        type=_positive_float,
        default=None,
        help=f"arrival rate, tasks per minute (default: {DEMO.paper_rate_per_min:g} on paper, "
        "the scenario's own "
        f"elsewhere; {DEMO.live_rate_per_min:g} live)",
    )
    d.add_argument(
        "--seeds",
        type=_COUNT,
        default=None,
        help=f"number of seeds (default: {DEMO.seeds} simulated, {DEMO.live_seeds} live)",
    )
    d.add_argument(
        "--schedulers",
        default=None,
        help="comma-separated specs (default: the baselines, and ldwp+speedup, ldwp+iawp when a model ships; "
        "live: ldwp+iawp,mct+mlsm)",
    )
    d.add_argument("--live", action="store_true", help="run real kernels on the local live runtime")
    d.add_argument(
        "--backend", choices=("numpy", "cupy"), default=None, help="live backend (default: automatic)"
    )
    d.add_argument(
        "--tasks",
        type=_COUNT,
        default=DEMO.live_tasks,
        help=f"live: tasks per run (default: {DEMO.live_tasks})",
    )
    d.add_argument(
        "--streams",
        type=_COUNT,
        default=DEMO.live_streams,
        help=f"live: video streams (default: {DEMO.live_streams})",
    )
    d.add_argument("--cluster", default=None, help="live: cluster file (TOML; default: the embedded cluster)")

    f = sub.add_parser("finetune", help="run a trained LDWP network on another cluster, then fine-tune it")
    f.add_argument("--from", dest="source", required=True, help="checkpoint directory of the trained network")
    f.add_argument(
        "--scenario", default=None, help="target scenario (built-in name or path); not with --live"
    )
    f.add_argument("--rate", type=_positive_float, default=None, help="arrival rate override, tasks/min")
    f.add_argument(
        "--steps",
        type=_STEPS,
        default=None,
        help=f"DQN steps on the target (default: {default(FinetuneConfig, 'steps')} simulated, "
        f"{default(LiveFinetuneConfig, 'steps')} live)",
    )
    f.add_argument("--seed", type=_SEED, default=default(FinetuneConfig, "seed"))
    f.add_argument("--out", required=True, help="output directory (checkpoints, transfer.json)")
    f.add_argument("--live", action="store_true", help="fine-tune on real executions of the live runtime")
    f.add_argument(
        "--backend",
        choices=("local", "ray"),
        default=default(LiveFinetuneConfig, "cluster_backend"),
        help=f"live cluster backend (default: {default(LiveFinetuneConfig, 'cluster_backend')})",
    )
    f.add_argument(
        "--device-backend",
        choices=("numpy", "cupy"),
        default=None,
        help="live device backend (default: automatic)",
    )
    f.add_argument(
        "--tasks",
        type=_COUNT,
        default=default(LiveFinetuneConfig, "tasks_per_episode"),
        help="live: tasks per training episode "
        f"(default: {default(LiveFinetuneConfig, 'tasks_per_episode')})",
    )
    f.add_argument(
        "--eval-tasks",
        type=_COUNT,
        default=default(LiveFinetuneConfig, "eval_tasks"),
        help=f"live: tasks per evaluation run (default: {default(LiveFinetuneConfig, 'eval_tasks')})",
    )
    f.add_argument("--cluster", default=None, help="live: cluster file (TOML; default: the embedded cluster)")

    sub.add_parser("scenarios", help="list the built-in scenarios with their offered load")

    sv = sub.add_parser("serve", help="run the live scheduling service (HTTP API, tenants, durable queue)")
    sv.add_argument("--config", required=True, help="service config file (TOML: tenants, scheduler, queue)")
    sv.add_argument("--host", default=None, help="address to bind (default: the config's, else 127.0.0.1)")
    sv.add_argument("--port", type=int, default=None, help="TCP port (default: the config's, else 8470)")
    sv.add_argument("--db", default=None, help="SQLite queue file (default: the config's)")
    sv.add_argument(
        "--scheduler", default=None, help="SELECTOR+PLACER (default: the config's, else ldwp+iawp)"
    )
    sv.add_argument(
        "--backend",
        choices=("local", "ray"),
        default=None,
        help="cluster backend: node agents in this process, or one per Ray node (default: the config's, "
        "else local)",
    )
    sv.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to join with --backend ray (default: the config's; none: start a local Ray)",
    )

    def _client_args(c: argparse.ArgumentParser) -> None:
        c.add_argument("--url", default="http://127.0.0.1:8470", help="service URL (default: %(default)s)")
        c.add_argument(
            "--token-env",
            default="RLSCHED_TOKEN",
            help="environment variable holding the bearer token (default: RLSCHED_TOKEN; not a flag, "
            "so it stays out of the process list)",
        )

    su = sub.add_parser("submit", help="submit tasks to a running service")
    _client_args(su)
    su.add_argument("--app", required=True, help="app of the tasks")
    su.add_argument("--stream", type=_SEED, default=0, help="stream id (default 0)")
    su.add_argument("--chunks", type=_COUNT, default=1, help="chunks 0..N-1 of the stream (default 1)")
    su.add_argument("--priority", type=int, default=0)
    su.add_argument("--wait", action="store_true", help="wait until every task has finished")
    st = sub.add_parser("status", help="a task's state on a running service")
    _client_args(st)
    st.add_argument("id", type=int)
    ca = sub.add_parser("cancel", help="cancel a queued task on a running service")
    _client_args(ca)
    ca.add_argument("id", type=int)
    tp = sub.add_parser("top", help="live view of a running service: queue, devices, throughput")
    _client_args(tp)
    tp.add_argument("--once", action="store_true", help="print one frame and exit")
    tp.add_argument("--interval", type=_positive_float, default=1.0, help="seconds between frames")

    e = sub.add_parser(
        "evaluate",
        help="compare schedulers over scenarios and seeds against the capacity bound; write a report",
    )
    e.add_argument("--suite", choices=SUITE_NAMES, default=None, help="a prepared evaluation (see README)")
    e.add_argument("--scenarios", default=None, help="comma-separated built-in names or scenario files")
    e.add_argument("--schedulers", default=None, help="comma-separated SELECTOR[+PLACER] specs")
    e.add_argument("--seeds", type=_COUNT, default=None, help="number of seeds (default 3)")
    e.add_argument(
        "--first-seed",
        type=_SEED,
        default=None,
        help=f"first seed (default {TEST_SEED_BASE}: the test set, disjoint from training and validation)",
    )
    e.add_argument("--rate", type=_positive_float, default=None, help="arrival rate override, tasks/min")
    e.add_argument("--model", default=None, help="LDWP checkpoint for ldwp (default: shipped)")
    e.add_argument(
        "--placer-model",
        default=None,
        help="placer checkpoint for iawp-rl (rlsched train --stage 2; default: shipped)",
    )
    e.add_argument("--jobs", type=_COUNT, default=None, help="worker processes (default: the cores)")
    e.add_argument(
        "--timeout",
        type=_positive_float,
        default=default(EvalConfig, "timeout_s"),
        help=f"seconds one run may take (default {default(EvalConfig, 'timeout_s'):g})",
    )
    e.add_argument(
        "--runs",
        action="append",
        default=[],
        help="NAME=DIR of a training run whose curves to plot (repeatable)",
    )
    e.add_argument(
        "--convergence-steps",
        type=_STEPS,
        default=default(EvalConfig, "convergence_steps"),
        help="--suite paper without --runs: DQN steps of each convergence run "
        f"(0 skips; default {default(EvalConfig, 'convergence_steps')})",
    )
    e.add_argument("--out", required=True, help="output folder (report.md, report.html, results.*, img/)")

    i = sub.add_parser("interference", help="co-location interference model: fit, evaluate")
    isub = i.add_subparsers(dest="action", required=True)
    fi = isub.add_parser("fit", help="fit a model on co-location CSVs and save it")
    fi.add_argument(
        "--data", action="append", required=True, help="device,kind,partner,norm_throughput CSV (repeatable)"
    )
    fi.add_argument("--method", choices=("ncf", "svd", "mean"), default="ncf", help="model (default: ncf)")
    fi.add_argument("--seed", type=_SEED, default=0)
    fi.add_argument("--out", required=True, help="checkpoint directory to write")
    ev = isub.add_parser("evaluate", help="error of a saved model on a co-location CSV")
    ev.add_argument("--model", required=True, help="checkpoint directory written by 'interference fit'")
    ev.add_argument("--data", required=True, help="device,kind,partner,norm_throughput CSV")
    ev.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    pr = sub.add_parser(
        "profile", help="measure kernel pairs co-running on the default live cluster's GPUs; write CSVs"
    )
    pr.add_argument(
        "--backend", choices=("numpy", "cupy"), default=None, help="device backend (default: automatic)"
    )
    pr.add_argument(
        "--apps",
        default="intrusion_detection,video_synopsis",
        help="comma-separated apps whose GPU kinds are measured (default: the two video apps)",
    )
    pr.add_argument(
        "--fraction", type=_fraction, default=1.0, help="share of (device, kind, partner) triples (default 1)"
    )
    pr.add_argument("--seed", type=_SEED, default=0, help="seed choosing the measured triples")
    pr.add_argument("--cluster", default=None, help="live cluster file (TOML; default: the embedded cluster)")
    pr.add_argument("--out", required=True, help="output directory (colocation.csv, solo.csv)")
    return p


def _demo_schedulers() -> list[str]:
    from models import PRETRAINED_LDWP

    extra = ["ldwp+speedup", "ldwp+iawp"] if (PRETRAINED_LDWP / "meta.json").is_file() else []
    return [*DEMO_SCHEDULERS[:-1], *extra, DEMO_SCHEDULERS[-1]]


def _policy_options(model_dir: str | None, placer_dir: str | None = None) -> PolicyOptions:
    """The checkpoints ``ldwp`` and ``iawp-rl`` use (``None``: shipped); a placer checkpoint is
    verified now, before any run."""
    from rlsched.policies.registry import PolicyOptions

    if placer_dir is not None:
        from rlsched.policies.iawp_rl import load_params

        load_params(placer_dir)
    return PolicyOptions(model_dir, placer_dir)


#: Flags of ``train`` that only one stage reads.
_STAGE1_FLAGS = (
    "--steps",
    "--pretrain",
    "--half-life",
    "--n-steps",
    "--double-q",
    "--no-double-q",
    "--learning-rate",
)
_STAGE2_FLAGS = ("--iterations", "--selector", "--jobs")


def _warn_unused(argv: Sequence[str], flags: Sequence[str], stage: str) -> None:
    """Say which given flags the chosen stage ignores (a silent no-op misleads)."""
    given = [f for f in flags if any(a == f or a.startswith(f + "=") for a in argv)]
    if given:
        print(f"rlsched: warning: {', '.join(given)} ignored with --stage {stage}", file=sys.stderr)


def _cmd_train(args: argparse.Namespace) -> int:
    argv = getattr(args, "argv", [])
    if args.stage == "1":
        _warn_unused(argv, _STAGE2_FLAGS, "1")
    elif args.stage == "2":
        _warn_unused(argv, _STAGE1_FLAGS, "2")
    if args.stage == "2":
        return _train_stage2(args, args.out, args.selector or "mct", None, init=args.resume)
    out = Path(args.out) / "stage1" if args.stage == "both" else Path(args.out)
    rc = _train_stage1(args, out)
    if rc != 0 or args.stage == "1":
        return rc
    # --resume was stage 1's; the placer starts from iawp-pass's rule.
    return _train_stage2(
        args, Path(args.out) / "stage2", args.selector or "ldwp", str(out / "best"), init=None
    )


def _train_stage1(args: argparse.Namespace, out: Path) -> int:
    from experiments.train import TrainConfig, train

    if args.n_steps > 1 and not args.half_life:
        print("rlsched: error: --n-steps: n-step returns need --half-life > 0", file=sys.stderr)
        return 2

    cfg = TrainConfig(
        scenario=args.scenario or TrainConfig.scenario,
        rate_per_min=args.rate,
        steps=args.steps,
        seed=args.seed,
        pretrain=None if args.pretrain == "none" else args.pretrain,
        half_life_s=args.half_life or None,
        double_q=args.double_q,
        learning_rate=args.learning_rate,
        n_steps=args.n_steps,
    )
    from experiments.train import training_scenarios

    try:
        for sc in training_scenarios(cfg):  # fail fast on a bad scenario
            check_fits(sc)
    except ValueError as e:
        print(f"rlsched: error: --scenario: {e}", file=sys.stderr)
        return 2
    summary = train(cfg, out, resume=args.resume)
    keys = ("seed_sets", "reference", "before_dqn", "after_dqn", "bc_accuracy")
    print(json.dumps({k: summary[k] for k in keys}))
    return 0


def _train_stage2(
    args: argparse.Namespace,
    out: str | Path,
    selector: str,
    selector_model: str | None,
    init: str | None,
) -> int:
    """Train the placer ``iawp-rl`` behind ``selector``, from the parameters in ``init`` (a
    placer checkpoint; ``None`` = ``iawp-pass``'s rule)."""
    from experiments.evaluation import load_entry
    from experiments.train_placer import PlacerTrainConfig, train_placer
    from rlsched.policies.registry import selector_names

    if selector not in selector_names():
        print(
            f"rlsched: error: --selector: unknown selector {selector!r}; known: "
            f"{', '.join(selector_names())}",
            file=sys.stderr,
        )
        return 2
    defaults = PlacerTrainConfig()
    cfg = PlacerTrainConfig(
        scenarios=args.scenario or defaults.scenarios,
        selector=selector,
        selector_model=selector_model,
        rate_per_min=args.rate,
        iterations=args.iterations or defaults.iterations,
        seed=args.seed,
        jobs=args.jobs or defaults.jobs,
    )
    try:
        for entry in cfg.entries():  # fail fast on a bad scenario
            check_fits(load_entry(entry, args.rate))
    except ValueError as e:
        print(f"rlsched: error: --scenario: {e}", file=sys.stderr)
        return 2
    summary = train_placer(cfg, out, init=init)
    print(json.dumps({k: summary[k] for k in ("seed_sets", "start", "best_iteration", "best")}))
    return 0


def _cmd_finetune_live(args: argparse.Namespace) -> int:
    from experiments.finetune_live import LiveFinetuneConfig, finetune_live

    steps = default(LiveFinetuneConfig, "steps") if args.steps is None else args.steps
    try:
        cfg = LiveFinetuneConfig(
            steps=steps,
            seed=args.seed,
            cluster_backend=args.backend,
            device_backend=args.device_backend,
            tasks_per_episode=args.tasks,
            eval_tasks=args.eval_tasks,
            progress=sys.stderr.isatty(),
        )
        r = finetune_live(args.source, args.out, cfg, _live_cluster(args.cluster))
    except (ValueError, RuntimeError) as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    ix = r["interference"]
    print(
        json.dumps(
            {
                "zero_shot": r["zero_shot"],
                "mct": r["mct"],
                "fine_tuned": r["fine_tuned"],
                "interference_mae_sim": ix["sim_pretrained"]["mae"],
                "interference_mae_after_live_update": ix["sim_pretrained_then_live_update"]["mae"],
            }
        )
    )
    return 0


def _cmd_finetune(args: argparse.Namespace) -> int:
    from experiments.finetune import finetune

    if args.live:
        if args.scenario is not None:
            print("rlsched: error: --scenario does not apply with --live", file=sys.stderr)
            return 2
        return _cmd_finetune_live(args)
    if args.scenario is None:
        print("rlsched: error: finetune needs --scenario (or --live)", file=sys.stderr)
        return 2
    check_fits(load_scenario(args.scenario, rate_per_min=args.rate))  # fail fast on a bad scenario
    r = finetune(
        args.source,
        args.scenario,
        args.out,
        default(FinetuneConfig, "steps") if args.steps is None else args.steps,
        args.seed,
        args.rate,
    )
    print(
        json.dumps(
            {k: r[k] for k in ("target_scenario", "target_nodes", "zero_shot", "mct", "fine_tuned_best")}
        )
    )
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from experiments.simulate import simulate

    options = _policy_options(args.model, args.placer_model)
    scenario = load_scenario(args.scenario, rate_per_min=args.rate)
    check_fits(scenario)
    try:
        progress = not args.json and sys.stderr.isatty()
        m = simulate(scenario, args.scheduler, args.seed, progress=progress, options=options)
    except ValueError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    seed = scenario.seed if args.seed is None else args.seed
    out = {"scenario": scenario.name, "scheduler": args.scheduler, "seed": seed, **m.to_dict()}
    if args.json:
        print(json.dumps(out))
    else:
        w = max(len(k) for k in out)
        for k, v in out.items():
            print(f"{k:<{w}}  {v:.4g}" if isinstance(v, float) else f"{k:<{w}}  {v}")
    return _report_unschedulable(scenario, {seed: m}, args.strict)


def _report_unschedulable(scenario: Scenario, runs: dict[int, RunMetrics], strict: bool) -> int:
    """One warning line (stderr) when tasks found no node that could run them: how many and why
    (a throughput of 0 must never pass silently). Exit 3 with ``--strict``, else 0.

    :param scenario: the scenario as loaded (before the seed's draw).
    :param runs: metrics by seed.
    :param strict: ``--strict`` was given.
    """
    from collections import Counter

    from rlsched.feasibility import static_feasible, task_needs, why_infeasible
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
    from rlsched.view import ClusterView

    bad = {seed: m for seed, m in runs.items() if m.tasks_unschedulable}
    if not bad:
        return 0
    why: Counter[str] = Counter()
    for seed in bad:
        drawn = scenario_for_seed(scenario, seed)
        view = ClusterView.from_spec(drawn.cluster)
        for task in generate_tasks(drawn, seed):
            needs = task_needs(task)
            if not static_feasible(needs, view).any():
                why[why_infeasible(needs, view)] += 1
    n = sum(m.tasks_unschedulable for m in bad.values())
    total = sum(m.tasks_total for m in runs.values())
    hardware = sum(why.values())
    if n > hardware:
        why["could run only on nodes that were down"] += n - hardware
    reasons = "; ".join(f"{k} tasks {r}" for r, k in why.most_common())
    over = f" (over {len(runs)} seeds)" if len(runs) > 1 else ""
    print(f"rlsched: warning: {n} of {total} tasks{over} were unschedulable: {reasons}", file=sys.stderr)
    return 3 if strict else 0


def _live_cluster(path: str | None) -> LiveClusterSpec:
    """The live cluster of ``--cluster PATH``, or the embedded default."""
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.config_io import load_live_cluster

    return default_live_cluster() if path is None else load_live_cluster(path)


def _cmd_live_demo(args: argparse.Namespace) -> int:
    from experiments.live_demo import LIVE_SCHEDULERS, LiveDemoConfig, main_demo
    from runtime.cluster.workload import LiveWorkload

    specs = [s.strip() for s in (args.schedulers or ",".join(LIVE_SCHEDULERS)).split(",") if s.strip()]
    rate = DEMO.live_rate_per_min if args.rate is None else args.rate  # the parser checked it
    cfg = LiveDemoConfig(
        schedulers=specs,
        seeds=tuple(range(DEMO.live_seeds if args.seeds is None else args.seeds)),
        workload=LiveWorkload(streams=args.streams, tasks=args.tasks, rate_per_s=rate / 60.0),
        backend=args.backend,
        cluster=_live_cluster(args.cluster),
        progress=sys.stderr.isatty(),
    )
    try:
        print(main_demo(cfg))
    except (ValueError, RuntimeError) as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from experiments.simulate import compare, format_table

    if args.live:
        return _cmd_live_demo(args)
    if args.rate is None and args.scenario == DEMO_SCENARIO:
        args.rate = DEMO.paper_rate_per_min  # the paper's busiest rate; other scenarios keep their own
    args.seeds = DEMO.seeds if args.seeds is None else args.seeds
    scenario = load_scenario(args.scenario, rate_per_min=args.rate)
    check_fits(scenario)
    specs = [s.strip() for s in (args.schedulers or ",".join(_demo_schedulers())).split(",") if s.strip()]
    seeds = list(range(args.seeds))
    t0 = time.perf_counter()
    try:
        cmp = compare(scenario, specs, seeds)
    except ValueError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    arrival = scenario.workload.arrival
    shown = args.rate or (arrival.rate_per_min if arrival.process == "poisson" else None)
    rate = f" at {shown:g} tasks/min" if shown else ""
    n = len(scenario.cluster.nodes)
    print(f"## {scenario.name}{rate}: {scenario.workload.tasks} tasks, {n} nodes, seeds {seeds}")
    print()
    print(format_table(cmp))
    print()
    print(f"(mean ± std over {len(seeds)} seeds; {time.perf_counter() - t0:.1f} s wall)")
    first = next(iter(cmp.runs.values()))  # every scheduler sees the same tasks per seed
    return _report_unschedulable(scenario, dict(zip(seeds, first, strict=True)), args.strict)


def _cmd_interference(args: argparse.Namespace) -> int:
    from experiments import interference_cli as ix

    try:
        if args.action == "fit":
            print(json.dumps(ix.fit(args.data, args.method, args.seed, args.out)))
            return 0
        scores = ix.score(args.model, args.data)
    except ix.InterferenceCliError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(scores) if args.json else ix.format_scores(scores))
    return 0


def _cmd_profile(args: argparse.Namespace) -> int:
    from runtime.profiler import LiveProfiler, profile_to_csv

    apps = tuple(a.strip() for a in args.apps.split(",") if a.strip())
    t0 = time.perf_counter()
    try:
        with LiveProfiler(_live_cluster(args.cluster), args.backend, apps) as prof:
            colo, solo = profile_to_csv(prof, args.out, args.fraction, args.seed, sys.stderr.isatty())
            out = {
                "colocation": str(colo),
                "solo": str(solo),
                "backend": prof.backend.name,
                "devices": prof.devices(),
                "kinds": [k.name for k in prof.kinds()],
                "rows": prof.measured_pairs,
                "solo_rows": len(prof.solo_table()),
            }
    except (ValueError, RuntimeError) as e:  # a bad app; a backend that cannot run here
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps({**out, "seconds": round(time.perf_counter() - t0, 2)}))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    import dataclasses

    from rlsched.policies import parse_scheduler
    from runtime.service.config import load_service_config
    from runtime.service.service import serve

    cfg = load_service_config(args.config)
    pairs = (
        ("host", args.host),
        ("port", args.port),
        ("db", args.db),
        ("backend", args.backend),
        ("ray_address", args.ray_address),
    )
    over = {k: v for k, v in pairs if v is not None}
    if args.scheduler is not None:
        over["scheduler"] = args.scheduler
    cfg = dataclasses.replace(cfg, **over)
    try:
        parse_scheduler(cfg.scheduler)
    except ValueError as e:
        print(f"rlsched: error: --scheduler: {e}", file=sys.stderr)
        return 2
    print(
        f"rlsched serve: {cfg.scheduler} on http://{cfg.host}:{cfg.port} "
        f"({cfg.backend} cluster, queue {cfg.db})",
        file=sys.stderr,
    )
    serve(cfg)
    return 0


def _cmd_client(args: argparse.Namespace) -> int:
    import httpx

    from rlsched.client import Client, ServiceError

    token = os.environ.get(args.token_env)
    if not token:
        print(f"rlsched: error: set the bearer token in ${args.token_env}", file=sys.stderr)
        return 2
    try:
        with Client(args.url, token) as c:
            if args.command == "submit":
                body = [
                    {"app": args.app, "stream": args.stream, "chunk": k, "priority": args.priority}
                    for k in range(args.chunks)
                ]
                rows = c.submit(body)
                if args.wait:
                    rows = c.wait([r["id"] for r in rows])
                print(json.dumps(rows))
            elif args.command == "status":
                print(json.dumps(c.get(args.id)))
            elif args.command == "cancel":
                print(json.dumps(c.cancel(args.id)))
            else:
                _top(c, args.once, args.interval)
    except ServiceError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    except httpx.HTTPError as e:  # the service is not there, or the connection broke
        print(f"rlsched: error: {args.url}: {e}", file=sys.stderr)
        return 2
    return 0


def _top(client: object, once: bool, interval: float) -> None:
    """Frames of queue depth, running tasks, per-GPU streams and memory, and completions/s."""
    from rlsched.client import Client

    assert isinstance(client, Client)
    last: tuple[float, int] | None = None
    while True:
        state = client.cluster()
        done = state["done"]
        now = time.monotonic()
        rate = (done - last[1]) / (now - last[0]) if last else 0.0
        last = (now, done)
        lines = [
            f"{state['scheduler']} on {state['backend']}: {state['queued']} queued, "
            f"{state['running']} running, {done} done, {rate:.1f}/s",
            "node        gpu model      streams running mem MiB",
        ]
        for n in state["nodes"]:
            for j, g in enumerate(n["gpus"]):
                lines.append(
                    f"{n['name']:<11} {j:<3} {g['model']:<10} {g['streams']:>7} {g['running']:>7} "
                    f"{g['mem_used_mib']:>7.0f}/{g['mem_mib']:.0f}"
                )
        print("\n".join(lines), flush=True)
        if once:
            return
        time.sleep(interval)
        print("\x1b[2J\x1b[H", end="")  # clear the terminal for the next frame


def _cmd_scenarios() -> int:
    from experiments.suites import scenario_table

    print(scenario_table(list_scenarios()))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from experiments.evaluate import EvaluateError, evaluate
    from experiments.suites import build_config

    try:
        cfg = build_config(args, args.argv)
        summary = evaluate(cfg, args.out, progress=True)
    except EvaluateError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(summary))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlsched`` console script.

    ``--debug`` anywhere on the line shows the traceback of an unexpected internal error.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    args = _parser().parse_args(argv)
    args.debug = debug
    args.argv = argv  # reports print the exact command
    out = getattr(args, "out", None)
    if out is None:
        return _dispatch(args)
    # Made before any work, so that a bad folder never throws a training run or measurements
    # away; removed again if the command fails before writing anything into it.
    made = Path(out)
    try:
        created = not made.exists()
        made.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"rlsched: error: --out: cannot create {out}: {e.strerror or e}", file=sys.stderr)
        return 2
    rc = 1
    try:
        rc = _dispatch(args)
        return rc
    finally:
        if rc != 0 and created and made.is_dir() and not any(made.iterdir()):
            made.rmdir()


def _dispatch(args: argparse.Namespace) -> int:
    try:
        if args.command == "simulate":
            return _cmd_simulate(args)
        if args.command == "demo":
            return _cmd_demo(args)
        if args.command == "train":
            return _cmd_train(args)
        if args.command == "finetune":
            return _cmd_finetune(args)
        if args.command == "interference":
            return _cmd_interference(args)
        if args.command == "profile":
            return _cmd_profile(args)
        if args.command == "evaluate":
            return _cmd_evaluate(args)
        if args.command == "serve":
            return _cmd_serve(args)
        if args.command in ("submit", "status", "cancel", "top"):
            return _cmd_client(args)
        return _cmd_scenarios()
    except ScenarioError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    except (FileNotFoundError, CheckpointError, TextFileError, RunTooLarge) as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as e:  # a path the system refuses (too long, a directory, no permission, disk full)
        where = f"{e.filename}: " if e.filename else ""
        print(f"rlsched: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        saved = getattr(e, "saved", None)  # training saved its weights first
        resume = f"; continue with --resume {saved}" if saved else ""
        print(f"rlsched: {str(e) or 'interrupted'}{resume}", file=sys.stderr)
        return 130
    except Exception as e:
        if args.debug:
            raise
        what = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(
            f"rlsched: internal error: {type(e).__name__}{': ' + what if what else ''} "
            "(a bug; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
