"""``rlsched demo``: schedulers compared over seeds, in the simulator or on the live runtime."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import BACKEND, exit_help
from experiments.commands.flags import flag, given
from experiments.commands.unschedulable import report_live_unschedulable, report_unschedulable
from experiments.configs import DemoConfig
from rlsched.errors import InputError

if TYPE_CHECKING:
    from rlsched.scenarios.spec import Scenario

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


@dataclass(kw_only=True)
class DemoArgs:
    """Options of ``rlsched demo``.

    :param scenario: simulated scenario (built-in name or file, with an optional @RATE or ~LOAD and #TASKS)
    :param strict: exit 3 when any task was unschedulable
    :param rate: arrival rate, tasks per minute
    :param seeds: number of seeds
    :param schedulers: comma-separated specs (default: the baselines, ldwp+iawp when a model ships,
        and the clairvoyant reference oracle+speedup; live: ldwp+iawp,mct+mlsm)
    :param live: run real kernels on the local live runtime
    :param backend: live device backend (default: automatic)
    :param tasks: live: tasks per run
    :param streams: live: video streams
    :param cluster: live: cluster file (TOML; default: the embedded cluster)
    """

    scenario: str = flag(DEMO_SCENARIO, path=True)
    strict: bool = False
    rate: float | None = flag(
        None,
        parse=values.positive_float,
        shown=f"{DEMO.paper_rate_per_min:g} on paper, the scenario's own elsewhere; "
        f"{DEMO.live_rate_per_min:g} live",
    )
    seeds: int | None = flag(
        None, parse=values.COUNT, shown=f"{DEMO.seeds} simulated, {DEMO.live_seeds} live"
    )
    schedulers: str | None = None
    live: bool = False
    backend: str | None = flag(None, choices=("numpy", "cupy"))
    tasks: int = flag(DEMO.live_tasks, parse=values.COUNT)
    streams: int = flag(DEMO.live_streams, parse=values.COUNT)
    cluster: str | None = flag(None, path=True)


def demo_schedulers() -> list[str]:
    """The simulated demo's schedulers: the baselines, and ``ldwp+iawp`` when weights ship."""
    from models import PRETRAINED_LDWP

    extra = ["ldwp+iawp"] if (PRETRAINED_LDWP / "meta.json").is_file() else []
    return [*DEMO_SCHEDULERS[:-1], *extra, DEMO_SCHEDULERS[-1]]


def run(args: DemoArgs, argv: Sequence[str]) -> int:
    """The simulated demo (a table with each scheduler's share of the bound), or the live one."""
    from experiments import inputs
    from experiments.case_folders import split_suffix
    from experiments.fit_cache import install
    from experiments.simulate import compare, format_table, throughput_bounds

    if args.live:
        if given(argv, ("--scenario",)):
            raise InputError(
                "--scenario", "value", "none with --live (the live cluster comes from --cluster)"
            )
        return _live(args)
    live_only = given(argv, ("--backend", "--tasks", "--streams", "--cluster"))
    if live_only:
        raise InputError(live_only[0], "value", "none without --live (it sets up the live runtime)")
    install()  # a second demo reads the placers' fitted interference models
    rate = args.rate
    name, suffix = split_suffix(args.scenario)
    if rate is None and name == DEMO_SCENARIO and not suffix.startswith(("@", "~")):
        rate = DEMO.paper_rate_per_min  # the paper's busiest rate; other scenarios keep their own
    scenario = inputs.scenario(args.scenario, rate)
    specs = inputs.schedulers(args.schedulers, demo_schedulers(), "--schedulers")
    inputs.policy_options(specs, None, None)
    seeds = list(range(DEMO.seeds if args.seeds is None else args.seeds))
    t0 = time.perf_counter()
    cmp = compare(scenario, specs, seeds)
    arrival = scenario.workload.arrival
    shown = rate or (arrival.rate_per_min if arrival.process == "poisson" else None)
    at = f" at {shown:g} tasks/min" if shown else ""
    n = len(scenario.cluster.nodes)
    print(f"## {scenario.name}{at}: {scenario.workload.tasks} tasks, {n} nodes, seeds {seeds}")
    print()
    print(format_table(cmp, bounds=throughput_bounds(scenario, seeds)))
    print()
    over = "1 seed" if len(seeds) == 1 else f"{len(seeds)} seeds"
    print(f"(mean ± std over {over}; {time.perf_counter() - t0:.1f} s wall)")
    print(_load_line(scenario))
    first = next(iter(cmp.runs.values()))  # every scheduler sees the same tasks per seed
    return report_unschedulable(scenario, dict(zip(seeds, first, strict=True)), args.strict)


def _load_line(scenario: Scenario) -> str:
    """What the scenario's offered load means for the table above it."""
    from experiments.bound_cache import own_bound
    from experiments.report_stats import ARRIVAL_BOUND

    bound = own_bound(scenario)
    load = float(bound["offered_load"])
    if float(bound["capacity_per_min"]) <= 0:
        return "No task of this workload can run on this cluster: the capacity bound is 0 (see the warning)."
    if load < ARRIVAL_BOUND:
        return (
            f"Offered load {load:.2f} of the capacity bound: arrival-bound. Every reasonable scheduler "
            "completes what arrives, so throughput ties; latency and utilisation tell them apart. "
            "`rlsched scenarios` marks the built-ins that have headroom."
        )
    return (
        f"Offered load {load:.2f} of the capacity bound: arrivals reach what the cluster can serve, "
        "so schedulers differ in how much of the bound they reach (`of bound`)."
    )


def _live(args: DemoArgs) -> int:
    from experiments import inputs
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
    report, results = main_demo(cfg)
    print(report)
    return report_live_unschedulable([r for runs in results.values() for r in runs], args.strict)


COMMAND = Command(
    "demo",
    "compare schedulers over several seeds: in the simulator, or on the live runtime (--live)",
    DemoArgs,
    run,
    exit_help(strict=True, unavailable=f"{BACKEND} (--live)"),
)
