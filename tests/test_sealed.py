"""Ground truth sealed by construction (ARCHITECTURE.md section 4): nothing handed to a policy or to a Gym
agent reaches the simulator's ground truth.

The walker (:func:`leaks`) follows ``gc.get_referents`` from every object a policy or an agent is
handed and fails on what it must never reach: a :class:`~envs.ground_truth.GroundTruth`, a
:class:`~envs.simulator.Simulator`, a running subtask's :class:`~envs.simulator.Run` (true remaining
work), or a :class:`~rlsched.tasks.Task` that has not arrived yet (a future arrival time).

What it follows: instance attributes (``__dict__`` and slots), containers, closures' cells,
functions' defaults, bound methods' ``__self__`` and ``__func__``, generators' and frames' locals —
data, however deeply nested. What it does not follow: modules, classes, code objects, and the
global namespaces of modules (a function's ``__globals__``, a frame's globals and builtins). Those
are program text, not data handed over: whatever they lead to is reachable by an import just as
well, and imports are what ``tests/test_layers.py`` checks (policies in ``rlsched`` cannot import
``envs``; experiments that may read the truth are named there). The walker deliberately does follow
closures and bound methods: a measuring function closing over the truth was how the profiling
instrument leaked it before.

Classes are not followed either: class attributes are shared program state, like a module's (a
policy that stored the simulator on its class would not be seen; no code of ours writes to a class).

Roots, in a simulator run: at sampled decisions, the task, view and mask ``select`` gets and the
selector and placer objects the world holds (thin wrappers around the policies, so whatever the
world sets on them at the hand-over counts); at sampled placements, the task, subtask and view
``place`` gets; the survey a calibrating placer is handed; at the end, both policies and the run's
metrics. The wrappers' watch, which reads the world's clock for the test, is not followed. In the
Gym env: the env object itself (all it references, private attributes included), every value
``reset``/``step`` return, ``action_masks()``, the spaces, and each public attribute and property.

Hand mutation checks (once, in a copy of the tree; each product change reverted a part of the
sealing and made the named test fail):

- the pre-sealing ``ClusterSchedulingEnv`` (a ``SchedulingEnv`` subclass holding its world
  in-process) restored: ``test_the_gym_env_reaches_no_truth`` failed with
  ``env.unwrapped._world -> the simulator``;
- ``rlsched.world.hand_over`` leaving the instrument on the placer (``placer.instrument =
  instrument``, as when placers were handed the instrument): ``test_a_run_hands_policies_no_truth``
  ``[mct-iawp]`` and ``[mlsm-iawp-cosine]`` failed with
  ``placer.instrument._co_run.__closure__[0].cell_contents -> the ground truth``;
- the simulator binding any policy that has ``bind_simulator`` (the old duck typing):
  ``test_an_undeclared_selector_is_not_handed_the_simulator`` failed (``selector.bound`` was the
  simulator).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import types
from collections import deque
from typing import Any

import gymnasium
import numpy as np
import pytest

import envs
from envs.env_worker import _portable
from envs.ground_truth import GroundTruth
from envs.gym_env import ClusterSchedulingEnv
from envs.simulated_instrument import SimulatedProfiler
from envs.simulated_worlds import SimulatedWorlds
from envs.simulator import Run, Simulator
from experiments.simulate import compare, format_table
from rlsched.interference.calibration import Survey
from rlsched.policies.registry import (
    SELECTORS,
    is_clairvoyant_spec,
    make_placer,
    make_selector,
    parse_scheduler,
    register_selector,
)
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import NodeSelector, SubtaskPlacer, TwoStageScheduler
from rlsched.scheduling_env import SchedulingEnv
from rlsched.tasks import Subtask, Task
from rlsched.view import ClusterView

#: Code, not data: never followed (see the module docstring).
_CODE = (types.ModuleType, type, types.CodeType)


def _namespaces() -> set[int]:
    """Ids of the modules' global namespaces (a function's ``__globals__``, a frame's globals)."""
    out = {id(vars(m)) for m in list(sys.modules.values()) if m is not None and hasattr(m, "__dict__")}
    import builtins

    return out | {id(vars(builtins)), id(sys.modules)}


