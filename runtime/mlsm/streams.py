"""MLSM stream pools and feedback-based stream adjustment.

Every GPU has a pool of streams, each served by one lane (``runtime.mlsm.lanes``). Only the first
``active`` streams take work; the placer sees ``active`` as the GPU's stream count
(``ClusterView.gpu_streams``). After each interval the feedback controller moves one stream per
node towards the GPU that turns a stream into the most work.

The MLSM papers give the idea, not formulas (``PAPERS.md``); ours, per node and interval:

- ``busy_g``: mean busy streams of GPU ``g``; ``idle_g = active_g - busy_g`` (spare streams);
- ``rate_g``: nominal seconds of work finished per busy-stream-second (what one more stream is
  worth there; a saturated GPU shows it falling as streams queue behind its engines);
- move one stream from a donor to a receiver when the receiver has no spare stream
  (``idle < 0.5``) and either the donor has a spare one (``idle >= 1``) and the receiver is not
  slower per stream by more than ``hysteresis``, or the receiver's rate exceeds the donor's by
  ``hysteresis`` — within ``[min_streams, max_streams]`` per GPU, the node's total fixed. (Without
  the rate condition the rule would feed slow GPUs: they keep their streams busy the longest.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from runtime.backends.base import Device, Stream
from runtime.mlsm.lanes import Lane


@dataclass
class StreamStats:
    """What one GPU did during a feedback interval."""

    active: int
    busy_stream_s: float
    work_s: float
    interval_s: float

    @property
    def busy(self) -> float:
        return self.busy_stream_s / self.interval_s if self.interval_s > 0 else 0.0

    @property
    def idle(self) -> float:
        return self.active - self.busy

    @property
    def rate(self) -> float:
        return self.work_s / self.busy_stream_s if self.busy_stream_s > 0 else 0.0


class StreamPool:
    """The streams of one GPU and the lanes that drive them.

    :param device: the device the streams belong to.
    :param active: initial number of usable streams.
    :param name: prefix of lane thread names.
    """

    def __init__(self, device: Device, active: int, name: str) -> None:
        self.device = device
        self.name = name
        self.streams: list[Stream] = []
        self.lanes: list[Lane] = []
        self.free: list[int] = []
        self.active = 0
        self.running = 0
        self._lock = threading.Lock()
        self._t_last = time.perf_counter()
        self._busy_area = 0.0
        self._work = 0.0
        self._t_start = self._t_last
        self.resize(active)

    def resize(self, active: int) -> None:
        """Make ``active`` streams usable, creating streams and lanes on first use."""
        while len(self.streams) < active:
            i = len(self.streams)
            self.streams.append(self.device.new_stream())
            self.lanes.append(Lane(f"{self.name}-s{i}"))
            self.free.append(i)
        self.active = active

    def acquire(self) -> int | None:
        """A free stream index among the usable ones, or ``None``."""
        if self.running >= self.active:
            return None
        usable = [i for i in self.free if i < self.active] or self.free
        if not usable:
            return None
        i = min(usable)
        self.free.remove(i)
        self._account()
        self.running += 1
        return i

    def release(self, i: int, work_s: float) -> None:
        """Stream ``i`` finished a subtask of ``work_s`` nominal seconds."""
        self._account()
        self.running -= 1
        self._work += work_s
        self.free.append(i)

    def _account(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self._busy_area += self.running * (now - self._t_last)
            self._t_last = now

    def take_stats(self) -> StreamStats:
        """Statistics since the last call (or creation), then start a new interval."""
        self._account()
        now = time.perf_counter()
        st = StreamStats(self.active, self._busy_area, self._work, now - self._t_start)
        self._busy_area, self._work, self._t_start = 0.0, 0.0, now
        return st

    def close(self) -> None:
        for lane in self.lanes:
            lane.stop(wait=False)


@dataclass
class StreamFeedback:
    """The feedback rule of the module docstring.

    :param min_streams: fewest streams a GPU keeps.
    :param max_streams: most streams a GPU may get.
    :param hysteresis: relative rate gap that justifies moving a stream between busy GPUs.
    """

    min_streams: int = 1
    max_streams: int = 8
    hysteresis: float = 0.25
    moves: list[tuple[int, int]] = field(default_factory=list)

    def adjust(self, stats: list[StreamStats]) -> list[int]:
        """New stream counts for the GPUs of one node (at most one stream moves)."""
        counts = [s.active for s in stats]
        if len(stats) < 2:
            return counts
        recv = [g for g, s in enumerate(stats) if s.idle < 0.5 and counts[g] < self.max_streams]
        donors = [g for g, s in enumerate(stats) if counts[g] > self.min_streams]
        best: tuple[float, int, int] | None = None
        for r in recv:
            for d in donors:
                if d == r:
                    continue
                # A spare stream goes to a busy GPU only if that GPU is not clearly slower per
                # stream: a slow GPU keeps its streams busy longest, and must not collect them.
                not_slower = stats[r].rate * (1.0 + self.hysteresis) >= stats[d].rate
                spare = stats[d].idle >= 1.0 and not_slower
                faster = stats[r].rate > (1.0 + self.hysteresis) * stats[d].rate
                if spare or faster:
                    score = stats[d].idle + stats[r].rate - stats[d].rate
                    if best is None or score > best[0]:
                        best = (score, d, r)
        if best is not None:
            _, d, r = best
            counts[d] -= 1
            counts[r] += 1
            self.moves.append((d, r))
        return counts
