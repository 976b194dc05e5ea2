"""How many GPU co-runs `rlsched serve` observes at rising submission rates (a script, not a test).

    python -m experiments.benchmarks.corun_supply [--seconds 25] [--rates 20,60,150] [--cores N]

Online interference learning (``ldwp+iawp`` with its defaults) learns only from GPU subtasks
that ran beside others; solo runs set its reference speeds. This starts a real ``rlsched serve``
child on the embedded live cluster (backend from ``RLSCHED_TEST_BACKEND``: ``numpy`` by default,
``cupy`` on a GPU), waits for its calibration survey, then submits the two video apps at each
rate in turn and reads ``/v1/models`` before and after: solo runs, co-runs, brief overlaps, and
the interference model's online updates (an update every 16 co-runs; the service's learning
test updates every 8). It answers whether a backend gives the learner anything to learn from: on one
H100, with the embedded cluster's one CPU core per node, the video apps' GPU kernels were so
short next to their CPU stages that none overlapped. ``--cores N`` serves the embedded cluster
with N cores per node instead (a GPU host has more than the 2 cores the default is sized for).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from experiments.benchmarks.service_process import ServiceProcess, free_port, until_models, write_config
from runtime.cluster.config import default_live_cluster
from runtime.cluster.config_io import write_live_cluster

H = {"Authorization": "Bearer tok-ops"}
TOP = (
    'checkpoint_interval_s = 5\ncalibration_apps = ["video_synopsis"]\ncalibration_budget_s = 120\n'
    "online_batch = 16\n"
)
APPS = ("video_synopsis", "intrusion_detection")


def _models(s: ServiceProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{s.url}/v1/models", headers=H, timeout=30).json())


def _calibrated(m: dict[str, Any]) -> bool:
    return bool(m["calibration"]) and all(v["state"] == "calibrated" for v in m["calibration"].values())


def _submit(s: ServiceProcess, rate: float, seconds: float, start: int) -> int:
    """Submit 4 tasks at a time, paced to ``rate`` tasks/s for ``seconds``; how many."""
    n, t0 = 0, time.monotonic()
    with httpx.Client(timeout=30) as c:
        while time.monotonic() < t0 + seconds:
            k = start + n
            body = [{"app": APPS[(k + j) % 2], "stream": (k + j) % 8, "chunk": k + j} for j in range(4)]
            r = c.post(f"{s.url}/v1/tasks", json=body, headers=H)
            r.raise_for_status()
            n += 4
            time.sleep(max(0.0, t0 + n / rate - time.monotonic()))
    return n


def main(argv: list[str] | None = None) -> None:
    """Print one row per rate."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=25.0, help="submission time per rate")
    ap.add_argument("--rates", default="20,60,150", help="tasks/s, comma-separated, in order")
    ap.add_argument("--cores", type=int, default=None, help="CPU cores per node (default: the embedded 1)")
    args = ap.parse_args(argv)
    rates = [float(x) for x in args.rates.split(",") if x.strip()]
    backend = os.environ.get("RLSCHED_TEST_BACKEND", "numpy")
    print(f"# command: python -m experiments.benchmarks.corun_supply {' '.join(sys.argv[1:])}")
    print(f"# machine: {platform.platform()}, cpus {os.cpu_count()}; backend {backend}")
    folder = Path(tempfile.mkdtemp(prefix="corun-"))
    port = free_port()
    top = TOP
    if args.cores is not None:
        spec = default_live_cluster()
        nodes = tuple(dataclasses.replace(n, cpu_cores=args.cores) for n in spec.nodes)
        write_live_cluster(dataclasses.replace(spec, nodes=nodes), folder / "cluster.toml")
        top += 'cluster = "cluster.toml"\n'
    print(f"# cluster: the embedded one, {args.cores or 1} CPU core(s) per node")
    print(f"# service log: {folder / 'server.log'}")
    config = write_config(folder, port, {"ops": "tok-ops"}, {"ops": "admin = true"}, top, "ldwp+iawp")
    s = ServiceProcess(config, port)
    s.start()
    try:
        t0 = time.monotonic()
        until_models(s, H, _calibrated, "every GPU model calibrated")
        print(f"\ncalibrated in {time.monotonic() - t0:.1f} s\n")
        print(
            "| rate tasks/s | submitted | solo runs | co-runs | of them without a solo reference | brief |"
            " interference updates (total) |"
        )
        print("|---|---|---|---|---|---|---|")
        sent = 0
        for rate in rates:
            before = _models(s)["observed_runs"]
            n = _submit(s, rate, args.seconds, sent)
            sent += n
            m = _models(s)
            seen = {k: m["observed_runs"][k] - before[k] for k in before}
            co_runs = seen["co_run"] + seen["no_reference"]
            print(
                f"| {rate:g} | {n} | {seen['solo']} | {co_runs} | {seen['no_reference']} | {seen['brief']} "
                f"| {m['online_updates']['interference']} |",
                flush=True,
            )
        cluster = httpx.get(f"{s.url}/v1/cluster", headers=H, timeout=30).json()
        print(f"\nat the end: {json.dumps({k: cluster[k] for k in ('queued', 'running', 'done', 'failed')})}")
    finally:
        s.stop()


if __name__ == "__main__":
    main()
