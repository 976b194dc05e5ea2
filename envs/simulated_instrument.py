"""The simulator's profiling instrument: co-runs pairs of kinds on each GPU model and times them.

It is to the simulator what a co-location micro-benchmark is to a real cluster: it returns
measurements (with noise, for a random subset of pairs), never the ground-truth parameters that
produced them. It is the simulated world's :class:`rlsched.interference.instrument.ProfilingInstrument`
and stays with the world: :func:`rlsched.world.hand_over` runs the survey a placer asks for on it
and hands the placer the data only. Its public operations are the survey's two parts
(:meth:`SimulatedProfiler.colocation`, :meth:`SimulatedProfiler.kind_profiles`) and the chosen triples
of an active survey (:meth:`SimulatedProfiler.measure`); it never reveals a factor it did not measure.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from envs.simulated_kind_profiles import profile_kinds
from rlsched.hardware import GpuModel
from rlsched.interference.instrument import colocation_survey, measure_triples
from rlsched.interference.kind_profiles import ProfileSamples
from rlsched.tasks import KindSpec

if TYPE_CHECKING:
    from envs.ground_truth import GroundTruth
    from rlsched.interference.measurements import ColocationData
    from rlsched.scenarios.spec import InterferenceSpec

#: Relative noise (log-normal sigma) of one co-location measurement.
MEASUREMENT_NOISE = 0.02


def _co_runner(truth: GroundTruth) -> Callable[[GpuModel, KindSpec, KindSpec], float]:
    """The simulated hardware: the true factor of ``kind`` co-running with ``partner`` (0 = cannot)."""

    def co_run(model: GpuModel, kind: KindSpec, partner: KindSpec) -> float:
        pairs = truth.pairs
        if pairs is not None and pairs.get((truth.csv_device(model), kind.name, partner.name)) == 0:
            return 0.0  # the pair does not fit on the device together
        return truth.factors([kind, partner], [1.0, 1.0], model)[0]

    return co_run


@dataclass(frozen=True, slots=True)
class Testbed:
    """What the instrument measures: the hardware (the ground truth plays it), the GPU models to
    co-run on and the kinds to co-run (:meth:`envs.simulator.Simulator.testbed` gives a world's).

    :param truth: the ground truth the co-runs read their factors from.
    :param models: the GPU models, one per name.
    :param kinds: the kinds that run on a GPU, one per name.
    :param interference: where the truth's interference comes from (it names the measurements).
    """

    truth: GroundTruth
    models: Sequence[GpuModel]
    kinds: Sequence[KindSpec]
    interference: InterferenceSpec


class SimulatedProfiler:
    """Measures kinds on GPU models against a simulated world's ground truth.

    :param testbed: the truth (it plays the hardware being measured), the models and the kinds.
    :param noise: relative noise of each measurement.
    """

    def __init__(self, testbed: Testbed, noise: float = MEASUREMENT_NOISE) -> None:
        # The measuring function closes over the truth (not the testbed). Only the world holds
        # this object; placers get the survey's data (tests/test_sealed.py walks what they hold).
        self._co_run = _co_runner(testbed.truth)
        self.noise = noise
        self._models = {m.name: m for m in sorted(testbed.models, key=lambda m: m.name)}
        self._kinds = sorted(testbed.kinds, key=lambda k: k.name)
        spec = testbed.interference
        self._key = (
            tuple(self._models),
            tuple(k.name for k in self._kinds),
            spec.model,
            str(spec.colocation_csv),
            str(spec.solo_csv),
            noise,
        )

    def key(self) -> Hashable:
        return self._key

    def devices(self) -> list[str]:
        return list(self._models)

    def kinds(self) -> list[KindSpec]:
        return list(self._kinds)

    def _measure(self, device: str, kind: KindSpec, partner: KindSpec, rng: np.random.Generator) -> float:
        """Normalised throughput of ``kind`` while ``partner`` runs on the same GPU (0 = cannot
        share). Private: measurements are taken only as part of a survey."""
        f = self._co_run(self._models[device], kind, partner)
        return 0.0 if f == 0.0 else float(f * np.exp(rng.normal(0.0, self.noise)))

    def colocation(self, fraction: float, seed: int) -> ColocationData:
        """Co-run a random ``fraction`` of (device, kind, partner) triples (see
        :func:`rlsched.interference.instrument.colocation_survey`)."""
        return colocation_survey(list(self._models), self._kinds, fraction, seed, self._measure)

    def measure(self, triples: Sequence[tuple[str, str, str]], seed: int) -> ColocationData:
        """Co-run the given (device, kind, partner) triples (see
        :func:`rlsched.interference.instrument.measure_triples`)."""
        return measure_triples(triples, self._kinds, seed, self._measure)

    def kind_profiles(self, metrics_per_kind: int, seed: int) -> ProfileSamples:
        """Measure ``metrics_per_kind`` random metrics of every kind (see
        :func:`envs.simulated_kind_profiles.profile_kinds`)."""
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x9F0F]))
        return profile_kinds(self._kinds, metrics_per_kind=metrics_per_kind, rng=rng)
