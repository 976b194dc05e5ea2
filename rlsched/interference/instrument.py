"""What a scheduler may learn interference from: a profiling instrument and run-time observations.

A placer that models interference (IAWP) is calibrated before a run by an instrument that
*measures* the cluster — co-running pairs of subtask kinds on each GPU model, and a few resource
metrics per kind — and keeps learning during the run from what the executor observes. The
simulator implements the instrument by running kinds against its ground truth (as a micro-benchmark
would on real hardware); the live runtime implements it with its profiler. Either way the placer
sees only measurements, never the parameters behind them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from rlsched.tasks import KindSpec

if TYPE_CHECKING:
    from rlsched.interference.kind_profiles import ProfileSamples
    from rlsched.interference.measurements import ColocationData


@runtime_checkable
class ProfilingInstrument(Protocol):
    """Measures the kinds of a workload on the GPU models of a cluster."""

    def key(self) -> Hashable:
        """Identifies what is measured (cluster GPU models, kinds, interference source): models
        fitted from one instrument may be reused for another with the same key."""
        ...

    def devices(self) -> list[str]:
        """GPU model names of the cluster (catalog names, e.g. ``"V100M16"``)."""
        ...

    def kinds(self) -> list[KindSpec]:
        """Subtask kinds of the workload that may run on a GPU."""
        ...

    def colocation(self, fraction: float, seed: int) -> ColocationData:
        """Co-run a random ``fraction`` of (device, kind, partner) triples (at least one partner per
        device and kind) and return their normalised throughputs (0 = cannot share)."""
        ...

    def kind_profiles(self, metrics_per_kind: int, seed: int) -> ProfileSamples:
        """Measure ``metrics_per_kind`` randomly chosen resource metrics of every kind."""
        ...


@runtime_checkable
class ObservingPlacer(Protocol):
    """A placer that learns from subtasks the executor saw finish on a GPU."""

    def observe(self, device: str, kind: str, partners: tuple[str, ...], speed: float) -> None:
        """One finished GPU subtask whose co-runners did not change while it ran.

        :param device: the GPU's model name.
        :param kind: the subtask's kind.
        :param partners: kinds of the subtasks it shared the GPU with (empty: it ran alone).
        :param speed: measured speed, nominal over measured run time (as ``ClusterView.speed_gpu``).
        """
        ...


#: Seed salt of the triples a co-location survey picks (shared by every instrument, so the
#: simulator's and the live profiler's surveys pick the same triples for one seed).
SURVEY_SALT = 0xC0C0


def colocation_survey(
    devices: Sequence[str],
    kinds: Sequence[KindSpec],
    fraction: float,
    seed: int,
    measure: Callable[[str, KindSpec, KindSpec, np.random.Generator], float],
) -> ColocationData:
    """Measure a random ``fraction`` of (device, kind, partner) triples, at least one partner per
    device and kind, as every :class:`ProfilingInstrument` does.

    Each partner is kept with probability ``fraction`` (one drawn at random when none is). The
    generator is handed to ``measure`` too, and an instrument's own draws (measurement noise)
    come from it in the same order for every instrument, so surveys stay in step.

    :param devices: GPU model names.
    :param kinds: GPU-capable kinds.
    :param fraction: share of triples, in (0, 1].
    :param seed: selection seed.
    :param measure: normalised throughput of a kind next to a partner on a device (0 = cannot share).
    :raises ValueError: for a fraction outside (0, 1].
    """
    from rlsched.interference.measurements import ColocationData

    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, SURVEY_SALT]))
    dev: list[str] = []
    kind: list[str] = []
    partner: list[str] = []
    y: list[float] = []
    for d in devices:
        for k in kinds:
            chosen = [p for p in kinds if rng.random() < fraction]
            if not chosen:
                chosen = [kinds[int(rng.integers(len(kinds)))]]
            for p in chosen:
                dev.append(d)
                kind.append(k.name)
                partner.append(p.name)
                y.append(measure(d, k, p, rng))
    return ColocationData(dev, kind, partner, np.array(y, dtype=np.float64))
