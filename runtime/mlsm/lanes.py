"""Worker lanes: one host thread per GPU stream or CPU core, fed through a queue.

A lane runs one job at a time, like a CUDA stream runs its kernels in order; the node agent
decides what each lane runs. Lanes are daemon threads so an interrupted run never hangs the
interpreter, and every job's exception is handed to its callback rather than killing the lane.

A thread can still die mid-job (``SystemExit``, a crash injected by the ``lane-dies`` failpoint):
its callback is then never called. The owner notices (:attr:`Lane.alive` is false while it
still counts the job as running) and starts the lane again with :meth:`Lane.revive`.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from runtime.failpoints import LaneKilled

log = logging.getLogger(__name__)

Job = Callable[[], Any]
Done = Callable[[Any, BaseException | None], None]

_STOP = object()


class Lane:
    """A thread that runs submitted jobs in order.

    :param name: thread name (shows in stack dumps).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopped = False
        self.busy = False
        self._thread = self._spawn()

    def _spawn(self) -> threading.Thread:
        t = threading.Thread(target=self._loop, name=self.name, daemon=True)
        t.start()
        return t

    @property
    def alive(self) -> bool:
        """The lane's thread runs (false once stopped, or after it died)."""
        return self._thread.is_alive()

    def submit(self, job: Job, done: Done) -> None:
        """Run ``job()`` on the lane, then ``done(result, error)`` on the lane's thread."""
        self.busy = True
        self._q.put((job, done))

    def stop(self, wait: bool = True) -> None:
        """Finish the queued jobs, then end the thread."""
        self._stopped = True
        self._q.put(_STOP)
        if wait:
            self._thread.join(timeout=30)

    def revive(self) -> bool:
        """Start a new thread for a lane whose thread died (not one that was stopped); it takes
        the jobs still queued. True if it did."""
        if self._stopped or self._thread.is_alive():
            return False
        self.busy = False
        self._thread = self._spawn()
        return True

    def _loop(self) -> None:
        try:
            self._serve()
        except LaneKilled:  # an injected crash: end as a crashed thread does, without the noise
            log.warning("lane %s: thread killed mid-job", self.name)

    def _serve(self) -> None:
        while True:
            item = self._q.get()
            if item is _STOP:
                return
            job, done = item
            try:
                result, err = job(), None
            except Exception as e:  # handed to the owner: a lane never dies of a job's error
                result, err = None, e
            self.busy = False
            done(result, err)
