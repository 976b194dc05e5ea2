"""SIGTERM taken as Ctrl-C by the commands that save their work when interrupted (``train``,
``finetune``): ``timeout``, systemd, Kubernetes and Slurm send SIGTERM first, and a run they
stopped saved nothing and said nothing (exit 143), up to one evaluation interval of steps lost."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt("terminated")


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises ``KeyboardInterrupt`` in the main thread, as Ctrl-C
    does (outside the main thread, where no handler can be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
