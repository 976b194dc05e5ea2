"""The simulator's ground truth: how fast subtasks really run, and how they interfere.

This is the only module that knows true speeds. Schedulers never read it; the ``oracle`` reference
(and the capacity bound, ``envs.capacity``) do, to show how far from clairvoyance a policy is.

Model (documented in README, "Simulator ground truth"):

* **Solo speed on a GPU**: a roofline with *hidden* efficiencies. A kind reaches a fraction of peak
  compute and of peak bandwidth that depends on the GPU's architecture and on a per-(kind,
  architecture) affinity (older architectures run modern kernels worse; some kernels suit some
  architectures). Nominal estimates (``rlsched.estimates``) assume one efficiency for all.
* **Solo speed on a CPU core**: GFLOP over the core's rate at a hidden per-kind vector efficiency,
  plus memory traffic at the core's bandwidth.
* **Co-location interference**: contention model — each kind demands a fraction of four shared
  resources (SMs, L2, DRAM bandwidth, PCIe) derived from its arithmetic intensity plus a hidden
  perturbation; a subtask's progress rate divides by the demand-weighted oversubscription of the
  resources it uses, and each extra co-runner costs a small context-switch overhead.
  Or measured pairs from a co-location CSV: rate factor ``1 / (1 + sum_j (1/norm_ij - 1))`` over
  co-runners ``j`` (exactly the measured value for one partner; ``0`` = cannot share, treated as
  time-slicing with a 20% penalty).
* **Drift**: each GPU's speed factor follows a bounded multiplicative random walk.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rlsched.estimates import CPU_CORE_BW_GBS, NOMINAL_BW_EFF, NOMINAL_COMPUTE_EFF
from rlsched.hardware import GpuModel
from rlsched.interference.measurements import pair_table, read_colocation_csv, read_solo_csv, solo_table
from rlsched.scenarios.spec import DriftSpec, InterferenceSpec
from rlsched.tasks import KindSpec, Subtask

#: Typical fraction of peak reached by architecture: (compute, bandwidth).
ARCH_EFF: dict[str, tuple[float, float]] = {
    "Kepler": (0.30, 0.55),
    "Maxwell": (0.40, 0.65),
    "Pascal": (0.55, 0.75),
    "Volta": (0.60, 0.80),
    "Turing": (0.55, 0.75),
    "Ampere": (0.50, 0.80),
    "Ada": (0.45, 0.80),
    "Hopper": (0.55, 0.85),
}
#: Extra slowdown per additional co-runner (context switches, scheduling).
CO_RUN_OVERHEAD = 0.03
#: Intensity (FLOP/byte) where a kind's demand moves from bandwidth to compute.
RIDGE = 20.0


def _unit(key: str) -> float:
    """A stable pseudo-random number in [0, 1) for a key (hidden per-kind parameters)."""
    return (zlib.crc32(key.encode()) & 0xFFFFFF) / float(0x1000000)


@dataclass(frozen=True)
class KindTruth:
    """Hidden parameters of one kind."""

    demand: tuple[float, float, float, float]  # SM, L2, DRAM, PCIe
    cpu_eff: float


def kind_truth(kind: KindSpec) -> KindTruth:
    """Hidden parameters of a kind, stable across runs and seeds."""
    c = kind.intensity / (kind.intensity + RIDGE)
    jitter = lambda tag, w: w * (_unit(kind.name + tag) - 0.5)  # noqa: E731
    sm = min(1.0, max(0.05, 0.25 + 0.7 * c + jitter("sm", 0.2)))
    dram = min(1.0, max(0.05, 0.25 + 0.7 * (1 - c) + jitter("dram", 0.2)))
    l2 = 0.15 + 0.5 * _unit(kind.name + "l2")
    pcie = 0.05 + 0.25 * _unit(kind.name + "pcie")
    return KindTruth((sm, l2, dram, pcie), cpu_eff=0.5 + 0.6 * _unit(kind.name + "cpu"))


def affinity(kind: str, arch: str) -> float:
    """Hidden multiplier of a kind's efficiency on an architecture, in [0.7, 1.3]."""
    return 0.7 + 0.6 * _unit(f"{kind}@{arch}")


