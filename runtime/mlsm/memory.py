"""MLSM unified device memory manager: working memory plus a cache of device-resident inputs.

One manager per device. It decides and accounts; the backend allocates. Running subtasks
:meth:`~DeviceMemory.reserve` their working memory; inputs shared by several subtasks (a frame
that three pipeline stages read, a model's weights) are fetched once with
:meth:`~DeviceMemory.cached` and stay on the device until room is needed, when the least recently
used unpinned input goes first. Running out of memory is never a crash: the caller gets
:class:`~runtime.backends.base.DeviceFull` and hands the work to another device or a CPU core.

Loads (uploads) run outside the lock; a second thread that misses an input already being loaded
waits for that load instead of uploading it again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.backends.base import DeviceFull


@dataclass(frozen=True)
class MemoryStats:
    """A snapshot of a manager's accounting.

    :param capacity_bytes: what the manager may hand out.
    :param used_bytes: working memory reserved plus cached inputs (including ones being loaded).
    :param cached_bytes: cached inputs alone.
    :param evictable_bytes: cached inputs nobody uses now (evicted on demand, so free for placing).
    :param hits: :meth:`DeviceMemory.cached` calls served without a load.
    :param misses: calls that started a load.
    :param evictions: cached inputs evicted to make room.
    :param h2d_bytes_loaded: bytes of successful loads.
    :param h2d_bytes_saved: bytes of hits (transfers avoided).
    :param peak_bytes: largest ``used_bytes`` seen.
    :param refusals: requests that did not fit even with every unused input evicted (a GPU
        subtask then waits for memory, an output stays on the host).
    """

    capacity_bytes: int
    used_bytes: int
    cached_bytes: int
    evictable_bytes: int
    hits: int
    misses: int
    evictions: int
    h2d_bytes_loaded: int
    h2d_bytes_saved: int
    peak_bytes: int
    refusals: int = 0

    @property
    def held_bytes(self) -> int:
        """Memory that cannot be had right now: working memory and inputs in use."""
        return self.used_bytes - self.evictable_bytes


@dataclass(eq=False)
class _Entry:
    nbytes: int
    pins: int = 1
    value: Any = None
    drop_on_unpin: bool = False
    failed: bool = False
    ready: threading.Event = field(default_factory=threading.Event)


class DeviceMemory:
    """Device memory accounting with an LRU cache of device-resident inputs.

    :param capacity_bytes: memory the manager may hand out (at most the backend's pool limit).
    :param name: label used in error messages (e.g. ``"n0/gpu1"``).
    """

    def __init__(self, capacity_bytes: int, name: str = "") -> None:
        if capacity_bytes < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity_bytes}")
        self.capacity_bytes = capacity_bytes
        self.name = name
        self._lock = threading.Lock()
        # Insertion order is recency order: the first entry is the least recently used.
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._working = 0
        self._cached = 0
        self._evictable = 0  # bytes of ready entries nobody pins (kept incrementally: read per event)
        self._hits = self._misses = self._evictions = 0
        self._loaded = self._saved = 0
        self._peak = 0
        self._refusals = 0

    # ---- working memory --------------------------------------------------------------------
    def reserve(self, nbytes: int) -> None:
        """Take working memory for a running subtask, evicting unpinned inputs LRU-first.

        :param nbytes: bytes to take.
        :raises DeviceFull: it does not fit even with every unpinned input evicted; nothing
            was evicted then.
        """
        _check_size(nbytes)
        with self._lock:
            self._make_room(nbytes)
            self._working += nbytes
            self._note_peak()

    def release(self, nbytes: int) -> None:
        """Give back working memory taken with :meth:`reserve`.

        :param nbytes: bytes to give back.
        :raises ValueError: more than is reserved.
        """
        _check_size(nbytes)
        with self._lock:
            if nbytes > self._working:
                raise ValueError(f"{self._label()}release of {nbytes} B exceeds {self._working} B reserved")
            self._working -= nbytes

    # ---- cached inputs ---------------------------------------------------------------------
    def cached(self, data_id: str, nbytes: int, load: Callable[[], Any]) -> Any:
        """The device-resident value of ``data_id``, loaded on a miss; pins it until :meth:`unpin`.

        :param data_id: key of the input (same id = same bytes).
        :param nbytes: device bytes the value takes.
        :param load: makes the value (typically an upload); called without the lock held, at most
            once per residency.
        :return: the value.
        :raises DeviceFull: a miss that does not fit even with every unpinned input evicted.
        """
        _check_size(nbytes)
        with self._lock:
            entry = self._entries.get(data_id)
            if entry is None:
                self._make_room(nbytes)
                entry = self._insert(data_id, nbytes)
                loader = True
            else:
                if self._is_evictable(entry):
                    self._evictable -= entry.nbytes
                entry.pins += 1
                self._entries.move_to_end(data_id)
                loader = False
                if entry.ready.is_set():
                    self._count_hit(entry)
                    return entry.value
        if loader:
            return self._load(data_id, entry, load)
        return self._wait(data_id, nbytes, entry, load)

    def unpin(self, data_id: str) -> None:
        """Done with a value from :meth:`cached`; it stays cached (evictable) until evicted.

        :param data_id: the input.
        :raises KeyError: ``data_id`` is not pinned.
        """
        with self._lock:
            entry = self._entries.get(data_id)
            if entry is None or entry.pins <= 0:
                raise KeyError(f"{self._label()}{data_id!r} is not pinned")
            entry.pins -= 1
            if self._is_evictable(entry):
                self._evictable += entry.nbytes
            if entry.pins == 0 and entry.drop_on_unpin:
                self._remove(data_id)

    def drop(self, data_id: str) -> None:
        """Remove an input now (e.g. a finished task's own inputs), or on its last unpin.

        :param data_id: the input; unknown ids are ignored.
        """
        with self._lock:
            entry = self._entries.get(data_id)
            if entry is None:
                return
            if entry.pins == 0:
                self._remove(data_id)
            else:
                entry.drop_on_unpin = True

    def let_go(self) -> None:
        """The device is closing: drop every cached value (its device array), keeping the
        accounting for reports. A closed cluster can outlive its run until Python's cycle
        collector finds it; without this its cached inputs stay allocated in the real device's
        pool, where the next cluster's GPUs on that device would count them as used."""
        with self._lock:
            for entry in self._entries.values():
                entry.value = None

    def contains(self, data_id: str) -> bool:
        """Whether ``data_id`` is resident (or being loaded).

        :param data_id: the input.
        """
        with self._lock:
            return data_id in self._entries

    @property
    def free_bytes(self) -> int:
        """Capacity not reserved and not cached (evictable inputs count as used)."""
        with self._lock:
            return self.capacity_bytes - self._working - self._cached

    def held_bytes(self) -> int:
        """Working memory plus inputs in use or loading: what cannot be had right now."""
        with self._lock:
            return self._working + self._cached - self._evictable

    def stats(self) -> MemoryStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return MemoryStats(
                capacity_bytes=self.capacity_bytes,
                used_bytes=self._working + self._cached,
                cached_bytes=self._cached,
                evictable_bytes=self._evictable,
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                h2d_bytes_loaded=self._loaded,
                h2d_bytes_saved=self._saved,
                peak_bytes=self._peak,
                refusals=self._refusals,
            )

    # ---- internals ---------------------------------------------------------------------------
    def _load(self, data_id: str, entry: _Entry, load: Callable[[], Any]) -> Any:
        try:
            value = load()
        except BaseException:
            with self._lock:
                entry.failed = True
                self._remove(data_id)
            entry.ready.set()
            raise
        with self._lock:
            entry.value = value
            self._loaded += entry.nbytes
        entry.ready.set()
        return value

    def _wait(self, data_id: str, nbytes: int, entry: _Entry, load: Callable[[], Any]) -> Any:
        entry.ready.wait()
        if entry.failed:
            # The first loader's error is its own to report; try the load ourselves (the entry
            # was removed, so this is a fresh miss and our pin went with it).
            return self.cached(data_id, nbytes, load)
        with self._lock:
            self._count_hit(entry)
        return entry.value

    def _insert(self, data_id: str, nbytes: int) -> _Entry:
        entry = _Entry(nbytes)
        self._entries[data_id] = entry
        self._cached += nbytes
        self._misses += 1
        self._note_peak()
        return entry

    def _remove(self, data_id: str) -> None:
        entry = self._entries.pop(data_id)
        self._cached -= entry.nbytes
        if self._is_evictable(entry):
            self._evictable -= entry.nbytes

    @staticmethod
    def _is_evictable(entry: _Entry) -> bool:
        return entry.pins == 0 and entry.ready.is_set()

    def _count_hit(self, entry: _Entry) -> None:
        self._hits += 1
        self._saved += entry.nbytes

    def _make_room(self, nbytes: int) -> None:
        """Evict LRU unpinned inputs until ``nbytes`` fit; check first, so failure changes nothing."""
        free = self.capacity_bytes - self._working - self._cached
        if nbytes <= free:
            return
        victims: list[str] = []
        for data_id, entry in self._entries.items():
            if entry.pins == 0 and entry.ready.is_set():
                victims.append(data_id)
                free += entry.nbytes
                if nbytes <= free:
                    break
        if nbytes > free:
            self._refusals += 1
            raise DeviceFull(
                f"{self._label()}{nbytes} B do not fit: {self.capacity_bytes} B capacity, "
                f"{self._working} B reserved, {self._cached} B cached ({free} B obtainable)"
            )
        for data_id in victims:
            self._remove(data_id)
        self._evictions += len(victims)

    def _note_peak(self) -> None:
        self._peak = max(self._peak, self._working + self._cached)

    def _label(self) -> str:
        return f"{self.name}: " if self.name else ""


def _check_size(nbytes: int) -> None:
    if nbytes < 0:
        raise ValueError(f"byte counts must be >= 0, got {nbytes}")
