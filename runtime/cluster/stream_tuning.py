"""Stream feedback on one node: at every interval, move at most one stream between its GPUs
(:class:`~runtime.mlsm.streams.StreamFeedback`), and show the new counts in the view."""

from __future__ import annotations

from collections.abc import Callable

from rlsched.view import ClusterView
from runtime.cluster.config import LiveClusterSpec
from runtime.mlsm.streams import StreamFeedback, StreamPool


class StreamTuner:
    """The stream-feedback loop of one node's GPUs.

    :param spec: the live cluster (stream bounds per GPU).
    :param node: the node's row in ``view``.
    :param view: the cluster view (its stream counts).
    :param pools: each GPU's stream pool.
    :param clock: seconds since the run started.
    """

    def __init__(
        self,
        spec: LiveClusterSpec,
        node: int,
        view: ClusterView,
        pools: list[StreamPool],
        clock: Callable[[], float],
    ) -> None:
        self.node, self.view, self.pools, self.clock = node, view, pools, clock
        self.feedback = StreamFeedback(spec.min_streams_per_gpu, spec.max_streams_per_gpu)
        #: (time, streams per GPU, mean idle streams per GPU) of each feedback interval.
        self.history: list[tuple[float, list[int], list[float]]] = []
        self._cooldown = False

    def step(self) -> tuple[list[int], bool]:
        """One feedback interval (the cluster lock held): the stream count of each GPU, and
        whether the interval was judged (False: the cool-down after a move)."""
        stats = [p.take_stats() for p in self.pools]
        self.history.append((self.clock(), [s.active for s in stats], [s.idle for s in stats]))
        if self._cooldown:
            # The interval after a move still shows the donor finishing on its lost stream and
            # the receiver not yet using its new one: judging it would undo the move.
            self._cooldown = False
            return [p.active for p in self.pools], False
        counts = self.feedback.adjust(stats)
        self._cooldown = counts != [s.active for s in stats]
        for g, c in enumerate(counts):
            if c != self.pools[g].active:
                self.pools[g].resize(c)
                self.view.set_streams(self.node, g, c)
        return counts, True
