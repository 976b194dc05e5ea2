"""The live data of one task: its input arrays, their cache ids and what its checks need.

:func:`runtime.kernels.tasks.make_task_data` makes it; :func:`runtime.kernels.checks.check_result`
checks a task's outputs against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class TaskData:
    """The live data of one task.

    :param app: app name.
    :param stream: stream number.
    :param chunk: chunk number within the stream.
    :param inputs: input arrays by name (host NumPy).
    :param input_ids: cache id of every input (shared by the chunks of a stream for repeated
        inputs).
    :param input_mb: nominal input size for ``rlsched.workloads.build_graph``, MB.
    :param truth: what :func:`runtime.kernels.checks.check_result` needs beyond the inputs.
    :param scale: ``"small"`` or ``"medium"``.
    :param shared: names of the inputs every chunk of the stream shares (weights, background...):
        a device cache keeps them after the task; the others are the task's own.
    """

    app: str
    stream: int
    chunk: int
    inputs: dict[str, np.ndarray]
    input_ids: dict[str, str]
    input_mb: float
    truth: dict[str, np.ndarray] = field(default_factory=dict)
    scale: str = "small"
    shared: frozenset[str] = frozenset()

    def shared_ids(self) -> frozenset[str]:
        """Cache ids of the inputs the stream's other chunks use too."""
        return frozenset(self.input_ids[n] for n in self.shared if n in self.input_ids)

    @property
    def input_bytes(self) -> int:
        """Real bytes of all inputs."""
        return sum(int(a.nbytes) for a in self.inputs.values())
