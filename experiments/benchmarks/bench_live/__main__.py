"""The live runtime's figures (a script, not a test): dispatch overhead, MLSM cache savings, stream
feedback, streams vs throughput, backend speedup per kernel and a measured interference matrix.

Sections (``--sections``, comma-separated; default all), each in its own module:

1. ``dispatch`` (:mod:`.dispatch_overhead`) — runtime time per subtask beyond the kernel's own time.
2. ``cache`` (:mod:`.cache_savings`) — H2D bytes loaded vs saved by the MLSM input cache.
3. ``feedback`` (:mod:`.stream_feedback`) — stream feedback on emulated GPUs of speeds 1 and 3.
4. ``streams`` (:mod:`.stream_throughput`) — tasks/s and GPU util of one GPU with 1, 2, 4, 8 streams.
5. ``backend`` (:mod:`.backend_speedup`) — NumPy (one thread) vs CuPy per kernel kind.
6. ``interference`` (:mod:`.interference_matrix`) — ``LiveProfiler``'s measured interference matrix.

``--quick`` shrinks every section (~1 minute on 2 cores).

    python -m experiments.benchmarks.bench_live [--backend numpy|cupy] [--out DIR] [--quick]
        [--sections dispatch,cache,feedback,streams,backend,interference]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from experiments.benchmarks.bench_live.backend_speedup import section_backend
from experiments.benchmarks.bench_live.cache_savings import section_cache
from experiments.benchmarks.bench_live.common import FULL, QUICK
from experiments.benchmarks.bench_live.dispatch_overhead import section_dispatch
from experiments.benchmarks.bench_live.interference_matrix import section_interference
from experiments.benchmarks.bench_live.stream_feedback import section_feedback
from experiments.benchmarks.bench_live.stream_throughput import section_streams
from runtime.backends.base import BACKEND_ENV
from runtime.backends.select import choose_backend, cupy_unavailable_reason

SECTIONS: tuple[str, ...] = ("dispatch", "cache", "feedback", "streams", "backend", "interference")
#: How ``--help`` and the ``# command:`` line name this script (``-m`` leaves ``__main__.py`` in argv).
PROG = "python -m experiments.benchmarks.bench_live"


def gpu_name() -> str:
    """CUDA device 0's name, or why there is none."""
    reason = cupy_unavailable_reason()
    if reason is not None:
        return f"none ({reason})"
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"]
    count = int(cupy.cuda.runtime.getDeviceCount())
    return f"{name.decode() if isinstance(name, bytes) else name} x {count}"


def resolve_backend(name: str | None) -> str:
    """The backend the run uses: the flag, else ``$RLSCHED_BACKEND``, else CuPy when usable."""
    name = name or os.environ.get(BACKEND_ENV, "").strip() or None
    if name is None:
        return "cupy" if cupy_unavailable_reason() is None else "numpy"
    return choose_backend(name).name  # validates the name and CuPy's availability


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Run the chosen sections; return their headline figures by section."""
    ap = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--backend", choices=("numpy", "cupy"), default=None, help="default: automatic")
    ap.add_argument("--out", default="bench_live_out", help="folder for plots and CSVs")
    ap.add_argument("--quick", action="store_true", help="shrink every section (~1 minute on 2 cores)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated of {','.join(SECTIONS)}")
    args = ap.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    backend = resolve_backend(args.backend)
    sz = QUICK if args.quick else FULL
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    shown = argv if argv is not None else sys.argv[1:]
    print("# command: " + " ".join([PROG, *shown]))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print(
        f"# machine: {platform.platform()}, {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, numpy {np.__version__}, usable cpus {cpus}, load average {load}"
    )
    print(f"# backend: {backend}; GPU: {gpu_name()}\n")
    titles = {
        "dispatch": "1. Dispatch overhead per subtask",
        "cache": "2. Host-to-device bytes saved by the MLSM cache",
        "feedback": "3. Stream feedback convergence",
        "streams": "4. Throughput with 1, 2, 4, 8 streams per GPU",
        "backend": "5. Backend speedup per kernel",
        "interference": "6. Measured interference matrix",
    }
    results: dict[str, dict[str, float]] = {}
    walls: dict[str, float] = {}
    t_all = time.perf_counter()
    for s in SECTIONS:
        if s not in sections:
            continue
        print(f"## {titles[s]}\n", flush=True)
        t0 = time.perf_counter()
        if s == "dispatch":
            results[s] = section_dispatch(sz, "numpy")
            if backend == "cupy":
                print()
                results["dispatch_cupy"] = section_dispatch(sz, "cupy")
        elif s == "cache":
            results[s] = section_cache(sz, backend)
        elif s == "feedback":
            results[s] = section_feedback(sz, out_dir)
        elif s == "streams":
            results[s] = section_streams(sz, backend, out_dir)
        elif s == "backend":
            results[s] = section_backend(sz, backend)
        else:
            results[s] = section_interference(sz, backend, out_dir)
        walls[s] = time.perf_counter() - t0
        print(f"\n_section wall: {walls[s]:.1f} s_\n", flush=True)
    total = time.perf_counter() - t_all
    print("## Wall time per section\n")
    print("| section | wall s |")
    print("|---|---|")
    for s, wall in walls.items():
        print(f"| {s} | {wall:.1f} |")
    print(f"| total | {total:.1f} |")
    if hasattr(os, "getloadavg"):
        print(f"\n# load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return results


if __name__ == "__main__":
    main()
