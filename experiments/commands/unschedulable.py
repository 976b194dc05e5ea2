"""The warning a run with unschedulable tasks ends with (``simulate`` and ``demo``)."""

from __future__ import annotations

import sys
from collections import Counter
from typing import TYPE_CHECKING

from experiments.commands.exit_codes import EXIT_OK, EXIT_UNSCHEDULABLE

if TYPE_CHECKING:
    from rlsched.metrics import RunMetrics
    from rlsched.scenarios.spec import Scenario
    from runtime.cluster.live import LiveResult


def report_unschedulable(scenario: Scenario, runs: dict[int, RunMetrics], strict: bool) -> int:
    """One warning line (stderr) when tasks found no node that could run them: how many and why
    (a throughput of 0 must never pass silently). Exit 3 with ``--strict``, else 0.

    :param scenario: the scenario as loaded (before the seed's draw).
    :param runs: metrics by seed.
    :param strict: ``--strict`` was given.
    """
    from rlsched.feasibility import static_feasible, task_needs, why_infeasible
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
    from rlsched.view import ClusterView

    bad = {seed: m for seed, m in runs.items() if m.tasks_unschedulable}
    if not bad:
        return EXIT_OK
    why: Counter[str] = Counter()
    for seed in bad:
        drawn = scenario_for_seed(scenario, seed)
        view = ClusterView.from_spec(drawn.cluster)
        for task in generate_tasks(drawn, seed):
            needs = task_needs(task)
            if not static_feasible(needs, view).any():
                why[why_infeasible(needs, view)] += 1
    n = sum(m.tasks_unschedulable for m in bad.values())
    total = sum(m.tasks_total for m in runs.values())
    hardware = sum(why.values())
    if n > hardware:
        why["could run only on nodes that were down"] += n - hardware
    reasons = "; ".join(f"{k} tasks {r}" for r, k in why.most_common())
    over = f" (over {len(runs)} seeds)" if len(runs) > 1 else ""
    print(f"rlsched: warning: {n} of {total} tasks{over} were unschedulable: {reasons}", file=sys.stderr)
    return EXIT_UNSCHEDULABLE if strict else EXIT_OK


def report_live_unschedulable(runs: list[LiveResult], strict: bool) -> int:
    """The same warning for live runs, with the reasons the runtime gave the tasks (each task that
    could run nowhere ends with an error saying why). Exit 3 with ``--strict``, else 0.

    :param runs: every live run of the command.
    :param strict: ``--strict`` was given.
    """
    n = sum(r.metrics.tasks_unschedulable for r in runs)
    if not n:
        return EXIT_OK
    why = Counter(e for r in runs for e in r.errors.values())
    reasons = "; ".join(f"{k} tasks: {e}" for e, k in why.most_common(3))
    total = sum(r.metrics.tasks_total for r in runs)
    over = f" (over {len(runs)} runs)" if len(runs) > 1 else ""
    print(f"rlsched: warning: {n} of {total} tasks{over} were unschedulable: {reasons}", file=sys.stderr)
    return EXIT_UNSCHEDULABLE if strict else EXIT_OK
