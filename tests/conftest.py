"""Shared test helpers: small hand-built scenarios.

``small_scenario`` builds a :class:`~rlsched.scenarios.spec.Scenario` straight from the dataclasses, so
tests stay fast and do not depend on scenario files. Tests get it through the fixture of the same
name (session-scoped, so it also works inside ``hypothesis`` tests).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

from experiments import fit_cache
from experiments.process_exit import freeze_heap_at_exit
from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.hardware import gpu_model
from rlsched.policies.case_features import FEATURES
from rlsched.policies.recogniser import Recogniser
from rlsched.policies.revisit import Revisit
from rlsched.policies.run_features import RUN_FEATURES
from rlsched.scenarios.spec import ArrivalSpec, DriftSpec, Scenario, WorkloadSpec

# Property tests draw the same examples on every run (CI time and outcome never depend on the
# draw); `HYPOTHESIS_PROFILE=explore make test` draws new ones, to hunt for new failures.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# pytest and each xdist worker exit as a command does, without walking the heap: 1.1-1.4 s each.
freeze_heap_at_exit()

#: `make test-all` runs every example of the simulator's property tests; the default `make test`
#: an eighth as many (of the same fixed draw), to stay within CI's ten minutes on two cores.
FULL_PROPERTIES = os.environ.get("RLSCHED_FULL_PROPERTIES") == "1"


#: Test files whose tests pace work against the clock: live kernels whose measured speeds,
#: budgets or overlaps they check, services whose learning or rebalancing depends on how much the
#: 2 cores get through in a given time, Ray clusters, signals at a moment of a run. `make test` runs
#: them alone, one at a time, after the others have run two at a time (pytest-xdist): another test
#: on the other core would change what they measure. Marked here, by file, so a new test in one of
#: them is serial too; a test elsewhere that times a signal is marked ``@pytest.mark.serial``
#: itself (test_train.py). Tests that run a real service or live cluster only to check what it
#: answers, stores or refuses (test_service.py, test_service_admin.py, ...) run in the parallel
#: pass: they wait on the service with deadlines, not on the clock, and pass with a third process
#: taking a core beside the two workers (2026-12-07, two runs).
SERIAL_FILES = (
    "test_active_profiling.py",
    "test_bench_live.py",
    "test_chaos.py",
    "test_runtime_backends.py",
    "test_runtime_cli.py",
    "test_runtime_live.py",
    "test_runtime_profiler.py",
    "test_runtime_ray.py",
    "test_service_auto.py",
    "test_service_canary.py",
    "test_service_learning.py",
    "test_service_ray.py",
    "test_service_rebalance.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`SERIAL_FILES` ``serial``."""
    for item in items:
        if item.path.name.startswith(SERIAL_FILES):
            item.add_marker(pytest.mark.serial)


def cli_in_a_fresh_interpreter(argv: Sequence[str], modules: Sequence[str]) -> tuple[int, list[str], str]:
    """``rlsched ARGV`` run by ``experiments.cli.main`` in a new interpreter (nothing imported
    before it): its exit code, which of ``modules`` it imported, and its stderr."""
    code = (
        "import sys\nfrom experiments.cli import main\n"
        f"try:\n    rc = main({list(argv)!r})\n"
        "except SystemExit as e:  # --help\n    rc = e.code if isinstance(e.code, int) else 0\n"
        f"print('imported:', rc, *[m for m in {tuple(modules)!r} if m in sys.modules])\n"
    )
    root = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.rfind("imported: ") >= 0, (r.stdout[-500:], r.stderr)
    _, rc, *loaded = r.stdout[r.stdout.rfind("imported: ") :].split()
    return int(rc), loaded, r.stderr


