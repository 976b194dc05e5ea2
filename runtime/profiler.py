"""Profiler: measures kernel pairs co-running on one device and writes the co-location CSV
(ARCHITECTURE.md section 7), so IAWP can learn the real machine.

:class:`LiveProfiler` is the live runtime's :class:`rlsched.interference.instrument.ProfilingInstrument`, the
twin of the simulator's ``envs.simulated_instrument.SimulatedProfiler``: placers calibrate from
either without knowing which. What it measures, per GPU model of the cluster (one device per
model: emulated devices of one model are identical; on CuPy the first GPU of that model):

- **solo**: a kind's kernel run ``2 * reps + 1`` times back to back on one stream, after a
  warm-up run; throughput = 1 / median run time (runs of the reference input per second). Solo
  runs are few (one set per device and kind) and every normalised throughput of the kind divides
  by them, so they get more repetitions than a co-run.
- **co-run** ``(kind, partner)``: ``kind`` run ``reps`` times on stream A while a second thread
  keeps ``partner`` running on stream B (started first, stopped once A is done); only A's runs
  are timed. ``norm_throughput`` = co-run throughput / solo throughput, clipped to
  ``[0.001, 1.5]``; ``0`` when the two working sets do not fit in the device's memory together.

Run times are the backend's device seconds: CUDA events on CuPy; on NumPy the time the lane was
busy, which includes the emulated device's speed factor and any wait for a free engine
(``device_concurrency``), so a device that serialises kernels shows interference as it would.

Each kind's kernel input is the one its stage reads in a reference task of its app
(``make_task_data(app, 0, 0, scale)`` run once through :func:`runtime.kernels.run_task_numpy`);
a kind that appears in several apps is measured on the input of the first app that has it.
Inputs are uploaded once per measurement, outside the timed runs.

Of the resource profile (:data:`~rlsched.interference.kind_profiles.METRICS`) only the GPU/CPU ``speedup``
can be
measured on every backend; ``sm``, ``l2``, ``dram`` and ``pcie`` need hardware counters (Nsight
Compute, ``ncu``), which this profiler does not read. See :meth:`LiveProfiler.kind_profiles`.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from rlsched.interference.instrument import colocation_survey, measure_triples
from rlsched.interference.kind_profiles import METRICS, REFERENCE_GPU, ProfileSamples
from rlsched.interference.measurements import (
    ColocationData,
    write_colocation_csv,
    write_solo_csv,
)
from rlsched.tasks import Device as Where
from rlsched.tasks import KindSpec
from rlsched.workloads import APPS
from runtime.backends.base import Backend, Device, DeviceConfig, DeviceFull, Stream
from runtime.backends.select import choose_backend
from runtime.cluster.config import LiveClusterSpec, LiveGpu, fold_ordinals
from runtime.cluster.workload import VIDEO_APPS
from runtime.kernels import LIVE_APPS, StagePlan, make_task_data, run_task_numpy, stage_plan

#: Timed runs per measurement. Three keeps the default cluster's profile (two video apps, four
#: GPU models, half the pairs) within ~15 s on two cores; the median of three already ignores
#: one outlier.
DEFAULT_REPS = 3
#: Largest normalised throughput written (a partner may *speed up* a kind a little, e.g. by
#: warming a shared cache; more than this is noise).
NORM_MAX = 1.5
#: Smallest normalised throughput of a pair that did share the device: 0 means "cannot share".
NORM_MIN = 1e-3


class SurveyTimeout(TimeoutError):
    """A survey ran past the profiler's deadline (the measurements so far stay cached)."""


#: Seconds to wait for the partner thread's first kernel before timing anyway.
_PARTNER_START_S = 10.0


@dataclass(frozen=True)
class _Kernel:
    """What one kind runs: its stage plan and the host arrays it reads."""

    kind: KindSpec
    app: str
    plan: StagePlan
    inputs: dict[str, np.ndarray]
    #: Bytes the stage reads and writes on the reference input (its working set on a device).
    nbytes: int


