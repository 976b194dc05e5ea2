"""Will ``rlsched train``'s replay buffer fit in memory? Checked before any work starts.

The simulated environment pads every observation to its largest cluster, and the DQN's replay
buffer keeps two observations a transition (SB3's ``DictReplayBuffer``: ``observations`` and
``next_observations``). With a 1,024-node fleet in the mix a transition takes ~240 KB whatever
scenario it came from, 40,000 of them 8.9 GiB; the buffer's arrays are allocated lazily and fill
as training goes, so without a check the run is killed for memory well into its DQN phase (its
cloning and teacher choice lost with it).
"""

from __future__ import annotations

from pathlib import Path

from rlsched.errors import InputError
from rlsched.features import CLUSTER_FEATURES, NODE_FEATURES, TASK_FEATURES
from rlsched.scenarios.spec import Scenario

#: Bytes of one transition besides its two observations: action (int64), reward, done, timeout
#: (float32 each) and the semi-MDP discount (float32).
_PER_TRANSITION = 8 + 4 * 4
#: Share of the available memory the buffer may take (the process, its env worker and the
#: evaluation runs need the rest).
SHARE = 0.7
_GIB = 2.0**30


def observation_bytes(n_nodes: int) -> int:
    """Bytes of one observation padded to ``n_nodes`` (float32 features, int8 mask)."""
    return 4 * (n_nodes * len(NODE_FEATURES) + len(TASK_FEATURES) + len(CLUSTER_FEATURES)) + n_nodes


def replay_bytes(n_nodes: int, transitions: int) -> int:
    """Bytes ``transitions`` transitions take in the replay buffer at ``n_nodes`` nodes wide."""
    return transitions * (2 * observation_bytes(n_nodes) + _PER_TRANSITION)


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The kernel's estimate of memory available to a new process, or ``None`` off Linux."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_replay_fits(
    scenarios: list[Scenario], entries: list[str], transitions: int, available: int | None
) -> None:
    """Refuse a training whose replay buffer would not fit in memory, naming the widest scenario.

    :param scenarios: the training scenarios (observations are padded to the widest).
    :param entries: their entries as given (``--scenario``), in the same order.
    :param transitions: transitions the buffer will hold (``min(steps, buffer_size)``).
    :param available: bytes available (:func:`available_bytes`); ``None`` skips the check.
    :raises InputError: naming ``--scenario`` and its widest entry.
    """
    if available is None or not scenarios:
        return
    widths = [len(s.cluster.nodes) for s in scenarios]
    widest = max(range(len(widths)), key=widths.__getitem__)
    need = replay_bytes(widths[widest], transitions)
    if need <= SHARE * available:
        return
    raise InputError(
        "--scenario",
        entries[widest],
        f"scenarios whose replay buffer fits in memory: {transitions:,} transitions padded to "
        f"{widths[widest]:,} nodes (every observation is padded to the widest cluster) take "
        f"{need / _GIB:.1f} GiB, {available / _GIB:.1f} GiB is available",
        hint="train the widest fleet on its own, or the others without it, or with fewer --steps",
    )
