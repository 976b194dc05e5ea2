"""Keeping the queue file bounded: finished tasks older than ``finished_retention_s`` are removed.

Every accepted task stays in the queue's SQLite file with its attempts and reports, so a service
that runs for months at tens of tasks a second would grow its file without end (about 3 million
tasks a day at 37 tasks/s, BENCHMARKS "Soak"). The feedback thread calls :meth:`Retention.tick`;
each call removes finished tasks past the retention in batches of
:data:`~runtime.service.store.PRUNE_BATCH` (the queue's lock is released between batches, so
submissions wait for one batch at most) until none is left or :data:`PRUNE_SECONDS` are spent;
the next call goes on. SQLite reuses the freed pages, so the file stops growing at about what the
retention holds (it does not shrink).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from runtime.service.store import PRUNE_BATCH, StorageError, TaskStore

log = logging.getLogger(__name__)
#: Seconds one call may spend removing (a backlog, e.g. a file kept for months, goes over calls).
PRUNE_SECONDS = 0.1
#: Seconds between two log lines about what was removed.
LOG_EVERY_S = 3600.0


class Retention:
    """Removes finished tasks that finished more than ``retention_s`` ago.

    :param store: the queue.
    :param retention_s: seconds a finished task is kept (0: kept for ever; nothing is removed).
    :param on_pruned: told how many tasks each call removed (the metrics).
    :param clock: epoch seconds (``finished_at`` is epoch time).
    """

    def __init__(
        self,
        store: TaskStore,
        retention_s: float,
        on_pruned: Callable[[int], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.retention_s = retention_s
        self.on_pruned = on_pruned
        self.clock = clock
        self._unlogged = 0
        self._logged_at = -LOG_EVERY_S

    def tick(self) -> int:
        """Remove what is past the retention, for at most :data:`PRUNE_SECONDS`; how many."""
        # While the file refuses writes, the service's probe decides when it takes them again
        # (a commit here would clear the store's degraded state on its own say).
        if self.retention_s <= 0 or self.store.degraded is not None:
            return 0
        before = self.clock() - self.retention_s
        removed, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < PRUNE_SECONDS:
            try:
                n = self.store.prune(before)
            except StorageError:  # the file refuses writes: readyz says so; the next call retries
                break
            removed += n
            if n < PRUNE_BATCH:
                break
        if removed:
            self.on_pruned(removed)
            self._log(removed)
        return removed

    def _log(self, removed: int) -> None:
        self._unlogged += removed
        now = time.monotonic()
        if now - self._logged_at >= LOG_EVERY_S:
            log.info(
                "rlsched serve: removed %d finished tasks older than %s (finished_retention_s)",
                self._unlogged,
                span_text(self.retention_s),
            )
            self._unlogged, self._logged_at = 0, now


def span_text(seconds: float) -> str:
    """``604800`` -> ``7 days``, ``7200`` -> ``2 h``, ``90`` -> ``90 s``."""
    if seconds >= 86400:
        return f"{seconds / 86400:.3g} days"
    return f"{seconds / 3600:.3g} h" if seconds >= 3600 else f"{seconds:.3g} s"