def _leak(obj: object, now: float) -> str | None:
    if isinstance(obj, GroundTruth):
        return "the ground truth"
    if isinstance(obj, Simulator):
        return "the simulator"
    if isinstance(obj, Run):
        return "a running subtask's true remaining work"
    if isinstance(obj, Task) and obj.arrival_s > now:
        return f"task {obj.id}, arriving at {obj.arrival_s:.3f} s (now {now:.3f} s)"
    return None


def leaks(roots: dict[str, object], now: float, limit: int = 5, harness: object = None) -> list[str]:
    """Paths from the named roots to anything sealed (breadth first: the shortest path to each).

    :param roots: what a policy or an agent is handed, by name.
    :param now: the world's time: a task arriving after it is a future arrival.
    :param limit: stop after this many leaks.
    :param harness: the test's own trusted object (a watch that reads the world's clock), not
        followed where a wrapper around a policy holds it.
    """
    skip = _namespaces() | {id(harness)}
    seen: set[int] = set()
    queue: deque[tuple[object, str]] = deque((obj, name) for name, obj in roots.items())
    found: list[str] = []
    while queue and len(found) < limit:
        obj, path = queue.popleft()
        if id(obj) in seen or id(obj) in skip or isinstance(obj, _CODE):
            continue
        seen.add(id(obj))
        what = _leak(obj, now)
        if what is not None:
            found.append(f"{path} -> {what}")
            continue
        queue.extend((ref, path + label) for label, ref in _referents(obj))
    return found


def _referents(obj: object) -> list[tuple[str, object]]:
    """What ``obj`` holds as data, each with a label for the path: ``gc.get_referents`` (all it
    holds), named where the name is known; a frame gives its locals only (its referents include
    its globals, builtins and callers)."""
    if isinstance(obj, types.FrameType):
        return [(f".{k}", v) for k, v in obj.f_locals.items()]
    names: dict[int, str] = {}
    inline: list[tuple[str, object]] = []
    refs = gc.get_referents(obj)
    if isinstance(obj, dict):
        names = {id(v): f"[{k!r}]" for k, v in obj.items()}
    elif isinstance(obj, list | tuple):
        names = {id(v): f"[{i}]" for i, v in enumerate(obj)}
    elif isinstance(obj, types.FunctionType):
        names = {id(obj.__closure__): ".__closure__", id(obj.__defaults__): ".__defaults__"}
    elif isinstance(obj, types.CellType):
        names = {id(obj.cell_contents): ".cell_contents"} if obj.cell_contents is not None else {}
    elif isinstance(obj, types.MethodType):
        names = {id(obj.__self__): ".__self__", id(obj.__func__): ".__func__"}
    else:  # an instance: its attributes by name (its __dict__ is walked through, not as a dict)
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            inline = [(f".{k}", v) for k, v in attrs.items()]
            refs = [r for r in refs if r is not attrs]
        for cls in type(obj).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if isinstance(slot, str) and hasattr(obj, slot):
                    names[id(getattr(obj, slot))] = f".{slot}"
        names |= {id(v): label for label, v in inline}
        inline = [(label, v) for label, v in inline if not any(v is r for r in refs)]
    return inline + [(names.get(id(ref), f" > {type(ref).__name__}"), ref) for ref in refs]


# ---- the walker itself: it finds planted leaks (planted here, never in the product) ------------
def _sim(scenario: Scenario, placer: SubtaskPlacer, seed: int = 0) -> Simulator:
    return Simulator(scenario, generate_tasks(scenario, seed), placer, seed)


