"""Resource profiles of subtask kinds, completed from sparse profiling (IAWP, TPDS 2021).

Profiling every kind on every metric is expensive, so each kind is profiled on a couple of
randomly chosen metrics and the kind × metric matrix is completed by collaborative filtering.
The completed profiles rank co-runners (cosine similarity of resource vectors: similar kinds
fight for the same resources) and pick CPU cores (kinds with the lowest GPU/CPU speedup lose
least by leaving the GPU).

Metrics (columns, :data:`METRICS`):

* ``sm``, ``l2``, ``dram``, ``pcie`` — the fraction (0-1) of each shared GPU resource the kind
  demands when running alone;
* ``cpu_eff`` — the fraction of a CPU core's sustained FLOP rate the kind reaches;
* ``speedup`` — solo time on one reference CPU core over solo time on the reference GPU.

Values are on these natural scales everywhere outside the completers. Inside, ``speedup`` is
taken as its logarithm (it spans orders of magnitude) and every metric is standardised by its
observed mean and spread, so one loss weighs all metrics alike.

The measurements themselves come from a profiler: ``envs.simulated_kind_profiles`` in the simulated world.
What this module knows of a kind beyond them is public: its declared cost model (:class:`KindSpec`)
and the datasheet of the reference GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from models.profile_completion import (
    NcfConfig,
    SvdConfig,
    fit_column_mean,
    fit_ncf,
    fit_svd,
    standardise,
)
from rlsched.estimates import cpu_seconds, gpu_seconds
from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.tasks import Device, KindSpec

#: Profile columns, in order.
METRICS: tuple[str, ...] = ("sm", "l2", "dram", "pcie", "cpu_eff", "speedup")
#: The shared GPU resources: the columns co-runner similarity is measured on.
RESOURCE_METRICS: tuple[str, ...] = ("sm", "l2", "dram", "pcie")
#: Columns completed on a log scale.
LOG_METRICS: frozenset[str] = frozenset({"speedup"})
#: Columns that are fractions of a resource, clipped to [0, 1] after completion.
FRACTION_METRICS: frozenset[str] = frozenset(RESOURCE_METRICS)
#: Reference GPU of the ``speedup`` metric and of the nominal side features.
REFERENCE_GPU = "V100M16"

Method = Literal["ncf", "svd", "mean"]

_LOG = np.array([m in LOG_METRICS for m in METRICS])
_FRACTION = np.array([m in FRACTION_METRICS for m in METRICS])


@dataclass
class ProfileSamples:
    """Profiling measurements in long format: row ``i`` is ``value[i]`` of ``metric[i]`` of
    kind ``kinds[i]``.

    :param kinds: kind name of each measurement.
    :param metric: metric name of each measurement (one of :data:`METRICS`).
    :param value: measured value on the metric's natural scale (positive).
    """

    kinds: list[str]
    metric: list[str]
    value: np.ndarray

    def __post_init__(self) -> None:
        self.value = np.asarray(self.value, dtype=np.float64)
        if not len(self.kinds) == len(self.metric) == self.value.size or self.value.ndim != 1:
            raise ValueError(
                f"kinds, metric and value must have one length, got "
                f"{len(self.kinds)}, {len(self.metric)}, {self.value.shape}"
            )
        unknown = sorted(set(self.metric) - set(METRICS))
        if unknown:
            raise ValueError(f"unknown metrics {unknown}; known: {', '.join(METRICS)}")
        if not np.all(np.isfinite(self.value) & (self.value > 0)):
            raise ValueError("profiled values must be finite and positive")

    def __len__(self) -> int:
        return self.value.size

    def matrix(self, kind_names: Sequence[str]) -> np.ndarray:
        """The ``(K, len(METRICS))`` matrix of observed values, NaN where unobserved.

        Repeated measurements of one entry are averaged (geometrically on log metrics);
        measurements of kinds not in ``kind_names`` are ignored.

        :param kind_names: the rows, in order.
        """
        internal = _to_internal_matrix(self, kind_names)
        return _from_internal(internal)


def _index(samples: ProfileSamples, kind_names: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, internal value) of the samples whose kind is among ``kind_names``."""
    row_of = {k: i for i, k in enumerate(kind_names)}
    col_of = {m: j for j, m in enumerate(METRICS)}
    keep = np.array([k in row_of for k in samples.kinds], dtype=bool)
    rows = np.array([row_of[k] for k in samples.kinds if k in row_of], dtype=np.int64)
    cols = np.array(
        [col_of[m] for k, m in zip(samples.kinds, samples.metric, strict=True) if k in row_of], dtype=np.int64
    )
    vals = samples.value[keep].copy()
    vals[_LOG[cols]] = np.log(vals[_LOG[cols]])
    return rows, cols, vals


