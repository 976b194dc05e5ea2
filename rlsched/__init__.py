"""rlsched's core: what a scheduler sees and decides, the same for the simulated and the live world.

Public names are imported on first use (PEP 562), so ``import rlsched`` stays cheap::

    from rlsched import load_scenario, generate_tasks, parse_scheduler
"""

from __future__ import annotations

from rlsched.lazy import lazy_dir, lazy_exports

_EXPORTS = {
    "ClusterSpec": "rlsched.cluster",
    "NodeSpec": "rlsched.cluster",
    "ClusterView": "rlsched.view",
    "RunMetrics": "rlsched.metrics",
    "Task": "rlsched.tasks",
    "Subtask": "rlsched.tasks",
    "NodeSelector": "rlsched.scheduler",
    "SubtaskPlacer": "rlsched.scheduler",
    "TwoStageScheduler": "rlsched.scheduler",
    "CPU": "rlsched.scheduler",
    "World": "rlsched.world",
    "drive": "rlsched.world",
    "hand_over": "rlsched.world",
    "SchedulingEnv": "rlsched.scheduling_env",
    "Scenario": "rlsched.scenarios",
    "ScenarioError": "rlsched.scenarios",
    "load_scenario": "rlsched.scenarios",
    "list_scenarios": "rlsched.scenarios",
    "generate_tasks": "rlsched.scenarios",
    "scenario_for_seed": "rlsched.scenarios",
    "PolicyOptions": "rlsched.policies",
    "parse_scheduler": "rlsched.policies",
    "make_selector": "rlsched.policies",
    "make_placer": "rlsched.policies",
}
__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)

#: The other top-level packages rlsched ships beside this one (the project's layout).
SIBLINGS = ("envs", "models", "runtime", "experiments")
#: Every top-level package of the project: code in them is rlsched's own (not a plug-in's).
OUR_PACKAGES = frozenset({"rlsched", *SIBLINGS})


def shadowed_siblings() -> list[tuple[str, str]]:
    """(package, where it was found) for each of :data:`SIBLINGS` that another package of that
    name, earlier on ``sys.path``, would be imported in place of: a project's own ``models/``
    package, with Python run from the project's folder, made ``parse_scheduler('ldwp+iawp')``
    fail with ``No module named 'models.interference'``, far from the cause."""
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    out = []
    for name in SIBLINGS:
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None) if module is not None else None
        if origin is None:
            spec = importlib.util.find_spec(name)
            locations = list(spec.submodule_search_locations or []) if spec is not None else []
            origin = (
                spec.origin if spec is not None and spec.origin else (locations[0] if locations else None)
            )
        if origin is None:
            continue  # not found at all: the import that needs it says so
        top = os.path.realpath(origin)
        if os.path.basename(top) == "__init__.py":
            top = os.path.dirname(top)
        if os.path.dirname(top) != here:
            out.append((name, top))
    return out


def _warn_shadowed() -> None:
    found = shadowed_siblings()
    if found:
        import warnings

        names = ", ".join(f"'{n}' is {where}" for n, where in found)
        warnings.warn(
            f"rlsched ships the top-level packages {', '.join(SIBLINGS)} beside 'rlsched', and another "
            f"package of the same name comes first on sys.path ({names}): rlsched's code that needs it "
            "will fail to import. Run Python from another folder, or rename your package",
            stacklevel=3,
        )


_warn_shadowed()
