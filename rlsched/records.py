"""What happened to one task in a run: the record both worlds keep and the metrics read."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(slots=True)
class TaskRecord:
    """One task's timing, in seconds since the run started (simulated or wall clock).

    :param arrival_s: when it arrived.
    :param deadline_s: its deadline, relative to arrival, if it has one.
    :param node: the node it last ran on (-1: none).
    :param first_start_s: when its first subtask started (NaN: never).
    :param done_s: when it completed (NaN: not completed).
    :param requeues: times it was handed back to the queue (node lost, memory).
    :param completions: times it completed (tests check that none completes twice).
    :param error: why it failed, in the live runtime (``None``: it did not).
    """

    arrival_s: float
    deadline_s: float | None = None
    node: int = -1
    first_start_s: float = math.nan
    done_s: float = math.nan
    requeues: int = 0
    completions: int = 0
    error: str | None = None
