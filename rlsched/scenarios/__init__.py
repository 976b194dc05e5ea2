"""Scenarios: what a run simulates — the cluster, its dynamics, the interference source and the
workload — read from TOML files (the built-ins are package data in ``builtin/``), and the tasks a
scenario and seed generate (arrivals, Alibaba trace windows, task classes)."""

from rlsched.scenarios.loader import ScenarioError, builtin_dir, list_scenarios, load_scenario
from rlsched.scenarios.spec import (
    AlibabaSpec,
    ArrivalSpec,
    DriftSpec,
    InterferenceSpec,
    Scenario,
    TaskClass,
    WorkloadSpec,
)
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

__all__ = [
    "AlibabaSpec",
    "ArrivalSpec",
    "DriftSpec",
    "InterferenceSpec",
    "Scenario",
    "ScenarioError",
    "TaskClass",
    "WorkloadSpec",
    "builtin_dir",
    "generate_tasks",
    "list_scenarios",
    "load_scenario",
    "scenario_for_seed",
]
