"""The completion estimates count a task's subtasks running side by side on a node's devices.

An eight-GPU pod (eight independent subtasks) runs on an eight-GPU node in an eighth of the time
one GPU would take, and on a two-GPU node in four eighths. Every ETC once costed it as if it ran on
one GPU everywhere, so the node with the shortest queue won however few GPUs it had (a validation
case's makespan was set by one such pod: 237 s against 81 s)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from envs.simulator import Simulator
from models.checkpoint import CheckpointError, sha256, write_meta
from rlsched.estimates import critical_path_shares, memory_aware_estimates, node_estimates
from rlsched.features import encode_nodes
from rlsched.policies.auto import switchboard
from rlsched.policies.recogniser import load_recogniser
from rlsched.policies.registry import PolicyOptions, parse_scheduler
from rlsched.policies.selectors import EtcSelector, MctDrainSelector
from rlsched.scenarios.traces import TRACE_GPU
from rlsched.tasks import Device, KindSpec, Subtask, SubtaskGraph, Task
from rlsched.view import ClusterView
from tests.conftest import node, small_scenario
from tests.test_stream_etc import ETCS

CORE = KindSpec(name="core_step", device=Device.CPU, gflop_per_mb=5.0, gbytes_per_mb=0.1)

# One eight-GPU node and one two-GPU node of the same GPU model.
FLEET = small_scenario(
    nodes=(
        node("wide", cores=32, gpus=("T4",) * 8, streams=4),
        node("narrow", cores=32, gpus=("T4",) * 2, streams=4),
    )
)


def pod_graph(
    parents: list[tuple[int, ...]], kind: KindSpec = TRACE_GPU, gflop: float = 2000.0
) -> SubtaskGraph:
    """Subtasks of one kind; subtask i depends on ``parents[i]``."""
    return SubtaskGraph(
        tuple(Subtask(i, kind, gflop, gflop / 40.0, 512.0, parents=p) for i, p in enumerate(parents))
    )


def pod_task(graph: SubtaskGraph, task_id: int = 0, arrival_s: float = 0.0) -> Task:
    """A task of ``graph`` (other test modules build their pods with it)."""
    return Task(id=task_id, app="pod", input_mb=1.0, arrival_s=arrival_s, graph=graph)


POD = pod_graph([()] * 8)  # eight independent subtasks
CHAIN = pod_graph([()] + [(i,) for i in range(7)])  # eight in a row


def test_critical_path_share_of_a_chain_a_pod_and_a_fork() -> None:
    assert critical_path_shares(CHAIN) == (1.0, 1.0)
    assert critical_path_shares(POD) == (pytest.approx(1 / 8), 1.0)
    fork = pod_graph([(), (0,), (0,), (1, 2)])  # 0 -> {1, 2} -> 3: three of four on the path
    assert critical_path_shares(fork)[0] == pytest.approx(3 / 4)
    cores = pod_graph([()] * 4, kind=CORE)
    assert critical_path_shares(cores) == (1.0, pytest.approx(1 / 4))


def test_a_pods_run_time_is_its_work_over_the_nodes_gpus() -> None:
    v = ClusterView.from_spec(FLEET.cluster)
    g_s, _, _ = node_estimates(pod_task(POD), v)
    one_gpu, _, _ = node_estimates(pod_task(POD), v, parallel=False)
    assert one_gpu[0] == pytest.approx(one_gpu[1])  # the old form: the same on both nodes
    assert g_s[0] == pytest.approx(one_gpu[0] / 8)
    assert g_s[1] == pytest.approx(one_gpu[1] / 2)
    chain, _, _ = node_estimates(pod_task(CHAIN), v)
    assert chain == pytest.approx(node_estimates(pod_task(CHAIN), v, parallel=False)[0])  # no faster


def test_every_etc_sends_a_pod_to_the_wide_node_past_a_shorter_queue() -> None:
    v = ClusterView.from_spec(FLEET.cluster)
    one_gpu = float(node_estimates(pod_task(POD), v, parallel=False)[0][0])
    # the wide node holds work: 30 % of the pod's one-GPU time on each of its eight GPUs
    v.backlog_gpu_s[:] = [0.3 * one_gpu * 8, 0.0]
    v.tasks_on_node[:] = [8, 0]
    v.node_gpu_rate[:] = [8.0, 2.0]
    for name, etc in ETCS.items():
        assert etc(pod_task(POD), v)[0] < etc(pod_task(POD), v)[1], name
    # the features keep the one-GPU form their networks were trained on: the queue decides there
    _, _, etc, _ = memory_aware_estimates(pod_task(POD), v, parallel=False)
    assert etc[0] > etc[1]
    mask = v.alive.copy()
    for version in (2, 3):
        cols = encode_nodes(v, pod_task(POD), mask, version=version)
        assert cols[0, 22] == pytest.approx(cols[1, 22])  # g_s, log-scaled: equal on both nodes
    # version 4 (what `rlsched train` writes now) reads the heuristics' form: the wide node first
    cols = encode_nodes(v, pod_task(POD), mask, version=4)
    assert cols[0, 22] < cols[1, 22] and cols[0, 24] < cols[1, 24]  # g_s and the ETC


def test_the_simulator_runs_pods_where_the_etc_says_they_finish_first() -> None:
    """Eight T4s against two A100s: one A100 runs a subtask 2.4x as fast as a T4, so costed on
    one GPU a pod finishes first on the A100s; run side by side it finishes first on the eight
    T4s (an eighth of the T4 time against a half of the A100 time). ``mct`` sends every pod there,
    and each finishes within its estimate's reach."""
    fleet = small_scenario(
        nodes=(
            node("t4s", cores=32, gpus=("T4",) * 8, streams=4),
            node("a100s", cores=32, gpus=("A100",) * 2, streams=4),
        )
    )
    tasks = [pod_task(POD, task_id=i, arrival_s=5.0 * i) for i in range(4)]  # spaced: no queue
    v = ClusterView.from_spec(fleet.cluster)
    g_s, _, _ = node_estimates(tasks[0], v)
    one_gpu, _, _ = node_estimates(tasks[0], v, parallel=False)
    assert one_gpu[1] < one_gpu[0] and g_s[0] < g_s[1]
    sched = parse_scheduler("mct+speedup")
    sim = Simulator(fleet, tasks, sched.placer, seed=0)
    assert sim.run(sched).tasks_completed == 4
    for t in tasks:
        r = sim.records[t.id]
        assert r.node == 0
        assert r.done_s - r.arrival_s < g_s[1]  # sooner than the A100s could have run it


