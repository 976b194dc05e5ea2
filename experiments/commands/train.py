"""``rlsched train``: LDWP (stage 1), the learned placer ``iawp-rl`` (stage 2), or both."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help
from experiments.commands.flags import flag, flag_name, given, pick, spelling
from experiments.configs import PlacerTrainConfig, TrainConfig, default
from rlsched.errors import InputError


@dataclass(kw_only=True)
class TrainArgs:
    """Options of ``rlsched train``.

    :param stage: 1: the LDWP network; 2: the placer iawp-rl (random search); both: stage 1, then
        stage 2 with the new network as selector, into OUT/stage1 and OUT/stage2
    :param scenario: built-in name or path, or several comma-separated NAME[@RATE][#TASKS] entries
        to train on all of them
    :param iterations: stage 2: random-search iterations
    :param selector: stage 2: node selector while the placer trains
    :param jobs: stage 2: worker processes
    :param rate_per_min: arrival rate override, tasks/min (default: the scenario's)
    :param steps: stage 1: DQN environment steps in all (with --resume, the checkpoint's own DQN steps
        count: resuming a 15,000-step network with --steps 20000 runs 5,000 more)
    :param seed: seeds torch, numpy and the training episodes
    :param pretrain: stage 1: teacher selector for behaviour cloning, 'best' (on each scenario the
        heuristic selector that completes most there; best/ is then measured against the best
        heuristic of each validation scenario), or 'none'
    :param validation_scenario: stage 1: entries (as --scenario) whose validation-seed runs choose
        best/ (default: the training entries)
    :param out: output directory (best/, last/, history.json, summary.json)
    :param resume: checkpoint directory to start from (stage 1: skips cloning; stage 2: the
        placer's parameters)
    :param half_life_s: semi-MDP discount: simulated seconds after which a reward counts half; 0 =
        discount per decision (by gamma)
    :param objective: what best/ is chosen on, on the validation seeds: throughput relative to the
        teacher or mean latency relative to it (with a throughput guard); train at high but
        sustainable load for latency, e.g. --scenario interference-saturated~0.9
    :param n_steps: decisions per return (n-step targets, discounted by elapsed time)
    :param double_q: double DQN targets
    :param learning_rate: DQN learning rate
    :param json: print the summary's headline figures as one JSON object instead of lines
    """

    stage: str = flag("1", choices=("1", "2", "both"))
    scenario: str | None = flag(
        None,
        path=True,
        shown=f"{default(TrainConfig, 'scenario')} for stage 1; "
        f"{default(PlacerTrainConfig, 'scenarios')} for stage 2",
    )
    iterations: int | None = flag(
        None, parse=values.COUNT, shown=str(default(PlacerTrainConfig, "iterations"))
    )
    selector: str | None = flag(
        None, shown=f"{default(PlacerTrainConfig, 'selector')}; with --stage both: the new LDWP"
    )
    jobs: int | None = flag(None, parse=values.COUNT, shown=str(default(PlacerTrainConfig, "jobs")))
    rate_per_min: float | None = flag(None, name="--rate", parse=values.positive_float)
    steps: int = flag(default(TrainConfig, "steps"), parse=values.STEPS)
    seed: int = flag(default(TrainConfig, "seed"), parse=values.SEED)
    pretrain: str | None = default(TrainConfig, "pretrain")
    validation_scenario: str | None = flag(None, path=True)
    out: str = flag(path=True)
    resume: str | None = flag(None, path=True)
    half_life_s: float | None = flag(
        default(TrainConfig, "half_life_s"), name="--half-life", parse=values.nonneg_float
    )
    objective: str = flag(default(TrainConfig, "objective"), choices=("throughput", "latency"))
    n_steps: int = flag(default(TrainConfig, "n_steps"), parse=values.COUNT)
    double_q: bool = flag(default(TrainConfig, "double_q"), negatable=True)
    learning_rate: float = flag(default(TrainConfig, "learning_rate"), parse=values.positive_float)
    json: bool = False


#: Options that only one stage reads (a silent no-op misleads, so they are named when ignored).
_STAGE1 = (
    "steps",
    "pretrain",
    "validation_scenario",
    "half_life_s",
    "n_steps",
    "double_q",
    "learning_rate",
    "objective",
)
_STAGE2 = ("iterations", "selector", "jobs")


def _warn_unused(argv: Sequence[str], names: Sequence[str], stage: str) -> None:
    fields = [f for f in dataclasses.fields(TrainArgs) if f.name in names]
    flags = [flag_name(f) for f in fields]
    flags += ["--no-" + flag_name(f)[2:] for f in fields if spelling(f).negatable]
    named = given(argv, flags)
    if named:
        print(f"rlsched: warning: {', '.join(named)} ignored with --stage {stage}", file=sys.stderr)


def run(args: TrainArgs, argv: Sequence[str]) -> int:
    """Train the stage(s) asked for; print the summary's headline figures. SIGTERM stops it as
    Ctrl-C does (the weights saved first)."""
    from experiments.commands.terminate import terminate_as_interrupt

    with terminate_as_interrupt():
        return _run(args, argv)


def _run(args: TrainArgs, argv: Sequence[str]) -> int:
    if args.stage == "1":
        _warn_unused(argv, _STAGE2, "1")
    elif args.stage == "2":
        _warn_unused(argv, _STAGE1, "2")
    from experiments import inputs

    if args.stage == "both":
        inputs.new_run_folder(Path(args.out) / "stage1", args.resume)
        inputs.new_run_folder(Path(args.out) / "stage2", resumable=False)
    else:  # stage 2 starts a new history from a checkpoint: never into the run it came from
        one = args.stage == "1"
        inputs.new_run_folder(args.out, args.resume if one else None, resumable=one)
    if args.stage == "2":
        selector, model = args.selector or "mct", None
        if args.resume is not None:
            args, selector, model = _resumed_stage2(args, selector)
        return _train_stage2(args, args.out, selector, model, init=args.resume)
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


def _train_stage1(args: TrainArgs, out: Path) -> int:
    from experiments import inputs

    if args.n_steps > 1 and not args.half_life_s:
        raise InputError(
            "--n-steps", "value", "1 without --half-life (n-step returns need --half-life > 0)", args.n_steps
        )
    if args.resume is not None and args.scenario is None:
        args = _resumed_scenarios(args)
    cfg = TrainConfig(
        **pick(
            TrainConfig,
            args,
            scenario=args.scenario or TrainConfig.scenario,
            pretrain=None if args.pretrain == "none" else args.pretrain,
            half_life_s=args.half_life_s or None,
        )
    )
    # Every input is read now: hours of training must not end on a typo. Folders of generated
    # cases are checked against the seed and family rules first.
    from experiments.train_entries import scenario_entries, validation_entries

    scenario_entries(cfg)
    validation_entries(cfg)
    inputs.scenario_entries(cfg.scenario, args.rate_per_min, "--scenario")
    if cfg.validation_scenario is not None:
        inputs.scenario_entries(cfg.validation_scenario, args.rate_per_min, "--validation-scenario")
    if cfg.pretrain not in (None, "best"):
        _teacher(cfg.pretrain)
    if args.resume is None:
        inputs.warn_before_learning(cfg.steps, cfg.learning_starts, "behaviour cloning still trains it")
    else:
        done = inputs.ldwp_weights(args.resume, cfg.net_arch, "--resume")
        if cfg.steps <= done:
            print(
                f"rlsched: warning: --steps {cfg.steps:,} is not above the {done:,} DQN steps of "
                f"--resume {args.resume}: nothing to train (--steps is the run's total)",
                file=sys.stderr,
            )
    from experiments.train import train  # torch and stable-baselines3: once the inputs are read
    from experiments.train_summary import stage1_lines

    started = time.time()
    summary = train(cfg, out, resume=args.resume)
    if args.json:
        keys = ("seed_sets", "reference", "before_dqn", "after_dqn", "bc_accuracy")
        print(json.dumps({k: summary[k] for k in keys}))
    else:
        print("\n".join(stage1_lines(summary, out, cfg.objective, started)))
    return EXIT_OK


def _resumed_scenarios(args: TrainArgs) -> TrainArgs:
    """``args`` with the scenarios of the ``--resume`` checkpoint's run, where none were given:
    the default ``paper`` would continue a run of other cases, and ``history.json``/``best/``
    would compare evaluations of both."""
    assert args.resume is not None
    config = _run_config(args.resume, "ldwp")
    if not isinstance(config.get("scenario"), str):
        return args
    flags = {
        "scenario": "--scenario",
        "validation_scenario": "--validation-scenario",
        "rate_per_min": "--rate",
    }
    kept = {k: config[k] for k in flags if config.get(k) is not None and getattr(args, k) is None}
    _say_resumed(args.resume, [f"{flags[k]} {v}" for k, v in kept.items()])
    return dataclasses.replace(args, **kept)


def _resumed_stage2(args: TrainArgs, selector: str) -> tuple[TrainArgs, str, str | None]:
    """``args``, the selector and its network for a stage-2 ``--resume``: where ``--selector`` or
    ``--scenario`` is not given, the placer checkpoint's run's. ``--stage both``'s stage 2,
    resumed as its Ctrl-C line says, trained behind ``mct`` instead of the new network (no flag
    names a network for stage 2), on the default scenarios."""
    resume = args.resume
    assert resume is not None
    config = _run_config(resume, "iawp-rl")
    said, model = [], None
    behind, network = config.get("selector"), config.get("selector_model")
    if args.selector is None and isinstance(behind, str) and (network is None or isinstance(network, str)):
        selector, model = behind, network
        said.append(f"selector {behind}" + ("" if network is None else f" ({network})"))
    if args.scenario is None and isinstance(config.get("scenarios"), str):
        args = dataclasses.replace(args, scenario=config["scenarios"])
        said.append(f"--scenario {config['scenarios']}")
    _say_resumed(resume, said)
    return args, selector, model


def _run_config(resume: str, kind: str) -> dict[str, Any]:
    """The config of the run a checkpoint of ``kind`` came from (``{}`` for a checkpoint that does
    not verify: it is refused, naming the file, where its weights are read)."""
    from models.checkpoint import CheckpointError, read_verified_meta

    try:
        config = read_verified_meta(resume, kind).get("config", {})
    except CheckpointError:
        return {}
    return config if isinstance(config, dict) else {}


def _say_resumed(resume: str, said: list[str]) -> None:
    if said:
        print(f"rlsched: --resume {resume}: going on with its run's {', '.join(said)}", file=sys.stderr)


def _stage2_config(args: TrainArgs, selector: str, selector_model: str | None) -> PlacerTrainConfig:
    """Stage 2's config; a folder of generated cases among its scenarios becomes their files,
    checked as stage 1's are (training seeds only)."""
    from experiments.train_entries import checked_entries

    defaults = PlacerTrainConfig()
    scenarios = checked_entries(args.scenario or defaults.scenarios, "scenario", "training")
    return PlacerTrainConfig(
        **pick(
            PlacerTrainConfig,
            args,
            scenarios=",".join(scenarios),
            selector=selector,
            selector_model=selector_model,
            iterations=args.iterations or defaults.iterations,
            jobs=args.jobs or defaults.jobs,
        )
    )


def _teacher(name: str) -> None:
    """``--pretrain``'s teacher: a selector that reads only what a real system observes (a
    clairvoyant one would teach the network the simulator's ground truth)."""
    from experiments import inputs
    from rlsched.policies.registry import is_clairvoyant_spec

    inputs.selector(name, "--pretrain", ", 'best' or 'none'")
    if is_clairvoyant_spec(name):
        raise InputError(
            "--pretrain",
            "selector",
            "a teacher that reads only what a real cluster shows",
            name,
            hint="it reads the simulator's ground truth, which a learning policy never does",
        )


def _check_stage2(args: TrainArgs, selector: str) -> None:
    """Read stage 2's inputs: its selector, its scenarios (each run held ``--jobs`` times)."""
    from experiments import inputs

    inputs.selector(selector, "--selector")
    cfg = _stage2_config(args, selector, None)
    inputs.scenario_entries(cfg.scenarios, args.rate_per_min, "--scenario", cfg.jobs)


def _train_stage2(
    args: TrainArgs, out: str | Path, selector: str, selector_model: str | None, init: str | None
) -> int:
    """Train the placer ``iawp-rl`` behind ``selector``, from the parameters in ``init`` (a
    placer checkpoint; ``None`` = ``iawp-pass``'s rule)."""
    from experiments import inputs

    _check_stage2(args, selector)
    if init is not None:
        inputs.placer_model(init, "--resume")
    from experiments.train_placer import train_placer
    from experiments.train_summary import stage2_lines

    started = time.time()
    summary = train_placer(_stage2_config(args, selector, selector_model), out, init=init)
    if args.json:
        print(json.dumps({k: summary[k] for k in ("seed_sets", "start", "best_iteration", "best")}))
    else:
        print("\n".join(stage2_lines(summary, Path(out), started)))
    return EXIT_OK


COMMAND = Command(
    "train",
    "train LDWP (stage 1: cloning, then masked DQN) and/or the learned placer iawp-rl (stage 2)",
    TrainArgs,
    run,
    exit_help(),
)
