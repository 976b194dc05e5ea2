"""Names of policies, and parsing of ``SELECTOR+PLACER`` specifications."""

from __future__ import annotations

from collections.abc import Callable

from rlsched.policies.base import NodeSelector, SubtaskPlacer, TwoStageScheduler
from rlsched.policies.placers import FirstFreePlacer, LeastLoadedPlacer, MlsmPlacer, SpeedupPlacer
from rlsched.policies.selectors import (
    LeastLoadedSelector,
    MctMemSelector,
    MctSelector,
    MlsmSelector,
    PatsSelector,
    RandomSelector,
    RoundRobinSelector,
)

SELECTORS: dict[str, Callable[[], NodeSelector]] = {
    "random": RandomSelector,
    "round-robin": RoundRobinSelector,
    "least-loaded": LeastLoadedSelector,
    "mct": MctSelector,
    "mct-mem": MctMemSelector,
    "pats": PatsSelector,
    "mlsm": MlsmSelector,
}


def _iawp() -> SubtaskPlacer:
    # Imported on use: the interference models bring in torch, which baseline runs do without.
    from rlsched.policies.iawp import IawpPlacer

    return IawpPlacer()


def _iawp_pass() -> SubtaskPlacer:
    from rlsched.policies.iawp import IawpPassPlacer

    return IawpPassPlacer()


def _coloc_greedy() -> SubtaskPlacer:
    from rlsched.policies.iawp import ColocGreedyPlacer

    return ColocGreedyPlacer()


def _iawp_cosine() -> SubtaskPlacer:
    from rlsched.policies.iawp_cosine import IawpCosinePlacer

    return IawpCosinePlacer()


def _iawp_rl() -> SubtaskPlacer:
    from rlsched.policies.iawp_rl import LearnedIawpPlacer

    return LearnedIawpPlacer()


PLACERS: dict[str, Callable[[], SubtaskPlacer]] = {
    "first-free": FirstFreePlacer,
    "least-loaded": LeastLoadedPlacer,
    "mlsm": MlsmPlacer,
    "speedup": SpeedupPlacer,
    "iawp": _iawp,
    "iawp-pass": _iawp_pass,
    "iawp-rl": _iawp_rl,
    "iawp-cosine": _iawp_cosine,
    "coloc-greedy": _coloc_greedy,
}
#: The placer a bare selector name gets.
DEFAULT_PLACER = "speedup"


def register_selector(name: str, factory: Callable[[], NodeSelector]) -> None:
    """Make a stage-1 policy available by name (used by layers above, e.g. the oracle)."""
    SELECTORS[name] = factory


def register_placer(name: str, factory: Callable[[], SubtaskPlacer]) -> None:
    """Make a stage-2 policy available by name."""
    PLACERS[name] = factory


def make_placer(spec: str | SubtaskPlacer) -> SubtaskPlacer:
    """A stage-2 policy by name (a placer object is returned as it is).

    :raises ValueError: naming the unknown placer and listing the known names.
    """
    if not isinstance(spec, str):
        return spec
    if spec not in PLACERS:
        raise ValueError(f"unknown placer {spec!r}; known: {', '.join(sorted(PLACERS))}")
    return PLACERS[spec]()


def parse_scheduler(spec: str) -> TwoStageScheduler:
    """Build a scheduler from ``SELECTOR`` or ``SELECTOR+PLACER``.

    :raises ValueError: naming the unknown part and listing the known names.
    """
    sel, plus, plc = spec.partition("+")
    if plus and not plc:
        raise ValueError(f"empty placer in {spec!r}; known: {', '.join(sorted(PLACERS))}")
    plc = plc or DEFAULT_PLACER
    if sel not in SELECTORS:
        raise ValueError(f"unknown selector {sel!r} in {spec!r}; known: {', '.join(sorted(SELECTORS))}")
    if plc not in PLACERS:
        raise ValueError(f"unknown placer {plc!r} in {spec!r}; known: {', '.join(sorted(PLACERS))}")
    return TwoStageScheduler(SELECTORS[sel](), PLACERS[plc]())
