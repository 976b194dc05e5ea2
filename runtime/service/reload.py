"""Changing a running service's configuration without a restart (``SIGHUP``, ``rlsched reload``).

The service re-reads its config file (and applies its command-line flags over it again, as at
start). The keys in :data:`RELOADABLE` take effect at once: tenants (a new token, a tenant added,
removed or given other limits), the scheduler (as ``PUT /v1/admin/scheduler`` would switch it),
the queue's bound, the retention of finished tasks, the log's level and format, rebalancing; so
does a renewed TLS certificate in the same files (:mod:`runtime.service.tls_reload`). Every other
key (where it listens, the TLS files' paths, the queue file, the cluster, the models, what learns)
stays as it started: a reload that finds one changed applies the rest and says which keys wait for
a restart, every time, until the service restarts (as PostgreSQL's ``pending_restart``). A file
that does not load changes nothing. A dry run (``rlsched reload --dry-run``) says what a reload
would do, and does nothing.

A tenant removed from the file can no longer authenticate; tasks it had queued or running still
run, under its last limits (the service accepted them).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from runtime.service.config import ServiceConfig, Tenant
from runtime.service.metrics import ServiceMetrics

log = logging.getLogger(__name__)

#: Keys a reload applies to the running service; a change to any other waits for a restart.
RELOADABLE = (
    "tenants",
    "queue_bound",
    "finished_retention_s",
    "log_level",
    "log_format",
    "rebalance",
    "scheduler",
)
#: Fields that are not keys of the file.
_NOT_KEYS = ("source", "extra")


class ReloadRefused(Exception):
    """A reload that changed nothing because part of it would fail; the message says why."""


@dataclass(frozen=True)
class ReloadOutcome:
    """What a reload did.

    :param source: the config file re-read.
    :param applied: the changes now in effect, one line each (``queue_bound: 100000 -> 500``).
    :param needs_restart: changed keys the running service keeps until it restarts.
    :param dry_run: nothing was applied: ``applied`` is what a reload would apply.
    """

    source: str
    applied: tuple[str, ...]
    needs_restart: tuple[str, ...]
    dry_run: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "config": self.source,
            "dry_run": self.dry_run,
            "applied": list(self.applied),
            "needs_restart": list(self.needs_restart),
        }

    def text(self) -> str:
        """One line for the log."""
        done = "; ".join(self.applied) if self.applied else "no change applied"
        out = f"rlsched serve: reloaded {self.source}: {done}"
        if self.needs_restart:
            out += f"; needs a restart to change: {'; '.join(self.needs_restart)}"
        return out


def changes(running: ServiceConfig, new: ServiceConfig) -> tuple[list[str], list[str]]:
    """The differences of ``new`` from ``running``: (reloadable ones, ones that need a restart)."""
    applied: list[str] = []
    pending: list[str] = []
    for f in dataclasses.fields(ServiceConfig):
        if f.name in _NOT_KEYS:
            continue
        a, b = getattr(running, f.name), getattr(new, f.name)
        if a == b:
            continue
        if f.name == "tenants":
            applied.extend(tenant_changes(a, b))
        elif f.name == "canary":  # one key of the file per field of the rule
            pending.extend(_field_changes(a, b, "canary_"))
        else:
            (applied if f.name in RELOADABLE else pending).append(_moved(f.name, a, b))
    return applied, pending


def tenant_changes(old: tuple[Tenant, ...], new: tuple[Tenant, ...]) -> list[str]:
    """Tenants added, removed and changed (a token is said to change, never shown)."""
    was = {t.name: t for t in old}
    now = {t.name: t for t in new}
    out = [f"tenant {n} added" for n in now if n not in was]
    out += [f"tenant {n} removed (its accepted tasks still run)" for n in was if n not in now]
    for n in now.keys() & was.keys():
        diffs = [d for d in _field_changes(was[n], now[n]) if "token" not in d]
        if was[n].digests != now[n].digests:
            diffs.insert(0, _tokens(was[n].digests, now[n].digests))
        if diffs:
            out.append(f"tenant {n}: {', '.join(diffs)}")
    return sorted(out)


def _tokens(was: tuple[str, ...], now: tuple[str, ...]) -> str:
    """How a tenant's tokens changed (a digest is never shown)."""
    if len(was) == len(now) == 1:
        return "new token"
    return f"tokens: {len(set(now) - set(was))} added, {len(set(was) - set(now))} removed"


