"""The ranges of a task's fields that the API accepts, shared with the ``rlsched submit`` flags
(which check them before anything is sent) without importing the server."""

from __future__ import annotations

MAX_STREAM = 1_000_000
MAX_CHUNK = 1_000_000_000
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
MAX_DEADLINE_S = 86_400 * 365
#: Task ids are SQLite rowids.
MAX_ID = 2**63 - 1