@pytest.fixture(scope="module")
def scenario(small_scenario, node) -> Scenario:  # type: ignore[no-untyped-def]
    return small_scenario(
        nodes=(node("a", cores=4, gpus=("V100M16", "T4"), streams=2), node("b", gpus=("P100",))),
        apps={"matmul": 1.0, "fft": 1.0, "kmeans": 1.0},
        tasks=24,
        rate_per_min=240.0,
    )


def test_the_walker_finds_a_simulator_behind_a_closure(scenario: Scenario) -> None:
    sim = _sim(scenario, make_placer("speedup"))
    selector = make_selector("mct")
    assert leaks({"selector": selector, "view": sim.view}, 0.0) == []
    selector.hook = lambda: sim.now  # type: ignore[attr-defined]  # a planted leak: a closure over it
    found = leaks({"selector": selector}, 0.0)
    assert found == ["selector.hook.__closure__[0].cell_contents -> the simulator"]


def test_the_walker_finds_the_truth_behind_a_bound_method_and_the_instrument(scenario: Scenario) -> None:
    sim = _sim(scenario, make_placer("speedup"))
    assert leaks({"callbacks": [sim.truth.step_drift]}, 0.0) == ["callbacks[0].__self__ -> the ground truth"]
    # The issue's own case: the instrument's measuring function closes over the truth.
    found = leaks({"instrument": SimulatedProfiler(sim.testbed())}, 0.0)
    assert found == ["instrument._co_run.__closure__[0].cell_contents -> the ground truth"]


def test_the_walker_finds_a_future_arrival_and_not_a_past_one(scenario: Scenario) -> None:
    tasks = generate_tasks(scenario, 0)
    last = tasks[-1]
    assert leaks({"seen": {"later": [last]}}, now=last.arrival_s) == []
    found = leaks({"seen": {"later": [last]}}, now=last.arrival_s - 1.0)
    assert len(found) == 1 and found[0].startswith(f"seen['later'][0] -> task {last.id}, arriving at")


def test_the_walker_finds_the_in_process_world_of_an_unsealed_env(scenario: Scenario) -> None:
    """The env as it was before it was sealed: an in-process ``SchedulingEnv`` holding its world."""
    unsealed = SchedulingEnv(SimulatedWorlds([scenario], "speedup", None))
    unsealed.reset(seed=0)
    assert "env._world -> the simulator" in leaks({"env": unsealed}, 0.0)


# ---- a simulator run ---------------------------------------------------------------------------
class _Watch:
    """Walks from what the policies are handed at sampled calls; ``clock`` reads the world's time
    (the test's trusted side: the watch itself is not a root)."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.calls = 0
        self.walks = 0
        self.found: list[str] = []

    def check(self, roots: dict[str, object]) -> None:
        self.calls += 1
        if self.calls <= 3 or self.calls % 20 == 0:
            self.walks += 1
            self.found += leaks(roots, self.clock(), harness=self)


class _Selector:
    def __init__(self, inner: NodeSelector, placer: SubtaskPlacer, watch: _Watch) -> None:
        self.inner, self.placer, self.watch, self.name = inner, placer, watch, inner.name

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        # The objects the world holds as its policies (these wrappers: what the world does to them,
        # such as setting an attribute at the hand-over, shows), and what select is handed.
        roots = {"task": task, "view": view, "mask": mask, "selector": self, "placer": self.placer}
        self.watch.check(roots)
        return self.inner.select(task, view, mask)


class _Placer:
    """Forwards the placer's hooks it has (``hand_over`` checks them by protocol)."""

    def __init__(self, inner: SubtaskPlacer, watch: _Watch) -> None:
        self.inner, self.watch, self.name = inner, watch, inner.name
        self.surveys: list[Survey] = []
        if hasattr(inner, "calibrate"):
            self.survey_request = inner.survey_request  # type: ignore[attr-defined]
            self.calibrate = self._calibrate
        if hasattr(inner, "observe"):
            self.observe = inner.observe  # type: ignore[attr-defined]

    def _calibrate(self, survey: Survey) -> None:
        self.surveys.append(survey)
        self.inner.calibrate(survey)  # type: ignore[attr-defined]

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        self.watch.check({"task": task, "subtask": sub, "view": view, "placer": self})
        return self.inner.place(task, sub, node, view)


