"""The one place policies are named, and parsing of ``SELECTOR+PLACER`` specifications.

Every policy of the core package is in the two tables below, built on use (a learned policy
imports torch only when it is asked for). Policies that live elsewhere come in through the
entry-point group :data:`ENTRY_POINT_GROUP` (``rlsched.policies``), read when a name is first
looked up: a third party's, and our own clairvoyant ``oracle``, which reads the simulator's ground
truth and therefore lives with the simulator (``envs.oracle``, declared in our pyproject.toml).
An entry point names a class (or a factory with no arguments) whose objects have ``select``
(a stage-1 :class:`~rlsched.scheduler.NodeSelector`) or ``place`` (a stage-2
:class:`~rlsched.scheduler.SubtaskPlacer`). Nothing is registered as a side effect of an import.

A policy that reads the simulator's ground truth is a clairvoyant reference and must say so: its
class (or factory) declares ``clairvoyant = True`` (:class:`~rlsched.scheduler.Clairvoyant`). The
registry records the declaration when the name is registered, so a report can mark a scheduler
by name (:func:`is_clairvoyant_spec`) without building it, and building a policy whose object
declares clairvoyance under a name registered without it is refused.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from rlsched import OUR_PACKAGES
from rlsched.policies.names import AUTO
from rlsched.policies.placers import FirstFreePlacer, LeastLoadedPlacer, MlsmPlacer, SpeedupPlacer
from rlsched.policies.selectors import (
    EtcSelector,
    LeastLoadedSelector,
    MctCapSelector,
    MctDrainSelector,
    MctMemSelector,
    MctSelector,
    MctStreamSelector,
    MlsmSelector,
    PatsSelector,
    RandomSelector,
    RoundRobinSelector,
)
from rlsched.scheduler import NodeSelector, SubtaskPlacer, TwoStageScheduler, is_clairvoyant

#: Entry-point group through which other packages add policies.
ENTRY_POINT_GROUP = "rlsched.policies"
#: The placer a bare selector name gets.
DEFAULT_PLACER = "speedup"


@dataclass(frozen=True)
class PolicyOptions:
    """Checkpoints of the learned policies.

    :param selector_model: LDWP checkpoint directory for ``ldwp`` (``None``: the shipped weights).
    :param placer_model: placer checkpoint directory for ``iawp-rl`` (``None``: shipped).
    :param recogniser_model: recogniser folder for ``auto`` (``None``: the shipped one).
    """

    selector_model: str | None = None
    placer_model: str | None = None
    recogniser_model: str | None = None


#: The shipped checkpoints of every learned policy.
SHIPPED = PolicyOptions()

SelectorFactory = Callable[[PolicyOptions], NodeSelector]
PlacerFactory = Callable[[PolicyOptions], SubtaskPlacer]


def _ldwp(o: PolicyOptions) -> NodeSelector:
    from rlsched.policies.ldwp import LdwpSelector  # torch only when ldwp is used

    return LdwpSelector(o.selector_model)


# The interference-aware placers import torch (their models), which baseline runs do without.
def _iawp(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp import IawpPlacer

    return IawpPlacer()


def _iawp_active(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp import IawpPlacer

    placer = IawpPlacer(active=True)
    placer.name = "iawp-active"
    return placer


def _iawp_pass(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp import IawpPassPlacer

    return IawpPassPlacer()


def _coloc_greedy(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp import ColocGreedyPlacer

    return ColocGreedyPlacer()


def _iawp_cosine(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp_cosine import IawpCosinePlacer

    return IawpCosinePlacer()


def _iawp_rl(o: PolicyOptions) -> SubtaskPlacer:
    from rlsched.policies.iawp_rl import LearnedIawpPlacer

    return LearnedIawpPlacer(model_dir=o.placer_model)


def _plain(cls: Callable[[], Any]) -> Callable[[PolicyOptions], Any]:
    return lambda _o: cls()


SELECTORS: dict[str, SelectorFactory] = {
    "random": _plain(RandomSelector),
    "round-robin": _plain(RoundRobinSelector),
    "least-loaded": _plain(LeastLoadedSelector),
    "mct": _plain(MctSelector),
    "mct-mem": _plain(MctMemSelector),
    "mct-stream": _plain(MctStreamSelector),
    "mct-drain": _plain(MctDrainSelector),
    "mct-cap": _plain(MctCapSelector),
    "pats": _plain(PatsSelector),
    "mlsm": _plain(MlsmSelector),
    "ldwp": _ldwp,
}
PLACERS: dict[str, PlacerFactory] = {
    "first-free": _plain(FirstFreePlacer),
    "least-loaded": _plain(LeastLoadedPlacer),
    "mlsm": _plain(MlsmPlacer),
    "speedup": _plain(SpeedupPlacer),
    "iawp": _iawp,
    "iawp-pass": _iawp_pass,
    "iawp-active": _iawp_active,
    "iawp-rl": _iawp_rl,
    "iawp-cosine": _iawp_cosine,
    "coloc-greedy": _coloc_greedy,
}
_BUILTIN_SELECTORS = frozenset(SELECTORS)
_BUILTIN_PLACERS = frozenset(PLACERS)
#: Names declared clairvoyant, by table (``"selector"`` or ``"placer"``): no built-in is.
_CLAIRVOYANT: dict[str, set[str]] = {"selector": set(), "placer": set()}
_plugins_read = False
#: The plug-ins loaded: policy name -> its entry point (``module:Class``), so that an error raised
#: in their code, or a broken contract, is said to be theirs (``experiments/cli.py``).
PLUGINS: dict[str, str] = {}


def _declare(kind: str, name: str, factory: object) -> None:
    """Record whether the policy ``name`` of ``kind`` is declared clairvoyant by its factory."""
    if is_clairvoyant(factory):
        _CLAIRVOYANT[kind].add(name)
    else:
        _CLAIRVOYANT[kind].discard(name)


def _checked(kind: str, name: str, policy: Any) -> Any:
    """``policy`` built under ``name``, refused if it declares clairvoyance its registration did not.

    :raises ValueError: naming the policy.
    """
    method = "select" if kind == "selector" else "place"
    if not callable(getattr(policy, method, None)):
        raise ValueError(
            f"{kind} {name!r}: its factory built {type(policy).__name__}, which has no {method}() "
            f"(registered as a {kind}?)"
        )
    if is_clairvoyant(policy) and name not in _CLAIRVOYANT[kind]:
        raise ValueError(
            f"{kind} {name!r} declares itself clairvoyant (clairvoyant = True) but was registered "
            "without the declaration: declare it on the class or factory, so reports mark it"
        )
    return policy


def _classify(ep: EntryPoint) -> str | None:
    """``"selector"`` or ``"placer"`` for a loadable entry point, else ``None`` (with a warning)."""
    try:
        obj = ep.load()
    except Exception as e:  # a broken plug-in must not take the built-ins down with it
        warnings.warn(f"{ENTRY_POINT_GROUP} entry point {ep.name!r} ({ep.value}): {e}", stacklevel=3)
        return None
    has_select, has_place = callable(getattr(obj, "select", None)), callable(getattr(obj, "place", None))
    problem = None
    if has_select == has_place:
        problem = (
            "expected a class with a 'select' method (node selector) or a 'place' method (subtask "
            "placer), " + ("not both" if has_select else "got neither")
        )
    elif getattr(obj, "clairvoyant", False) is True and not callable(getattr(obj, "bind_simulator", None)):
        # Neither honoured nor refused, its runs would say clairvoyant: false, and a report would
        # rank a self-declared reference among the real schedulers.
        problem = "clairvoyant = True needs a bind_simulator(sim) method (it is handed the simulator)"
    if problem is not None:
        warnings.warn(f"{ENTRY_POINT_GROUP} entry point {ep.name!r} ({ep.value}): {problem}", stacklevel=3)
        return None
    return "selector" if has_select else "placer"


def load_plugins() -> None:
    """Read the entry-point group once (later calls do nothing). A plug-in whose name is taken
    by a built-in is ignored with a warning."""
    global _plugins_read
    if _plugins_read:
        return
    _plugins_read = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        kind = _classify(ep)
        if kind is None:
            continue
        table: dict[str, Any] = SELECTORS if kind == "selector" else PLACERS
        if ep.name in (_BUILTIN_SELECTORS if kind == "selector" else _BUILTIN_PLACERS):
            warnings.warn(
                f"{ENTRY_POINT_GROUP}: {ep.name!r} is a built-in {kind}; plug-in ignored", stacklevel=2
            )
            continue
        if ep.name not in table:
            factory = ep.load()
            table[ep.name] = _plain(factory)
            _declare(kind, ep.name, factory)
            if (
                ep.value.split(".", 1)[0].split(":", 1)[0] not in OUR_PACKAGES
            ):  # an entry point of this project's own (oracle) is no plug-in
                PLUGINS[ep.name] = ep.value


def plugin_of(error: BaseException) -> str | None:
    """The plug-in an error belongs to, as ``'NAME' (module:Class)``: one whose module raised it
    (a frame of its traceback), or whose name the error's message starts with (a contract the
    world checks: ``'NAME': select returned ...``, ``NAME: GPU 9 of node 1 ...``). ``None``:
    rlsched's own.

    :param error: what a command raised.
    """
    if not PLUGINS:
        return None
    modules = {v.split(":", 1)[0].split(".", 1)[0] for v in PLUGINS.values()}
    by_class = {v.rsplit(":", 1)[-1]: n for n, v in PLUGINS.items()}
    found = None
    tb = error.__traceback__
    while tb is not None:  # the innermost frame of a plug-in's module, by its class if it has one
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] in modules:
            owner = tb.tb_frame.f_code.co_qualname.split(".", 1)[0]
            found = (
                f"{by_class[owner]!r} ({PLUGINS[by_class[owner]]})" if owner in by_class else f"of {module}"
            )
        tb = tb.tb_next
    if found is not None:
        return found
    text = str(error)
    for name, value in PLUGINS.items():
        for called in {name, value.rsplit(":", 1)[-1]}:  # a policy without a name is its class's
            if text.startswith((f"{called}:", f"'{called}':", f"selector '{called}'", f"placer {called}:")):
                return f"{name!r} ({value})"
    return None


def selector_names() -> list[str]:
    """Every stage-1 policy name, sorted."""
    load_plugins()
    return sorted(SELECTORS)


def placer_names() -> list[str]:
    """Every stage-2 policy name, sorted."""
    load_plugins()
    return sorted(PLACERS)


#: A policy's name: what a SELECTOR+PLACER spec can hold.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _check_name(kind: str, name: str) -> None:
    """A name a spec can spell, not one of rlsched's own (as for plug-ins: built-in names win).

    :raises ValueError: naming it.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            f"{kind} name {name!r}: expected letters, digits and _.- (it is spelt in SELECTOR+PLACER specs)"
        )
    if name in (_BUILTIN_SELECTORS if kind == "selector" else _BUILTIN_PLACERS) or name == AUTO:
        raise ValueError(f"{kind} name {name!r} is rlsched's own: register yours under another name")


