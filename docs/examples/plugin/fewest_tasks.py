"""An rlsched policy plug-in: a node selector and a subtask placer in another package."""

import numpy as np


class FewestTasks:
    """Stage 1: the feasible node with the fewest tasks per GPU (cores if it has none)."""

    name = "fewest-tasks"

    def reset(self, view, seed):
        pass

    def select(self, task, view, mask):
        load = view.tasks_on_node / np.maximum(view.n_gpus, 1)
        return int(np.argmin(np.where(mask, load, np.inf)))


class EmptiestGpu:
    """Stage 2: the fitting GPU running the fewest subtasks, else a free core, else wait."""

    name = "emptiest-gpu"
    CPU = -1  # rlsched.scheduler.CPU: "any free core of the node"

    def reset(self, view, seed):
        pass

    def place(self, task, sub, node, view):
        f = view.fast
        fits = [
            g
            for g in range(int(view.n_gpus[node]))
            if sub.kind.device.name != "CPU"
            and f.gpu_running[node][g] < f.gpu_streams[node][g]
            and f.gpu_mem_used[node][g] + sub.mem_mb <= f.gpu_mem[node][g]
            and (not task.gpu_models or view.model_names[f.gpu_model[node][g]] in task.gpu_models)
        ]
        if fits:
            return min(fits, key=lambda g: f.gpu_running[node][g])
        if sub.kind.device.name != "GPU" and f.cpu_busy[node] < f.cores[node]:
            return self.CPU
        return None
