"""What an admin changed at run time, kept in the queue file so that it outlives a restart.

Two changes are kept: the nodes drained (``POST /v1/admin/nodes/{name}/drain``) and a scheduler
switched to (``PUT /v1/admin/scheduler``). Without them a service that died or was restarted
came back giving new tasks to a node taken out for maintenance, and ran the config's scheduler
again, with nothing said.

The config stays the source of what a service runs. A switch is restored only while the config
names the scheduler it was made over: an operator who has edited ``scheduler`` since has the
last word, as a reload that changes it has. A drain is restored only if the cluster still has a
node of that name. Nodes added or removed through the API are not kept: the cluster file is the
membership.

A change the file refuses (full, read-only) still applies in memory: the answer says it would
not outlive a restart (``"kept": false``), and the log says why.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from runtime.service.store import StorageError, TaskStore

log = logging.getLogger(__name__)

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
