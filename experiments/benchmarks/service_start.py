"""How long ``rlsched serve`` takes to start and to stop, its memory once ready and how soon it
answers at rest (a script, not a test).

    python -m experiments.benchmarks.service_start [--schedulers mct+mlsm,auto] [--runs 3]

For each scheduler, ``--runs`` times: a fresh config and queue in a temporary folder, the service
started as a child (:class:`~experiments.benchmarks.service_process.ServiceProcess`, NumPy
backend) and timed until ``/readyz`` answers 200; its resident memory then (``VmRSS``, Linux);
the median of 50 ``GET /healthz`` on one kept-alive connection; then SIGTERM, timed until the
process has exited. What a restart costs an operator, and what each
real-service test pays per service it starts.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from experiments.benchmarks.service_process import ServiceProcess, free_port, proc_figures, write_config


@dataclass(frozen=True)
class StartStop:
    """One service's life: seconds to ready, resident MiB once ready, the median ms of a request
    at rest, seconds from SIGTERM to exit."""

    ready_s: float
    rss_mib: float
    request_ms: float
    stop_s: float


def one(scheduler: str, folder: Path) -> StartStop:
    """Start, measure and stop one service on ``scheduler`` with its files in ``folder``."""
    port = free_port()
    s = ServiceProcess(write_config(folder, port, {"bench": "tok-bench"}, scheduler=scheduler), port)
    t0 = time.monotonic()
    s.start()
    ready = time.monotonic() - t0
    rss, _ = proc_figures(s.pid)
    ms = []
    with httpx.Client(base_url=s.url) as c:
        for _ in range(50):
            t = time.perf_counter()
            c.get("/healthz")
            ms.append(1000 * (time.perf_counter() - t))
    t1 = time.monotonic()
    s.stop()
    return StartStop(ready, rss, statistics.median(ms), time.monotonic() - t1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", default="mct+mlsm,mct+speedup,mct+iawp-pass,auto")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"# python -m experiments.benchmarks.service_start --schedulers {a.schedulers} --runs {a.runs}")
    print(f"# {platform.node()}, {platform.python_version()}")
    print("| scheduler | start to ready, s | SIGTERM to exit, s | RSS, MiB | GET /healthz, median ms |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in a.schedulers.split(","):
            runs = []
            for i in range(a.runs):
                folder = Path(tmp) / f"{spec}-{i}"
                folder.mkdir()
                runs.append(one(spec, folder))

            def cells(xs: list[float], fmt: str) -> str:
                return " / ".join(format(x, fmt) for x in xs)

            print(
                f"| `{spec}` | {cells([r.ready_s for r in runs], '.2f')} | "
                f"{cells([r.stop_s for r in runs], '.2f')} | {cells([r.rss_mib for r in runs], '.0f')} | "
                f"{cells([r.request_ms for r in runs], '.1f')} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
