"""rlsched's core: what a scheduler sees and decides, the same for the simulated and the live world.

Public names are imported on first use (PEP 562), so ``import rlsched`` stays cheap::

    from rlsched import load_scenario, generate_tasks, parse_scheduler
"""

from __future__ import annotations

from rlsched.lazy import lazy_exports

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
