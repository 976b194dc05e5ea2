"""The simulated world's profiler: measures subtask kinds' resource profiles from ground truth.

On a real machine this is nsight/nvprof plus a timed solo run on a GPU and on a CPU core; here it
reads :mod:`envs.ground_truth`, which is why it lives in ``envs`` (the only layer that may). Like a
real profiler it is sparse and noisy: each kind is measured on a few metrics only, each
measurement off by a small multiplicative error. :func:`true_profiles` gives the exact matrix for
evaluating completion; no scheduler may use it.

Metric definitions (columns of :data:`~rlsched.interference.kind_profiles.METRICS`): the kind's true
demand on the four shared GPU resources, its true CPU vector efficiency, and its GPU/CPU speedup —
solo time on one CPU core of ``core_gflops`` over solo time on an undrifted ``reference_gpu``, both
for the work of one MB of input (the ratio does not depend on the input size). The speedup is
defined for every kind, also those declared for one device only: the ground truth can time any kind
anywhere, as an offline profiler could run a kernel's reference implementation.

**An oracle counter.** The SM, L2, DRAM and PCIe columns are the hidden demand vector of the
contention model plus noise: they stand for hardware counters (Nsight Compute's achieved
utilisation of each unit), which on the simulator's ground truth *are* that vector. A real
counter reads what a kernel achieves, which is the same thing only in this model, so
``iawp-cosine`` (the one consumer) sees more than a live profiler would give it: the live runtime
measures only the speedup column (README, "Profiler"). Results of ``iawp-cosine`` in the
simulator carry this caveat; ``iawp`` learns from timed co-runs only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.ground_truth import GroundTruth, kind_truth
from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.interference.kind_profiles import METRICS, REFERENCE_GPU, ProfileSamples
from rlsched.scenarios.spec import DriftSpec, InterferenceSpec
from rlsched.tasks import KindSpec, Subtask


def true_profiles(
    kinds: Sequence[KindSpec], reference_gpu: str = REFERENCE_GPU, core_gflops: float = CPU_CORE_GFLOPS
) -> np.ndarray:
    """The exact ``(K, len(METRICS))`` profile matrix (evaluation only).

    :param kinds: the kinds (rows).
    :param reference_gpu: catalog name of the GPU the speedup refers to.
    :param core_gflops: GFLOP/s of the CPU core the speedup refers to.
    """
    model = gpu_model(reference_gpu)
    truth = GroundTruth(InterferenceSpec(), DriftSpec(), [[model]], np.random.default_rng(0))
    rows = []
    for kind in kinds:
        t = kind_truth(kind)
        one_mb = Subtask(0, kind, kind.gflop_per_mb, kind.gbytes_per_mb, 0.0)
        speedup = truth.cpu_solo_seconds(one_mb, core_gflops) / truth.gpu_solo_seconds(one_mb, model)
        rows.append([*t.demand, t.cpu_eff, speedup])
    return np.array(rows, dtype=np.float64).reshape(len(kinds), len(METRICS))


def _balanced_choice(n_kinds: int, per_kind: int, rng: np.random.Generator) -> np.ndarray:
    """``(n_kinds, per_kind)`` distinct random metric indices per kind, spread so every metric is
    measured about equally often (each kind takes the least-measured metrics, ties at random)."""
    counts = np.zeros(len(METRICS))
    out = np.empty((n_kinds, per_kind), dtype=np.int64)
    for i in rng.permutation(n_kinds):
        # Random tie-break below 1, so it never overrides a count difference.
        out[i] = np.argsort(counts + rng.random(len(METRICS)))[:per_kind]
        counts[out[i]] += 1
    return out


def profile_kinds(
    kinds: Sequence[KindSpec],
    metrics_per_kind: int = 2,
    rng: np.random.Generator | int | None = None,
    noise: float = 0.02,
    reference_gpu: str = REFERENCE_GPU,
    core_gflops: float = CPU_CORE_GFLOPS,
) -> ProfileSamples:
    """Measure ``metrics_per_kind`` random metrics of each kind, with multiplicative noise.

    Which metrics are chosen is random but balanced: across kinds every metric is measured
    about equally often, so none is left unmeasured when ``len(kinds) * metrics_per_kind >= 6``.

    :param kinds: kinds to profile.
    :param metrics_per_kind: distinct metrics measured per kind (1 to ``len(METRICS)``).
    :param rng: generator or seed choosing the metrics and the noise.
    :param noise: std of the log of the multiplicative measurement error.
    :param reference_gpu: catalog name of the GPU the speedup refers to.
    :param core_gflops: GFLOP/s of the CPU core the speedup refers to.
    :raises ValueError: if ``metrics_per_kind`` is out of range or ``noise`` is negative.
    """
    if not 1 <= metrics_per_kind <= len(METRICS):
        raise ValueError(f"metrics_per_kind must be in 1..{len(METRICS)}, got {metrics_per_kind}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    truth = true_profiles(kinds, reference_gpu, core_gflops)
    chosen = _balanced_choice(len(kinds), metrics_per_kind, gen)
    rows = np.repeat(np.arange(len(kinds)), metrics_per_kind)
    cols = chosen.reshape(-1)
    values = truth[rows, cols] * np.exp(gen.normal(0.0, noise, size=rows.size))
    return ProfileSamples(
        kinds=[kinds[int(r)].name for r in rows], metric=[METRICS[int(c)] for c in cols], value=values
    )
