"""Run a grid of scenario x scheduler x seed in the simulator, in parallel, with capacity bounds.

Each case runs in a worker process; a scheduler that raises or passes its time limit comes back as
a failed row with its error, never as a missing one. The capacity bound of each (scenario, seed)
is computed once, in a worker of its own. The grid's rows feed ``experiments.report_writer``.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from experiments.worker_pool import run_surviving
from rlsched.errors import InputError
from rlsched.scenarios.spec import Scenario

#: Time bins of the per-device busy picture, and busy-state samples kept per bin on average.
UTIL_BINS = 60
SAMPLES_PER_BIN = 10


@dataclass(frozen=True)
class Case:
    """One simulation: a scenario, a scheduler, a seed.

    :param scenario: built-in name or path of a scenario file.
    :param scheduler: ``SELECTOR[+PLACER]``.
    :param seed: the seed (tasks, drift; on trace scenarios the node sample and window too).
    :param rate: arrival-rate override, tasks/min, or ``None``.
    :param model: LDWP checkpoint directory for the ``ldwp`` selector (``None``: shipped).
    :param placer_model: placer checkpoint for ``iawp-rl`` (``None``: shipped).
    :param timeout_s: wall-time limit of the run.
    :param detail: keep per-task latencies and per-device busy samples.
    :param arrival_scale: arrivals come this many times faster (:func:`scale_arrivals`).
    :param recogniser: the ``auto`` scheduler's recogniser folder (``None``: shipped).
    :param rebalance: move not-started tasks off nodes that stay overloaded or to idle GPU
        nodes (as the service).
    """

    scenario: str
    scheduler: str
    seed: int
    rate: float | None = None
    model: str | None = None
    timeout_s: float = 600.0
    detail: bool = True
    placer_model: str | None = None
    arrival_scale: float = 1.0
    recogniser: str | None = None
    rebalance: bool = False


@dataclass
class CaseResult:
    """What one case produced: metrics (``simulate --json`` fields) or an error."""

    case: Case
    status: str  # "ok", "failed" or "timeout"
    error: str = ""
    metrics: dict[str, float | int | None] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    done_s: list[float] = field(default_factory=list)  # completion times, sorted
    util_t: list[float] = field(default_factory=list)
    util: list[list[float]] = field(default_factory=list)  # devices x bins, share of samples busy
    devices: list[str] = field(default_factory=list)
    chose: str = ""  # the pair ``auto`` ran after its window ("" for any other scheduler)


class CaseTimeout(Exception):
    """The run passed its wall-time limit."""


def parse_entry(
    entry: str, rate: float | None, flag: str = "--scenarios"
) -> tuple[str, float | None, int | None]:
    """``NAME[@RATE][#TASKS]`` -> (name, rate, tasks): an entry may set its own arrival rate
    (tasks/min) and task count (the first ``TASKS`` tasks), e.g. ``paper@30`` or ``large#5000``.
    ``NAME~LOAD`` (see :func:`load_entry`) comes back as ``name`` ``"NAME~LOAD"``.

    :param entry: the entry.
    :param rate: the rate without ``@RATE`` (``--rate``; ``None``: the scenario's own).
    :param flag: the flag the entry came from, named in errors.
    :raises InputError: naming the flag and the entry, for a rate or count that is not a
        positive number.
    """
    whole = entry
    head, hash_, count = entry.rpartition("#")
    tasks = None
    if hash_:
        if not count.isdigit() or int(count) < 1:
            raise InputError(flag, whole, "a positive integer task count after '#'", count)
        entry, tasks = head, int(count)
    name, at, r = entry.rpartition("@")
    if not at:
        return entry, rate, tasks
    try:
        value = float(r)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InputError(flag, whole, "a positive arrival rate (tasks/min) after '@'", r)
    if "~" in name:
        raise InputError(flag, whole, "either @RATE or ~LOAD, not both", whole)
    if rate is not None:  # which would win is a guess the user should not have to make
        raise InputError(flag, whole, "either the entry's @RATE or --rate, not both", whole)
    return name, value, tasks


def load_entry(
    entry: str, rate: float | None, flag: str = "--scenarios", arrival_scale: float = 1.0
) -> Scenario:
    """The scenario a grid entry names (``NAME[@RATE][#TASKS]``, see :func:`parse_entry`).

    ``NAME~LOAD[#TASKS]`` runs the scenario's tasks arriving at ``LOAD`` times its capacity bound
    on its own seed (``rlsched scenarios``' load column), e.g. ``interference-saturated~0.9``.

    A file or built-in of that very name is read as it is, suffix or not: ``a@b.toml`` is a file.

    :param arrival_scale: then make its arrivals this many times faster (:func:`scale_arrivals`).
    :raises InputError: for a bad entry (naming ``flag``) or scenario (naming its file).
    """
    import dataclasses
    from pathlib import Path

    from rlsched.scenarios.loader import list_scenarios, load_scenario

    if entry in list_scenarios() or Path(entry).expanduser().is_file():
        return scale_arrivals(load_scenario(entry, rate_per_min=rate), arrival_scale)
    name, r, tasks = parse_entry(entry, rate, flag)
    name, tilde, load_text = name.partition("~")
    if tilde and rate is not None:
        raise InputError(flag, entry, "either the entry's ~LOAD or --rate, not both", entry)
    # #TASKS is applied as the file is read (its span checked with the tasks that run), except
    # under ~LOAD: the load is of the scenario's whole workload, as `rlsched scenarios` lists it.
    sc = load_scenario(name, rate_per_min=None if tilde else r, max_tasks=None if tilde else tasks)
    if tilde:
        sc = scale_arrivals(sc, _load_scale(sc, load_text, entry, flag))
        if tasks is not None:
            sc = dataclasses.replace(
                sc, workload=dataclasses.replace(sc.workload, tasks=min(tasks, sc.workload.tasks))
            )
    return scale_arrivals(sc, arrival_scale)


#: Offered loads an entry (``NAME~LOAD``) or ``evaluate --loads`` may ask for.
LOAD_RANGE = (0.05, 3.0)


def _load_scale(sc: Scenario, text: str, entry: str, flag: str) -> float:
    """How much faster ``sc``'s arrivals must come for offered load ``text``."""
    from experiments.bound_cache import own_bound

    try:
        load = float(text)
    except ValueError:
        load = math.nan
    lo, hi = LOAD_RANGE
    if not (lo <= load <= hi):
        raise InputError(flag, entry, f"an offered load in [{lo:g}, {hi:g}] after '~'", text)
    b = own_bound(sc)
    return load / float(b["offered_load"])


def scale_arrivals(sc: Scenario, factor: float) -> Scenario:
    """``sc`` with arrivals ``factor`` times as fast and the same tasks: Poisson and bursty rates
    times ``factor``, a replayed trace's gaps divided by it (``arrival_speedup``). Each gap is
    the same random draw divided by ``factor``, so the offered load scales exactly."""
    import dataclasses

    if factor == 1.0:
        return sc
    wl = sc.workload
    if wl.alibaba is not None:
        ali = dataclasses.replace(wl.alibaba, arrival_speedup=wl.alibaba.arrival_speedup * factor)
        return dataclasses.replace(sc, workload=dataclasses.replace(wl, alibaba=ali))
    a = wl.arrival
    if a.process == "trace":
        arrival = dataclasses.replace(a, time_scale=a.time_scale / factor)
    else:
        arrival = dataclasses.replace(
            a,
            rate_per_min=a.rate_per_min * factor,
            high_rate_per_min=a.high_rate_per_min * factor,
            low_rate_per_min=a.low_rate_per_min * factor,
            mean_high_s=a.mean_high_s / factor,
            mean_low_s=a.mean_low_s / factor,
        )
    return dataclasses.replace(sc, workload=dataclasses.replace(wl, arrival=arrival))


def run_case(case: Case) -> CaseResult:
    """Run one case to completion (worker side); errors come back in the result."""
    try:
        return _run(case)
    except CaseTimeout as e:
        return CaseResult(case, "timeout", str(e))
    except Exception as e:  # a failing scheduler is a result to report, not a crash
        return CaseResult(case, "failed", f"{type(e).__name__}: {e}")


def _run(case: Case) -> CaseResult:
    from envs.capacity import task_latency_bounds
    from envs.simulator import Simulator
    from experiments.fit_cache import install
    from rlsched.metrics import served_share
    from rlsched.policies.registry import PolicyOptions, describe_auto, parse_scheduler
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

    install()  # a placer's fitted interference model, shared with the other workers and runs
    scenario = scenario_for_seed(
        load_entry(case.scenario, case.rate, arrival_scale=case.arrival_scale), case.seed
    )
    tasks = generate_tasks(scenario, case.seed)
    sched = parse_scheduler(case.scheduler, PolicyOptions(case.model, case.placer_model, case.recogniser))
    sim = Simulator(scenario, tasks, sched.placer, seed=case.seed, rebalance=case.rebalance)
    devices = [(n, g) for n, node in enumerate(scenario.cluster.nodes) for g in range(len(node.gpus))]
    valid = sim.view.gpu_valid
    samples: list[tuple[float, np.ndarray]] = []
    # A bounded number of samples, whatever the task count (8,192 GPUs x 30,000 decisions would not fit).
    every = max(1, len(tasks) // (UTIL_BINS * SAMPLES_PER_BIN))
    decisions = 0
    deadline = time.perf_counter() + case.timeout_s

    def on_decision() -> None:
        nonlocal decisions
        decisions += 1
        if case.detail and decisions % every == 0:
            samples.append((sim.now, sim.view.gpu_running[valid] > 0))
        if time.perf_counter() > deadline:
            raise CaseTimeout(f"passed its time limit of {case.timeout_s:g} s")

    m = sim.run(sched, on_decision=on_decision)
    res = CaseResult(case, "ok", metrics=m.to_dict())
    auto = describe_auto(sched)
    res.chose = auto["running"] if auto is not None else ""
    arrivals, done = [r.arrival_s for r in sim.records], [r.done_s for r in sim.records]
    res.metrics["served_share"] = served_share(arrivals, done, task_latency_bounds(scenario, tasks))
    if case.detail:
        res.latencies = [r.done_s - r.arrival_s for r in sim.records if not math.isnan(r.done_s)]
        res.done_s = sorted(r.done_s for r in sim.records if not math.isnan(r.done_s))
        res.devices = [
            f"{scenario.cluster.nodes[n].name}/{scenario.cluster.nodes[n].gpus[g].name}#{g}"
            for n, g in devices
        ]
        res.util_t, res.util = _bin_samples(samples, len(devices))
    return res


def _bin_samples(
    samples: list[tuple[float, np.ndarray]], n_dev: int
) -> tuple[list[float], list[list[float]]]:
    """Average busy samples into ``UTIL_BINS`` equal time bins (empty bins stay NaN)."""
    if not samples or n_dev == 0:
        return [], []
    t = np.array([s[0] for s in samples])
    busy = np.stack([s[1] for s in samples]).astype(float)
    edges = np.linspace(t.min(), t.max() + 1e-9, UTIL_BINS + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, UTIL_BINS - 1)
    sums = np.zeros((UTIL_BINS, n_dev))
    np.add.at(sums, idx, busy)
    counts = np.bincount(idx, minlength=UTIL_BINS)[:, None]
    with np.errstate(invalid="ignore"):
        mean = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    centres = ((edges[:-1] + edges[1:]) / 2).tolist()
    return centres, mean.T.tolist()


@dataclass(frozen=True)
class BoundCase:
    """The capacity bound of one scenario and seed (and arrival rate, or scale)."""

    scenario: str
    seed: int
    rate: float | None = None
    arrival_scale: float = 1.0


def run_bound(case: BoundCase) -> tuple[BoundCase, dict[str, float | int | str | bool] | str]:
    """The bound's fields, or the error text (worker side)."""
    try:
        from envs.capacity import capacity_bound
        from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

        entry = load_entry(case.scenario, case.rate, arrival_scale=case.arrival_scale)
        scenario = scenario_for_seed(entry, case.seed)
        return case, capacity_bound(scenario, generate_tasks(scenario, case.seed)).to_dict()
    except Exception as e:
        return case, f"{type(e).__name__}: {e}"


#: Relative cost per (task x node) of a stage-1 decision, measured roughly on `large`: the
#: clairvoyant reference simulates every candidate node, the Q-network scores every node.
_DECISION_COST = {"oracle": 40.0, "ldwp": 4.0}


def _run_work(
    w: Case | BoundCase,
) -> CaseResult | tuple[BoundCase, dict[str, float | int | str | bool] | str]:
    return run_case(w) if isinstance(w, Case) else run_bound(w)


def longest_first(cases: Sequence[Case]) -> list[Case]:
    """``cases`` ordered by a rough expected run time, longest first (tasks x nodes x policy)."""
    size: dict[tuple[str, float | None], float] = {}

    def cost(c: Case) -> float:
        key = (c.scenario, c.rate)
        if key not in size:
            try:
                sc = load_entry(c.scenario, c.rate)
                size[key] = float(sc.workload.tasks * max(len(sc.cluster.nodes), 1))
            except Exception:  # the run itself reports the error
                size[key] = 0.0
        return size[key] * _DECISION_COST.get(c.scheduler.split("+")[0], 1.0)

    return sorted(cases, key=cost, reverse=True)


def default_jobs() -> int:
    """Worker processes by default: the cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_grid(
    cases: Sequence[Case],
    bounds: Sequence[BoundCase],
    jobs: int,
    progress: bool = True,
    on_result: Callable[[CaseResult], None] | None = None,
) -> tuple[list[CaseResult], dict[BoundCase, dict[str, float | int | str | bool] | str]]:
    """Run every case and bound over ``jobs`` processes (in this process when ``jobs == 1``).

    :param cases: the simulations.
    :param bounds: the (scenario, seed) bounds to compute.
    :param jobs: worker processes.
    :param progress: show a progress bar on stderr.
    :param on_result: called with each case's result as it arrives (partial results on disk).
    """
    results: dict[Case, CaseResult] = {}
    bound_out: dict[BoundCase, dict[str, float | int | str | bool] | str] = {}
    # The bar counts runs only; capacity bounds (short) show in its postfix as they finish.
    bar = tqdm(total=len(cases), desc="evaluate", unit="run", disable=None if progress else True)
    # Off a terminal (CI, a log file) the bar is silent: one plain line per run instead.
    plain = progress and bar.disable
    t0 = time.perf_counter()

    def take_case(r: CaseResult) -> None:
        results[r.case] = r
        if on_result is not None:
            on_result(r)
        what = f"{r.case.scenario} {r.case.scheduler} s{r.case.seed}: {r.status}"
        bar.set_postfix_str(what, refresh=False)
        bar.update()
        if plain:
            done = len(results)
            print(
                f"evaluate: {done}/{len(cases)} runs, {time.perf_counter() - t0:.0f} s: {what}",
                file=sys.stderr,
            )

    def take_bound(b: BoundCase, out: dict[str, float | int | str | bool] | str) -> None:
        bound_out[b] = out
        bar.set_postfix_str(f"bounds {len(bound_out)}/{len(bounds)}", refresh=True)

    try:
        if jobs <= 1:
            for b in bounds:
                bc, out = run_bound(b)
                take_bound(bc, out)
            for c in cases:
                take_case(run_case(c))
        else:
            # Spawned, not forked (a fork of a process that has started torch's or BLAS's thread
            # pools can deadlock); bounds are short, then the longest runs first, so the tail
            # stays short (the last oracle run on a large scenario used to start last and run
            # alone for minutes).
            work: list[Case | BoundCase] = [*bounds, *longest_first(cases)]

            def take(
                _: int, out: CaseResult | tuple[BoundCase, dict[str, float | int | str | bool] | str]
            ) -> None:
                if isinstance(out, CaseResult):
                    take_case(out)
                else:
                    take_bound(*out)

            def lost(i: int, why: str) -> None:
                w = work[i]
                if isinstance(w, Case):
                    take_case(CaseResult(w, "failed", why))
                else:
                    take_bound(w, why)

            def on_break(n: int) -> None:
                what = f"a worker process died; the {n} runs and bounds left run again"
                bar.write(f"evaluate: {what} (those it had started, one process each)", file=sys.stderr)

            run_surviving(work, _run_work, jobs, take, lost, on_break)
    finally:
        bar.close()
    return [results[c] for c in cases], bound_out
