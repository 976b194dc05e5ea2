"""Real computations of the live runtime: one kernel per subtask kind, written once against the
array namespace ``xp`` (NumPy or CuPy), plus generated task data with known right answers.

See :mod:`runtime.kernels.pipelines` for the calling convention and :mod:`runtime.kernels.tasks`
for task sizes.
"""

from runtime.kernels.checks import check_result
from runtime.kernels.pipelines import KERNELS, LIVE_APPS, KernelSpec, StagePlan, kernel_for, stage_plan
from runtime.kernels.run_local import run_task_numpy
from runtime.kernels.task_data import TaskData
from runtime.kernels.tasks import SCALES, make_task_data, output_digest
from runtime.kernels.video import Video, generate_video

__all__ = [
    "KERNELS",
    "LIVE_APPS",
    "SCALES",
    "KernelSpec",
    "StagePlan",
    "TaskData",
    "Video",
    "check_result",
    "generate_video",
    "kernel_for",
    "make_task_data",
    "output_digest",
    "run_task_numpy",
    "stage_plan",
]