def register_selector(name: str, factory: Callable[[], NodeSelector]) -> None:
    """Add a stage-1 policy for this process (code that embeds rlsched; packages use the
    entry-point group instead). A clairvoyant reference declares ``clairvoyant = True`` on
    ``factory`` (its class).

    :raises ValueError: a name a spec cannot spell, or one of rlsched's own.
    """
    _check_name("selector", name)
    SELECTORS[name] = _plain(factory)
    _declare("selector", name, factory)


def register_placer(name: str, factory: Callable[[], SubtaskPlacer]) -> None:
    """Add a stage-2 policy for this process (see :func:`register_selector`)."""
    _check_name("placer", name)
    PLACERS[name] = _plain(factory)
    _declare("placer", name, factory)


def is_clairvoyant_spec(spec: str) -> bool:
    """Whether the scheduler ``SELECTOR[+PLACER]`` has a part declared clairvoyant (a reference
    that reads the simulator's ground truth); unknown names are not.

    :param spec: e.g. ``"oracle+speedup"``.
    """
    sel, _, plc = spec.partition("+")
    if sel not in SELECTORS or (plc and plc not in PLACERS):
        load_plugins()
    return sel in _CLAIRVOYANT["selector"] or plc in _CLAIRVOYANT["placer"]


#: Policies that run a trained network: the LDWP selector and the learned placer.
LEARNED_SELECTORS = frozenset({"ldwp"})
LEARNED_PLACERS = frozenset({"iawp-rl"})


