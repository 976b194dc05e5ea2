"""Stage 2, ``iawp-cosine``: the TPDS 2021 paper's own IAWP rule, for comparison with ``iawp``.

Each kind is profiled on two random resource metrics and its profile completed by NCF
(:func:`rlsched.interference.kind_profiles.complete_profiles`). A ready subtask goes to the GPU whose running
subtasks are least similar to it — priority ``1 / mean cosine similarity`` of resource vectors
(similar kinds fight for the same SMs, caches and bandwidth) — and a subtask that may run on a CPU
takes a free core when its predicted GPU/CPU speedup is low: below what its share of the GPU would
be worth (the GPU time-slices between the subtasks on it).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from rlsched.interference.calibration import Survey, SurveyRequest
from rlsched.interference.kind_profiles import METRICS, complete_profiles, cosine_similarity
from rlsched.policies.placers import MlsmPlacer, core_free, fitting_gpus, gpus_ever_fitting
from rlsched.scheduler import CPU
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView

#: Resource metrics the profiler measures per kind (the paper's two).
METRICS_PER_KIND = 2

_CALIBRATED: dict[Hashable, tuple[dict[str, int], np.ndarray, np.ndarray]] = {}


class IawpCosinePlacer(MlsmPlacer):
    """The paper's IAWP: least-similar co-runners on GPUs, lowest predicted speedups on cores.

    :param method: profile completion method (``ncf``, ``svd`` or ``mean``).
    """

    name = "iawp-cosine"

    def __init__(self, method: str = "ncf") -> None:
        self.method = method
        self._index: dict[str, int] = {}
        self._similarity = np.zeros((0, 0))
        self._speedup = np.zeros(0)

    def survey_request(self) -> SurveyRequest:
        """Two resource metrics per kind (the paper's budget), no co-location survey."""
        return SurveyRequest(metrics_per_kind=METRICS_PER_KIND)

    def calibrate(self, survey: Survey) -> None:
        """Complete the kinds' profiles from the survey's sparse measurements.

        :param survey: the cluster's survey (:meth:`survey_request`); its seed seeds the completion.
        :raises ValueError: if the survey holds no kind profiles.
        """
        if survey.profiles is None:
            raise ValueError(
                f"{self.name}: the survey holds no kind profiles (it asks for {METRICS_PER_KIND})"
            )
        seed = survey.request.seed
        key = (survey.key, self.method, seed)
        hit = _CALIBRATED.get(key)
        if hit is None:
            kinds = list(survey.kinds)
            prof = complete_profiles(survey.profiles, kinds, self.method, seed)  # type: ignore[arg-type]
            index = {k.name: i for i, k in enumerate(kinds)}
            hit = _CALIBRATED[key] = (index, cosine_similarity(prof), prof[:, METRICS.index("speedup")])
        self._index, self._similarity, self._speedup = hit

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        dev = sub.kind.device
        cpu_ok = dev is not Device.GPU and core_free(node, view)
        if dev is Device.CPU:
            return CPU if cpu_ok else None
        gpus = fitting_gpus(task, sub, node, view)
        k = self._index.get(sub.kind.name)
        speedup = float(self._speedup[k]) if k is not None else float("inf")
        if not gpus:
            if cpu_ok and not gpus_ever_fitting(task, sub, node, view):
                return CPU  # no GPU of the node could ever hold it
            # Every stream taken: a stream slot is worth about 1/streams of a GPU.
            f = view.fast
            per_gpu = f.node_streams[node] / max(int(view.n_gpus[node]), 1)
            return CPU if cpu_ok and speedup < per_gpu else None
        g, sharing = self._least_similar(k, node, gpus, view)
        return CPU if cpu_ok and speedup < 1 + sharing else g

    def _least_similar(self, k: int | None, node: int, gpus: list[int], view: ClusterView) -> tuple[int, int]:
        """The fitting GPU of highest priority (1 / mean similarity), and how many run there."""
        f = view.fast
        run, streams = f.gpu_running[node], f.gpu_streams[node]
        tf, sp = f.gpu_tflops[node], f.speed_gpu[node]
        best, best_key = gpus[0], (-np.inf, -np.inf)
        for g in gpus:
            running = view.gpu_kinds[node][g]
            idx = [self._index[p] for p in running if p in self._index]
            if k is None or not idx:
                priority = np.inf if not running else 1.0
            else:
                mean = float(self._similarity[k, idx].mean())
                priority = 1.0 / mean if mean > 1e-9 else np.inf
            key = (priority, (streams[g] - run[g]) * tf[g] * sp[g])  # MLSM's spare power breaks ties
            if key > best_key:
                best, best_key = g, key
        return best, len(view.gpu_kinds[node][best])
