"""The strongest heuristics: the memory-aware ETC (``mct-mem``) and the host-memory queue it reads."""

from __future__ import annotations

from collections import Counter

import numpy as np

from envs.simulator import Simulator
from rlsched.estimates import host_memory_wait
from rlsched.policies.registry import parse_scheduler
from rlsched.policies.selectors import MctMemSelector, MctSelector
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario

# "tight" has the cores but host memory for one task at a time (tasks hold ~1 GB); "roomy" has both.
TIGHT = small_scenario(
    nodes=(
        node("tight", cores=16, mem_gib=1.5, gpus=("T4", "T4")),
        node("roomy", cores=16, mem_gib=64, gpus=("T4",)),
    ),
    apps={"matmul": 1.0, "kmeans": 1.0},
    tasks=80,
    rate_per_min=240.0,
    input_mb=(300.0, 400.0),
)


def _run(spec: str) -> tuple[float, Counter]:
    sched = parse_scheduler(spec)
    sim = Simulator(TIGHT, generate_tasks(TIGHT, 0), sched.placer, seed=0)
    m = sim.run(sched)
    assert m.tasks_completed == 80
    assert np.allclose(sim.view.host_mem_queued_mb, 0.0)  # every queued task was admitted
    return m.throughput, Counter(r.node for r in sim.records)


def test_memory_aware_etc_stops_piling_onto_a_node_short_of_host_memory() -> None:
    mct, mct_nodes = _run("mct")
    mem, mem_nodes = _run("mct-mem")
    assert mem > 1.10 * mct  # measured 15.5 vs 13.1 tasks/min
    assert mem_nodes[0] < mct_nodes[0]


def test_queue_is_observed_and_prices_the_wait() -> None:
    v = ClusterView.from_spec(TIGHT.cluster)
    task = generate_tasks(TIGHT, 0)[0]
    assert host_memory_wait(task, v).tolist() == [0.0, 0.0]
    # Node 0 holds one task and queues three more, with 10 s of nominal work each.
    v.host_mem_changed(0, 1000.0)
    v.host_mem_queue_changed(0, 3000.0)
    v.tasks_on_node[0] = 4
    v.backlog_cpu_s[0] = 40.0
    # Node 1 has more work queued on its cores (5 s each), and memory to spare.
    v.host_mem_changed(1, 8000.0)
    v.tasks_on_node[1] = 8
    v.backlog_cpu_s[1] = 80.0
    wait = host_memory_wait(task, v)
    assert wait[1] == 0.0 and wait[0] >= 30.0  # three tasks ahead finish one after another
    assert MctSelector().select(task, v, np.array([True, True])) == 0  # blind to the queue
    assert MctMemSelector().select(task, v, np.array([True, True])) == 1


def test_memory_totals_return_to_exactly_zero() -> None:
    """Adding and subtracting the same shares leaves float residue (4.5e-13 MB here); a subtask
    asking for a whole GPU then never fitted an idle GPU, and the run stopped with a
    PlacementError (found on alibaba-dense, validation seed 10016)."""
    sc = small_scenario(nodes=(node("a", cores=2, gpus=("T4",)),))
    v = ClusterView.from_spec(sc.cluster)
    shares = [6553.6, 3276.8, 1638.4]
    for m in shares:
        v.gpu_started(0, 0, m, "k")
        v.host_mem_changed(0, m)
    for m in shares:
        v.gpu_finished(0, 0, m, "k", 0.0, 0.1)
        v.host_mem_changed(0, -m)
    assert v.fast.gpu_mem_used[0][0] == 0.0 and v.gpu_mem_used_mb[0, 0] == 0.0
    assert v.fast.node_gpu_mem_used[0] == 0.0 and v.host_mem_used_mb[0] == 0.0


def test_ldwp_observes_the_host_memory_queue_and_wait() -> None:
    """Since feature version 2 the node encoder carries the queue (over host memory) and the task's
    estimated memory wait, and its ETC columns are mct-mem's, so a network cloned from mct-mem
    can see what mct-mem sees (since version 4, with the subtasks side by side, as mct-mem)."""
    from rlsched.features import NODE_FEATURES, encode_nodes

    v = ClusterView.from_spec(TIGHT.cluster)
    task = generate_tasks(TIGHT, 0)[0]
    v.host_mem_changed(0, 1000.0)
    v.host_mem_queue_changed(0, 3000.0)
    v.tasks_on_node[0] = 4
    v.backlog_cpu_s[0] = 40.0
    x = encode_nodes(v, task, np.array([True, True]))
    col = {name: i for i, name in enumerate(NODE_FEATURES)}
    assert x[0, col["host_mem_queued"]] == np.float32(3000.0 / v.host_mem_mb[0])
    assert x[1, col["host_mem_queued"]] == 0.0
    wait = host_memory_wait(task, v)
    assert x[0, col["mem_wait_log"]] == np.float32(np.log1p(wait[0] / 60.0)) and wait[0] > 0
    assert x[1, col["mem_wait_log"]] == 0.0
    etc = MctMemSelector().etc(task, v)  # version 4: mct-mem's ETC as it is
    assert np.allclose(x[:, col["etc_log"]], np.log1p(etc / 60.0), rtol=1e-6)
    one_device = MctMemSelector(parallel=False).etc(task, v)  # version 3: the one-device form
    x3 = encode_nodes(v, task, np.array([True, True]), version=3)
    assert np.allclose(x3[:, col["etc_log"]], np.log1p(one_device / 60.0), rtol=1e-6)
