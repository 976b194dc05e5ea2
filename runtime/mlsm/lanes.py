"""Worker lanes: one host thread per GPU stream or CPU core, fed through a queue.

A lane runs one job at a time, like a CUDA stream runs its kernels in order; the node agent
decides what each lane runs. Lanes are daemon threads so an interrupted run never hangs the
interpreter, and every job's exception is handed to its callback rather than killing the lane.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

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
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.busy = False
        self._thread.start()

    def submit(self, job: Job, done: Done) -> None:
        """Run ``job()`` on the lane, then ``done(result, error)`` on the lane's thread."""
        self.busy = True
        self._q.put((job, done))

    def stop(self, wait: bool = True) -> None:
        """Finish the queued jobs, then end the thread."""
        self._q.put(_STOP)
        if wait:
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is _STOP:
                return
            job, done = item
            try:
                result, err = job(), None
            except BaseException as e:  # handed to the owner: a lane never dies of a job
                result, err = None, e
            self.busy = False
            done(result, err)
