"""A kernel's working memory is reserved before it runs: a GPU that cannot hold what a kernel
allocates while it runs does not run it (a real GPU's pool would refuse it), and the table the
reservation comes from matches a fresh measurement."""

from __future__ import annotations

from rlsched.policies.registry import parse_scheduler
from runtime.cluster.config import LiveClusterSpec, LiveGpu, LiveNode
from runtime.cluster.live import LiveOptions, run_live
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import LiveWorkload, build_work
from runtime.kernels import check_result, stage_plan
from runtime.kernels.working_memory import MARGIN, PEAK_PER_INPUT_BYTE, measure_peaks, working_bytes


def test_the_table_holds_each_kernels_measured_peak() -> None:
    measured = measure_peaks()
    assert set(measured) == set(PEAK_PER_INPUT_BYTE)
    for kind, per in measured.items():
        # Enough for the peak, and not a stale figure far above it.
        assert per <= PEAK_PER_INPUT_BYTE[kind] <= per * MARGIN + 0.1, (kind, per)
    assert working_bytes("kmeans_assign", 1_000_000) == 7_100_000


def test_a_kernel_reserves_what_it_allocates_before_it_runs() -> None:
    """One kmeans task on one roomy GPU: MLSM's peak counts ``kmeans_assign``'s ~9 MB of working
    memory, not only the inputs it caches and the outputs it keeps (~3 MB)."""
    spec = LiveClusterSpec(nodes=(LiveNode("n", cpu_cores=0, gpus=(LiveGpu("T4", 0, 1024),)),))
    cluster = LocalCluster(spec, "numpy")
    (item,) = work = build_work(LiveWorkload(apps={"kmeans": 1.0}, streams=1, tasks=1, rate_per_s=10.0))
    res = run_live(cluster, parse_scheduler("mct+mlsm"), work, LiveOptions(seed=1))
    assert res.metrics.tasks_completed == 1, res.errors
    check_result(item[1], res.outcomes[item[0].id].outputs)
    (plan,) = [p for p in stage_plan("kmeans") if p.spec.kind == "kmeans_assign"][:1]
    inputs = sum(int(item[1].inputs[n].nbytes) for n in plan.reads if n in item[1].inputs)
    peak = cluster.agents[0].residency.memory[0].stats().peak_bytes
    assert peak >= working_bytes("kmeans_assign", inputs) > 6 * inputs, (peak, inputs)


def test_a_kind_without_a_measurement_gets_the_largest() -> None:
    assert working_bytes("no-such-kind", 10) == working_bytes("gaussian_pyramid", 10)