def is_learned_spec(spec: str) -> bool:
    """Whether the scheduler ``SELECTOR[+PLACER]`` has a learned part (:data:`LEARNED_SELECTORS`,
    :data:`LEARNED_PLACERS`), or is ``auto`` (a learned recogniser over pairs); a pair that is
    neither learned nor clairvoyant is a heuristic.

    :param spec: e.g. ``"ldwp+speedup"`` (learned) or ``"mct+iawp"`` (not).
    """
    sel, _, plc = spec.partition("+")
    return sel in LEARNED_SELECTORS or plc in LEARNED_PLACERS or sel == AUTO


def make_selector(name: str, options: PolicyOptions = SHIPPED) -> NodeSelector:
    """A stage-1 policy by name.

    :raises ValueError: naming the unknown selector and listing the known names.
    """
    if name not in SELECTORS:
        load_plugins()
    if name not in SELECTORS:
        raise ValueError(f"unknown selector {name!r}; known: {', '.join(selector_names())}")
    return _checked("selector", name, SELECTORS[name](options))


def make_placer(spec: str | SubtaskPlacer, options: PolicyOptions = SHIPPED) -> SubtaskPlacer:
    """A stage-2 policy by name (a placer object is returned as it is).

    :raises ValueError: naming the unknown placer and listing the known names.
    """
    if not isinstance(spec, str):
        return spec
    if spec not in PLACERS:
        load_plugins()
    if spec not in PLACERS:
        raise ValueError(f"unknown placer {spec!r}; known: {', '.join(placer_names())}")
    return _checked("placer", spec, PLACERS[spec](options))