class LiveProfiler:
    """Measures the GPU-capable kinds of some apps on the GPU models of a live cluster.

    :param spec: the live cluster; one device per GPU model is opened (its first GPU in node
        order), with the model's emulated speed and memory and the spec's ``device_concurrency``.
    :param backend: ``"numpy"``, ``"cupy"``, a backend object, or ``None`` to choose
        automatically (``RLSCHED_BACKEND`` overrides).
    :param apps: apps whose stages' kinds are measured (apps with live kernels).
    :param reps: timed runs of a co-run measurement (>= 1); solo measurements take ``2 * reps + 1``.
    :param seed: data seed of the reference tasks.
    :param scale: reference task size, ``"small"`` or ``"medium"``.
    :param deadline: ``time.monotonic()`` after which no new co-run measurement starts (a survey
        then raises :class:`SurveyTimeout`); ``None``: no limit.
    :raises ValueError: for an app without live kernels, ``reps < 1`` or an unknown backend name.
    :raises RuntimeError: ``cupy`` asked for where it cannot run.
    """

    def __init__(
        self,
        spec: LiveClusterSpec,
        backend: Backend | str | None = None,
        apps: Sequence[str] = VIDEO_APPS,
        reps: int = DEFAULT_REPS,
        seed: int = 0,
        scale: str = "small",
        deadline: float | None = None,
    ) -> None:
        unknown = [a for a in apps if a not in LIVE_APPS]
        if unknown or not apps:
            raise ValueError(
                f"unknown app(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                f"apps with live kernels: {', '.join(LIVE_APPS)}"
            )
        if reps < 1:
            raise ValueError(f"reps must be >= 1, got {reps}")
        self.spec = spec
        self.apps = tuple(dict.fromkeys(apps))
        self.reps = reps
        self.seed = seed
        self.scale = scale
        self.deadline = deadline
        if backend is None or isinstance(backend, str):
            # The fastest model of the spec runs at native speed, whatever order devices open in.
            self.backend: Backend = choose_backend(backend, max_speed=spec.max_speed)
        else:
            self.backend = backend
        if self.backend.device_count() > 0:  # real GPUs: fold the spec's ordinals onto them
            spec = self.spec = fold_ordinals(spec, self.backend.device_count())
        gpus: dict[str, LiveGpu] = {}
        for node in spec.nodes:
            for g in node.gpus:
                gpus.setdefault(g.model, g)
        self._gpus = dict(sorted(gpus.items()))
        self._kernels = self._reference_kernels()
        self._devices: dict[str, tuple[Device, Stream, Stream]] = {}
        self._solo_s: dict[tuple[str, str], float] = {}  # median seconds; inf = does not fit
        self._pairs: dict[tuple[str, str, str], float] = {}
        self._cpu_s: dict[str, float] = {}
        self._key = (
            self.backend.name,
            tuple((m, g.rel_speed, g.mem_bytes) for m, g in self._gpus.items()),
            spec.device_concurrency,
            tuple(self._kernels),
            self.apps,
            scale,
            seed,
        )

    # ---- the instrument ------------------------------------------------------------------
    def key(self) -> Hashable:
        """Backend, GPU models (speed, memory), concurrency, kinds, apps, data scale and seed."""
        return self._key

    def devices(self) -> list[str]:
        """Catalog names of the cluster's GPU models, sorted."""
        return list(self._gpus)

    def kinds(self) -> list[KindSpec]:
        """GPU-capable kinds of the apps' stages, sorted by name (as the simulator's instrument)."""
        return [k.kind for k in self._kernels.values()]

    @property
    def measured_pairs(self) -> int:
        """Distinct (device, kind, partner) triples measured so far."""
        return len(self._pairs)

    def solo(self, device: str, kind: str | KindSpec) -> float:
        """Throughput of ``kind`` alone on ``device``, runs per second (0: it does not fit).

        :param device: a GPU model of :meth:`devices`.
        :param kind: a kind of :meth:`kinds` (or its name).
        :raises KeyError: for an unknown device or kind.
        """
        s = self._solo_seconds(device, self._kernel(kind).kind.name)
        return 0.0 if s == float("inf") else 1.0 / s

    def corun(self, device: str, kind: str | KindSpec, partner: str | KindSpec) -> float:
        """Normalised throughput of ``kind`` while ``partner`` runs beside it on ``device``.

        Measured once per profiler; later calls return the cached value.

        :param device: a GPU model of :meth:`devices`.
        :param kind: the kind whose runs are timed.
        :param partner: the kind kept running on the other stream.
        :return: co-run over solo throughput in ``[0.001, 1.5]``, or 0 when the pair cannot share
            the device (their working sets exceed its memory, or it ran out of memory).
        :raises KeyError: for an unknown device or kind.
        """
        a, b = self._kernel(kind), self._kernel(partner)
        key = (device, a.kind.name, b.kind.name)
        hit = self._pairs.get(key)
        if hit is None:
            hit = self._pairs[key] = self._measure_pair(device, a, b)
        return hit

    def colocation(self, fraction: float, seed: int, progress: bool = False) -> ColocationData:
        """Co-run a random ``fraction`` of (device, kind, partner) triples, at least one partner
        per device and kind, and return their normalised throughputs (0 = cannot share).

        The selection is :func:`rlsched.interference.instrument.colocation_survey`'s, as for the simulator's
        instrument: both pick the same triples for one seed. Triples measured before are not
        measured again.

        :param fraction: share of triples to measure, in (0, 1].
        :param seed: selection seed.
        :param progress: show a bar of measured triples (on a terminal).
        :raises ValueError: for a fraction outside (0, 1].
        """
        with tqdm(desc="profile", unit="pair", disable=None if progress else True) as bar:

            def measure(device: str, kind: KindSpec, partner: KindSpec, rng: np.random.Generator) -> float:
                value = self._survey_measure(device, kind, partner, rng)
                bar.update(1)
                return value

            return colocation_survey(list(self._gpus), self.kinds(), fraction, seed, measure)

    def measure(self, triples: Sequence[tuple[str, str, str]], seed: int) -> ColocationData:
        """Co-run the given (device, kind, partner) triples, chosen by active profiling (see
        :func:`rlsched.interference.instrument.measure_triples`). Triples measured before are not
        measured again.

        :raises SurveyTimeout: past the survey's time budget.
        """
        return measure_triples(triples, self.kinds(), seed, self._survey_measure)

    def _survey_measure(
        self, device: str, kind: KindSpec, partner: KindSpec, rng: np.random.Generator
    ) -> float:
        rng.normal()  # the simulator's instrument draws its noise here: drawing alike keeps surveys in step
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise SurveyTimeout(f"the survey ran past its time budget after {len(self._pairs)} co-runs")
        return self.corun(device, kind, partner)

    def kind_profiles(self, metrics_per_kind: int, seed: int) -> ProfileSamples:
        """The GPU/CPU ``speedup`` of every kind, measured; no other metric.

        ``sm``, ``l2``, ``dram`` and ``pcie`` are fractions of GPU resources that only hardware
        counters report (Nsight Compute), and ``cpu_eff`` needs a FLOP count of the kernel; this
        profiler reads neither, so it returns one ``speedup`` sample per kind whatever
        ``metrics_per_kind`` asks, and :func:`~rlsched.interference.kind_profiles.complete_profiles` fills the
        other
        columns with its nominal stand-ins. ``speedup`` is the median time of the kernel with
        NumPy on one CPU thread over its solo median time on the reference device: the catalog's
        :data:`~rlsched.interference.kind_profiles.REFERENCE_GPU` when the cluster has one, else its fastest
        model
        (on the NumPy backend the fastest model runs at native host speed, so speedups there are
        about 1). A kind that does not fit on the reference device is left out.

        :param metrics_per_kind: checked (1 to ``len(METRICS)``), otherwise unused.
        :param seed: unused: nothing is drawn at random.
        :raises ValueError: for ``metrics_per_kind`` out of range.
        """
        if not 1 <= metrics_per_kind <= len(METRICS):
            raise ValueError(f"metrics_per_kind must be in 1..{len(METRICS)}, got {metrics_per_kind}")
        ref = self.reference_device()
        names: list[str] = []
        values: list[float] = []
        for k in self._kernels:
            gpu_s = self._solo_seconds(ref, k)
            if gpu_s == float("inf"):
                continue
            names.append(k)
            values.append(self._cpu_seconds(k) / gpu_s)
        return ProfileSamples(names, ["speedup"] * len(names), np.array(values, dtype=np.float64))

    def reference_device(self) -> str:
        """The device ``speedup`` is measured on: :data:`REFERENCE_GPU` if the cluster has it,
        else its fastest model (largest emulated speed, then name).

        :raises ValueError: for a cluster without GPUs.
        """
        if not self._gpus:
            raise ValueError("the cluster has no GPUs to profile")
        if REFERENCE_GPU in self._gpus:
            return REFERENCE_GPU
        return min(self._gpus, key=lambda m: (-self._gpus[m].rel_speed, m))

    def solo_table(self) -> list[tuple[str, str, float]]:
        """``(device, kind, solo_throughput)`` of every device and kind that fits there, measuring
        what was not measured yet (rows of the solo CSV)."""
        out = []
        for d in self._gpus:
            for k in self._kernels:
                t = self.solo(d, k)
                if t > 0:
                    out.append((d, k, t))
        return out

    def close(self) -> None:
        """Close the devices opened so far (measurements stay cached)."""
        devices, self._devices = self._devices, {}
        for dev, _, _ in devices.values():
            dev.close()

    def __enter__(self) -> LiveProfiler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- measuring -------------------------------------------------------------------------
    def _reference_kernels(self) -> dict[str, _Kernel]:
        found: dict[str, _Kernel] = {}
        for app in self.apps:
            data = make_task_data(app, 0, 0, seed=self.seed, scale=self.scale)
            every = run_task_numpy(data)
            for plan, stage in zip(stage_plan(app), APPS[app].stages, strict=True):
                kind = stage.kind
                if kind.device is Where.CPU or kind.name in found:
                    continue
                inputs = {name: every[name] for name in plan.reads}
                nbytes = sum(int(np.asarray(every[n]).nbytes) for n in (*plan.reads, *plan.writes))
                found[kind.name] = _Kernel(kind, app, plan, inputs, nbytes)
        return dict(sorted(found.items()))

    def _kernel(self, kind: str | KindSpec) -> _Kernel:
        name = kind if isinstance(kind, str) else kind.name
        k = self._kernels.get(name)
        if k is None:
            raise KeyError(f"kind {name!r} is not measured; kinds: {', '.join(self._kernels)}")
        return k

    def _device(self, model: str) -> tuple[Device, Stream, Stream]:
        hit = self._devices.get(model)
        if hit is None:
            g = self._gpus.get(model)
            if g is None:
                raise KeyError(f"device {model!r} is not in the cluster; devices: {', '.join(self._gpus)}")
            dev = self.backend.open(
                DeviceConfig(g.index, g.model, g.mem_bytes, g.rel_speed, self.spec.device_concurrency)
            )
            hit = self._devices[model] = (dev, dev.new_stream(), dev.new_stream())
        return hit

    def _upload(self, stream: Stream, k: _Kernel) -> dict[str, Any]:
        return {name: stream.upload(a) for name, a in k.inputs.items()}

    def _solo_seconds(self, model: str, kind: str) -> float:
        key = (model, kind)
        hit = self._solo_s.get(key)
        if hit is not None:
            return hit
        k = self._kernel(kind)
        dev, stream, _ = self._device(model)
        secs = float("inf")
        if k.nbytes <= dev.config.mem_bytes:
            try:
                inputs = self._upload(stream, k)
                fn, params = k.plan.spec.fn, k.plan.params
                stream.run(fn, inputs, params)  # warm-up: CuPy compiles kernels on first launch
                runs = 2 * self.reps + 1
                secs = statistics.median(stream.run(fn, inputs, params)[1] for _ in range(runs))
            except DeviceFull:
                secs = float("inf")
        self._solo_s[key] = secs = max(secs, 1e-9)
        return secs

    def _measure_pair(self, model: str, a: _Kernel, b: _Kernel) -> float:
        dev, stream_a, stream_b = self._device(model)
        if a.nbytes + b.nbytes > dev.config.mem_bytes:
            return 0.0
        solo = self._solo_seconds(model, a.kind.name)
        # Also warms the partner's kernel, so its first launch is not a compile that leaves A alone.
        if solo == float("inf") or self._solo_seconds(model, b.kind.name) == float("inf"):
            return 0.0
        try:
            in_a, in_b = self._upload(stream_a, a), self._upload(stream_b, b)
        except DeviceFull:
            return 0.0
        started, stop = threading.Event(), threading.Event()
        failed: list[BaseException] = []

        def keep_partner_busy() -> None:
            try:
                while not stop.is_set():
                    started.set()
                    stream_b.run(b.plan.spec.fn, in_b, b.plan.params)
            except BaseException as exc:  # re-raised (or read as "cannot share") in the caller
                failed.append(exc)
                started.set()

        lane = threading.Thread(target=keep_partner_busy, name=f"profile-{model}-{b.kind.name}", daemon=True)
        lane.start()
        times: list[float] = []
        try:
            started.wait(_PARTNER_START_S)
            fn, params = a.plan.spec.fn, a.plan.params
            times = [stream_a.run(fn, in_a, params)[1] for _ in range(self.reps)]
        except DeviceFull:
            return 0.0
        finally:
            stop.set()
            lane.join()
        if failed:
            if isinstance(failed[0], DeviceFull):
                return 0.0
            raise failed[0]
        norm = solo / max(statistics.median(times), 1e-9)
        return float(min(max(norm, NORM_MIN), NORM_MAX))

    def _cpu_seconds(self, kind: str) -> float:
        hit = self._cpu_s.get(kind)
        if hit is None:
            k = self._kernel(kind)
            fn, params = k.plan.spec.fn, k.plan.params
            fn(np, k.inputs, params)  # warm-up, as on the device
            times = []
            for _ in range(2 * self.reps + 1):  # as many runs as a solo measurement
                t0 = time.perf_counter()
                fn(np, k.inputs, params)
                times.append(time.perf_counter() - t0)
            hit = self._cpu_s[kind] = max(statistics.median(times), 1e-9)
        return hit


def profile_to_csv(
    profiler: LiveProfiler,
    out_dir: str | Path,
    fraction: float = 1.0,
    seed: int = 0,
    progress: bool = False,
) -> tuple[Path, Path]:
    """Profile and write ``colocation.csv`` and ``solo.csv`` into ``out_dir`` (created if needed).

    :param profiler: the profiler (its cached measurements are reused).
    :param out_dir: output directory.
    :param fraction: share of (device, kind, partner) triples to co-run, in (0, 1].
    :param seed: pair selection seed.
    :param progress: show a bar of measured triples (on a terminal).
    :return: the paths of the co-location CSV and of the solo CSV.
    :raises ValueError: for a fraction outside (0, 1].
    """

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = profiler.colocation(fraction, seed, progress)
    colo, solo = out / "colocation.csv", out / "solo.csv"
    write_colocation_csv(colo, data)
    write_solo_csv(solo, profiler.solo_table())
    return colo, solo
