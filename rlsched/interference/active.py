"""Active profiling: spend a fixed co-location budget where the answers are worth most.

A random survey co-runs a ``fraction`` of the (device, kind, partner) triples, at least one
partner per device and kind. An active survey co-runs the same number of triples, chosen in
rounds: first one random partner per device and kind (the random survey's floor, so every
device and kind is measured), then, after each round, an interference model is fitted to what
has been measured and the next round measures the triples whose answer is worth most — those
where the model's members disagree most about the slowdown a placement would read
(:meth:`rlsched.interference.predictor.InterferencePredictor.predict_spread`).

It runs on the world's side (:func:`rlsched.interference.calibration.run_survey`) with the world's
instrument, so the simulator, ``run_live`` and the service's calibration take it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rlsched.interference.instrument import ProfilingInstrument
    from rlsched.interference.measurements import ColocationData

#: Rounds of fit-then-measure after the first (coverage) round.
ROUNDS = 3
#: A candidate's value is divided by this for each triple already picked this round on the same
#: device and pair of kinds (its mirror included): the symmetric model learns both from either.
SAME_PAIR_DISCOUNT = 2.0
#: Throughputs below this read as "cannot share" (as ``iawp`` reads them), and slowdowns are
#: capped at ``1 / NO_SHARE_BELOW - 1`` so that a pair near that edge does not swamp the value.
NO_SHARE_BELOW = 0.05
_SALT = 0xAC71


def budget(n_devices: int, n_kinds: int, fraction: float) -> int:
    """Co-runs of a survey of ``fraction`` of the triples: the expected size of a random one
    (at least one partner per device and kind).

    :raises ValueError: for a fraction outside (0, 1].
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return max(n_devices * n_kinds, round(fraction * n_devices * n_kinds * n_kinds))


def slowdown_spread(mean: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Spread of the slowdown ``1/n - 1`` for throughput ``mean`` ± ``spread`` (first order)."""
    n = np.maximum(mean, NO_SHARE_BELOW)
    return np.minimum(spread / (n * n), 1.0 / NO_SHARE_BELOW - 1.0)


def pick(
    candidates: Sequence[tuple[str, str, str]], value: np.ndarray, m: int, rng: np.random.Generator
) -> list[tuple[str, str, str]]:
    """The ``m`` candidates of most value, greedily, each pick discounting the candidates on the
    same device and pair of kinds (:data:`SAME_PAIR_DISCOUNT`); ties broken at random.

    :param candidates: unmeasured (device, kind, partner) triples.
    :param value: value of measuring each.
    :param m: how many to pick.
    :param rng: tie-breaking generator.
    """
    v = np.asarray(value, dtype=np.float64) + 1e-12 * rng.random(len(candidates))
    group = [(d, *sorted((k, p))) for d, k, p in candidates]
    members: dict[tuple[str, ...], list[int]] = {}
    for i, gkey in enumerate(group):
        members.setdefault(gkey, []).append(i)
    out: list[tuple[str, str, str]] = []
    for _ in range(min(m, len(candidates))):
        i = int(np.argmax(v))
        out.append(candidates[i])
        v[i] = -np.inf
        for j in members[group[i]]:
            v[j] /= SAME_PAIR_DISCOUNT
    return out


def active_colocation(
    instrument: ProfilingInstrument, fraction: float, seed: int, method: str = "ncf", rounds: int = ROUNDS
) -> ColocationData:
    """An active co-location survey of :func:`budget` co-runs (see the module docstring).

    :param instrument: the world's instrument.
    :param fraction: budget as a share of all triples, in (0, 1].
    :param seed: seeds the coverage round, tie-breaks, fits and measurement noise.
    :param method: model family fitted between rounds (as the placer's: ``ncf``, ``svd``).
    :param rounds: fit-then-measure rounds after the coverage round.
    :raises ValueError: for a fraction outside (0, 1].
    """
    from rlsched.interference import fit_store
    from rlsched.interference.measurements import ColocationData

    devices, kinds = instrument.devices(), [k.name for k in instrument.kinds()]
    n = budget(len(devices), len(kinds), fraction)
    if not devices or not kinds:
        return ColocationData([], [], [], np.zeros(0))
    rng = np.random.default_rng(np.random.SeedSequence([seed, _SALT]))
    first = [(d, k, kinds[int(rng.integers(len(kinds)))]) for d in devices for k in kinds]
    data = instrument.measure(first, seed)
    measured = set(first)
    everything = [(d, k, p) for d in devices for k in kinds for p in kinds]
    for r in range(rounds):
        left = n - len(measured)
        if left <= 0:
            break
        candidates = [t for t in everything if t not in measured]
        model = fit_store.fit(data, method, seed)  # a store, where installed, keeps each round's fit
        mean, spread = model.predict_spread(*(list(c) for c in zip(*candidates, strict=True)))
        chosen = pick(candidates, slowdown_spread(mean, spread), math.ceil(left / (rounds - r)), rng)
        data = ColocationData.concat([data, instrument.measure(chosen, seed * 64 + r + 1)])
        measured.update(chosen)
    return data
