"""What an idle ``rlsched serve`` costs, and how soon it starts a task it is given (a script, not
a test).

    python -m experiments.benchmarks.service_idle [--scheduler mct+mlsm] [--seconds 20] [--tasks 40]

Starts a service child (NumPy backend, the embedded cluster), waits until its calibration
survey (interference-aware placers only) is over, and measures the CPU time it uses over
``--seconds`` with nothing to do. Then it submits ``--tasks`` single ``matmul`` tasks 0.15 s
apart, each onto an idle cluster, and prints the time from each task's acceptance to its start
as the service recorded them (``started_at - submitted_at``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from experiments.benchmarks.service_process import (
    ServiceProcess,
    cpu_seconds,
    free_port,
    until_models,
    write_config,
)

TOKEN = "tok-bench"


def _surveyed(models: dict[str, Any]) -> bool:
    """No GPU model's calibration is under way."""
    return not {v["state"] for v in models["calibration"].values()} & {"surveying", "pending"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", default="mct+mlsm")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--tasks", type=int, default=40)
    a = ap.parse_args(argv)
    print(
        "# python -m experiments.benchmarks.service_idle "
        f"--scheduler {a.scheduler} --seconds {a.seconds:g} --tasks {a.tasks}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        s = ServiceProcess(write_config(Path(tmp), port, {"bench": TOKEN}, scheduler=a.scheduler), port)
        s.start()
        try:
            with httpx.Client(base_url=s.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
                until_models(s, c.headers, _surveyed, "the calibration survey's end", timeout=300)
                time.sleep(1)
                c0, t0 = cpu_seconds(s.pid), time.monotonic()
                time.sleep(a.seconds)
                idle = (cpu_seconds(s.pid) - c0) / (time.monotonic() - t0)
                ids = []
                for k in range(a.tasks):
                    ids += [t["id"] for t in c.post("/v1/tasks", json={"app": "matmul", "chunk": k}).json()]
                    time.sleep(0.15)
                time.sleep(1)
                rows = [c.get(f"/v1/tasks/{i}").json() for i in ids]  # as any version answers
        finally:
            s.stop()
    waits = sorted(1000 * (r["started_at"] - r["submitted_at"]) for r in rows if r["started_at"] is not None)
    print(f"idle: {100 * idle:.1f} % of a core over {a.seconds:g} s")
    print(
        f"accepted -> started, {len(waits)} single tasks: median {statistics.median(waits):.1f} ms, "
        f"p90 {waits[int(0.9 * (len(waits) - 1))]:.1f} ms, max {waits[-1]:.1f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
