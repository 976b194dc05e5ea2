"""A node's NIC, one direction: a FIFO link, and the recent traffic a node would measure on it.

Transfers queue back to back at the link's full bandwidth, so the link is busy without a gap from
any moment until its ``free_at``. The measured rate is an exponential moving average (time
constant :data:`TAU_S`) of the busy indicator — what a node reads from its NIC counters, as the
paper's per-node up/down traffic rates — kept exactly by integrating the indicator between
updates.
"""

from __future__ import annotations

import math

import numpy as np

#: Time constant of the measured traffic average, seconds.
TAU_S = 10.0


class Link:
    """One direction of every node's NIC.

    :param n: number of nodes.
    """

    def __init__(self, n: int) -> None:
        self.free_at = np.zeros(n)
        self._ema = np.zeros(n)  # busy fraction, as of self._t
        self._t = np.zeros(n)

    def reserve(self, node: int, now: float, seconds: float) -> float:
        """Queue a transfer of ``seconds`` at full bandwidth; return when it ends."""
        self._settle(node, now)
        start = max(now, float(self.free_at[node]))
        end = start + seconds
        self.free_at[node] = end
        return end

    def cut(self, node: int, now: float) -> None:
        """Drop the node's queued transfers (it left the cluster)."""
        self._settle(node, now)
        self.free_at[node] = now

    def busy_s(self, now: float, out: np.ndarray) -> None:
        """Seconds of transfers still queued on each node, written into ``out``."""
        np.maximum(self.free_at - now, 0.0, out=out)

    def utilisation(self, now: float, out: np.ndarray) -> None:
        """Recent busy fraction of each node's link (0..1), written into ``out``."""
        decay = np.exp((self._t - now) / TAU_S)
        busy_until = np.clip(self.free_at, self._t, now)
        # EMA of a 0/1 indicator that is 1 on [t, busy_until] and 0 on (busy_until, now].
        np.multiply(self._ema, decay, out=out)
        out += np.exp((busy_until - now) / TAU_S) - decay

    def _settle(self, node: int, now: float) -> None:
        t = float(self._t[node])
        if now <= t:
            return
        decay = math.exp((t - now) / TAU_S)
        busy_until = min(max(float(self.free_at[node]), t), now)
        self._ema[node] = self._ema[node] * decay + math.exp((busy_until - now) / TAU_S) - decay
        self._t[node] = now
