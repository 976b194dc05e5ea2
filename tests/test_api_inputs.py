"""The Python API's inputs a researcher gets wrong, named where they are given (``/tmp/walk-E``
findings, 2026-12-07): each was taken in silence or failed far from the cause before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from envs import ClusterSchedulingEnv
from rlsched import load_scenario
from rlsched.scenarios import ScenarioError

PAPER = Path(__file__).resolve().parents[1] / "rlsched" / "scenarios" / "builtin" / "paper.toml"


def test_a_path_object_names_a_scenario_file() -> None:
    """``argument of type 'PosixPath' is not iterable``."""
    assert load_scenario(PAPER).name == "paper"
    assert ClusterSchedulingEnv(PAPER).scenarios[0].name == "paper"


def test_a_command_line_suffix_in_the_api_says_what_to_pass_instead() -> None:
    with pytest.raises(
        ScenarioError, match=r"load_scenario\('paper', rate_per_min=\.\.\., max_tasks=\.\.\.\)"
    ):
        load_scenario("paper#100")


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_max_tasks_must_be_a_positive_integer(bad: object) -> None:
    """A negative one sliced tasks off the end of every episode; 0 made an episode over at reset."""
    with pytest.raises(ScenarioError, match="max_tasks: expected an integer >= 1"):
        load_scenario("paper", max_tasks=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tasks must be an integer >= 1"):
        ClusterSchedulingEnv("paper", max_tasks=bad)  # type: ignore[arg-type]
    assert load_scenario("paper", max_tasks=np.int64(5)).workload.tasks == 5


def test_the_env_refuses_an_action_that_is_no_node_index_and_an_unknown_option() -> None:
    """2.7 was node 2, "3" node 3; ``options={"scenrio": 1}`` ran another scenario."""
    env = ClusterSchedulingEnv("paper", max_tasks=5)
    env.reset(seed=0)
    for bad in (2.7, "3", np.array([1, 2])):
        with pytest.raises(ValueError, match="expected an integer node index"):
            env.step(bad)  # type: ignore[arg-type]
    env.step(np.int64(0))  # what Discrete samples and SB3 passes
    env.step(np.array(0))
    with pytest.raises(ValueError, match="reset options: unknown 'scenrio'"):
        env.reset(seed=0, options={"scenrio": 1})
    env.close()


def test_a_registration_is_refused_a_name_a_spec_cannot_spell_or_that_is_rlscheds() -> None:
    """``register_selector("mct", ...)`` replaced the built-in in silence; "a+b" and "" were taken;
    a placer registered as a selector failed at its first decision."""
    from rlsched.policies import make_selector, register_placer, register_selector
    from rlsched.policies.placers import FirstFreePlacer
    from rlsched.policies.selectors import RoundRobinSelector

    for bad in ("mct", "auto", "a+b", "", "has space"):
        with pytest.raises(ValueError, match="selector name"):
            register_selector(bad, RoundRobinSelector)
    with pytest.raises(ValueError, match="placer name 'mlsm' is rlsched's own"):
        register_placer("mlsm", FirstFreePlacer)
    from rlsched.policies.registry import SELECTORS

    register_selector("walk-e-placer-as-selector", FirstFreePlacer)  # type: ignore[arg-type]
    try:
        with pytest.raises(ValueError, match=r"which has no select\(\) \(registered as a selector\?\)"):
            make_selector("walk-e-placer-as-selector")
    finally:
        SELECTORS.pop("walk-e-placer-as-selector")  # the registry is the process's


def test_a_cluster_built_in_code_is_held_to_the_loaders_rules() -> None:
    """Each of these ran with plausible metrics (0 streams per GPU: 1/40 of the throughput); GPU
    names for models died later in an AttributeError."""
    import dataclasses

    from envs.simulator import Simulator
    from rlsched import generate_tasks, make_placer
    from rlsched.cluster import NodeSpec
    from rlsched.hardware import gpu_model

    v100 = gpu_model("V100M16")
    for kw, field in (
        ({"cpu_cores": 0, "gpus": ()}, "cpu_cores"),
        ({"cpu_cores": -1}, "cpu_cores"),
        ({"streams_per_gpu": 0}, "streams_per_gpu"),
        ({"gpus": ("V100M16",)}, "gpus"),
        ({"join_s": 5.0, "leave_s": 5.0}, "leave_s"),
    ):
        args = {"name": "a-0", "cpu_cores": 4, "host_mem_gib": 16.0, "gpus": (v100,)} | kw
        with pytest.raises(ValueError, match=rf"node 'a-0': {field}: expected"):
            NodeSpec(**args)  # type: ignore[arg-type]
    sc = load_scenario("paper", max_tasks=5)
    first = sc.cluster.nodes[0]
    bad = dataclasses.replace(sc, cluster=dataclasses.replace(sc.cluster, nodes=(first, first)))
    with pytest.raises(ValueError, match="unique names"):
        Simulator(bad, generate_tasks(sc, 0), make_placer("speedup"))


def test_the_api_says_what_it_has(tmp_path: Path) -> None:
    """``dir()`` listed no lazy export; ``isinstance(sim, World)`` raised; a written scenario did
    not compare equal to the one it was written from (its path took part)."""
    import envs
    import rlsched
    from envs.simulator import Simulator
    from rlsched import generate_tasks, make_placer
    from rlsched.scenarios.writer import write_scenario
    from rlsched.world import World

    assert {"load_scenario", "parse_scheduler"} <= set(dir(rlsched)) and "Simulator" in dir(envs)
    sc = load_scenario("paper", max_tasks=5)
    assert isinstance(Simulator(sc, generate_tasks(sc, 0), make_placer("speedup")), World)
    write_scenario(sc, tmp_path / "p.toml")
    assert load_scenario(tmp_path / "p.toml") == sc


def test_a_simulators_seed_defaults_to_the_scenarios_as_its_tasks_do() -> None:
    """Tasks came from the scenario's seed and drift from seed 0: a scenario of seed 7 simulated
    without a seed paired two different runs."""
    import dataclasses

    from envs.simulator import Simulator
    from rlsched import generate_tasks, make_placer

    sc = dataclasses.replace(load_scenario("dynamic", max_tasks=30), seed=7)
    assert Simulator(sc, generate_tasks(sc), make_placer("speedup")).seed == 7
    assert Simulator(sc, generate_tasks(sc), make_placer("speedup"), seed=3).seed == 3
