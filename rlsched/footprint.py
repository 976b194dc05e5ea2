"""Memory a simulated run needs, checked before it starts: a run that cannot fit says so at once
instead of swapping for minutes or dying with a ``MemoryError`` traceback."""

from __future__ import annotations

from pathlib import Path

from rlsched.errors import InputError
from rlsched.scenarios.spec import Scenario

#: Bytes per task of a run: task records, subtask graphs, the simulator's per-task state.
#: Measured ~2 KB (65 MB peak at 10,000 tasks, 126 MB at 40,000, README "Limits"); twice that
#: covers apps with larger subtask graphs.
BYTES_PER_TASK = 4_096
#: Interpreter, numpy and the cluster view.
BASE_BYTES = 128 * 2**20


class RunTooLarge(InputError):
    """A run whose estimated memory exceeds what the machine has available: bad input, since the
    scenario's ``workload.tasks`` (or ``--jobs``) asks for it."""


def run_bytes(scenario: Scenario) -> int:
    """Estimated peak memory of one simulated run of ``scenario``."""
    return BASE_BYTES + BYTES_PER_TASK * scenario.workload.tasks


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Memory available to new work (``MemAvailable``), or ``None`` where the system does not say."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fits(scenario: Scenario, processes: int = 1, available: int | None = None) -> None:
    """Refuse a run (or ``processes`` parallel runs) that would not fit in available memory.

    :param scenario: the scenario to run.
    :param processes: runs held in memory at once.
    :param available: bytes available (default: read from the system; unknown = no check).
    :raises RunTooLarge: naming the scenario, the estimate and what is available.
    """
    have = available_bytes() if available is None else available
    need = run_bytes(scenario) * processes
    if have is not None and need > have:
        gib = 2**30
        fits = max(0, (have // processes - BASE_BYTES) // BYTES_PER_TASK)
        raise RunTooLarge(
            scenario.path or scenario.name,
            "workload.tasks",
            f"at most ~{fits:,} tasks to fit the {have / gib:.1f} GiB available "
            f"({processes} run(s) at once, ~{BYTES_PER_TASK // 1024} KiB per task; "
            f"this needs ~{need / gib:.1f} GiB)",
            scenario.workload.tasks,
            hint="lower workload.tasks (or --jobs)",
        )