def examples(n: int) -> int:
    """Examples a heavy property test draws: ``n`` under ``make test-all``, else an eighth."""
    return n if FULL_PROPERTIES else max(4, n // 8)


def ctrl_c_able() -> None:
    """``preexec_fn`` of a child a test interrupts: SIGINT back to its default. A test run
    started as a background job (``cmd &`` in a script) inherits SIGINT ignored, and so would
    the child; Ctrl-C then does nothing and the test fails for its launcher's sake."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_rlsched(
    args: Sequence[str], ready: Path | Callable[[], bool], after_s: float, sig: int = signal.SIGINT
) -> tuple[int, str]:
    """Run ``rlsched ARGS``, wait until ``ready`` exists as a file or returns True (the run is
    under way), let it work ``after_s`` more seconds, send ``sig`` (SIGINT: as Ctrl-C would), and
    return (exit code, stderr)."""
    exe = shutil.which("rlsched") or str(Path(sys.executable).with_name("rlsched"))
    proc = subprocess.Popen(
        [exe, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_able
    )
    try:
        deadline = time.monotonic() + 120
        while not (ready() if callable(ready) else ready.is_file()):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.2)
        time.sleep(after_s)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, err


def drive_selector(path: Path, sched: Any, rate: float | None = None) -> tuple[list[int], Any, list[Any]]:
    """Run every stage-1 decision of the scenario file ``path`` (seed 10001, placer calibrated)
    through ``sched``'s selector and assign each task where it chose; each choice must be feasible.

    :param sched: a :class:`~rlsched.scheduler.TwoStageScheduler` (its placer runs the simulator).
    :param rate: the arrival rate, per minute (``None``: the file's).
    :returns: the nodes chosen, the simulator (as the last decision left it) and the tasks decided.
    """
    from envs.simulator import Simulator
    from experiments.evaluation import load_entry
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

    sc = scenario_for_seed(load_entry(str(path), rate), 10001)
    sim = Simulator(sc, generate_tasks(sc, 10001), sched.placer, seed=10001)
    sched.reset(sim.view, sim.seed)
    sim.calibrate_placer()
    nodes, tasks = [], []
    while (task := sim.next_decision()) is not None:
        mask = sim.mask(task)
        choice = sched.selector.select(task, sim.view, mask)
        assert mask[choice]
        nodes.append(choice)
        tasks.append(task)
        sim.assign(task, choice)
    return nodes, sim, tasks


def node(
    name: str,
    cores: int = 4,
    mem_gib: float = 32.0,
    gpus: Sequence[str] = ("T4",),
    streams: int = 2,
    **kw: object,
) -> NodeSpec:
    """A worker node with GPUs named from the catalog; ``kw`` sets other NodeSpec fields
    (``join_s``, ``leave_s``, ``net_gbps``, ...)."""
    return NodeSpec(
        name=name,
        cpu_cores=cores,
        host_mem_gib=mem_gib,
        gpus=tuple(gpu_model(g) for g in gpus),
        streams_per_gpu=streams,
        **kw,  # type: ignore[arg-type]
    )


def small_scenario(
    nodes: Sequence[NodeSpec] | None = None,
    apps: dict[str, float] | None = None,
    tasks: int = 20,
    rate_per_min: float = 30.0,
    input_mb: tuple[float, float] | None = None,
    drift_sigma: float = 0.0,
    drift_interval_s: float = 30.0,
    seed: int = 0,
) -> Scenario:
    """A small scenario; by default two nodes (T4 x2, P4) running matmul and kmeans tasks.

    :param nodes: the nodes (see :func:`node`).
    :param apps: app name -> share (default: matmul and kmeans equally).
    :param tasks: task count.
    :param rate_per_min: Poisson arrival rate.
    :param input_mb: input size range, or ``None`` for each app's default.
    :param drift_sigma: GPU speed drift (0 = none).
    :param drift_interval_s: drift interval.
    :param seed: the scenario seed (drives task generation).
    """
    if nodes is None:
        nodes = (node("n0", gpus=("T4", "T4")), node("n1", gpus=("P4",)))
    return Scenario(
        name="test",
        cluster=ClusterSpec(tuple(nodes)),
        workload=WorkloadSpec(
            tasks=tasks,
            apps=dict(apps) if apps is not None else {"matmul": 1.0, "kmeans": 1.0},
            arrival=ArrivalSpec(rate_per_min=rate_per_min),
            input_mb=input_mb,
        ),
        drift=DriftSpec(sigma=drift_sigma, interval_s=drift_interval_s),
        seed=seed,
    )


@pytest.fixture(scope="session", name="small_scenario")
def small_scenario_fixture() -> Callable[..., Scenario]:
    """The :func:`small_scenario` builder."""
    return small_scenario


@pytest.fixture(scope="session", name="node")
def node_fixture() -> Callable[..., NodeSpec]:
    """The :func:`node` builder."""
    return node


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> None:
    """Caches (the scenario bounds, fitted interference models) go to a fresh folder: tests
    neither read a user's cache nor write into it, and every run starts cold. The xdist workers
    of one run share it, and the tests' own processes fit through it as ``rlsched evaluate``'s
    workers do (:mod:`experiments.fit_cache`): a stored model is the one a fit would give, bit
    for bit, and the same surveys recur across tests (an active survey's four fits, ~16 s)."""
    root = tmp_path_factory.getbasetemp()
    cache = (root if worker_id == "master" else root.parent) / "cache"
    cache.mkdir(exist_ok=True)
    os.environ["RLSCHED_CACHE_DIR"] = str(cache)
    fit_cache.install()


def toy_recogniser(folder: Path) -> Path:
    """A recogniser saved under ``folder/rec`` (returned): every training case says ``mct+iawp-pass``
    beats the default ``mct+iawp`` by far; and the second decision, at the 24th arrival, that
    switching from it to ``mct+speedup`` doubles throughput."""
    F, R = len(FEATURES), len(RUN_FEATURES)
    rows = np.arange(2 * F, dtype=float).reshape(2, F)
    scores = np.log(np.array([[0.5, 1.0, 0.6], [0.5, 1.0, 0.6]]))
    pairs = ("mct+iawp", "mct+iawp-pass", "mct+speedup")
    r = Recogniser(pairs, pairs[0], 12, 2, 0.0, rows.mean(axis=0), np.ones(F), rows, scores, ("a", "b"))
    folder = r.save(folder / "rec")
    zero, one, gain = np.zeros((1, R)), np.ones(R), np.log([[2.0]])
    Revisit(24, ("mct+speedup",), 1, 0.0, zero[0], one, zero, ("mct+iawp-pass",), gain).save(folder)
    return folder


def _spawned_children() -> set[int]:
    """This process's children that multiprocessing spawned as pool workers (read from /proc)."""
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == os.getpid() and b"spawn_main" in cmd:
            kids.add(int(stat.parent.name))
    return kids


def kill_a_pool_worker(stop: threading.Event, killed: list[int], generation: int) -> None:
    """SIGKILL a worker of the ``generation``-th process pool (0: the first) that this process
    starts, once, recording its pid in ``killed``. A command's pools follow one another (each is
    shut down before the next starts), so workers none of which were seen before are a new pool's.
    Run in a thread beside the command; set ``stop`` when it returns."""
    seen: set[int] = set()
    pool = -1
    while not stop.is_set() and not killed:
        kids = _spawned_children()
        if kids and not kids & seen:
            pool += 1
        seen |= kids
        if kids and pool == generation:
            pid = min(kids)
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        time.sleep(0.01)


def evaluate_two_tiny_killing(tmp_path: Path, schedulers: str, pool: int) -> tuple[int, list[int], Path]:
    """``rlsched evaluate`` (in this process, two workers) over two copies of test_evaluate's tiny
    scenario while :func:`kill_a_pool_worker` kills a worker of its ``pool``-th pool (0: the
    runs', 1: the figures'); the exit status, the pids killed and the output folder."""
    from experiments.cli import main
    from tests.test_evaluate import TINY

    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "tiny2.toml").write_text(TINY.replace('name = "tiny"', 'name = "tiny2"'))
    out = tmp_path / "out"
    scen = f"{tmp_path / 'tiny.toml'},{tmp_path / 'tiny2.toml'}"
    stop, killed = threading.Event(), []
    watcher = threading.Thread(target=kill_a_pool_worker, args=(stop, killed, pool), daemon=True)
    watcher.start()
    try:
        args = ["evaluate", "--scenarios", scen, "--schedulers", schedulers, "--seeds", "1", "--jobs", "2"]
        rc = main([*args, "--out", str(out), "--json"])
    finally:
        stop.set()
        watcher.join()
    return rc, killed, out
