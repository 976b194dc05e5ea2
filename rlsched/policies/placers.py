"""Stage-2 baselines: which GPU stream or CPU core takes a ready subtask.

All placers respect what the simulator enforces (a free stream, enough free device memory, an
allowed GPU model) and differ in which fitting unit they prefer and when a subtask that may run on
either side goes to a CPU core.
"""

from __future__ import annotations

from rlsched.estimates import subtask_cpu_seconds, subtask_gpu_seconds
from rlsched.scheduler import CPU
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView


def fitting_gpus(task: Task, sub: Subtask, node: int, view: ClusterView) -> list[int]:
    """GPUs of ``node`` that can start ``sub`` now: a free stream, room in memory, an allowed model."""
    if sub.kind.device is Device.CPU:
        return []
    f = view.fast
    run, streams = f.gpu_running[node], f.gpu_streams[node]
    used, cap = f.gpu_mem_used[node], f.gpu_mem[node]
    need = sub.mem_mb
    out = [g for g in range(len(run)) if run[g] < streams[g] and used[g] + need <= cap[g]]
    if task.gpu_models and out:
        names, models = view.model_names, f.gpu_model[node]
        out = [g for g in out if names[models[g]] in task.gpu_models]
    return out


def gpus_ever_fitting(task: Task, sub: Subtask, node: int, view: ClusterView) -> list[int]:
    """GPUs of ``node`` that could take ``sub`` once idle (memory and allowed model), read from
    the view's list mirrors: a placer asks on every offer of a subtask, and numpy over a node's
    few GPUs cost more than the answer (``np.flatnonzero`` of a mask: 3.3 µs a call, 1.1 million
    calls in a saturated run)."""
    f = view.fast
    models, mem, need = f.gpu_model[node], f.gpu_mem[node], sub.mem_mb
    out = [g for g in range(len(models)) if models[g] >= 0 and mem[g] >= need]  # model -1: no GPU
    if task.gpu_models and out:
        names = view.model_names
        out = [g for g in out if names[models[g]] in task.gpu_models]
    return out


def cpu_seconds(sub: Subtask, node: int, view: ClusterView) -> float:
    """Predicted run time of ``sub`` on one core of ``node``: nominal over measured core speed."""
    f = view.fast
    return subtask_cpu_seconds(sub, f.cpu_gflops[node]) / max(f.speed_cpu[node], 1e-3)


def core_free(node: int, view: ClusterView) -> bool:
    """Whether a CPU core of ``node`` is idle."""
    f = view.fast
    return f.cpu_busy[node] < f.cores[node]


class _Placer:
    name = "base"

    def reset(self, view: ClusterView, seed: int) -> None:
        """Stateless placers have nothing to reset."""

    def _choose(self, gpus: list[int], node: int, view: ClusterView) -> int:
        raise NotImplementedError

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        """GPU first when the kind may use one; a free core otherwise; else wait."""
        gpus = fitting_gpus(task, sub, node, view)
        if gpus:
            return self._choose(gpus, node, view)
        if sub.kind.device is not Device.GPU and core_free(node, view):
            return CPU
        return None


class FirstFreePlacer(_Placer):
    """The first fitting GPU in index order, then any free core."""

    name = "first-free"

    def _choose(self, gpus: list[int], node: int, view: ClusterView) -> int:
        return gpus[0]


class LeastLoadedPlacer(_Placer):
    """The fitting GPU with the smallest share of its streams busy."""

    name = "least-loaded"

    def _choose(self, gpus: list[int], node: int, view: ClusterView) -> int:
        f = view.fast
        run, streams = f.gpu_running[node], f.gpu_streams[node]
        return min(gpus, key=lambda g: (run[g] / streams[g], g))


class MlsmPlacer(_Placer):
    """MLSM: idle streams measure spare computing power; weight them by measured GPU speed.

    A GPU that finishes its work faster than its datasheet predicts (``speed_gpu`` > 1) counts
    its idle streams for more — the stream feedback of MLSM, read from measurements. MLSM balances
    GPUs: work that may use a GPU waits for a stream rather than fall back to a core, unless no
    GPU of the node could ever hold it.
    """

    name = "mlsm"

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        if sub.kind.device is Device.CPU:
            return CPU if core_free(node, view) else None
        gpus = fitting_gpus(task, sub, node, view)
        if gpus:
            return self._choose(gpus, node, view)
        if sub.kind.device is Device.BOTH and not gpus_ever_fitting(task, sub, node, view):
            return CPU if core_free(node, view) else None
        return None

    def _choose(self, gpus: list[int], node: int, view: ClusterView) -> int:
        if len(gpus) == 1:
            return gpus[0]
        f = view.fast
        run, streams = f.gpu_running[node], f.gpu_streams[node]
        tf, sp = f.gpu_tflops[node], f.speed_gpu[node]
        best, best_score = gpus[0], -1.0
        for g in gpus:  # the first of equals wins, as max() over (score, -g) would
            score = (streams[g] - run[g]) * tf[g] * sp[g]
            if score > best_score:
                best, best_score = g, score
        return best


class SpeedupPlacer(MlsmPlacer):
    """CPU/GPU choice by predicted speedup (the paper's rule), MLSM choice among GPUs.

    A subtask that may run on either side goes to a free core when the core is predicted to
    finish it sooner than a GPU would, counting the wait for a GPU when none is free now.
    """

    name = "speedup"

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        gpus = fitting_gpus(task, sub, node, view)
        if sub.kind.device is Device.GPU:
            return self._choose(gpus, node, view) if gpus else None
        cpu_ok = core_free(node, view)
        if sub.kind.device is Device.CPU:
            return CPU if cpu_ok else None
        if not cpu_ok:
            return self._choose(gpus, node, view) if gpus else None
        t_cpu = cpu_seconds(sub, node, view)
        if gpus:
            g = self._choose(gpus, node, view)
            t_gpu = self._gpu_time(sub, node, g, view) * (1 + view.fast.gpu_running[node][g])
            return CPU if t_cpu < t_gpu else g
        # No GPU now: expected wait is the node's queued GPU work over the rate its GPUs drain it.
        # Each stream runs at its GPU's measured speed (interference included), so a GPU drains
        # streams × speed nominal seconds per second, not speed.
        valid = gpus_ever_fitting(task, sub, node, view)
        if not valid:
            return CPU  # no GPU of this node could ever take it
        drain = float((view.gpu_streams[node][valid] * view.speed_gpu[node][valid]).sum())
        wait = float(view.backlog_gpu_s[node]) / max(drain, 1e-3)
        g = valid[0]
        return CPU if t_cpu < wait + self._gpu_time(sub, node, g, view) else None

    @staticmethod
    def _gpu_time(sub: Subtask, node: int, g: int, view: ClusterView) -> float:
        f = view.fast
        t = subtask_gpu_seconds(sub, f.gpu_tflops[node][g], f.gpu_bw[node][g])
        return t / max(f.speed_gpu[node][g], 1e-3)