def _auto_parallel(folder: str | None) -> set[bool]:
    board = switchboard(parse_scheduler("auto", PolicyOptions(recogniser_model=folder)))
    assert board is not None
    etc = [s for s in board.selectors.values() if isinstance(s, EtcSelector)]
    assert etc  # the shipped candidates hold mct pairs
    return {s.parallel for s in etc}


def test_auto_runs_the_etc_its_recogniser_was_fitted_on(tmp_path: Path) -> None:
    """The shipped recogniser's labels were measured with the one-device ETC (its file has no
    ``etc_version``), so ``auto`` runs its ``mct`` pairs that way, bit for bit as before; a refit
    (``etc_version`` 2) runs them with subtasks side by side; another version is refused."""
    assert _auto_parallel(None) == {False}
    assert MctDrainSelector().parallel  # a plain mct-drain counts them
    rec = load_recogniser()
    refit = dataclasses.replace(rec, parallel_etc=True).save(tmp_path / "refit")
    assert json.loads((refit / "recogniser.json").read_text())["etc_version"] == 2
    assert _auto_parallel(str(refit)) == {True}
    old = dataclasses.replace(rec, parallel_etc=False).save(tmp_path / "old")
    assert _auto_parallel(str(old)) == {False}
    data = json.loads((old / "recogniser.json").read_text())
    data["etc_version"] = 3
    bad = tmp_path / "bad"
    dataclasses.replace(rec).save(bad)
    (bad / "recogniser.json").write_text(json.dumps(data))
    meta = json.loads((bad / "meta.json").read_text())
    meta["files"]["recogniser.json"] = sha256(bad / "recogniser.json")
    write_meta(bad, meta)
    with pytest.raises(CheckpointError, match="etc_version"):
        load_recogniser(bad)