def recogniser_version(folder: str | None) -> str:
    """Load and verify ``auto``'s recogniser in ``folder`` (``None``: the shipped one); its sha256.

    :raises models.checkpoint.CheckpointError: naming its file and what is wrong.
    """
    from rlsched.policies.recogniser import load_recogniser, model_sha256
    from rlsched.policies.revisit import load_revisit

    load_recogniser(folder)
    load_revisit(folder)
    return model_sha256(folder)


def revisit_version(folder: str | None) -> str | None:
    """The sha256 of ``auto``'s second decision in the recogniser ``folder`` (verified when
    ``auto`` loads it), or ``None`` when it has none."""
    from rlsched.policies.revisit import revisit_sha256

    return revisit_sha256(folder)


def describe_auto(scheduler: TwoStageScheduler) -> dict[str, Any] | None:
    """What ``auto`` has seen and chosen, or ``None`` when ``scheduler`` is not ``auto``
    (:func:`rlsched.policies.auto.describe`)."""
    if AUTO not in (getattr(scheduler.selector, "name", None), getattr(scheduler.placer, "name", None)):
        return None
    from rlsched.policies.auto import describe

    return describe(scheduler)


def auto_choice(scheduler: TwoStageScheduler) -> dict[str, Any] | None:
    """``auto``'s decision as plain data (:meth:`Choice.to_dict`), or ``None`` when ``scheduler``
    is not ``auto`` or has not decided yet (the service checkpoints it)."""
    from rlsched.policies.auto import switchboard

    board = switchboard(scheduler)
    return None if board is None or board.choice is None else board.choice.to_dict()


