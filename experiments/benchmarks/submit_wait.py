"""What ``rlsched submit --chunks N --wait`` costs a client and the service (a script, not a test).

    python -m experiments.benchmarks.submit_wait [--tasks 300] [--no-wait]

Starts a service (``mct+mlsm``, the embedded cluster, NumPy backend, a line per request in its
log), runs ``rlsched submit --app matmul --chunks N --wait`` against it as a user would, and
prints the command's wall time, the tasks' own latency (the command's summary line) and the
requests the service logged, by method, route and status. With ``--no-wait``, the submission
alone: the command's wall time and the service's own time on its ``POST /v1/tasks`` requests.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from experiments.benchmarks.service_process import ROOT, ServiceProcess, free_port, write_config


def requests_logged(log: str) -> Counter[str]:
    """Requests in a service log, by ``METHOD route status`` (task ids as ``{id}``)."""
    found = re.findall(r"INFO (GET|POST|PUT|DELETE) (\S+) (\d{3})", log)
    return Counter(f"{m} {re.sub(r'/[0-9]+', '/{id}', path)} {status}" for m, path, status in found)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=300)
    ap.add_argument("--no-wait", action="store_true", help="time the submission alone")
    a = ap.parse_args(argv)
    print(
        f"# python -m experiments.benchmarks.submit_wait --tasks {a.tasks}"
        + (" --no-wait" if a.no_wait else "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        s = ServiceProcess(
            write_config(Path(tmp), port, {"bench": "tok-bench"}, top='log_level = "info"'), port
        )
        s.start()
        try:
            cmd = [sys.executable, "-m", "experiments.cli", "submit", "--app", "matmul"]
            cmd += ["--chunks", str(a.tasks), "--url", s.url] + ([] if a.no_wait else ["--wait"])
            t0 = time.monotonic()
            r = subprocess.run(
                cmd,
                cwd=ROOT,
                env={**os.environ, "RLSCHED_TOKEN": "tok-bench"},
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - t0
        finally:
            s.stop()
        if r.returncode != 0:
            print(r.stderr, file=sys.stderr)
            return 1
        log = s.log.read_text()
        if a.no_wait:
            ms = [float(x) for x in re.findall(r"INFO POST /v1/tasks 20[01] tenant=\S+ ([\d.]+) ms", log)]
            print(f"submit of {a.tasks} tasks: {wall:.2f} s wall; its POST /v1/tasks: {sum(ms):.1f} ms")
        else:
            print(f"submit --wait of {a.tasks} tasks: {wall:.1f} s wall")
            print(f"its summary: {r.stdout.splitlines()[-1]}")
        for route, n in sorted(requests_logged(log).items()):
            print(f"  {n:6d}  {route}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
