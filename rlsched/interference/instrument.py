"""What measures interference: the profiling instrument, and how every instrument picks and
draws its measurements.

The simulator's instrument (``envs.simulated_instrument``) runs kinds against its ground truth, as
a micro-benchmark would on real hardware; the live runtime's is its profiler. Either way the
instrument stays with the world, which takes the survey a placer asks for with it
(:func:`rlsched.interference.calibration.run_survey`): placers get the data, never the instrument.
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
    """Measures the kinds of a workload on the GPU models of a cluster.

    Held by the world only (the trusted side): placers get a
    :class:`~rlsched.interference.calibration.Survey` taken with it.
    """

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

    def measure(self, triples: Sequence[tuple[str, str, str]], seed: int) -> ColocationData:
        """Co-run exactly these (device, kind, partner) triples (names as :meth:`devices` and
        :meth:`kinds` give them) and return their normalised throughputs (0 = cannot share);
        ``seed`` seeds the measurement noise. Active profiling (:mod:`rlsched.interference.active`)
        picks them."""
        ...

    def kind_profiles(self, metrics_per_kind: int, seed: int) -> ProfileSamples:
        """Measure ``metrics_per_kind`` randomly chosen resource metrics of every kind."""
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


def measure_triples(
    triples: Sequence[tuple[str, str, str]],
    kinds: Sequence[KindSpec],
    seed: int,
    measure: Callable[[str, KindSpec, KindSpec, np.random.Generator], float],
) -> ColocationData:
    """Measure the given (device, kind, partner) triples, in order, as every
    :class:`ProfilingInstrument`'s ``measure`` does (one generator for the noise, drawn alike).

    :param triples: (device, kind name, partner name) to co-run.
    :param kinds: the instrument's kinds (names resolve to these).
    :param seed: noise seed.
    :param measure: as for :func:`colocation_survey`.
    :raises ValueError: naming a kind the instrument does not have.
    """
    from rlsched.interference.measurements import ColocationData

    by_name = {k.name: k for k in kinds}
    missing = sorted({n for _, k, p in triples for n in (k, p)} - set(by_name))
    if missing:
        raise ValueError(f"cannot measure unknown kinds: {', '.join(missing)}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, SURVEY_SALT, 1]))
    y = [measure(d, by_name[k], by_name[p], rng) for d, k, p in triples]
    return ColocationData(
        [t[0] for t in triples],
        [t[1] for t in triples],
        [t[2] for t in triples],
        np.array(y, dtype=np.float64),
    )