@pytest.mark.parametrize(
    ("selector", "placer"), [("mct", "speedup"), ("mct", "iawp"), ("mlsm", "iawp-cosine")]
)
def test_a_run_hands_policies_no_truth(scenario: Scenario, selector: str, placer: str) -> None:
    inner_placer = make_placer(placer)
    holder: list[Simulator] = []
    watch = _Watch(lambda: holder[0].now)
    spy = _Placer(inner_placer, watch)
    sim = _sim(scenario, spy)  # type: ignore[arg-type]
    holder.append(sim)
    inner_selector = make_selector(selector)
    selector_spy = _Selector(inner_selector, spy, watch)  # type: ignore[arg-type]
    m = sim.run(TwoStageScheduler(selector_spy, spy))  # type: ignore[arg-type]
    assert m.tasks_completed == len(sim.tasks) and not m.clairvoyant
    assert watch.walks > 6 and watch.found == []
    if placer != "speedup":  # a calibrating placer was handed its survey's data, and only that
        assert len(spy.surveys) == 1
        survey = spy.surveys[0]
        assert (survey.colocation is not None) == (placer == "iawp")
        assert (survey.profiles is not None) == (placer == "iawp-cosine")
        assert leaks({"survey": survey}, 0.0) == []
    after = {"selector": selector_spy, "placer": spy, "metrics": m}
    assert leaks(after, sim.now, harness=watch) == []


def test_the_declared_oracle_is_handed_the_simulator_and_marked(scenario: Scenario) -> None:
    """The one legitimate reader: declared clairvoyant, bound, marked — and the walker sees it."""
    placer = make_placer("speedup")
    sim = _sim(scenario, placer)
    oracle = make_selector("oracle")
    m = sim.run(TwoStageScheduler(oracle, placer))
    assert m.clairvoyant and m.to_dict()["clairvoyant"] is True
    assert "oracle.sim -> the simulator" in leaks({"oracle": oracle}, 0.0)


class _Undeclared:
    """Has the hook the simulator once looked for, without declaring clairvoyance."""

    name = "undeclared"

    def __init__(self) -> None:
        self.inner = make_selector("mct")
        self.bound: Simulator | None = None

    def bind_simulator(self, sim: Simulator) -> None:
        self.bound = sim

    def reset(self, view: ClusterView, seed: int) -> None:
        self.inner.reset(view, seed)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        return self.inner.select(task, view, mask)


def test_an_undeclared_selector_is_not_handed_the_simulator(scenario: Scenario) -> None:
    placer = make_placer("speedup")
    selector = _Undeclared()
    m = _sim(scenario, placer).run(TwoStageScheduler(selector, placer))
    assert selector.bound is None and not m.clairvoyant


class _Seer(_Undeclared):
    """Declares itself clairvoyant (a third party's reference)."""

    name = "seer"
    clairvoyant = True


def test_the_registry_knows_declared_clairvoyance_by_name(scenario: Scenario) -> None:
    assert is_clairvoyant_spec("oracle") and is_clairvoyant_spec("oracle+iawp")
    assert not is_clairvoyant_spec("mct+iawp") and not is_clairvoyant_spec("nope")
    try:
        register_selector("seer", _Seer)
        assert is_clairvoyant_spec("seer+speedup")
        sched = parse_scheduler("seer")
        m = _sim(scenario, sched.placer).run(sched)
        assert m.clairvoyant and isinstance(sched.selector, _Seer) and sched.selector.bound is not None
        # A factory that hides the declaration from the registry: refused when built, so reports
        # (which go by name) cannot miss it.
        register_selector("hidden", lambda: _Seer())
        assert not is_clairvoyant_spec("hidden")
        with pytest.raises(ValueError, match="'hidden' declares itself clairvoyant"):
            make_selector("hidden")
    finally:
        for name in ("seer", "hidden"):
            register_selector(name, _Undeclared)  # clears the declaration
            del SELECTORS[name]


