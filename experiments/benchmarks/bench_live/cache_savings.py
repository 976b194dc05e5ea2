"""Section ``cache``: H2D bytes loaded vs saved by the MLSM input cache for streams of matmul,
fft and kmeans on a two-GPU node, with ample and with deliberately small device memory (issue
target: saved >= 50 % of what the inputs would have cost; with small memory evictions > 0 and 0
lost; a third, smaller memory is a stress case).
"""

from __future__ import annotations

import math
from collections import Counter

from experiments.benchmarks.bench_live.common import SCHEDULER, Sizes, cuda_count, on_real_gpus, run_session
from experiments.benchmarks.bench_live.logged_backend import LoggedBackend
from runtime.backends.select import choose_backend
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions, device_table
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work

#: Device memories of the cache section: ample; small enough to evict; smaller than the parked
#: intermediate outputs of a few fft tasks plus the next stage (a stress case).
CACHE_MEM_MIB = (1024, 40, 24)


def section_cache(sz: Sizes, backend: str) -> dict[str, float]:
    """Section 2; returns the saved share and evictions of each memory size."""
    apps = {"matmul": 1.0, "fft": 1.0, "kmeans": 1.0}
    ngpu = min(2, cuda_count(backend))
    w = LiveWorkload(apps=apps, streams=sz.cache_streams, tasks=sz.cache_tasks, rate_per_s=100.0, seed=0)
    print(
        f"One node, {ngpu} x V100M16 + 1 CPU core, scheduler {SCHEDULER}; {w.tasks} tasks of {w.streams} "
        "streams (matmul, fft, kmeans; weights / filter spectra / centroids repeat within a stream) at "
        f"{w.rate_per_s:.0f}/s. saved share = saved / (loaded + saved). Target: >= 50 %.\n"
    )
    print(
        "| device memory | tasks done | not completed | hits | misses | hit rate | evictions | H2D MB loaded "
        "| H2D MB saved | saved share | all uploads MB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    out: dict[str, float] = {}
    tables = []
    notes: list[str] = []
    for mem in CACHE_MEM_MIB:
        gpus = tuple(LiveGpu("V100M16", i, mem_mib=mem) for i in range(ngpu))
        spec = on_real_gpus(LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=1, gpus=gpus),)), backend)
        logged = LoggedBackend(choose_backend(backend, max_speed=spec.max_speed))
        res, _ = run_session(LocalCluster(spec, logged), build_work(w), LiveOptions(seed=0))
        d = res.devices
        hits, misses = sum(x.hits for x in d), sum(x.misses for x in d)
        loaded, saved = sum(x.h2d_bytes_loaded for x in d), sum(x.h2d_bytes_saved for x in d)
        share = saved / (loaded + saved) if loaded + saved else math.nan
        evictions = sum(x.evictions for x in d)
        m = res.metrics
        print(
            f"| {mem} MiB | {m.tasks_completed} | {m.not_completed} | {hits} | {misses} "
            f"| {hits / max(hits + misses, 1):.2f} | {evictions} | {loaded / 1e6:.1f} | {saved / 1e6:.1f} "
            f"| {100 * share:.0f} % | {sum(logged.log.upload_bytes) / 1e6:.1f} |",
            flush=True,
        )
        if res.errors:
            reasons = Counter(e.strip().splitlines()[-1][:120] for e in res.errors.values())
            notes.append(f"{mem} MiB: " + "; ".join(f"{n} x {r!r}" for r, n in reasons.most_common(3)))
        tables.append((mem, device_table(d)))
        out[f"saved_share_{mem}"] = share
        out[f"evictions_{mem}"] = float(evictions)
        out[f"lost_{mem}"] = float(m.not_completed)
    print(
        "\nH2D MB loaded / saved: task inputs through the MLSM cache (misses / hits); all uploads: "
        "every host-to-device copy, parent outputs moved between units included."
    )
    for note in notes:
        print(f"\nLost or failed tasks, {note}")
    for mem, table in tables:
        print(f"\nPer GPU, {mem} MiB:\n\n{table}")
    return out