def _field_changes(a: Any, b: Any, prefix: str = "") -> list[str]:
    """``KEY: OLD -> NEW`` for each field of dataclass ``a`` that differs in ``b``."""
    return [
        _moved(prefix + f.name, getattr(a, f.name), getattr(b, f.name))
        for f in dataclasses.fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def _moved(key: str, a: Any, b: Any) -> str:
    return f"{key}: {_shown(a)} -> {_shown(b)}"


def _shown(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


class Reloadable(Protocol):
    """What a reload needs of a running service (:class:`runtime.service.service.Service`)."""

    config: ServiceConfig
    metrics: ServiceMetrics

    def apply_config(self, config: ServiceConfig) -> None: ...

    def scheduler_for(self, spec: str) -> Any: ...

    def set_scheduler(self, spec: str, sched: Any = None) -> str: ...

    def admin_switch(self) -> str | None: ...


class Reloader:
    """Re-reads the config and applies what can change to a running service.

    :param service: the running service.
    :param reread: loads the config as the service was started with it (file, then flags).
    """

    def __init__(
        self,
        service: Reloadable,
        reread: Callable[[], ServiceConfig],
        certificate: Callable[..., str | None] | None = None,
    ) -> None:
        self.service = service
        self.reread = reread
        #: Loads a renewed TLS certificate (:mod:`runtime.service.tls_reload`), if the service
        #: serves HTTPS.
        self.certificate = certificate
        self._lock = threading.Lock()  # SIGHUP and the API may ask at once

    def reload(self, dry_run: bool = False) -> ReloadOutcome:
        """Re-read and apply.

        :param dry_run: only say what a reload would apply and what would wait for a restart.
        :raises ReloadRefused: the file does not load, its new scheduler does not build, or a
            renewed certificate does not load (nothing changed).
        """
        from rlsched.errors import InputError

        metrics = self.service.metrics
        with self._lock:
            running = self.service.config
            try:
                new = self.reread()
                # Everything that can fail, before anything changes; and what a start with this
                # file would refuse, though it waits for a restart (a model folder that is not
                # there): the next restart would otherwise fail where this reload said "reloaded".
                from runtime.service.preflight import check_service_config

                check_service_config(new)
                renewed = self.certificate(load=False) if self.certificate is not None else None
                sched = self._scheduler(running, new)
            except (InputError, ValueError) as e:
                if not dry_run:
                    metrics.reloads.labels("refused").inc()
                raise ReloadRefused(f"nothing changed: {e}") from None
            applied, pending = changes(running, new)
            if not any(t.admin for t in new.tenants) and any(t.admin for t in running.tenants):
                # Applied all the same (the file is the operator's), but said: after it no token
                # can reload, drain or switch; only SIGHUP or a restart reads the file again.
                applied.append("no tenant has the admin role now: only SIGHUP or a restart reloads again")
            switch = self.service.admin_switch()
            if sched is not None and switch is not None:
                # What runs is the admin's switch, not the file's old scheduler: say so, and that
                # the file's new one ends it (as a restart with an edited file would).
                was = _moved("scheduler", running.scheduler, new.scheduler)
                applied[applied.index(was)] = (
                    f"scheduler: {switch} (an admin's switch over {running.scheduler}, forgotten) -> "
                    f"{new.scheduler}"
                )
            if renewed is not None:
                applied.append(renewed)
            if dry_run:
                return ReloadOutcome(new.source, tuple(applied), tuple(pending), dry_run=True)
            if self.certificate is not None:
                # First of the changes: the files may have changed again since the check, and a
                # pair that then fails must still leave the reload with nothing changed.
                try:
                    self.certificate()
                except InputError as e:
                    metrics.reloads.labels("refused").inc()
                    raise ReloadRefused(f"nothing changed: {e}") from None
            if sched is not None:
                self.service.set_scheduler(new.scheduler, sched)
            self.service.apply_config(
                dataclasses.replace(running, **{k: getattr(new, k) for k in RELOADABLE})
            )
            metrics.reloads.labels("applied").inc()
            metrics.pending_restart.set(len(pending))
            return ReloadOutcome(new.source, tuple(applied), tuple(pending))

    def _scheduler(self, running: ServiceConfig, new: ServiceConfig) -> Any:
        """The file's new scheduler, built (its models loaded), or ``None`` if it did not change.

        :raises ValueError: it does not build, or ``selector_learning`` needs an ``ldwp`` selector.
        """
        from rlsched.errors import InputError

        if new.scheduler == running.scheduler:
            return None
        try:
            return self.service.scheduler_for(new.scheduler)
        except ValueError as e:  # named as every other refused key is: the file and the key
            raise InputError(
                new.source, "scheduler", "a scheduler that builds", new.scheduler, hint=str(e)
            ) from None