class GroundTruth:
    """True solo speeds, interference and drift for one scenario.

    :param interference: where interference comes from.
    :param drift: the drift process.
    :param gpus: (N, G) GPU models per node slot (``None`` for padding).
    :param rng: drives drift only.
    """

    def __init__(
        self,
        interference: InterferenceSpec,
        drift: DriftSpec,
        gpus: Sequence[Sequence[GpuModel | None]],
        rng: np.random.Generator,
    ) -> None:
        self.drift_spec = drift
        self.rng = rng
        self.gpus = gpus
        self.speed = np.ones((len(gpus), max((len(r) for r in gpus), default=1) or 1))
        self._kinds: dict[str, KindTruth] = {}
        self._solo: dict[tuple[str, str], tuple[float, float]] = {}
        self._factor_cache: dict[tuple, list[float]] = {}
        self.pairs: dict[tuple[str, str, str], float] | None = None
        self.solo_tput: dict[tuple[str, str], float] | None = None
        if interference.model == "csv":
            self._load_csv(interference)

    # ---- solo speeds -----------------------------------------------------------------------
    def _truth(self, kind: KindSpec) -> KindTruth:
        t = self._kinds.get(kind.name)
        if t is None:
            t = self._kinds[kind.name] = kind_truth(kind)
        return t

    def _gpu_rates(self, kind: KindSpec, model: GpuModel) -> tuple[float, float]:
        """(effective GFLOP/s, effective GB/s) of a kind on a model."""
        key = (kind.name, model.name)
        r = self._solo.get(key)
        if r is None:
            ce, be = ARCH_EFF.get(model.arch, (0.5, 0.75))
            a = affinity(kind.name, model.arch)
            r = self._solo[key] = (model.fp32_tflops * 1e3 * ce * a, model.mem_bw_gbs * be * math.sqrt(a))
        return r

    def gpu_solo_seconds(self, sub: Subtask, model: GpuModel) -> float:
        """True run time of ``sub`` alone on an undrifted GPU of ``model``."""
        if self.solo_tput is not None:
            return self._csv_seconds(sub, model)
        flops, bw = self._gpu_rates(sub.kind, model)
        return max(sub.gflop / flops, sub.gbytes / bw)

    def cpu_solo_seconds(self, sub: Subtask, core_gflops: float) -> float:
        """True run time of ``sub`` on one CPU core."""
        eff = self._truth(sub.kind).cpu_eff
        return sub.gflop / (core_gflops * eff) + sub.gbytes / (CPU_CORE_BW_GBS * 0.9)

    # ---- interference ----------------------------------------------------------------------
    def factors(self, kinds: Sequence[KindSpec], shares: Sequence[float], model: GpuModel) -> list[float]:
        """Progress-rate factors (<= 1) of subtasks co-running on one GPU.

        :param kinds: kinds of the co-running subtasks.
        :param shares: GPU share each asked for.
        :param model: the GPU's model (selects rows of a co-location CSV).
        """
        k = len(kinds)
        if k <= 1:
            return [1.0] * k
        key = (model.name, *(kd.name for kd in kinds), *shares)
        hit = self._factor_cache.get(key)
        if hit is None:
            hit = self._factor_cache[key] = self._factors(kinds, shares, model)
        return hit

    def _factors(self, kinds: Sequence[KindSpec], shares: Sequence[float], model: GpuModel) -> list[float]:
        # One formula for the simulator and the capacity bound: a single mix of mix_factors.
        return self.mix_factors(kinds, shares, np.arange(len(kinds))[None, :], model)[0].tolist()

    def mix_factors(
        self, kinds: Sequence[KindSpec], shares: Sequence[float], mixes: np.ndarray, model: GpuModel
    ) -> np.ndarray:
        """:meth:`factors` of many mixes at once (the simulator's :meth:`factors` is one row of
        this): the capacity bound lists up to 20,000 mixes per GPU group. With a co-location
        table, each co-runner adds ``1 / norm - 1`` to a runner's slowdown; with the contention
        model, a runner slows by its demand-weighted load on the GPU's resources and a fixed
        overhead per co-runner.

        :param kinds: the candidate runners' kinds; ``shares``: their GPU shares.
        :param mixes: (mixes, k) indices into ``kinds``, one row per mix of ``k`` co-runners.
        :param model: the GPU's model.
        :returns: (mixes, k) progress-rate factors.
        """
        n, k = mixes.shape
        if k <= 1:
            return np.ones((n, k))
        if self.pairs is not None:
            dev = self.csv_device(model)
            term = np.empty((len(kinds), len(kinds)))
            for a, ka in enumerate(kinds):
                for b, kb in enumerate(kinds):
                    term[a, b] = self._pair_slowdown(dev, ka, kb)
            slow = np.zeros((n, k))
            for j in range(k):  # co-runner by co-runner (tests/test_capacity_mixes.py keeps the order)
                t = term[mixes, mixes[:, j : j + 1]]
                t[:, j] = 0.0
                slow += t
            return 1.0 / (1.0 + slow)
        dem_of = np.array(
            [[d * s for d in self._truth(kd).demand] for kd, s in zip(kinds, shares, strict=True)]
        )
        dem = dem_of[mixes]  # (mixes, k, resources)
        tot = dem[:, 0, :].copy()
        for j in range(1, k):
            tot += dem[:, j, :]
        load = dem[:, :, 0] * tot[:, None, 0]
        sd = dem[:, :, 0].copy()
        for r in range(1, dem.shape[2]):
            load += dem[:, :, r] * tot[:, None, r]
            sd += dem[:, :, r]
        load = np.divide(load, sd, out=np.ones_like(load), where=sd > 0)
        return 1.0 / (np.maximum(1.0, load) * (1.0 + CO_RUN_OVERHEAD * (k - 1)))

    def _pair_slowdown(self, dev: str, kind: KindSpec, partner: KindSpec) -> float:
        """What one co-runner adds to a runner's slowdown on a measured device, ``1 / norm - 1``:
        an unmeasured pair reads ``norm`` 1/1.2, a pair measured unable to share (0) half that."""
        assert self.pairs is not None
        norm = self.pairs.get((dev, kind.name, partner.name), 1.0 / 1.2)
        norm = norm if norm > 0 else 1.0 / (1.2 * 2)
        return 1.0 / norm - 1.0

    def factor_ceiling(
        self,
        kind: KindSpec,
        share: float,
        partners: Sequence[tuple[KindSpec, float]],
        k: int,
        model: GpuModel,
    ) -> float:
        """An upper bound on the factor of ``kind`` among ``k`` co-runners drawn from ``partners``.

        Used by the capacity bound where enumerating every mix is too costly. For the contention
        model the load of a runner is its self-load plus one term per co-runner, each at least the
        smallest over the possible partners; for measured pairs the slowdown is a sum of one term
        per co-runner, each at least the smallest. Exact when one partner kind minimises it.

        :param kind: the runner's kind; ``share``: its GPU share.
        :param partners: every (kind, share) that may share the GPU (``kind`` itself included).
        :param k: how many subtasks run on the GPU in all (``k >= 1``).
        :param model: the GPU's model.
        """
        if k <= 1:
            return 1.0
        if self.pairs is not None:
            dev = self.csv_device(model)
            terms = [self._pair_slowdown(dev, kind, pk) for pk, _ in partners]
            return 1.0 / max(1e-9, 1.0 + (k - 1) * min(terms))
        d = [x * share for x in self._truth(kind).demand]
        sd = sum(d)
        self_load = sum(x * x for x in d) / sd
        cross = min(
            sum(a * b * s for a, b in zip(d, self._truth(pk).demand, strict=True)) / sd for pk, s in partners
        )
        load = self_load + (k - 1) * cross
        return 1.0 / (max(1.0, load) * (1.0 + CO_RUN_OVERHEAD * (k - 1)))

    # ---- drift -----------------------------------------------------------------------------
    def step_drift(self) -> None:
        """Advance every GPU's speed factor by one drift interval."""
        d = self.drift_spec
        if d.sigma <= 0:
            return
        self.speed *= np.exp(self.rng.normal(0.0, d.sigma, size=self.speed.shape))
        np.clip(self.speed, d.min_factor, d.max_factor, out=self.speed)

    # ---- co-location CSV -------------------------------------------------------------------
    def _load_csv(self, spec: InterferenceSpec) -> None:
        if not spec.colocation_csv:
            raise ValueError("interference model 'csv' needs colocation_csv")
        self.pairs = pair_table(read_colocation_csv(spec.colocation_csv))
        self.solo_tput = solo_table(read_solo_csv(spec.solo_csv)) if spec.solo_csv else {}
        # Longest names first so "a100" is tried before "a10"; then by name, so the reference
        # device below never depends on set order (string hashing differs between processes).
        self._devices = sorted({d for d, _, _ in self.pairs}, key=lambda d: (-len(d), d))
        ref = [v for (d, _), v in self.solo_tput.items() if d == self._devices[-1]] or [1.0]
        self._ref_tput = float(np.mean(ref))

    def csv_device(self, model: GpuModel) -> str:
        """The co-location CSV device name covering a catalog model (``V100M16`` -> ``v100``)."""
        for d in self._devices:
            if model.name.lower().startswith(d):
                return d
        raise KeyError(f"GPU model {model.name} has no rows in the co-location CSV")

    def _csv_seconds(self, sub: Subtask, model: GpuModel) -> float:
        # Calibrated so that a kind of mean throughput takes its nominal roofline time on the
        # reference device; kinds and devices then differ as measured.
        nominal = max(
            sub.gflop / (model.fp32_tflops * 1e3 * NOMINAL_COMPUTE_EFF),
            sub.gbytes / (model.mem_bw_gbs * NOMINAL_BW_EFF),
        )
        assert self.solo_tput is not None
        tput = self.solo_tput.get((self.csv_device(model), sub.kind.name))
        return nominal if not tput else nominal * self._ref_tput / tput
