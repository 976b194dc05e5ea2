"""Model versions of a running service: a candidate stage-1 policy under a canary, promoted or
rolled back by the test of :mod:`runtime.service.canary`, or by an admin.

A candidate is a selector (``SELECTOR``, optionally with an LDWP checkpoint); the placer stays the
service's, so the canary compares stage-1 decisions on the same cluster at the same time. Every
promotion and rollback is logged, counted in ``/metrics`` and kept in the history that
``GET /v1/admin/models`` lists (in memory: a restart ends a canary, and the service runs what its
config names).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from rlsched.errors import InputError
from rlsched.scheduler import TwoStageScheduler
from runtime.service.canary import Canary, CanaryRule
from runtime.service.models import ModelVersion, build_scheduler

log = logging.getLogger(__name__)


class PromotionError(ValueError):
    """A model operation that cannot be done now (no canary, one already running)."""


class Promotion:
    """The incumbent scheduler's versions, the canary, and their history.

    :param rule: the canary's test.
    :param versions: the incumbent's model versions (changed in place on a promotion).
    :param install: makes a selector the incumbent's (called on a promotion).
    :param on_event: called with ``"promoted"`` or ``"rolled_back"`` (metrics).
    """

    def __init__(
        self,
        rule: CanaryRule,
        versions: list[ModelVersion],
        install: Callable[[Any, str], None],
        on_event: Callable[[str], None],
    ) -> None:
        self.rule, self.versions, self.install, self.on_event = rule, versions, install, on_event
        self.canary: Canary | None = None
        self.history: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def start(self, scheduler: TwoStageScheduler, spec: str, selector_model: str | None) -> dict[str, Any]:
        """Start a canary of selector ``spec`` (optionally an LDWP checkpoint).

        :raises PromotionError: a canary already runs.
        :raises InputError: an unknown selector or a bad checkpoint (naming it).
        """
        sel, plus, plc = spec.partition("+")
        placer = getattr(scheduler.placer, "name", None)
        if plus and plc != placer:
            raise InputError("body", "scheduler", f"a selector (the placer stays {placer})", spec)
        try:
            candidate, versions = build_scheduler(sel, selector_model, None, "body")
        except ValueError as e:
            if isinstance(e, InputError):
                raise
            raise InputError("body", "scheduler", "a known selector", sel, hint=str(e)) from None
        version = next((v.sha256 for v in versions if v.role == "selector"), None)
        return self.start_selector(sel, candidate.selector, version)

    def start_selector(self, name: str, selector: Any, version: str | None) -> dict[str, Any]:
        """Start a canary of a selector already built (the online learner's).

        :raises PromotionError: a canary already runs.
        """
        with self._lock:
            if self.canary is not None:
                raise PromotionError(
                    f"a canary of {self.canary.name} is running: promote or roll it back first"
                )
            self.canary = Canary(name, selector, version, self.rule)
            self._note("canary", name, version, "started")
            return self.canary.summary()

    def check(self) -> str | None:
        """Apply the test's verdict, if any (called every feedback tick)."""
        canary = self.canary
        if canary is None:
            return None
        verdict = canary.verdict()
        if verdict == "promote":
            self.promote("its share measured not worse than the incumbent's")
        elif verdict == "rollback":
            self.rollback("its share measured worse than the incumbent's")
        return verdict

    def promote(self, why: str = "by an admin") -> dict[str, Any]:
        """Make the candidate the incumbent.

        :raises PromotionError: no canary runs.
        """
        with self._lock:
            canary = self._end()
            self.install(canary.selector, canary.name)
            self.versions[:] = [v for v in self.versions if v.role != "selector"]
            if canary.version is not None:
                src = "canary"
                self.versions.insert(0, ModelVersion("selector", canary.name, src, canary.version))
            entry = self._note("promoted", canary.name, canary.version, why, canary.summary())
        log.warning("rlsched serve: promoted %s (%s)", canary.name, why)
        self.on_event("promoted")
        return entry

    def rollback(self, why: str = "by an admin") -> dict[str, Any]:
        """End the canary; the incumbent keeps every task.

        :raises PromotionError: no canary runs.
        """
        with self._lock:
            canary = self._end()
            entry = self._note("rolled back", canary.name, canary.version, why, canary.summary())
        log.warning("rlsched serve: rolled back %s (%s)", canary.name, why)
        self.on_event("rolled_back")
        return entry

    def _end(self) -> Canary:
        if self.canary is None:
            raise PromotionError("no canary is running")
        canary, self.canary = self.canary, None
        return canary

    def _note(
        self, event: str, name: str, version: str | None, why: str, measured: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        entry = {"at": time.time(), "event": event, "selector": name, "sha256": version, "why": why}
        if measured is not None:
            entry["measured"] = measured["arms"]
        self.history.append(entry)
        return entry

    def describe(self) -> dict[str, Any]:
        """``GET /v1/admin/models``: the incumbent's versions, the canary, the history."""
        canary = self.canary
        return {
            "incumbent": [vars(v) for v in self.versions],
            "canary": canary.summary() if canary is not None else None,
            "rule": vars(self.rule),
            "history": list(self.history),
        }
