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

from experiments import inputs
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
from rlsched.errors import InputError, Unavailable
from rlsched.scenarios.loader import list_scenarios

if TYPE_CHECKING:
    from rlsched.metrics import RunMetrics
    from rlsched.scenarios.spec import Scenario

# Exit codes (README "Exit codes"; each command's --help names those it may end with).
#: The command did what was asked.
EXIT_OK = 0
#: Anything raised that is not one of the refusals below: a bug (``--debug`` shows the traceback).
EXIT_INTERNAL = 1
#: Bad input (:class:`~rlsched.errors.InputError`): one line naming the file or flag and the field.
EXIT_INPUT = 2
#: ``--strict`` and some tasks were unschedulable.
EXIT_UNSCHEDULABLE = 3
#: Refused for a reason of the environment (:class:`~rlsched.errors.Unavailable`): a device or
#: cluster backend that cannot run on this machine; a service that cannot be reached or answers
#: with an error.
EXIT_UNAVAILABLE = 4
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED = 130
#: The output pipe was closed (``| head``).
EXIT_BROKEN_PIPE = 141

#: What each exit code means, for ``--help`` (codes 3 and 4 only where a command can end so).
_EXIT_MEANING = {
    EXIT_OK: "done",
    EXIT_INTERNAL: "internal error (a bug; --debug shows the traceback)",
    EXIT_INPUT: "bad input (one line: rlsched: error: FILE-OR-FLAG: FIELD: expected ...)",
    EXIT_UNSCHEDULABLE: "unschedulable tasks under --strict",
    EXIT_UNAVAILABLE: "a backend or service that is unavailable here",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_BROKEN_PIPE: "output pipe closed",
}


def _exit_help(strict: bool = False, unavailable: str | None = None) -> str:
    """The ``exit codes: ...`` line of a command's ``--help``.

    :param strict: the command has ``--strict`` (code 3).
    :param unavailable: what code 4 means for the command, or ``None`` when it cannot end so.
    """
    meaning = dict(_EXIT_MEANING)
    if not strict:
        del meaning[EXIT_UNSCHEDULABLE]
    if unavailable is None:
        del meaning[EXIT_UNAVAILABLE]
    else:
        meaning[EXIT_UNAVAILABLE] = unavailable
    return "exit codes: " + "; ".join(f"{code} {text}" for code, text in sorted(meaning.items()))


_EXIT_HELP = _exit_help()
_BACKEND = "the device or cluster backend cannot run on this machine"

