"""Measured speed on a live cluster, relative to what the same kind of work runs at elsewhere in it.

A unit's raw speed sample is nominal seconds (its own datasheet's roofline) over measured seconds.
In the simulator the rates behind those samples sit at 0.6-1.4; on a live cluster they do not mean
"as its datasheet": emulated GPUs run the kernels on the host (raw speeds 0.00002-0.004 on the
2-core development machine, i.e. 10-1,000x below any datasheet), a kernel kind's raw speed differs
from another's by up to 100x (the roofline fits some kernels and not others), and one sample
differs from the next by a coefficient of variation of 1-3.5 (lane waits, the GIL, host load).
Fed to the view as they come, a GPU 3x slower than its datasheet is lost in that noise, and a
network trained on ~1 sees values it never saw (BENCHMARKS, "A cluster that differs from its
datasheet").

So each (unit, kind) keeps an EMA of the *log* of its raw samples (log: samples are heavy-tailed
and their ratios are what matters), each kind has a reference, the median of that EMA over the
units of its class (GPUs or CPU cores) that ran it, and a unit's speed is the geometric mean,
over the kinds it ran, of its EMA over the kind's reference. A unit that runs every kind as the
rest of the cluster does reads 1, one 3x slower reads ~1/3, whatever the backend, the host load
or the kernel mix; host load that slows every unit alike cancels out.

One reference serves the whole cluster: :class:`~runtime.cluster.local.LocalCluster` shares one
between its agents; on Ray each node keeps its own and sends its table (:meth:`table`) with its
snapshots, and the driver's reference (:meth:`load`) recomputes every node's speeds.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

from rlsched.view import SPEED_EMA

#: Samples of a (unit, kind) after which its weight in the unit's mean stops growing: a kind a unit
#: ran once does not count as much as one it runs all the time.
FULL_WEIGHT_SAMPLES = 8
#: The unit index of a node's CPU cores (its GPUs are 0, 1, ...).
CPU_UNIT = -1

#: (node, unit) -> kind -> (log-EMA, samples).
_Table = dict[tuple[int, int], dict[str, tuple[float, int]]]


class SpeedReference:
    """Per-(unit, kind) log-speed EMAs and the cluster-relative speed of every unit.

    Thread-safe: agents record from their lane threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ema: _Table = {}
        #: (is CPU, kind) -> (node, unit) -> (log-EMA, samples): the peers a kind's reference is over.
        self._peers: dict[tuple[bool, str], dict[tuple[int, int], tuple[float, int]]] = {}
        #: (is CPU, kind) -> its reference, dropped whenever one of its peers changes.
        self._refs: dict[tuple[bool, str], float] = {}

    def record(self, node: int, unit: int, kind: str, raw: float) -> float:
        """Add a raw speed sample and return the unit's relative speed.

        :param node: node index.
        :param unit: GPU index on the node, or :data:`CPU_UNIT`.
        :param kind: the subtask's kind.
        :param raw: nominal over measured seconds (> 0).
        """
        x = math.log(raw)
        with self._lock:
            kinds = self._ema.setdefault((node, unit), {})
            old = kinds.get(kind)
            new = (x, 1) if old is None else (old[0] + SPEED_EMA * (x - old[0]), old[1] + 1)
            kinds[kind] = new
            self._peers.setdefault((unit == CPU_UNIT, kind), {})[(node, unit)] = new
            self._refs.pop((unit == CPU_UNIT, kind), None)
            return self._relative(node, unit)

    def relative(self, node: int, unit: int) -> float:
        """The unit's speed relative to the cluster (1.0 before it ran anything)."""
        with self._lock:
            return self._relative(node, unit)

    def table(self, node: int) -> dict[str, list[float]]:
        """One node's EMAs as plain values (``"unit|kind" -> [log-EMA, samples]``), for Ray."""
        with self._lock:
            return {
                f"{unit}|{kind}": [e, n]
                for (nd, unit), kinds in self._ema.items()
                if nd == node
                for kind, (e, n) in kinds.items()
            }

    def load(self, node: int, table: Mapping[str, list[float]]) -> None:
        """Replace one node's EMAs with a table from :meth:`table` (another process's)."""
        rows: _Table = {}
        for name, (e, n) in table.items():
            unit, kind = name.split("|", 1)
            rows.setdefault((node, int(unit)), {})[kind] = (float(e), int(n))
        with self._lock:
            for key in [k for k in self._ema if k[0] == node]:
                for kind in self._ema.pop(key):
                    self._peers[(key[1] == CPU_UNIT, kind)].pop(key, None)
                    self._refs.pop((key[1] == CPU_UNIT, kind), None)
            for key, kinds in rows.items():
                self._ema[key] = kinds
                for kind, v in kinds.items():
                    self._peers.setdefault((key[1] == CPU_UNIT, kind), {})[key] = v
                    self._refs.pop((key[1] == CPU_UNIT, kind), None)

    def forget(self, node: int) -> None:
        """Drop a node that left the cluster."""
        self.load(node, {})

    def speeds(self) -> dict[tuple[int, int], float]:
        """Relative speed of every (node, unit) that ran something."""
        with self._lock:
            return {key: self._relative(*key) for key in self._ema}

    def _relative(self, node: int, unit: int) -> float:
        kinds = self._ema.get((node, unit))
        if not kinds:
            return 1.0
        is_cpu = unit == CPU_UNIT
        total = weight = 0.0
        for kind, (e, n) in kinds.items():
            w = min(n, FULL_WEIGHT_SAMPLES)
            total += w * (e - self._reference((is_cpu, kind)))
            weight += w
        return math.exp(total / weight)

    def _reference(self, key: tuple[bool, str]) -> float:
        ref = self._refs.get(key)
        if ref is None:
            ref = self._refs[key] = _median([e for e, _ in self._peers[key].values()])
        return ref


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m])