def _to_internal_matrix(samples: ProfileSamples, kind_names: Sequence[str]) -> np.ndarray:
    """Observed entries on the internal scale (log for log metrics), averaged, NaN elsewhere."""
    rows, cols, vals = _index(samples, kind_names)
    k, m = len(kind_names), len(METRICS)
    sums = np.zeros(k * m)
    counts = np.zeros(k * m)
    np.add.at(sums, rows * m + cols, vals)
    np.add.at(counts, rows * m + cols, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, np.nan).reshape(k, m)


def _from_internal(x: np.ndarray) -> np.ndarray:
    """Natural scale from internal scale, column by column."""
    out = x.copy()
    out[:, _LOG] = np.exp(out[:, _LOG])
    return out


def nominal_speedup(
    kinds: Sequence[KindSpec], reference_gpu: str = REFERENCE_GPU, core_gflops: float = CPU_CORE_GFLOPS
) -> np.ndarray:
    """Nominal GPU/CPU speedup of each kind, ``(K,)``: the roofline time of one MB of input on one
    CPU core over that on the reference GPU, at the nominal efficiencies of
    :mod:`rlsched.estimates` (public information, not a measurement).

    :param kinds: the kinds.
    :param reference_gpu: catalog name of the GPU.
    :param core_gflops: CPU core rate, GFLOP/s.
    """
    g = gpu_model(reference_gpu)
    return np.array(
        [
            max(cpu_seconds(k.gflop_per_mb, k.gbytes_per_mb, core_gflops), 1e-12)
            / max(gpu_seconds(k.gflop_per_mb, k.gbytes_per_mb, g.fp32_tflops, g.mem_bw_gbs), 1e-12)
            for k in kinds
        ],
        dtype=np.float64,
    )


def kind_cost_features(
    kinds: Sequence[KindSpec], reference_gpu: str = REFERENCE_GPU, core_gflops: float = CPU_CORE_GFLOPS
) -> np.ndarray:
    """Public side features of each kind, ``(K, 10)``, standardised across the given kinds.

    From the declared cost model and the reference GPU's datasheet only: log arithmetic
    intensity; the nominal compute-bound fraction ``I / (I + ridge)`` at the reference GPU's
    nominal ridge point; the nominal log GPU/CPU speedup (roofline vs one core, as
    :mod:`rlsched.estimates` computes them); log GFLOP and GB per MB; log memory per MB and log
    fixed memory; and the device one-hot (GPU, CPU, both).

    :param kinds: the kinds.
    :param reference_gpu: catalog name of the GPU the nominal figures refer to.
    :param core_gflops: reference CPU core rate, GFLOP/s.
    """
    g = gpu_model(reference_gpu)
    flop = np.array([k.gflop_per_mb for k in kinds], dtype=np.float64)
    byt = np.array([k.gbytes_per_mb for k in kinds], dtype=np.float64)
    inten = flop / np.maximum(byt, 1e-12)
    ridge = gpu_seconds(0.0, 1.0, g.fp32_tflops, g.mem_bw_gbs) / gpu_seconds(
        1.0, 0.0, g.fp32_tflops, g.mem_bw_gbs
    )
    device = np.array([[k.device == d for d in (Device.GPU, Device.CPU, Device.BOTH)] for k in kinds], float)
    raw = np.column_stack(
        [
            np.log10(np.maximum(inten, 1e-3)),
            inten / (inten + ridge),
            np.log(nominal_speedup(kinds, reference_gpu, core_gflops)),
            np.log10(np.maximum(flop, 1e-9)),
            np.log10(np.maximum(byt, 1e-9)),
            np.log1p([k.mem_mb_per_mb for k in kinds]),
            np.log1p([k.fixed_mem_mb for k in kinds]),
            device.reshape(len(kinds), 3),
        ]
    )
    return standardise(raw, axis=0)[0]


