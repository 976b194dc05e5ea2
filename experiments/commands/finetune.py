"""``rlsched finetune``: a trained LDWP network on another cluster, zero-shot, then fine-tuned."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import BACKEND, EXIT_OK, exit_help
from experiments.commands.flags import flag, given
from experiments.configs import FinetuneConfig, LiveFinetuneConfig, TrainConfig, default
from rlsched.errors import InputError


@dataclass(kw_only=True)
class FinetuneArgs:
    """Options of ``rlsched finetune``.

    :param source: checkpoint directory of the trained network ('shipped': the shipped one)
    :param scenario: target scenario (built-in name or path, with an optional @RATE or ~LOAD and #TASKS);
        not with --live
    :param rate: arrival rate override, tasks/min
    :param steps: DQN steps on the target
    :param seed: training seed
    :param out: output directory (checkpoints, transfer.json)
    :param live: fine-tune on real executions of the live runtime
    :param backend: live cluster backend
    :param device_backend: live device backend (default: automatic)
    :param tasks: live: tasks per training episode
    :param eval_tasks: live: tasks per evaluation run
    :param cluster: live: cluster file (TOML; default: the embedded cluster)
    :param json: print the headline figures as one JSON object instead of lines
    """

    source: str = flag(name="--from", path=True)
    scenario: str | None = flag(None, path=True)
    rate: float | None = flag(None, parse=values.positive_float)
    steps: int | None = flag(
        None,
        parse=values.STEPS,
        shown=f"{default(FinetuneConfig, 'steps')} simulated, {default(LiveFinetuneConfig, 'steps')} live",
    )
    seed: int = flag(default(FinetuneConfig, "seed"), parse=values.SEED)
    out: str = flag(path=True)
    live: bool = False
    backend: str = flag(default(LiveFinetuneConfig, "cluster_backend"), choices=("local", "ray"))
    device_backend: str | None = flag(None, choices=("numpy", "cupy"))
    tasks: int = flag(default(LiveFinetuneConfig, "tasks_per_episode"), parse=values.COUNT)
    eval_tasks: int = flag(default(LiveFinetuneConfig, "eval_tasks"), parse=values.COUNT)
    cluster: str | None = flag(None, path=True)
    json: bool = False


def run(args: FinetuneArgs, argv: Sequence[str]) -> int:
    """Fine-tune in the simulator (``--scenario``) or live (``--live``); print the comparison.
    SIGTERM stops it as Ctrl-C does."""
    from experiments.commands.terminate import terminate_as_interrupt

    with terminate_as_interrupt():
        return _run(args, argv)


def _run(args: FinetuneArgs, argv: Sequence[str]) -> int:
    from experiments import inputs

    if args.source == "shipped":  # the installed package's, wherever it is
        from models import PRETRAINED_LDWP

        args = dataclasses.replace(args, source=str(PRETRAINED_LDWP))
    inputs.new_run_folder(args.out, resumable=False)
    live_only = given(argv, ("--backend", "--device-backend", "--tasks", "--eval-tasks", "--cluster"))
    if live_only and not args.live:
        raise InputError(live_only[0], "value", "none without --live (it sets up the live runtime)")
    if args.live and given(argv, ("--rate",)):
        raise InputError("--rate", "value", "none with --live (the live workload has its own rate)")
    if args.live:
        if args.scenario is not None:
            raise InputError(
                "--scenario",
                "value",
                "none with --live (the live cluster comes from --cluster)",
                args.scenario,
            )
        return _live(args)
    if args.scenario is None:
        raise InputError("--scenario", "value", "a target scenario, built-in name or file (or --live)")
    inputs.scenario(args.scenario, args.rate)  # before the network: loading it imports torch
    from experiments.case_folders import check_file_use

    check_file_use(args.scenario, "training", "--scenario")  # it trains there: never a test case
    inputs.ldwp_model(args.source, "--from")
    steps = default(FinetuneConfig, "steps") if args.steps is None else args.steps
    inputs.warn_before_learning(steps, default(TrainConfig, "learning_starts"), "it stays --from's")
    from experiments.finetune import finetune  # torch and stable-baselines3: once the inputs are read
    from experiments.train_summary import finetune_lines

    started = time.time()
    r = finetune(args.source, args.scenario, args.out, steps, args.seed, args.rate)
    if args.json:
        keys = ("target_scenario", "target_nodes", "zero_shot", "mct", "fine_tuned_best")
        print(json.dumps({k: r[k] for k in keys}))
    else:
        print("\n".join(finetune_lines(r, Path(args.out), started)))
    return EXIT_OK


def _live(args: FinetuneArgs) -> int:
    from experiments import inputs
    from experiments.finetune_live import finetune_live
    from experiments.train_summary import live_finetune_lines

    inputs.ldwp_model(args.source, "--from")
    # It writes its own co-location survey and model there: never over a profile's.
    inputs.unused_output(args.out, ("colocation.csv", "solo.csv", "interference"), "measurements")
    cluster = inputs.live_cluster(args.cluster)
    if not any(n.gpus for n in cluster.nodes):  # its interference model is fitted on GPU co-runs
        raise InputError(
            args.cluster or "--cluster", "nodes", "a cluster with at least one GPU to fine-tune on"
        )
    inputs.cluster_backend(args.backend)
    inputs.device_backend(args.device_backend, "--device-backend")
    cfg = LiveFinetuneConfig(
        steps=default(LiveFinetuneConfig, "steps") if args.steps is None else args.steps,
        seed=args.seed,
        cluster_backend=args.backend,
        device_backend=args.device_backend,
        tasks_per_episode=args.tasks,
        eval_tasks=args.eval_tasks,
        progress=sys.stderr.isatty(),
    )
    started = time.time()
    r = finetune_live(args.source, args.out, cfg, cluster)
    ix = r["interference"]
    if not args.json:
        print("\n".join(live_finetune_lines(r, Path(args.out), started)))
        return EXIT_OK
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


COMMAND = Command(
    "finetune",
    "run a trained LDWP network on another cluster, then fine-tune it",
    FinetuneArgs,
    run,
    exit_help(unavailable=f"{BACKEND} (--live)"),
)
