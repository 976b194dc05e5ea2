"""What a scheduler may learn interference from: a profiling instrument and run-time observations.

A placer that models interference (IAWP) is calibrated before a run by an instrument that
*measures* the cluster — co-running pairs of subtask kinds on each GPU model, and a few resource
metrics per kind — and keeps learning during the run from what the executor observes. The
simulator implements the instrument by running kinds against its ground truth (as a micro-benchmark
would on real hardware); the live runtime implements it with its profiler. Either way the placer
sees only measurements, never the parameters behind them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rlsched.tasks import KindSpec

if TYPE_CHECKING:
    from rlsched.interference import ColocationData
    from rlsched.profiles import ProfileSamples


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