def complete_profiles(
    samples: ProfileSamples,
    kinds: Sequence[KindSpec],
    method: Method = "ncf",
    seed: int = 0,
    ncf: NcfConfig | None = None,
    svd: SvdConfig | None = None,
) -> np.ndarray:
    """The completed ``(K, len(METRICS))`` profile matrix on natural scales; observed entries
    are kept as measured (averaged where measured more than once).

    A metric measured on none of ``kinds`` (possible with fewer than three kinds) gets the
    nominal stand-in of :func:`_nominal_internal` for every kind.

    :param samples: the measurements; those of kinds not in ``kinds`` are ignored.
    :param kinds: the rows, in order.
    :param method: ``"ncf"`` (NCF-MLP with public kind features), ``"svd"`` (biased matrix
        factorisation) or ``"mean"`` (each metric's observed mean).
    :param seed: model initialisation.
    :param ncf: NCF hyper-parameters (default :class:`NcfConfig`).
    :param svd: SVD hyper-parameters (default :class:`SvdConfig`).
    :raises ValueError: if no sample is of one of ``kinds``, or for an unknown method.
    """
    names = [k.name for k in kinds]
    obs = _to_internal_matrix(samples, names)
    seen = ~np.isnan(obs)
    if not seen.any():
        raise ValueError("none of the samples is of one of the kinds to complete")
    counts = seen.sum(axis=0)
    filled = np.where(seen, obs, 0.0)
    mean = filled.sum(axis=0) / np.maximum(counts, 1)
    # One observation gives no spread; unit spread then just centres the column.
    var = np.where(seen, (obs - mean) ** 2, 0.0).sum(axis=0) / np.maximum(counts, 1)
    std = np.maximum(np.where(counts > 1, np.sqrt(var), 1.0), 1e-6)
    rows, cols = np.nonzero(seen)
    y = (obs[rows, cols] - mean[cols]) / std[cols]
    k, m = obs.shape
    if method == "ncf":
        z = fit_ncf(rows, cols, y, kind_cost_features(kinds), m, ncf or NcfConfig(), seed)
    elif method == "svd":
        z = fit_svd(rows, cols, y, k, m, svd or SvdConfig(), seed)
    elif method == "mean":
        z = fit_column_mean(rows, cols, y, k, m)
    else:
        raise ValueError(f"unknown completion method {method!r}; known: ncf, svd, mean")
    full = np.where(seen, obs, z * std + mean)
    unmeasured = counts == 0
    full[:, unmeasured] = _nominal_internal(kinds)[:, unmeasured]
    out = _from_internal(full)
    out[:, _FRACTION] = np.clip(out[:, _FRACTION], 0.0, 1.0)
    out[:, ~_FRACTION] = np.maximum(out[:, ~_FRACTION], 1e-6)
    return out


def _nominal_internal(kinds: Sequence[KindSpec]) -> np.ndarray:
    """Stand-ins (internal scale) for a metric no kind was measured on: nothing in the data says
    where such a metric lies, so the public nominal model speaks — the roofline speedup, the
    full core rate that :func:`rlsched.estimates.cpu_seconds` assumes, and the midpoint of a
    resource fraction."""
    out = np.full((len(kinds), len(METRICS)), 0.5)
    out[:, METRICS.index("cpu_eff")] = 1.0
    out[:, METRICS.index("speedup")] = np.log(nominal_speedup(kinds))
    return out


def cosine_similarity(profiles: np.ndarray, metrics: Sequence[str] | None = RESOURCE_METRICS) -> np.ndarray:
    """Pairwise cosine similarity ``(K, K)`` of kinds' profile vectors.

    By default only the shared GPU resources count: that is where co-runners contend, while
    ``cpu_eff`` and ``speedup`` are on other scales and say nothing about contention. A kind
    with an all-zero vector is similar only to itself.

    :param profiles: ``(K, len(METRICS))`` profiles, or ``(K, D)`` vectors when ``metrics`` is None.
    :param metrics: the columns to compare, or ``None`` for every column of ``profiles``.
    """
    p = np.asarray(profiles, dtype=np.float64)
    if metrics is not None:
        if p.ndim != 2 or p.shape[1] != len(METRICS):
            raise ValueError(f"profiles must be (K, {len(METRICS)}) when metrics are named, got {p.shape}")
        p = p[:, [METRICS.index(name) for name in metrics]]
    norm = np.linalg.norm(p, axis=1)
    unit = p / np.where(norm > 0, norm, 1.0)[:, None]
    sim = np.clip(unit @ unit.T, -1.0, 1.0)
    np.fill_diagonal(sim, 1.0)
    return sim