def auto_second(scheduler: TwoStageScheduler) -> dict[str, Any] | None:
    """``auto``'s second decision as plain data (:meth:`SecondChoice.to_dict`), or ``None`` when
    ``scheduler`` is not ``auto`` or has not made it (the service checkpoints it)."""
    from rlsched.policies.auto import switchboard

    board = switchboard(scheduler)
    return None if board is None or board.second is None else board.second.to_dict()


def restore_auto_choice(
    scheduler: TwoStageScheduler, doc: dict[str, Any], second: dict[str, Any] | None = None
) -> str | None:
    """Make ``auto`` take a decision saved by :func:`auto_choice` (and the second one saved by
    :func:`auto_second`, when given); the pair it runs now, or ``None`` when ``scheduler`` is not
    ``auto`` or the pair is not one of its candidates.

    :raises ValueError: ``doc`` or ``second`` is not a saved decision.
    """
    from rlsched.policies.auto import switchboard
    from rlsched.policies.recogniser import Choice
    from rlsched.policies.revisit import SecondChoice

    board = switchboard(scheduler)
    choice = Choice.from_dict(doc)
    later = SecondChoice.from_dict(second) if second is not None else None
    if board is None or not board.restore(choice, later):
        return None
    return board.current


def is_auto(scheduler: TwoStageScheduler) -> bool:
    """Whether ``scheduler`` is ``auto``."""
    from rlsched.policies.auto import switchboard

    return switchboard(scheduler) is not None


def _auto(options: PolicyOptions) -> TwoStageScheduler:
    """``auto`` with the recogniser and candidate checkpoints of ``options``."""
    from rlsched.policies.auto import build_auto
    from rlsched.policies.recogniser import load_recogniser
    from rlsched.policies.revisit import load_revisit

    folder = options.recogniser_model
    recogniser, revisit = load_recogniser(folder), load_revisit(folder)

    def selector(name: str) -> NodeSelector:
        sel = make_selector(name, options)
        if isinstance(sel, EtcSelector):  # run the ETC its labels were measured with
            sel.parallel = recogniser.parallel_etc
        return sel

    return build_auto(recogniser, selector, lambda p: make_placer(p, options), revisit)


def parse_scheduler(spec: str, options: PolicyOptions = SHIPPED) -> TwoStageScheduler:
    """Build a scheduler from ``SELECTOR`` or ``SELECTOR+PLACER``.

    :param spec: e.g. ``"mct"`` (the default placer), ``"ldwp+iawp"``, or ``"auto"`` (the case
        recogniser over its candidate pairs, :mod:`rlsched.policies.auto`).
    :param options: checkpoints of learned policies.
    :raises ValueError: naming the unknown part and listing the known names.
    """
    if spec == AUTO:
        return _auto(options)
    sel, plus, plc = spec.partition("+")
    if sel == AUTO:
        raise ValueError(f"{spec!r}: auto chooses its own pair; name it alone ('auto')")
    if plus and not plc:
        raise ValueError(f"empty placer in {spec!r}; known: {', '.join(placer_names())}")
    plc = plc or DEFAULT_PLACER
    if sel not in SELECTORS or plc not in PLACERS:
        load_plugins()
    if sel not in SELECTORS:
        raise ValueError(f"unknown selector {sel!r} in {spec!r}; known: {', '.join(selector_names())}")
    if plc not in PLACERS:
        raise ValueError(f"unknown placer {plc!r} in {spec!r}; known: {', '.join(placer_names())}")
    return TwoStageScheduler(
        _checked("selector", sel, SELECTORS[sel](options)), _checked("placer", plc, PLACERS[plc](options))
    )