#: Flags whose values are paths the user names: an OSError on one of them (or under it) is bad
#: input (exit 2); on any other path it is an internal error.
_PATH_FLAGS = (
    ("out", "--out"),
    ("scenario", "--scenario"),
    ("model", "--model"),
    ("placer_model", "--placer-model"),
    ("data", "--data"),
    ("cluster", "--cluster"),
    ("source", "--from"),
    ("resume", "--resume"),
    ("config", "--config"),
    ("db", "--db"),
)

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
        prog="rlsched",
        description="Learning scheduler for heterogeneous GPU clusters.",
        epilog=_exit_help(strict=True, unavailable=_EXIT_MEANING[EXIT_UNAVAILABLE]),
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser(
        "simulate",
        help="run a scenario in the simulator with one scheduler",
        epilog=_exit_help(strict=True),
    )
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
        epilog=_EXIT_HELP,
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
        "--objective",
        choices=("throughput", "latency"),
        default=default(TrainConfig, "objective"),
        help="what best/ is chosen on, on the validation seeds: throughput relative to the teacher "
        "(default) or mean latency relative to it (with a throughput guard); train at high but "
        "sustainable load for latency, e.g. --scenario interference-saturated~0.9",
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
        epilog=_exit_help(strict=True, unavailable=f"{_BACKEND} (--live)"),
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
        help="comma-separated specs (default: the baselines, and ldwp+iawp when a model ships; "
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

    f = sub.add_parser(
        "finetune",
        help="run a trained LDWP network on another cluster, then fine-tune it",
        epilog=_exit_help(unavailable=f"{_BACKEND} (--live)"),
    )
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

    sub.add_parser("scenarios", help="list the built-in scenarios with their offered load", epilog=_EXIT_HELP)

    sv = sub.add_parser(
        "serve",
        help="run the live scheduling service (HTTP API, tenants, durable queue)",
        epilog=_exit_help(unavailable="the port is in use by another process"),
    )
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
    sv.add_argument(
        "--selector-model", default=None, help="LDWP checkpoint folder (default: the config's, else shipped)"
    )
    sv.add_argument(
        "--placer-model", default=None, help="iawp-rl checkpoint folder (default: the config's, else shipped)"
    )
    sv.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=None,
        help="service log level (default: the config's, else info: a line per request, recovery, shutdown)",
    )
    sv.add_argument(
        "--interference-model",
        default=None,
        help="interference model: a folder of 'interference fit' or a co-location CSV of 'profile' "
        "(default: the config's, else surveyed on the cluster at start)",
    )

    sub.add_parser(
        "token",
        help="print a new bearer token and the token_sha256 line a service config stores for it",
        epilog=_EXIT_HELP,
    )

    def _client_args(c: argparse.ArgumentParser) -> None:
        c.add_argument("--url", default="http://127.0.0.1:8470", help="service URL (default: %(default)s)")
        c.add_argument(
            "--token-env",
            default="RLSCHED_TOKEN",
            help="environment variable holding the bearer token (default: RLSCHED_TOKEN; not a flag, "
            "so it stays out of the process list)",
        )

    client_exits = _exit_help(unavailable="the service cannot be reached or answered with an error")
    su = sub.add_parser("submit", help="submit tasks to a running service", epilog=client_exits)
    _client_args(su)
    su.add_argument("--app", required=True, help="app of the tasks")
    su.add_argument("--stream", type=_SEED, default=0, help="stream id (default 0)")
    su.add_argument("--chunks", type=_COUNT, default=1, help="chunks 0..N-1 of the stream (default 1)")
    su.add_argument("--priority", type=int, default=0)
    su.add_argument("--wait", action="store_true", help="wait until every task has finished")
    st = sub.add_parser("status", help="a task's state on a running service", epilog=client_exits)
    _client_args(st)
    st.add_argument("id", type=int)
    ca = sub.add_parser("cancel", help="cancel a queued task on a running service", epilog=client_exits)
    _client_args(ca)
    ca.add_argument("id", type=int)
    for c in (su, st, ca):
        c.add_argument("--json", action="store_true", help="print the full task records as JSON")
    tp = sub.add_parser(
        "top", help="live view of a running service: queue, devices, throughput", epilog=client_exits
    )
    _client_args(tp)
    tp.add_argument("--once", action="store_true", help="print one frame and exit")
    tp.add_argument("--interval", type=_positive_float, default=1.0, help="seconds between frames")

    e = sub.add_parser(
        "evaluate",
        help="compare schedulers over scenarios and seeds against the capacity bound; write a report",
        epilog=_EXIT_HELP,
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
    e.add_argument(
        "--loads",
        default=None,
        help="offered loads, e.g. 0.5,0.7,0.8,0.9,0.95: each scenario runs at the rates that give them, "
        "and the report plots latency against load",
    )
    e.add_argument(
        "--load-of",
        default="bound",
        help="what --loads are relative to: 'bound' (the LP capacity bound, default) or "
        "SELECTOR+PLACER (its saturated throughput on each seed)",
    )
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
    fi = isub.add_parser("fit", help="fit a model on co-location CSVs and save it", epilog=_EXIT_HELP)
    fi.add_argument(
        "--data", action="append", required=True, help="device,kind,partner,norm_throughput CSV (repeatable)"
    )
    fi.add_argument("--method", choices=("ncf", "svd", "mean"), default="ncf", help="model (default: ncf)")
    fi.add_argument("--seed", type=_SEED, default=0)
    fi.add_argument("--out", required=True, help="checkpoint directory to write")
    ev = isub.add_parser("evaluate", help="error of a saved model on a co-location CSV", epilog=_EXIT_HELP)
    ev.add_argument("--model", required=True, help="checkpoint directory written by 'interference fit'")
    ev.add_argument("--data", required=True, help="device,kind,partner,norm_throughput CSV")
    ev.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    pr = sub.add_parser(
        "profile",
        help="measure kernel pairs co-running on the default live cluster's GPUs; write CSVs",
        epilog=_exit_help(unavailable=_BACKEND),
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

    extra = ["ldwp+iawp"] if (PRETRAINED_LDWP / "meta.json").is_file() else []
    return [*DEMO_SCHEDULERS[:-1], *extra, DEMO_SCHEDULERS[-1]]


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
    if args.stage == "both":  # stage 2's inputs are checked before stage 1 spends its hours
        _check_stage2(args, args.selector or "ldwp")
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
        raise InputError(
            "--n-steps", "value", "1 without --half-life (n-step returns need --half-life > 0)", args.n_steps
        )
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
        objective=args.objective,
    )
    # Every input is read now: hours of training must not end on a typo.
    inputs.scenario_entries(cfg.scenario, args.rate, "--scenario")
    if cfg.pretrain is not None:
        inputs.selector(cfg.pretrain, "--pretrain")
    if args.resume is not None:
        inputs.ldwp_weights(args.resume, cfg.net_arch, "--resume")
    summary = train(cfg, out, resume=args.resume)
    keys = ("seed_sets", "reference", "before_dqn", "after_dqn", "bc_accuracy")
    print(json.dumps({k: summary[k] for k in keys}))
    return EXIT_OK


def _check_stage2(args: argparse.Namespace, selector: str) -> None:
    """Read stage 2's inputs: its selector, its scenarios (each run held ``--jobs`` times)."""
    from experiments.train_placer import PlacerTrainConfig

    inputs.selector(selector, "--selector")
    defaults = PlacerTrainConfig()
    inputs.scenario_entries(
        args.scenario or defaults.scenarios, args.rate, "--scenario", args.jobs or defaults.jobs
    )


def _train_stage2(
    args: argparse.Namespace,
    out: str | Path,
    selector: str,
    selector_model: str | None,
    init: str | None,
) -> int:
    """Train the placer ``iawp-rl`` behind ``selector``, from the parameters in ``init`` (a
    placer checkpoint; ``None`` = ``iawp-pass``'s rule)."""
    from experiments.train_placer import PlacerTrainConfig, train_placer

    _check_stage2(args, selector)
    if init is not None:
        inputs.placer_model(init, "--resume")
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
    summary = train_placer(cfg, out, init=init)
    print(json.dumps({k: summary[k] for k in ("seed_sets", "start", "best_iteration", "best")}))
    return EXIT_OK


def _cmd_finetune_live(args: argparse.Namespace) -> int:
    from experiments.finetune_live import LiveFinetuneConfig, finetune_live

    inputs.ldwp_model(args.source, "--from")
    cluster = inputs.live_cluster(args.cluster)
    inputs.cluster_backend(args.backend)
    inputs.device_backend(args.device_backend, "--device-backend")
    steps = default(LiveFinetuneConfig, "steps") if args.steps is None else args.steps
    cfg = LiveFinetuneConfig(
        steps=steps,
        seed=args.seed,
        cluster_backend=args.backend,
        device_backend=args.device_backend,
        tasks_per_episode=args.tasks,
        eval_tasks=args.eval_tasks,
        progress=sys.stderr.isatty(),
    )
    r = finetune_live(args.source, args.out, cfg, cluster)
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
    return EXIT_OK


def _cmd_finetune(args: argparse.Namespace) -> int:
    from experiments.finetune import finetune

    if args.live:
        if args.scenario is not None:
            raise InputError(
                "--scenario",
                "value",
                "none with --live (the live cluster comes from --cluster)",
                args.scenario,
            )
        return _cmd_finetune_live(args)
    if args.scenario is None:
        raise InputError("--scenario", "value", "a target scenario, built-in name or file (or --live)")
    inputs.ldwp_model(args.source, "--from")
    inputs.scenario(args.scenario, args.rate)
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
    return EXIT_OK


def _cmd_simulate(args: argparse.Namespace) -> int:
    from experiments.simulate import simulate

    # Every input is read and checked here; the run below raises only bugs (exit 1).
    scenario = inputs.scenario(args.scenario, args.rate)
    spec = inputs.scheduler(args.scheduler, "--scheduler")
    options = inputs.policy_options([spec], args.model, args.placer_model)
    progress = not args.json and sys.stderr.isatty()
    m = simulate(scenario, spec, args.seed, progress=progress, options=options)
    seed = scenario.seed if args.seed is None else args.seed
    out = {"scenario": scenario.name, "scheduler": args.scheduler, "seed": seed, **m.to_dict()}
    if args.json:
        print(json.dumps({**out, "throughput_per_min": m.throughput * 60.0}))
    else:
        # Tasks per minute, as demo and evaluate report it (--json keeps `throughput` in tasks/s).
        out = {k if k != "throughput" else "throughput_per_min": v for k, v in out.items()}
        out["throughput_per_min"] = m.throughput * 60.0
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


def _cmd_live_demo(args: argparse.Namespace) -> int:
    from experiments.live_demo import LIVE_SCHEDULERS, LiveDemoConfig, main_demo
    from runtime.cluster.workload import LiveWorkload

    specs = inputs.live_schedulers(args.schedulers, LIVE_SCHEDULERS)
    inputs.policy_options(specs, None, None)
    cluster = inputs.live_cluster(args.cluster)
    inputs.device_backend(args.backend)
    rate = DEMO.live_rate_per_min if args.rate is None else args.rate  # the parser checked it
    cfg = LiveDemoConfig(
        schedulers=specs,
        seeds=tuple(range(DEMO.live_seeds if args.seeds is None else args.seeds)),
        workload=LiveWorkload(streams=args.streams, tasks=args.tasks, rate_per_s=rate / 60.0),
        backend=args.backend,
        cluster=cluster,
        progress=sys.stderr.isatty(),
    )
    print(main_demo(cfg))
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from experiments.bound_cache import own_bound
    from experiments.report_stats import ARRIVAL_BOUND
    from experiments.simulate import compare, format_table, throughput_bounds

    if args.live:
        return _cmd_live_demo(args)
    if args.rate is None and args.scenario == DEMO_SCENARIO:
        args.rate = DEMO.paper_rate_per_min  # the paper's busiest rate; other scenarios keep their own
    args.seeds = DEMO.seeds if args.seeds is None else args.seeds
    scenario = inputs.scenario(args.scenario, args.rate)
    specs = inputs.schedulers(args.schedulers, _demo_schedulers(), "--schedulers")
    inputs.policy_options(specs, None, None)
    seeds = list(range(args.seeds))
    t0 = time.perf_counter()
    cmp = compare(scenario, specs, seeds)
    arrival = scenario.workload.arrival
    shown = args.rate or (arrival.rate_per_min if arrival.process == "poisson" else None)
    rate = f" at {shown:g} tasks/min" if shown else ""
    n = len(scenario.cluster.nodes)
    print(f"## {scenario.name}{rate}: {scenario.workload.tasks} tasks, {n} nodes, seeds {seeds}")
    print()
    print(format_table(cmp, bounds=throughput_bounds(scenario, seeds)))
    print()
    print(f"(mean ± std over {len(seeds)} seeds; {time.perf_counter() - t0:.1f} s wall)")
    load = float(own_bound(scenario)["offered_load"])
    if load < ARRIVAL_BOUND:
        print(
            f"Offered load {load:.2f} of the capacity bound: arrival-bound. Every reasonable scheduler "
            "completes what arrives, so throughput ties; latency and utilisation tell them apart. "
            "`rlsched scenarios` marks the built-ins that have headroom."
        )
    else:
        print(
            f"Offered load {load:.2f} of the capacity bound: arrivals reach what the cluster can serve, "
            "so schedulers differ in how much of the bound they reach (`of bound`)."
        )
    first = next(iter(cmp.runs.values()))  # every scheduler sees the same tasks per seed
    return _report_unschedulable(scenario, dict(zip(seeds, first, strict=True)), args.strict)


def _cmd_interference(args: argparse.Namespace) -> int:
    from experiments import interference_cli as ix

    # The readers of --data and --model raise InputError naming the file and field.
    if args.action == "fit":
        print(json.dumps(ix.fit(args.data, args.method, args.seed, args.out)))
        return EXIT_OK
    scores = ix.score(args.model, args.data)
    print(json.dumps(scores) if args.json else ix.format_scores(scores))
    return EXIT_OK


def _cmd_profile(args: argparse.Namespace) -> int:
    from runtime.profiler import LiveProfiler, profile_to_csv

    apps = inputs.live_apps(args.apps)
    cluster = inputs.live_cluster(args.cluster)
    if not any(n.gpus for n in cluster.nodes):
        raise InputError(args.cluster or "--cluster", "nodes", "a cluster with at least one GPU to profile")
    inputs.device_backend(args.backend)
    t0 = time.perf_counter()
    with LiveProfiler(cluster, args.backend, apps) as prof:
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
    print(json.dumps({**out, "seconds": round(time.perf_counter() - t0, 2)}))
    return EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    import dataclasses

    from runtime.service.config import load_service_config
    from runtime.service.service import serve

    cfg = load_service_config(args.config)
    pairs = (
        ("host", args.host),
        ("port", args.port),
        ("db", args.db),
        ("backend", args.backend),
        ("ray_address", args.ray_address),
        ("selector_model", args.selector_model),
        ("placer_model", args.placer_model),
        ("interference_model", args.interference_model),
        ("log_level", args.log_level),
    )
    over = {k: v for k, v in pairs if v is not None}
    if args.scheduler is not None:
        over["scheduler"] = args.scheduler
    cfg = dataclasses.replace(cfg, **over)
    if args.ray_address is not None and cfg.backend != "ray":
        raise InputError("--ray-address", "value", "a flag of --backend ray only", args.ray_address)
    inputs.live_schedulers(
        cfg.scheduler, [], "--scheduler" if args.scheduler else f"{args.config}: scheduler"
    )

    def announce() -> None:  # only once it listens: a service that could not start says only why
        print(
            f"rlsched serve: {cfg.scheduler} on http://{cfg.host}:{cfg.port} "
            f"({cfg.backend} cluster, queue {cfg.db})",
            file=sys.stderr,
        )

    _service_log(cfg.log_level)
    serve(cfg, announce)  # a queue another service holds: exit 2; a port in use: exit 4
    return 0


def _service_log(level: str) -> None:
    """The service's own loggers (``runtime.*``) to stderr with a timestamp, at ``level``; other
    libraries' loggers keep their defaults."""
    import logging

    logger = logging.getLogger("runtime")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.handlers = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False


def _cmd_scenarios() -> int:
    from experiments.suites import scenario_table

    print(scenario_table(list_scenarios()))
    return EXIT_OK


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from experiments.evaluate import evaluate
    from experiments.suites import build_config

    # build_config and evaluate's own validate() read every input before the first run.
    cfg = build_config(args, args.argv)
    summary = evaluate(cfg, args.out, progress=True)
    print(json.dumps(summary))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlsched`` console script.

    ``--debug`` anywhere on the line shows the traceback of an unexpected internal error.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :returns: the exit code (README "Exit codes"; ``EXIT_*`` above).
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
        err = InputError("--out", "value", "a folder that can be created", out, hint=e.strerror or str(e))
        print(f"rlsched: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    rc = EXIT_INTERNAL
    try:
        rc = _dispatch(args)
        return rc
    finally:
        if rc != 0 and created and made.is_dir() and not any(made.iterdir()):
            made.rmdir()


def _command(args: argparse.Namespace) -> int:
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
        from experiments.client_cli import run_client

        run_client(args)
        return EXIT_OK
    if args.command == "token":
        from experiments.client_cli import new_token

        new_token()
        return EXIT_OK
    return _cmd_scenarios()


def _user_path(args: argparse.Namespace, e: OSError) -> tuple[str, str] | None:
    """``(path, flag)`` when ``e`` concerns a path the user named on the command line (or one
    under it, such as a file in ``--out``), else ``None``."""
    failed = [Path(f) for f in (e.filename, e.filename2) if isinstance(f, (str, os.PathLike))]
    for attr, flag in _PATH_FLAGS:
        given = getattr(args, attr, None)
        for value in given if isinstance(given, list) else [given]:
            if not isinstance(value, str) or not value:
                continue
            root = Path(value).expanduser().absolute()
            for f in failed:
                path = f.expanduser().absolute()
                if path == root or root in path.parents:
                    return str(f), flag
    return None


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command; map what it raises to an exit code: the one error boundary.

    Only :class:`~rlsched.errors.InputError` (raised where a file or flag is read) is exit 2, and
    an ``OSError`` on a path the user named; :class:`~rlsched.errors.Unavailable` is exit 4;
    anything else — a ``ValueError`` from inside a run included — is an internal error (exit 1).
    """
    try:
        return _command(args)
    except InputError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except Unavailable as e:
        print(f"rlsched: unavailable: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as e:
        saved = getattr(e, "saved", None)  # training saved its weights first
        resume = f"; continue with --resume {saved}" if saved else ""
        print(f"rlsched: {str(e) or 'interrupted'}{resume}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        # A path the user named that the system refuses (no permission, a directory, disk full)
        # is bad input; an OSError anywhere else is ours, as is every other exception.
        where = _user_path(args, e) if isinstance(e, OSError) else None
        if where is not None:
            path, flag = where
            assert isinstance(e, OSError)
            err = InputError(
                path, "<file>", f"a path this command can use (given by {flag})", hint=e.strerror or str(e)
            )
            print(f"rlsched: error: {err}", file=sys.stderr)
            return EXIT_INPUT
        if args.debug:
            raise
        what = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        print(
            f"rlsched: internal error: {type(e).__name__}{': ' + what if what else ''} "
            "(a bug; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
