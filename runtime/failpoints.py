"""Failpoints: faults a test or the chaos campaign switches on in a real service process.

Off unless the environment variable ``RLSCHED_FAILPOINTS`` names them (read once, at import), so
a production process pays one dictionary lookup at each point. The format is a ``;``-separated
list of ``name=value``:

- ``lane-dies=P`` — each kernel kills the lane thread that runs it, mid-kernel, with
  probability ``P`` (the thread ends without reporting, as a thread that crashes would; the node
  agent's watchdog must notice and run the subtask again).
- ``store-full=A-B`` — from ``A`` to ``B`` seconds after the queue file was opened, SQLite's page
  cap is the file's current size, so every write that needs a page fails with a real
  ``SQLITE_FULL``; after ``B`` the cap is lifted ("space returns").
- ``store-readonly=A-B`` — from ``A`` to ``B`` seconds after opening, the queue's connection is
  read-only (``PRAGMA query_only``): every write fails with ``SQLITE_READONLY``.
- ``state-full=N`` — the first ``N`` checkpoints of the service's learned state fail as a full
  disk fails them (``OSError`` ``ENOSPC``); the service must keep scheduling, say so
  (``/v1/models``, ``/metrics``) and checkpoint again once space returns.
- ``submit-late=S`` — the first submission's answer is held ``S`` seconds after its tasks were
  queued; past ``request_timeout_s`` the client gets 503 for a submission that was applied, as
  when an answer is lost (a client must find its tasks again by their idempotency keys).
- ``late-result=S`` — local backend: ``S`` seconds after a removed node's tasks were reported
  lost, each reports a success too, as a partitioned node that finished anyway would (the
  service must refuse it: the task's retry holds it by then).

``RLSCHED_FAILPOINTS_SEED`` seeds the random draws (default 0), so a campaign can be repeated.
"""

from __future__ import annotations

import os
import random
import threading

ENV = "RLSCHED_FAILPOINTS"
NAMES = ("lane-dies", "store-full", "store-readonly", "state-full", "late-result", "submit-late")


class LaneKilled(BaseException):
    """Raised inside a lane thread by ``lane-dies``: not an ``Exception``, so nothing on the way
    catches it and the thread ends, as a crashed thread would."""


def parse(spec: str) -> dict[str, str]:
    """``name=value;...`` as a dict.

    :raises ValueError: an unknown failpoint or an entry without ``=``.
    """
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, eq, value = part.partition("=")
        if not eq or name not in NAMES:
            raise ValueError(f"{ENV}: {part!r}: expected NAME=VALUE with NAME one of {', '.join(NAMES)}")
        out[name] = value
    return out


_ACTIVE = parse(os.environ.get(ENV, ""))
_RNG = random.Random(int(os.environ.get(f"{ENV}_SEED", "0")))
_RNG_LOCK = threading.Lock()


def value(name: str) -> str | None:
    """The value of failpoint ``name`` (``None``: off)."""
    return _ACTIVE.get(name)


_TAKEN: set[str] = set()


def first(name: str) -> str | None:
    """The value of failpoint ``name`` the first time it is asked for; ``None`` after (and when
    it is off)."""
    with _RNG_LOCK:
        if name in _TAKEN or name not in _ACTIVE:
            return None
        _TAKEN.add(name)
        return _ACTIVE[name]


def chance(name: str) -> bool:
    """True with the probability failpoint ``name`` gives (False when it is off)."""
    v = _ACTIVE.get(name)
    if v is None:
        return False
    with _RNG_LOCK:
        return _RNG.random() < float(v)


def window(name: str) -> tuple[float, float] | None:
    """The ``(start, end)`` seconds failpoint ``name`` gives (``None``: off)."""
    v = _ACTIVE.get(name)
    if v is None:
        return None
    a, _, b = v.partition("-")
    return float(a), float(b)


def set_for_test(spec: str) -> None:
    """Replace the active failpoints (in-process tests; a service reads the environment)."""
    global _ACTIVE
    _ACTIVE = parse(spec)
    _TAKEN.clear()
