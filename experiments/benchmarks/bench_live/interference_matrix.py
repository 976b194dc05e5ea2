"""Section ``interference``: ``LiveProfiler`` on the default live cluster; ``colocation.csv`` and
``solo.csv`` into ``--out`` and the kind x partner matrix of V100M16.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.benchmarks.bench_live.common import MATRIX_DEVICE, Sizes, on_real_gpus
from runtime.cluster.config import default_live_cluster
from runtime.cluster.workload import VIDEO_APPS


def section_interference(sz: Sizes, backend: str, out_dir: Path) -> dict[str, float]:
    """Section 6; returns the number of measured pairs."""
    from rlsched.interference.measurements import read_colocation_csv
    from runtime.profiler import DEFAULT_REPS, LiveProfiler, profile_to_csv

    spec = on_real_gpus(default_live_cluster(), backend)
    print(
        f"LiveProfiler on the default live cluster ({backend}), apps {', '.join(VIDEO_APPS)}, fraction "
        f"{sz.profile_fraction}, {DEFAULT_REPS} timed co-runs per pair, seed 0.\n"
    )
    with LiveProfiler(spec, backend, VIDEO_APPS, DEFAULT_REPS) as prof:
        colo, solo = profile_to_csv(prof, out_dir, sz.profile_fraction, seed=0)
        pairs = prof.measured_pairs
    data = read_colocation_csv(colo)
    cells: dict[tuple[str, str], list[float]] = {}
    for dv, k, p, y in zip(data.device, data.kind, data.partner, data.y, strict=True):
        if dv == MATRIX_DEVICE:
            cells.setdefault((k, p), []).append(float(y))
    kinds = sorted({k for k, _ in cells} | {p for _, p in cells})
    print(f"norm_throughput on {MATRIX_DEVICE} (row: measured kind, column: partner; '-' not measured):\n")
    print("| kind \\ partner | " + " | ".join(kinds) + " |")
    print("|---" * (len(kinds) + 1) + "|")
    for k in kinds:
        row = [f"{np.mean(cells[k, p]):.2f}" if (k, p) in cells else "-" for p in kinds]
        print(f"| {k} | " + " | ".join(row) + " |")
    print(f"\n{pairs} (device, kind, partner) triples measured; wrote {colo} and {solo}")
    return {"pairs": float(pairs)}
