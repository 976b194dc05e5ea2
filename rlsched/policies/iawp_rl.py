"""Stage 2, learned: IAWP whose placement rule is a linear policy trained in the simulator.

``iawp-rl`` keeps everything ``iawp`` knows — the NCF interference model fitted from the
profiler, its online updates, the measured solo speeds — and replaces the hand-set rule that turns
those predictions into a placement with a parameter vector learned by random search in the
simulator (Augmented Random Search, Mania et al. 2018: linear policies, antithetic
perturbations of the parameters, the update weighted by the difference of episode returns; see
``experiments/train_placer.py``). The decision for one ready subtask is made in two steps, both
linear in features the executor can observe:

1. **which GPU**: among the fitting GPUs, the highest ``w_sel · [log(solo_g / best solo),
   log(1 + own_g + harm_g), log(1 + own_g), gain_g]`` — ``own`` the slowdown its co-runners are
   predicted to cause it, ``harm`` the slowdown it is predicted to cause them, ``gain`` the
   predicted change of the GPU's total progress rate (:meth:`IawpPlacer._gain`);
2. **what to do**, as two logistic-style tests in ``iawp``'s order: take a free core when
   ``w_cpu · [log(t_cpu / t_gpu), 1] > 0``; else hold back when ``w_hold · [1, gain, streams
   pressure, log(1 + own)] > 0`` (only while the node's GPUs run something; younger subtasks
   may pass); else run on the chosen GPU.
   When every stream is taken, the choice is a core or waiting for a stream (the GPU time then
   includes the predicted wait, as in ``iawp``).

The initial parameters reproduce ``iawp-pass`` exactly (its GPU cost, its core rule and its hold
threshold 0.4), so training starts from the best validated rule and the checkpoint chosen on
validation seeds can only keep or improve it there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models import PRETRAINED_IAWP_RL
from rlsched.interference.predictor import InterferencePredictor
from rlsched.policies.iawp import IawpPlacer
from rlsched.policies.placers import core_free, cpu_seconds, fitting_gpus, gpus_ever_fitting
from rlsched.scheduler import CPU
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView

#: Version of the placer's features; a checkpoint of another version is refused.
PLACER_FEATURE_VERSION = 1
#: Names of the parameters, in order (``meta.json`` of a checkpoint lists them).
PARAM_NAMES: tuple[str, ...] = (
    "sel_log_solo_rel",
    "sel_log_cost",
    "sel_log_own",
    "sel_gain",
    "cpu_log_time_rel",
    "cpu_bias",
    "hold_bias",
    "hold_gain",
    "hold_pressure",
    "hold_log_own",
)
#: ``iawp-pass`` as a parameter vector: GPU by smallest solo x (1 + own + harm), a core when it
#: is faster, hold while the gain is below 0.4.
INITIAL = np.array([-1.0, -1.0, 0.0, 0.0, -1.0, 0.0, 0.4, -1.0, 0.0, 0.0])
#: Where the shipped parameters live (trained by ``rlsched train --stage 2``).
PRETRAINED = PRETRAINED_IAWP_RL


def load_params(directory: str | Path) -> np.ndarray:
    """The verified parameter vector of a placer checkpoint.

    :raises CheckpointError: naming the file and what is wrong.
    """
    from models.checkpoint import CheckpointError, load_checkpoint

    state, meta = load_checkpoint(
        directory, PLACER_FEATURE_VERSION, retrain="rlsched train --stage 2", kind="iawp-rl"
    )
    if meta.get("params") != list(PARAM_NAMES):
        raise CheckpointError(
            Path(directory) / "meta.json", "params", f"{list(PARAM_NAMES)}", meta.get("params")
        )
    w = state.get("w")
    if w is None or tuple(w.shape) != (len(PARAM_NAMES),):
        raise CheckpointError(Path(directory) / "weights.pt", "w", f"one vector of {len(PARAM_NAMES)} values")
    out = w.double().numpy()
    if not np.all(np.isfinite(out)):
        raise CheckpointError(Path(directory) / "weights.pt", "w", "finite parameters")
    return out


def save_params(directory: str | Path, w: np.ndarray, meta: dict) -> Path:
    """Write a placer checkpoint (``weights.pt`` with the vector, ``meta.json`` with checksums)."""
    import torch

    from models.checkpoint import save_checkpoint

    full = {**meta, "feature_version": PLACER_FEATURE_VERSION, "params": list(PARAM_NAMES)}
    return save_checkpoint(directory, {"w": torch.tensor(np.asarray(w, dtype=np.float64))}, full)


class LearnedIawpPlacer(IawpPlacer):
    """IAWP with a learned placement rule (see the module docstring).

    :param params: the parameter vector; ``None`` loads ``model_dir``.
    :param model_dir: a checkpoint of ``rlsched train --stage 2``; ``None`` = the shipped one,
        or :data:`INITIAL` when none is shipped.
    :param predictor: as :class:`IawpPlacer`.
    """

    name = "iawp-rl"

    def __init__(
        self,
        params: np.ndarray | None = None,
        model_dir: str | Path | None = None,
        predictor: InterferencePredictor | None = None,
    ) -> None:
        super().__init__(predictor=predictor, min_gain=0.0, hold="pass")
        #: The checkpoint the parameters came from (``None``: given, or the untrained initial ones).
        self.model_dir: Path | None = None
        if params is None:
            src = Path(model_dir) if model_dir is not None else PRETRAINED
            if model_dir is not None or (src / "meta.json").is_file():
                params, self.model_dir = load_params(src), src
            else:
                params = INITIAL
        w = np.asarray(params, dtype=np.float64)
        if w.shape != (len(PARAM_NAMES),):
            raise ValueError(f"params: expected {len(PARAM_NAMES)} values, got shape {w.shape}")
        self.w = w.copy()

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        dev = sub.kind.device
        if dev is Device.CPU:
            return CPU if core_free(node, view) else None
        if self._falls_back(node, view):
            return self._plain.place(task, sub, node, view)
        cpu_ok = dev is Device.BOTH and core_free(node, view)
        gpus = fitting_gpus(task, sub, node, view)
        if not gpus:
            return self._core_or_wait(task, sub, node, view) if cpu_ok else None
        g, t_gpu, own, gain = self._choose_gpu(sub, node, gpus, view)
        w = self.w
        if cpu_ok and w[4] * np.log(cpu_seconds(sub, node, view) / t_gpu) + w[5] > 0.0:
            return CPU
        if view.fast.node_gpu_running[node] > 0:
            if gain is None:  # the score did not need every GPU's gain: only the chosen one's
                gain = self._gain(sub.kind.name, node, g, view) if w[7] != 0.0 else 0.0
            pressure = float(view.ready_waiting[node]) / max(view.fast.node_streams[node], 1)
            if w[6] + w[7] * gain + w[8] * pressure + w[9] * np.log1p(own) > 0.0:
                return None
        return g

    def _core_or_wait(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        """Every stream is taken: a core, or wait for a stream (GPU time includes the wait)."""
        able = gpus_ever_fitting(task, sub, node, view)
        if not able:
            return CPU
        _, t_gpu, _, _ = self._choose_gpu(sub, node, able, view)
        wait = t_gpu * float(view.ready_waiting[node]) / max(view.fast.node_streams[node], 1)
        logit = self.w[4] * np.log(cpu_seconds(sub, node, view) / (t_gpu + wait)) + self.w[5]
        return CPU if logit > 0.0 else None

    def _choose_gpu(
        self, sub: Subtask, node: int, gpus: list[int], view: ClusterView
    ) -> tuple[int, float, float, float | None]:
        """The GPU with the highest selection score: (index, predicted seconds, own slowdown, gain;
        the gain is ``None`` when the score does not weigh gains, so none was computed)."""
        names, models, kind = view.model_names, view.fast.gpu_model[node], sub.kind.name
        ps = self._pair_slowdown
        solo = np.empty(len(gpus))
        own = np.empty(len(gpus))
        harm = np.empty(len(gpus))
        for i, g in enumerate(gpus):
            device = names[models[g]]
            solo[i] = self._solo_seconds(sub, node, g, device, view)
            running = view.gpu_kinds[node][g]
            own[i] = sum(ps(device, kind, p) for p in running)
            harm[i] = sum(ps(device, p, kind) for p in running)
        w = self.w
        score = w[0] * np.log(solo / solo.min()) + w[1] * np.log1p(own + harm) + w[2] * np.log1p(own)
        gains = None
        if w[3] != 0.0:
            gains = np.array([self._gain(kind, node, g, view) for g in gpus])
            score = score + w[3] * gains
        i = int(np.argmax(score))
        gain = float(gains[i]) if gains is not None else None
        return gpus[i], float(solo[i] * (1.0 + own[i])), float(own[i]), gain
