"""Sim-to-live through the service: scheduler pairs through a real ``rlsched serve`` on the
embedded live cluster, next to the same pairs in the simulator on the same cluster and tasks.

    python -m experiments.benchmarks.service_vs_sim [--seeds 20000,20001,20002] [--tasks 600]
        [--rate 30] [--pairs ldwp+iawp,mct+iawp,mct+mlsm,mct+speedup]

Per seed, one workload of the two video apps (``LiveWorkload``: Poisson arrivals at ``--rate``
tasks/s over 6 streams, where co-location on the GPUs matters) is built once. Simulator: the
cluster's datasheet twin (``LiveClusterSpec.to_cluster_spec``) runs exactly those tasks; its IAWP
calibrates on the simulator's instrument. Service: a fresh ``rlsched serve`` (NumPy backend)
with the pair; once its placer is calibrated on the live cluster (its own background survey),
each task is submitted at its arrival time; throughput is tasks over the span from the first
submission to the last completion, p95 the 95th percentile of submission-to-completion latency
(from the queue file). Seeds are the test seeds (20000+): nothing was tuned on them. The two
worlds run at different absolute speeds (datasheet FLOP/s against emulated devices on the host),
so compare pairs within a world, as ratios to ``mct+mlsm``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from experiments.benchmarks.service_load import wait_drained
from experiments.benchmarks.service_process import ServiceProcess, free_port, write_config
from experiments.report_stats import mean_pm
from rlsched.scenarios import Scenario, WorkloadSpec
from rlsched.tasks import Task
from runtime.cluster.config import default_live_cluster
from runtime.cluster.workload import VIDEO_APPS, LiveWorkload, build_work

TOKEN = "bench"
H = {"Authorization": f"Bearer {TOKEN}"}
PAIRS = ("ldwp+iawp", "mct+iawp", "mct+mlsm", "mct+speedup")


#: Tasks/s ``mct+mlsm`` completes through the service on the embedded cluster with a backlog
#: (the soak's capacity measurement on the development container, 2 cores, 2026-12-03: 46.1-46.9).
LIVE_CAPACITY = 46.5


def _twin(work: LiveWorkload, tasks: list[Task]) -> Scenario:
    spec = default_live_cluster()
    return Scenario("live-twin", spec.to_cluster_spec(), WorkloadSpec(tasks=len(tasks), apps=dict(work.apps)))


def sim_scale(work: LiveWorkload, live_capacity: float) -> float:
    """Factor on the workload's arrival times that offers the datasheet twin the same share of
    its capacity as the live cluster gets (the twin runs the small live kernels at datasheet
    FLOP/s, about a thousand times faster than emulated devices on the host: unscaled, it is idle)."""
    from envs.simulator import Simulator
    from rlsched.policies import parse_scheduler

    tasks = [dataclasses.replace(t, arrival_s=0.0) for t, _ in build_work(work)]
    sched = parse_scheduler("mct+mlsm")
    capacity = Simulator(_twin(work, tasks), tasks, sched.placer, seed=work.seed).run(sched).throughput
    share = work.rate_per_s / live_capacity
    return work.rate_per_s / (share * capacity)


def simulate(pair: str, work: LiveWorkload, scale: float) -> dict[str, float]:
    """The pair on the live cluster's datasheet twin, on the workload's very tasks, arrivals
    scaled by ``scale`` (:func:`sim_scale`); latencies are reported in the twin's seconds."""
    from envs.simulator import Simulator
    from rlsched.policies import parse_scheduler

    tasks = [dataclasses.replace(t, arrival_s=t.arrival_s * scale) for t, _ in build_work(work)]
    sched = parse_scheduler(pair)
    m = Simulator(_twin(work, tasks), tasks, sched.placer, seed=work.seed).run(sched)
    return {"throughput": m.throughput, "p95_s": m.latency_p95_s, "completed": m.tasks_completed}


