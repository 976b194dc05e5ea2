"""How much device memory a kernel takes while it runs, for MLSM to hold before launching it.

MLSM once accounted a running subtask's inputs and, after the kernel, its outputs — not what the
kernel allocates while it runs. A real GPU's pool, capped at the same bytes, refuses those
allocations: on the first GPU run, with 24 MiB, `kmeans_assign` (8.4 MB of temporaries on 1.3 MB
of inputs and no output) was refused until its task failed (BENCHMARKS.md, "The live runtime on
a real GPU"). Each kind's peak allocation per byte of its inputs is measured here on NumPy with
``tracemalloc`` (the kernels allocate the same arrays on CuPy). A live subtask declares its inputs
plus this as its memory (``runtime.cluster.workload.stage_mem_mb``), and the node agent holds it
in MLSM before the kernel starts (``SubtaskExecutor.hold``).
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np

from rlsched.tasks import Device
from rlsched.workloads import KINDS
from runtime.kernels.pipelines import LIVE_APPS, stage_plan
from runtime.kernels.tasks import make_task_data

#: Peak bytes each GPU-capable kernel allocates while it runs (temporaries and outputs) per byte
#: of its inputs, measured by :func:`measure_peaks` (``python -m
#: experiments.benchmarks.kernel_memory``) on the small task scale, times :data:`MARGIN`, rounded
#: up to a tenth. A test re-measures them.
PEAK_PER_INPUT_BYTE: dict[str, float] = {
    "gmm": 7.6,
    "frame_diff": 8.6,
    "gaussian_pyramid": 17.1,
    "dog_pyramid": 0.9,
    "extrema_detection": 3.4,
    "tube_extraction": 11.8,
    "face_locations": 8.3,
    "landmarks": 0.5,
    "encodings": 0.2,
    "distance": 0.9,
    "matmul": 0.2,
    "fft": 5.8,
    "spectral_filter": 7.1,
    "ifft": 1.1,
    "kmeans_assign": 7.1,
    "kmeans_update": 6.3,
}
#: Head-room over the measured peak (allocator rounding, a larger chunk than the one measured).
MARGIN = 1.1
#: For a kind without a measurement: the largest measured.
_UNKNOWN = max(PEAK_PER_INPUT_BYTE.values())


def working_bytes(kind: str, input_bytes: int) -> int:
    """Device bytes to reserve for one run of ``kind``'s kernel on ``input_bytes`` of inputs.

    :param kind: the subtask kind.
    :param input_bytes: bytes of the arrays it reads.
    """
    return math.ceil(PEAK_PER_INPUT_BYTE.get(kind, _UNKNOWN) * input_bytes)


def measure_peaks() -> dict[str, float]:
    """Each GPU-capable kind's peak allocation per input byte, on NumPy (the largest over the
    stages and apps that run it), from one task per app at the small scale."""
    peaks: dict[str, float] = {}
    for app in LIVE_APPS:
        task = make_task_data(app, 1, 1)
        data = dict(task.inputs)
        for plan in stage_plan(app):
            args = {n: data[n] for n in plan.reads}
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                out = plan.spec.fn(np, args, plan.params)
                peak = tracemalloc.get_traced_memory()[1] - base
            finally:
                tracemalloc.stop()
            data.update(out)
            if KINDS[plan.spec.kind].device is Device.CPU:
                continue
            per = peak / max(sum(int(a.nbytes) for a in args.values()), 1)
            peaks[plan.spec.kind] = max(peaks.get(plan.spec.kind, 0.0), per)
    return peaks
