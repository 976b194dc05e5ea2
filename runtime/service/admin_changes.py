"""What an admin changed at run time, kept in the queue file so that it outlives a restart.

Two changes are kept: the nodes drained (``POST /v1/admin/nodes/{name}/drain``) and a scheduler
switched to (``PUT /v1/admin/scheduler``). Without them a service that died or was restarted
came back giving new tasks to a node taken out for maintenance, and ran the config's scheduler
again, with nothing said.

The config stays the source of what a service runs. A switch is restored only while the config
names the scheduler it was made over: an operator who has edited ``scheduler`` since has the
last word, as a reload that changes it has. A drain of a node the cluster does not have at start (a
Ray node not yet discovered, a node added through the API) waits for a node of that name to
join, until an admin resumes it. Nodes added or removed through the API are not kept: the
cluster file is the membership.

A change the file refuses (full, read-only) still applies in memory: the answer says it would
not outlive a restart (``"kept": false``), and the log says why.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from runtime.service.store import StorageError, TaskStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The queue file's ``meta`` key that holds them.
META_KEY = "admin_changes"


@dataclass
class AdminChanges:
    """An admin's run-time changes.

    :param drained: names of the nodes drained.
    :param scheduler: the scheduler switched to (``None``: the config's runs).
    :param over: the config's ``scheduler`` when the switch was made.
    """

    drained: list[str] = field(default_factory=list)
    scheduler: str | None = None
    over: str | None = None

    def restorable_switch(self, config_scheduler: str) -> str | None:
        """The switch to restore under a config naming ``config_scheduler`` (``None``: none)."""
        return self.scheduler if self.scheduler is not None and self.over == config_scheduler else None


def load(store: TaskStore) -> AdminChanges:
    """The changes kept in ``store`` (none if the value is unreadable: said in the log)."""
    text = store.meta(META_KEY)
    if text is None:
        return AdminChanges()
    try:
        doc = json.loads(text)
        drained, sched, over = doc["drained"], doc["scheduler"], doc["over"]
        if not (isinstance(drained, list) and all(isinstance(n, str) for n in drained)):
            raise TypeError("drained: expected a list of node names")
        if not all(v is None or isinstance(v, str) for v in (sched, over)):
            raise TypeError("scheduler, over: expected names")
    except (ValueError, KeyError, TypeError) as e:
        log.warning("rlsched serve: an admin's kept changes are unreadable (%s); none restored", e)
        return AdminChanges()
    return AdminChanges(list(drained), sched, over)


def save(store: TaskStore, changes: AdminChanges) -> bool:
    """Keep ``changes`` in ``store``; False (and a warning) if the file takes no writes."""
    doc = {"drained": sorted(changes.drained), "scheduler": changes.scheduler, "over": changes.over}
    try:
        store.set_meta(META_KEY, json.dumps(doc))
    except StorageError as e:
        log.warning("rlsched serve: an admin's change applies now but will not outlive a restart: %s", e)
        return False
    return True


class AdminKeeper:
    """A service's kept changes: restored at start, written on each change, one at a time (two
    drains at once must not each write the set as it saw it, the later dropping the other's).

    :param store: the service's queue.
    """

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self.changes = load(store)
        self.lock = threading.Lock()
        #: Drained nodes not in the cluster: drained when a node of the name joins.
        self.pending: set[str] = set()

    def restore_switch(self, configured: str, build: Callable[[str], T]) -> T | None:
        """The scheduler an admin switched to, built by ``build``, while the config names the one
        it was switched from (``configured``); else ``None``, and the switch is forgotten."""
        c = self.changes
        if c.scheduler is None:
            return None
        spec = c.restorable_switch(configured)
        if spec is None:
            self.forget_switch(configured)
            return None
        try:
            sched = build(spec)
        except ValueError as e:
            log.warning("rlsched serve: an admin's switch to %s is forgotten: %s", spec, e)
            self.switched(None, None)
            return None
        log.info("rlsched serve: scheduler %s, as an admin switched it before the restart", spec)
        return sched

    def restore_drains(self, live_index: Callable[[str], int], closed: set[int]) -> None:
        """Add to ``closed`` the row of each node an admin drained (``live_index`` finds it, or
        raises :class:`~runtime.service.nodes.UnknownNode`, a :class:`ValueError`)."""
        for name in self.changes.drained:
            try:
                closed.add(live_index(name))
                log.warning("rlsched serve: node %s stays drained, as an admin left it", name)
            except ValueError:
                self.pending.add(name)
                log.warning(
                    "rlsched serve: drained node %s is not in the cluster: it is drained if it joins "
                    "(rlsched resume %s forgets it)",
                    name,
                    name,
                )

    def joined(self, name: str, row: int, closed: set[int]) -> None:
        """A node joined: drain its ``row`` if an admin drained a node of that name."""
        with self.lock:
            if name in self.pending:
                self.pending.discard(name)
                closed.add(row)
                log.warning("rlsched serve: node %s joined: drained, as an admin left it", name)

    def forget_pending(self, name: str) -> bool:
        """Forget the drain waiting for ``name`` to join (lock held); False if there was none."""
        if name not in self.pending:
            return False
        self.pending.discard(name)
        return True

    def drained(self, names: Iterable[str]) -> bool:
        """Keep ``names``, and the drains waiting for their nodes, as the nodes drained now;
        whether the file took them."""
        self.changes.drained = sorted(set(names) | self.pending)
        return save(self.store, self.changes)

    def forget_switch(self, configured: str) -> None:
        """Forget an admin's switch, if one is kept: the config names ``configured`` now."""
        c = self.changes
        if c.scheduler is None:
            return
        log.warning(
            "rlsched serve: an admin's switch to %s (over %s) is forgotten: the config names %s now",
            c.scheduler,
            c.over,
            configured,
        )
        self.switched(None, None)

    def switched(self, spec: str | None, over: str | None) -> bool:
        """Keep a switch to ``spec`` made over the config's ``over`` (``None``: the config's
        scheduler runs); whether the file took it."""
        self.changes.scheduler, self.changes.over = spec, over
        return save(self.store, self.changes)