def _calibrated(url: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = httpx.get(f"{url}/v1/models", headers=H, timeout=30).json()
        states = {v["state"] for v in m["calibration"].values()}
        if not states & {"pending", "surveying"}:
            return
        time.sleep(0.5)
    raise RuntimeError("the service's placer was not calibrated in time")


def _replay(url: str, work: LiveWorkload) -> list[int]:
    """Submit each task at its arrival time (tasks due within 10 ms go together)."""
    tasks = [(t.arrival_s, d.app, d.stream, d.chunk) for t, d in build_work(work)]
    ids: list[int] = []
    t0 = time.monotonic()
    i = 0
    with httpx.Client(timeout=60) as c:
        while i < len(tasks):
            now = time.monotonic() - t0
            if tasks[i][0] > now:
                time.sleep(min(tasks[i][0] - now, 0.01))
                continue
            j = i
            while j < len(tasks) and tasks[j][0] <= now + 0.01:
                j += 1
            body = [{"app": a, "stream": s, "chunk": k} for _, a, s, k in tasks[i:j]]
            r = c.post(f"{url}/v1/tasks", json=body, headers=H)
            r.raise_for_status()
            ids += [t["id"] for t in r.json()]
            i = j
    return ids


def serve(pair: str, work: LiveWorkload, folder: Path, top: str = "") -> dict[str, float]:
    """The pair through ``rlsched serve``, the workload replayed at its arrival times.

    :param top: more top-level lines of the service's config (e.g. its ``cluster`` file).
    """
    port = free_port()
    top = 'calibration_apps = ["intrusion_detection", "video_synopsis"]\n' + top
    s = ServiceProcess(write_config(folder, port, {"bench": TOKEN}, {}, top, pair), port)
    s.start(timeout=120)
    try:
        _calibrated(s.url)
        ids = _replay(s.url, work)
        db = folder / "queue.db"
        wait_drained(db, set(ids), timeout_s=600)
    finally:
        s.stop()
    con = sqlite3.connect(db)
    rows = con.execute(
        f"SELECT submitted_at, finished_at, state FROM tasks WHERE id IN ({','.join(map(str, ids))})"
    ).fetchall()
    con.close()
    done = [(sub, fin) for sub, fin, st in rows if st == "done"]
    first = min(sub for sub, _ in done)
    last = max(fin for _, fin in done)
    lat = np.array([fin - sub for sub, fin in done])
    return {
        "throughput": len(done) / (last - first),
        "p95_s": float(np.percentile(lat, 95)),
        "completed": len(done),
    }


def _fmt(xs: list[float], f: str = ".2f") -> str:
    return mean_pm(xs, f)


def print_table(
    runs: dict[str, dict[str, list[dict[str, float]]]], pairs: list[str], worlds: tuple[str, ...]
) -> None:
    """Per pair and world: throughput, p95 and throughput over ``mct+mlsm``'s (per seed, then
    averaged), as a Markdown table."""
    head = " | ".join(f"{w} tasks/s | {w} p95 s | {w} tput / mct+mlsm" for w in worlds)
    print(f"| pair | {head} |\n|---|" + "---|---|---|" * len(worlds))
    for pair in pairs:
        cells = []
        for w in worlds:
            thr = [r["throughput"] for r in runs[pair][w]]
            base = [r["throughput"] for r in runs["mct+mlsm"][w]] if "mct+mlsm" in runs else None
            ratio = _fmt([a / b for a, b in zip(thr, base, strict=True)]) if base else "-"
            cells += [_fmt(thr), _fmt([r["p95_s"] for r in runs[pair][w]]), ratio]
        print(f"| {pair} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="20000,20001,20002")
    p.add_argument("--tasks", type=int, default=600)
    p.add_argument("--rate", type=float, default=30.0)
    p.add_argument("--pairs", default=",".join(PAIRS))
    p.add_argument("--live-capacity", type=float, default=LIVE_CAPACITY, help="tasks/s (see LIVE_CAPACITY)")
    p.add_argument("--sim-only", action="store_true", help="the simulator's half only")
    p.add_argument("--json", help="write every run's figures here too")
    args = p.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",")]
    pairs = args.pairs.split(",")
    runs: dict[str, dict[str, list[dict[str, float]]]] = {q: {"sim": [], "service": []} for q in pairs}
    for seed in seeds:
        work = LiveWorkload(
            apps={a: 1.0 for a in VIDEO_APPS}, tasks=args.tasks, rate_per_s=args.rate, seed=seed
        )
        scale = sim_scale(work, args.live_capacity)
        print(f"seed {seed}: simulator arrivals scaled by {scale:.3g}", file=sys.stderr)
        for pair in pairs:
            runs[pair]["sim"].append(simulate(pair, work, scale))
            if not args.sim_only:
                with tempfile.TemporaryDirectory(prefix="rlsched-s2l-") as tmp:
                    runs[pair]["service"].append(serve(pair, work, Path(tmp)))
            print(
                f"seed {seed} {pair}: {json.dumps({w: r[-1] for w, r in runs[pair].items() if r})}",
                file=sys.stderr,
            )
    cmd = " ".join(
        ["python -m experiments.benchmarks.service_vs_sim", *(argv if argv is not None else sys.argv[1:])]
    )
    print(
        f"# {cmd}\n# {platform.node()}: {os.cpu_count()} cores, {platform.platform()}; "
        f"test seeds {args.seeds}\n"
    )
    print_table(runs, pairs, ("sim",) if args.sim_only else ("sim", "service"))
    print(f"\n(mean ± std over seeds {args.seeds}; ratios per seed, then averaged)")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
