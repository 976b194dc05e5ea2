"""``rlsched demo --live``: the pretrained schedulers on the live runtime, against a heuristic pair.

Runs a few hundred video tasks from several streams on the embedded default cluster
(``runtime.cluster.config.default_live_cluster``: emulated GPUs on the NumPy backend unless CuPy finds a
GPU) once per scheduler and seed, checks every task's result against its ground truth, and prints
throughput, latency, per-device utilisation, cache hit rate and stream counts.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.configs import DemoConfig, default
from experiments.report_stats import mean_pm
from rlsched.interference.calibration import CalibratingPlacer
from rlsched.policies.registry import is_clairvoyant_spec, parse_scheduler
from runtime.cluster.config import LiveClusterSpec, default_live_cluster
from runtime.cluster.live import LiveOptions, LiveResult, device_table, run_live
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work
from runtime.kernels import check_result

#: Schedulers the live demo compares: the learned pair and the strongest heuristic pair.
LIVE_SCHEDULERS: tuple[str, ...] = ("ldwp+iawp", "mct+mlsm")


@dataclass(frozen=True)
class LiveDemoConfig:
    """What ``demo --live`` runs.

    :param schedulers: ``SELECTOR+PLACER`` specs.
    :param seeds: seeds (workload and scheduler).
    :param workload: tasks, streams, rate (its seed is replaced per run).
    :param backend: ``numpy``, ``cupy`` or ``None`` (automatic).
    :param cluster: the live cluster; ``None`` = the embedded default.
    """

    schedulers: Sequence[str] = LIVE_SCHEDULERS
    seeds: Sequence[int] = tuple(range(default(DemoConfig, "live_seeds")))
    workload: LiveWorkload = dataclasses.field(default_factory=LiveWorkload)
    backend: str | None = None
    cluster: LiveClusterSpec | None = None
    progress: bool = False


def run_one(spec: str, seed: int, cfg: LiveDemoConfig) -> LiveResult:
    """One live run of one scheduler, every result checked against its ground truth."""
    cluster = LocalCluster(cfg.cluster or default_live_cluster(), cfg.backend)
    work = build_work(dataclasses.replace(cfg.workload, seed=seed))
    sched = parse_scheduler(spec)
    instrument = None
    if isinstance(sched.placer, CalibratingPlacer):
        from runtime.profiler import LiveProfiler

        instrument = LiveProfiler(cluster.spec, cluster.backend_name, apps=tuple(cfg.workload.apps))
    res = run_live(cluster, sched, work, LiveOptions(seed=seed, progress=cfg.progress), instrument)
    data = {t.id: d for t, d in work}
    for tid, out in res.outcomes.items():
        if out.error is None:
            check_result(data[tid], out.outputs)
    return res


def check_live_schedulers(specs: Sequence[str]) -> None:
    """Refuse, before anything runs, a spec that cannot run live: an unknown name, or a policy
    that reads the simulator's ground truth (the ``oracle``).

    :raises ValueError: naming the spec.
    """
    for spec in specs:
        parse_scheduler(spec)  # unknown names: refused here, naming the known ones
        if is_clairvoyant_spec(spec):  # a declared clairvoyant reference (rlsched.scheduler.Clairvoyant)
            raise ValueError(
                f"scheduler {spec!r} reads the simulator's ground truth and cannot run on the live "
                "runtime; drop it from --schedulers"
            )


def run_demo(cfg: LiveDemoConfig) -> dict[str, list[LiveResult]]:
    """Every scheduler on every seed (every spec is checked before the first run starts)."""
    check_live_schedulers(cfg.schedulers)
    out: dict[str, list[LiveResult]] = {spec: [] for spec in cfg.schedulers}
    jobs = [(spec, seed) for spec in cfg.schedulers for seed in cfg.seeds]
    t0 = time.perf_counter()
    for i, (spec, seed) in enumerate(jobs, 1):
        res = run_one(spec, seed, cfg)
        out[spec].append(res)
        if not cfg.progress:  # no live bar (CI, a log file): one line per run
            print(
                f"[{i}/{len(jobs)}] live {spec} seed {seed}: "
                f"{res.metrics.throughput:.2f} tasks/s ({time.perf_counter() - t0:.0f} s elapsed)",
                file=sys.stderr,
                flush=True,
            )
    return out


def mean_std(values: Sequence[float], fmt: str = ".2f") -> str:
    """``mean ± sample std`` over seeds (ddof = 1, as every report); the value alone for one."""
    return mean_pm(values, fmt)


def format_demo(results: dict[str, list[LiveResult]]) -> str:
    """Comparison table over seeds, then the per-device table of each scheduler's first run."""
    lines = [
        "| scheduler | tasks/s | p50 s | p95 s | GPU util | cache hit rate | not completed | stream moves |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for spec, runs in results.items():
        hit = [
            sum(d.hits for d in r.devices) / max(sum(d.hits + d.misses for d in r.devices), 1) for r in runs
        ]
        lines.append(
            f"| {spec} | {mean_std([r.metrics.throughput for r in runs])} "
            f"| {mean_std([r.metrics.latency_p50_s for r in runs])} "
            f"| {mean_std([r.metrics.latency_p95_s for r in runs])} "
            f"| {mean_std([r.metrics.gpu_util for r in runs])} | {mean_std(hit)} "
            f"| {sum(r.metrics.not_completed for r in runs)} | {mean_std([r.stream_moves for r in runs])} |"
        )
    for spec, runs in results.items():
        lines += ["", f"{spec}, seed run 1 of {len(runs)} — per device:", "", device_table(runs[0].devices)]
    return "\n".join(lines)


#: Busy share of the host's cores, measured over one second before the runs, above which the
#: live demo warns that emulated-GPU timings are stretched by other work (on a loaded 2-core
#: machine the learned pair measured 11.9 tasks/s against 33.7 on an idle one).
BUSY_HOST = 0.3


def host_busy(seconds: float = 1.0) -> float | None:
    """Share of the host's CPU time spent busy over ``seconds`` (``/proc/stat``; ``None`` where
    there is none)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return 1.0 - (i1 - i0) / max(t1 - t0, 1)


def host_load_note(busy: float | None, backend: str) -> str:
    """A line on how busy the host was before the runs: emulated GPUs (NumPy) run on the host's
    cores, so other work there stretches every measured time; a warning above :data:`BUSY_HOST`."""
    if busy is None:
        return "host load: not measured here (no /proc/stat)"
    line = f"host load before the runs: {busy:.0%} of the CPU busy with other work"
    if backend == "numpy" and busy > BUSY_HOST:
        return (
            f"{line}. WARNING: the emulated GPUs run on these cores; other work stretches their "
            "timings, so absolute figures are low and noisy. Compare schedulers within one run, "
            "or rerun on an idle machine."
        )
    return line


def main_demo(cfg: LiveDemoConfig) -> tuple[str, dict[str, list[LiveResult]]]:
    """Run the demo; its report and the runs."""
    t0 = time.perf_counter()
    busy = host_busy()
    results = run_demo(cfg)
    first = next(iter(results.values()))[0]
    w = cfg.workload
    head = (
        f"## live runtime ({first.backend} backend): {w.tasks} tasks of {', '.join(sorted(w.apps))} "
        f"from {w.streams} streams at {w.rate_per_s:g} tasks/s, seeds {list(cfg.seeds)}"
    )
    done = sum(r.metrics.tasks_completed for runs in results.values() for r in runs)
    checked = (
        "every result checked against its ground truth" if done else "no task completed: no result to check"
    )
    tail = f"({checked}; {time.perf_counter() - t0:.1f} s wall)"
    note = host_load_note(busy, first.backend)
    return "\n".join([head, "", format_demo(results), "", tail, note]), results
