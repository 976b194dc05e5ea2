"""Prepared evaluations (``rlsched evaluate --suite``), the test seeds, and the scenario listing.

Seeds (``rlsched.seeds``): training episodes use the training set (0-9,999), model selection
(``best/``) the validation set (10,000-19,999); reported figures use the test seeds from
:data:`TEST_SEED_BASE` on, which neither touches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlsched.seeds import TEST

if TYPE_CHECKING:
    pass

#: First test seed: evaluations report these, never training or validation seeds.
TEST_SEED_BASE = TEST.start
SUITE_NAMES = ("default", "paper", "full")

#: The main schedulers: the paper's baselines, the strongest heuristics, ours, the reference.
MAIN_SCHEDULERS = (
    "random+speedup",
    "least-loaded+speedup",
    "pats+speedup",
    "mlsm+mlsm",
    "mct+speedup",
    "mct+mlsm",
    "ldwp+iawp",
    "oracle+speedup",
)
#: The TPDS paper's comparison: Random, ETC (``mct``) and PATS against the learned scheduler.
PAPER_SCHEDULERS = (
    "random+speedup",
    "mct+speedup",
    "pats+speedup",
    "ldwp+iawp",
    "oracle+speedup",
)
PAPER_RATES = (10, 20, 30, 40, 50, 60)
#: The default suite runs the first N tasks of its largest scenarios, so that it finishes in 15
#: minutes on 2 cores (measured: ``oracle`` alone takes over 600 s on all 30,000 tasks of ``large``
#: and 50 s a seed on all of ``alibaba-full``).
DEFAULT_TASK_CAP = {"large": 3000, "interference-gavel": 6000, "alibaba-full": 2000}


def available_scenarios() -> list[str]:
    """Built-in scenarios that load here (trace scenarios need the sample data)."""
    from rlsched.scenarios.loader import ScenarioError, list_scenarios, load_scenario

    out = []
    for name in list_scenarios():
        try:
            load_scenario(name)
        except ScenarioError:
            continue
        out.append(name)
    return out


def suite(name: str) -> tuple[list[str], list[str], int, str]:
    """(scenarios, schedulers, seeds, title) of a suite."""
    if name == "paper":
        return (
            [*(f"paper@{r}" for r in PAPER_RATES), "dynamic"],
            list(PAPER_SCHEDULERS),
            3,
            "The TPDS 2021 experiments on the paper's platform",
        )
    if name == "full":
        from rlsched.policies.registry import placer_names, selector_names

        scheds = [f"{s}+{p}" for s in selector_names() for p in placer_names()]
        return available_scenarios(), scheds, 5, "Full evaluation"
    capped = [f"{n}#{DEFAULT_TASK_CAP[n]}" if n in DEFAULT_TASK_CAP else n for n in available_scenarios()]
    return capped, list(MAIN_SCHEDULERS), 3, "Default evaluation: every built-in scenario"


def scenario_table(names: Sequence[str], extra: Sequence[tuple[str, Mapping[str, str]]] = ()) -> str:
    """Each scenario with its size, arrival rate, capacity bound and offered load.

    :param names: built-in names or scenario files (shown by their stem).
    :param extra: more columns after the name: (header, value by entry of ``names``).
    """
    from experiments.bound_cache import own_bound
    from rlsched.scenarios.loader import ScenarioError, load_scenario

    widths = [max([len(h), *(len(v) for v in col.values())]) for h, col in extra]
    tags = [(h, col, w) for (h, col), w in zip(extra, widths, strict=True)]
    cols = f"{'nodes':>5} {'tasks':>6} {'arrivals/min':>12} {'capacity/min':>12} {'load':>6}"
    head = f"{'scenario':<24} {''.join(f'{h:<{w}} ' for h, _, w in tags)}{cols}  regime"
    lines = [head]
    for name in names:
        shown = Path(name).stem if name.endswith(".toml") else name
        shown = f"{shown:<24} " + "".join(f"{col.get(name, ''):<{w}} " for _, col, w in tags)
        try:
            sc = load_scenario(name)
        except ScenarioError as e:
            lines.append(f"{shown}(cannot load: {e})")
            continue
        b = own_bound(sc)
        regime = "arrival-bound" if b["arrival_bound"] else "has headroom"
        lines.append(
            f"{shown}{len(sc.cluster.nodes):>5} {sc.workload.tasks:>6} "
            f"{b['arrival_rate_per_min']:>12.1f} {b['capacity_per_min']:>12.1f} {b['offered_load']:>6.2f}  "
            f"{regime}  {sc.description}"
        )
    lines.append(
        "(load = arrival rate over the capacity bound, for the scenario's own seed; under 0.8 a\n"
        " scenario is arrival-bound: every reasonable scheduler completes what arrives; above it has\n"
        " headroom: schedulers differ. `rlsched evaluate --loads 0.5,0.7,0.9` runs each scenario at\n"
        ' those loads and plots latency against load: README, "Latency against offered load")'
    )
    return "\n".join(lines)
