"""An admin's run-time changes in the queue file (runtime/service/admin_changes.py): kept, read
back, refused whole when the file takes no writes, and never trusted when unreadable. The
service's use of them (a kill -9 and restarts) is in test_service_admin.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime import failpoints
from runtime.service import admin_changes
from runtime.service.admin_changes import META_KEY, AdminChanges
from runtime.service.store import TaskStore


@pytest.fixture
def no_faults() -> Iterator[None]:
    failpoints.set_for_test("")
    yield
    failpoints.set_for_test("")


def test_kept_changes_read_back_in_a_new_process_s_store(tmp_path: Path, no_faults: None) -> None:
    store = TaskStore(tmp_path / "q.db")
    assert admin_changes.load(store) == AdminChanges()
    assert admin_changes.save(store, AdminChanges(["volta", "ampere"], "round-robin+mlsm", "mct+mlsm"))
    store.close()
    store = TaskStore(tmp_path / "q.db")
    try:
        assert admin_changes.load(store) == AdminChanges(["ampere", "volta"], "round-robin+mlsm", "mct+mlsm")
    finally:
        store.close()


def test_a_switch_is_restored_only_under_the_config_it_was_made_over() -> None:
    c = AdminChanges([], "round-robin+mlsm", "mct+mlsm")
    assert c.restorable_switch("mct+mlsm") == "round-robin+mlsm"
    assert c.restorable_switch("mct+iawp") is None  # the operator edited the config since
    assert AdminChanges().restorable_switch("mct+mlsm") is None


@pytest.mark.parametrize(
    "text",
    ["not json", '{"drained": "volta", "scheduler": null, "over": null}', '{"drained": []}', "[1]"],
)
def test_an_unreadable_value_restores_nothing_and_says_so(
    tmp_path: Path, no_faults: None, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = TaskStore(tmp_path / "q.db")
    try:
        store.set_meta(META_KEY, text)
        with caplog.at_level(logging.WARNING):
            assert admin_changes.load(store) == AdminChanges()
        assert "unreadable" in caplog.text
    finally:
        store.close()


def test_a_file_that_takes_no_writes_keeps_the_last_changes_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failpoints.set_for_test("")
    store = TaskStore(tmp_path / "q.db")
    admin_changes.save(store, AdminChanges(["volta"]))
    store.close()
    failpoints.set_for_test("store-readonly=0-0.5")
    store = TaskStore(tmp_path / "q.db")
    try:
        with caplog.at_level(logging.WARNING):
            assert not admin_changes.save(store, AdminChanges(["volta", "turing"]))
        assert "will not outlive a restart" in caplog.text
        assert admin_changes.load(store) == AdminChanges(["volta"])
        time.sleep(0.6)
        assert admin_changes.save(store, AdminChanges(["turing"]))
        assert admin_changes.load(store) == AdminChanges(["turing"])
    finally:
        store.close()
        failpoints.set_for_test("")


def test_a_service_whose_file_takes_no_writes_still_drains_and_switches_and_says_so(
    tmp_path: Path,
) -> None:
    """The service's answers carry ``kept: false`` when the queue file refuses the write, and the
    change applies all the same (an operator draining a node during a disk-full incident)."""
    from runtime.service.config import ServiceConfig, Tenant, hash_token
    from runtime.service.service import Service

    failpoints.set_for_test("store-readonly=4-60")  # seconds after the queue opens: after the start
    cfg = ServiceConfig(
        tenants=(Tenant("a", hash_token("t")),),
        db=str(tmp_path / "q.db"),
        state_dir=str(tmp_path / "state"),
        scheduler="mct+mlsm",
    )
    svc = Service(cfg)
    try:
        svc.start()
        time.sleep(max(0.0, 4.2 - (time.monotonic() - svc.store._opened)))
        out = svc.drain_node("volta")
        assert out == {"name": "volta", "index": 0, "draining": True, "kept": False}
        assert [n["draining"] for n in svc.cluster_state()["nodes"]] == [True, False]
        assert svc.switch_scheduler("round-robin+mlsm") == {"scheduler": "round-robin+mlsm", "kept": False}
        assert svc.scheduler.name == "round-robin+mlsm"
    finally:
        svc.stop()
        failpoints.set_for_test("")
    store = TaskStore(tmp_path / "q.db")
    try:
        assert admin_changes.load(store) == AdminChanges()  # nothing was written
    finally:
        store.close()
