"""Section ``backend``: per kernel kind at scale medium, NumPy (one thread, in a subprocess with
the BLAS thread variables set to 1) vs CuPy (one stream, CUDA-event time after a warm-up). Skipped
without a usable CuPy.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from experiments.benchmarks.bench_live.common import MATRIX_DEVICE, Sizes
from rlsched.tasks import Device as Where
from rlsched.workloads import KINDS
from runtime.backends.base import Backend, DeviceConfig
from runtime.backends.select import choose_backend, cupy_unavailable_reason
from runtime.kernels import KERNELS, LIVE_APPS, make_task_data, run_task_numpy, stage_plan

#: Variables that pin NumPy's BLAS and OpenMP pools to one thread in the reference subprocess.
ONE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def kind_inputs(scale: str) -> dict[str, tuple[str, dict[str, np.ndarray], dict[str, Any]]]:
    """For every kind of :data:`KERNELS`: (first app that has it, the inputs its stage reads in
    that app's reference task, the stage's params)."""
    found: dict[str, tuple[str, dict[str, np.ndarray], dict[str, Any]]] = {}
    for app in LIVE_APPS:
        every = run_task_numpy(make_task_data(app, 0, 0, seed=0, scale=scale))
        for plan in stage_plan(app):
            if plan.spec.kind not in found:
                found[plan.spec.kind] = (app, {n: every[n] for n in plan.reads}, plan.params)
    return {k: found[k] for k in KERNELS if k in found}


def numpy_kernel_seconds(scale: str, reps: int) -> dict[str, float]:
    """Median NumPy seconds of every kind's kernel in this thread, after one warm-up run."""
    out = {}
    for kind, (_, inputs, params) in kind_inputs(scale).items():
        fn = KERNELS[kind].fn
        fn(np, inputs, params)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(np, inputs, params)
            times.append(time.perf_counter() - t0)
        out[kind] = statistics.median(times)
    return out


def numpy_one_thread(scale: str, reps: int) -> dict[str, float]:
    """:func:`numpy_kernel_seconds` in a subprocess whose BLAS uses one thread (the variables are
    read when NumPy loads, so this process cannot change its own pool)."""
    env = {**os.environ, **dict.fromkeys(ONE_THREAD_ENV, "1")}
    code = (
        "import json; from experiments.benchmarks.bench_live.backend_speedup import numpy_kernel_seconds; "
        f"print(json.dumps(numpy_kernel_seconds({scale!r}, {reps})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=Path(__file__).resolve().parents[3],  # the repository root, where ``experiments`` lives
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    times: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return times


def device_kernel_seconds(backend: Backend, scale: str, reps: int) -> dict[str, tuple[float, float] | str]:
    """Per kind: (median device seconds, median host wall of the synchronised run) on one stream of
    device 0 after a warm-up run, or why it could not run."""
    dev = backend.open(DeviceConfig(0, MATRIX_DEVICE, 16 << 30))
    stream = dev.new_stream()
    out: dict[str, tuple[float, float] | str] = {}
    try:
        for kind, (_app, inputs, params) in kind_inputs(scale).items():
            if KINDS[kind].device is Where.CPU:
                out[kind] = "CPU-only kind"
                continue
            fn = KERNELS[kind].fn
            try:
                on_dev = {n: stream.upload(a) for n, a in inputs.items()}
                stream.run(fn, on_dev, params)  # warm-up: CuPy compiles kernels on first launch
                secs, walls = [], []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    secs.append(stream.run(fn, on_dev, params)[1])
                    walls.append(time.perf_counter() - t0)
                out[kind] = (statistics.median(secs), statistics.median(walls))
            except Exception as exc:  # one broken kernel must not cost the rest of a short GPU session
                out[kind] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
    finally:
        dev.close()
    return out


def section_backend(sz: Sizes, backend: str, device_backend: Backend | None = None) -> dict[str, float]:
    """Section 5; ``device_backend`` overrides the CuPy backend (a NumPy one exercises the code
    path on machines without a GPU). Returns each kind's speedup."""
    if device_backend is None:
        reason = cupy_unavailable_reason()
        if backend != "cupy" or reason is not None:
            why = reason or "CuPy is usable but --backend numpy was asked for"
            print(f"Skipped: {why}.")
            return {}
        device_backend = choose_backend("cupy")
    print(
        f"Scale {sz.backend_scale}; median of {sz.backend_reps} runs after a warm-up. NumPy: one thread "
        f"({', '.join(ONE_THREAD_ENV)} = 1, in a subprocess); {device_backend.name}: one stream of device 0, "
        "device seconds (CUDA events) and host wall of the synchronised run.\n"
    )
    cpu = numpy_one_thread(sz.backend_scale, sz.backend_reps)
    dev = device_kernel_seconds(device_backend, sz.backend_scale, sz.backend_reps)
    print(
        f"| kind | app | NumPy 1 thread ms | {device_backend.name} device ms | {device_backend.name} wall ms "
        "| speedup (device) | speedup (wall) |"
    )
    print("|---|---|---|---|---|---|---|")
    apps = {k: a for k, (a, _, _) in kind_inputs("small").items()}
    out: dict[str, float] = {}
    for kind, c in cpu.items():
        d = dev.get(kind, "not measured")
        if isinstance(d, str):
            print(f"| {kind} | {apps.get(kind, '?')} | {c * 1e3:.2f} | {d} | | | |")
            continue
        sd, sw = d
        out[kind] = c / max(sd, 1e-9)
        print(
            f"| {kind} | {apps.get(kind, '?')} | {c * 1e3:.2f} | {sd * 1e3:.3f} | {sw * 1e3:.3f} "
            f"| {out[kind]:.1f} | {c / max(sw, 1e-9):.1f} |"
        )
    return out