def test_tables_mark_the_clairvoyant_reference(scenario: Scenario) -> None:
    table = format_table(compare(scenario, ["oracle+speedup", "mct+speedup"], [0], progress=False))
    assert "| oracle+speedup (clairvoyant) |" in table and "| mct+speedup |" in table


# ---- the Gym env ---------------------------------------------------------------------------------
def _surface(env: gymnasium.Env) -> dict[str, object]:
    """Every public attribute and property of the env, by name (methods included: bound, they
    lead back to the env, which is a root anyway)."""
    out: dict[str, object] = {}
    for name in dir(env):
        if not name.startswith("_"):
            with contextlib.suppress(RuntimeError):  # a property with no value before reset()
                out[f"env.{name}"] = getattr(env, name)
    return out


def test_the_gym_env_reaches_no_truth(scenario: Scenario) -> None:
    env = gymnasium.make(envs.ENV_ID, scenario=scenario, max_tasks=20)
    inner = env.unwrapped
    assert isinstance(inner, ClusterSchedulingEnv)
    assert leaks({"env": env, **_surface(inner)}, 0.0) == []
    obs, info = env.reset(seed=3)
    done, steps, walked = False, 0, 0
    while not done:
        if steps < 3 or steps % 5 == 0:
            roots = {
                "env": env,
                "obs": obs,
                "info": info,
                "action_masks": inner.action_masks(),
                **_surface(inner),
            }
            roots |= {
                "task": inner.task,
                "view": inner.view,
                "spaces": (env.observation_space, env.action_space),
            }
            assert leaks(roots, info["time_s"]) == []
            walked += 1
        action = int(np.flatnonzero(inner.action_masks())[0])
        obs, _, done, _, info = env.step(action)
        steps += 1
    assert walked >= 5 and inner.metrics is not None and inner.metrics.tasks_completed > 0
    assert leaks({"env": env, "info": info, **_surface(inner)}, info["time_s"]) == []
    env.close()


def test_an_error_carries_no_object_of_the_world_out_of_the_worker(scenario: Scenario) -> None:
    """What an error in the worker sends back is plain data: an exception carrying an object of the
    world is replaced by a RuntimeError that says what it was."""
    sim = _sim(scenario, make_placer("speedup"))
    sent = _portable(ValueError("bad node", sim.tasks[-1]))
    assert type(sent) is RuntimeError and "ValueError: ('bad node', Task(" in str(sent)
    assert leaks({"error": sent, "args": sent.args, "notes": sent.__notes__}, 0.0) == []
    plain = _portable(ValueError("options['scenario']: expected an index < 1, got 7"))
    assert type(plain) is ValueError and "worker process" in plain.__notes__[0]


def test_a_planted_world_on_the_gym_env_is_found(scenario: Scenario) -> None:
    env = ClusterSchedulingEnv(scenario, max_tasks=5)
    env.reset(seed=0)
    assert leaks({"env": env}, 0.0) == []
    env.debug = [SimulatedWorlds([scenario], "speedup", None).open(0, np.random.default_rng(0), None)]  # type: ignore[attr-defined]
    assert leaks({"env": env}, 0.0) == ["env.debug[0] -> the simulator"]
    env.close()


def test_a_placer_with_the_old_calibrate_hook_is_refused_not_run_uncalibrated() -> None:
    """``calibrate(instrument)`` was the hook before surveys: such a placer would otherwise be
    silently skipped by the hand-over and run without its model."""
    from rlsched.world import hand_over

    class OldPlacer:
        name = "old"

        def calibrate(self, instrument: object, seed: int = 0) -> None:
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="placer old: has calibrate\\(\\) but no survey_request"):
        hand_over(OldPlacer(), None)
