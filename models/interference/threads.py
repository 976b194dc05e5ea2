"""Run torch on one thread: the interference models are too small to gain from more."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch on one thread inside the block, then restore the previous count.

    These models are tiny: each step is a few hundred small ops, and spreading them over
    threads only adds synchronisation — on a busy 2-core machine, fitting with 2 threads took
    ten times as long as with one.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)
