"""``rlsched serve --backend ray`` on a real two-node Ray cluster started on this machine: a node
agent killed mid-task (its Ray node removed) and its tasks completed elsewhere exactly once; a
Ray node that joins later is picked up and takes tasks. The service is a child process that
joins the Ray cluster by its address, as an operator runs it."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rlsched.hardware import gpu_model
from runtime.kernels import make_task_data, output_digest, run_task_numpy
from runtime.service.store_audit import exactly_once_violations
from tests.service_helpers import Server, cluster_nodes, free_port, headers, service_config, wait_done

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402  (after the importorskip)

MB = 1 << 20


@pytest.fixture
def ray_cluster() -> Iterator[Any]:
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RLSCHED_BACKEND")}
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a local test cluster needs no tokens
    os.environ["RLSCHED_BACKEND"] = "numpy"  # the agents never look for a GPU
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * MB, "include_dashboard": False},
    )
    try:
        cluster.add_node(num_cpus=1, object_store_memory=80 * MB)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _cluster_file(folder: Path) -> Path:
    # GPUs 100x slower than a T4: a task runs for about a second, so tasks are surely in
    # flight on the node that dies.
    speed = gpu_model("T4").fp32_tflops / 100
    p = folder / "live.toml"
    p.write_text(
        "".join(
            f'[[nodes]]\nname = "{n}"\ncpu_cores = 1\n[[nodes.gpus]]\nmodel = "T4"\nspeed = {speed}\n\n'
            for n in ("a", "b")
        )
    )
    return p


def test_ray_node_killed_mid_task_and_a_joining_node_picked_up(tmp_path: Path, ray_cluster: Any) -> None:
    _more_nodes_than_ray_has_is_unavailable(tmp_path, ray_cluster.address)  # one Ray cluster for both
    port = free_port()
    top = f'backend = "ray"\nray_address = "{ray_cluster.address}"\ncluster = "{_cluster_file(tmp_path)}"\n'
    top += 'log_format = "json"\n'  # Ray's own lines too (they were plain text among the JSON)
    # Round robin: both nodes surely get tasks at once (stage 1 on Ray sees a node's backlog only
    # when its agent reports, so a burst's decisions all see the same idle nodes).
    cfg = service_config(tmp_path, port, {"video": "admin = true\n"}, top=top, scheduler="round-robin+mlsm")
    s = Server(cfg, port)
    s.start()
    try:
        workers = [n for n in ray_cluster.worker_nodes]
        doomed = workers[0]
        nodes = cluster_nodes(s)
        on_doomed = next(n["name"] for n in nodes if n["ray_node_id"] == doomed.node_id)
        body = [{"app": "intrusion_detection", "stream": k % 4, "chunk": k} for k in range(16)]
        r = httpx.post(f"{s.url}/v1/tasks", json=body, headers=headers("video"), timeout=30)
        ids = [t["id"] for t in r.json()]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            running = httpx.get(f"{s.url}/v1/tasks?state=running", headers=headers("video")).json()["tasks"]
            busy = sum(t["node"] == on_doomed for t in running)
            if busy >= 2:
                break
            time.sleep(0.05)
        assert busy >= 2, running
        ray_cluster.remove_node(doomed)
        rows = wait_done(s, "video", ids, timeout=120)
        assert {r["state"] for r in rows} == {"done"}, [r["error"] for r in rows]
        # Nodes send the outputs' digest, not the arrays; it is what the API returns.
        first = make_task_data("intrusion_detection", 0, 0)
        arrays = run_task_numpy(first)  # its inputs, and every stage's outputs
        expected = output_digest({k: v for k, v in arrays.items() if k not in first.inputs})
        assert rows[0]["result"] == expected
        again = [r for r in rows if r["attempt"] > 1]
        assert len(again) >= 2 and all(r["node"] != on_doomed for r in again)
        db = sqlite3.connect(tmp_path / "queue.db")
        assert exactly_once_violations(db) == []
        db.close()
        assert 'rlsched_tasks_requeued_total{tenant="video"}' in httpx.get(f"{s.url}/metrics").text

        # A Ray node joins: the service gives it an agent (a T4, from its accelerator label).
        fresh = ray_cluster.add_node(num_cpus=1, num_gpus=1, resources={"accelerator_type:T4": 1})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            joined = [n for n in cluster_nodes(s) if n["ray_node_id"] == fresh.node_id and n["alive"]]
            if joined:
                break
            time.sleep(0.25)
        assert joined and [g["model"] for g in joined[0]["gpus"]] == ["T4"]
        # The log says both (it said neither: only Ray's own lines told of the lost node).
        said = s.log.read_text()
        lines = [json.loads(x) for x in said.splitlines()]  # every line one JSON object
        assert any(x["logger"].startswith("ray.") for x in lines), said
        assert f"node {on_doomed} lost (Ray node {doomed.node_id[:12]} gone)" in said, said
        assert f"joined as {joined[0]['name']} (T4)" in said, said
        survivor = next(
            n["name"] for n in cluster_nodes(s) if n["alive"] and n["ray_node_id"] != fresh.node_id
        )
        r = httpx.post(f"{s.url}/v1/admin/nodes/{survivor}/drain", headers=headers("video"), timeout=30)
        assert r.status_code == 200
        body = [{"app": "matmul", "chunk": k} for k in range(4)]
        ids = [t["id"] for t in httpx.post(f"{s.url}/v1/tasks", json=body, headers=headers("video")).json()]
        rows = wait_done(s, "video", ids, timeout=60)
        assert {r["node"] for r in rows} == {joined[0]["name"]} and {r["state"] for r in rows} == {"done"}

        # An admin removes it: discovery (every 2 s) leaves its Ray node alone, and an admin may
        # put a node there again (its Ray node stayed "taken" for ever: 409 until a restart).
        name = joined[0]["name"]
        assert httpx.delete(f"{s.url}/v1/admin/nodes/{name}", headers=headers("video")).status_code == 200
        time.sleep(5)
        assert not [n for n in cluster_nodes(s) if n["ray_node_id"] == fresh.node_id and n["alive"]]
        node = {"name": "again", "cpu_cores": 1, "gpus": [{"model": "T4"}], "ray_node_id": fresh.node_id}
        r = httpx.post(f"{s.url}/v1/admin/nodes", json=node, headers=headers("video"), timeout=90)
        assert r.status_code == 201, r.text
        back = [n for n in cluster_nodes(s) if n["ray_node_id"] == fresh.node_id and n["alive"]]
        assert [n["name"] for n in back] == ["again"]
    finally:
        s.stop()


def _more_nodes_than_ray_has_is_unavailable(tmp_path: Path, address: str) -> None:
    """Three cluster-file nodes on a two-node Ray cluster: "internal error ... (a bug)", exit 1."""
    import subprocess
    import sys

    from experiments.benchmarks.service_process import ROOT

    folder = tmp_path / "three"
    folder.mkdir()
    nodes = _cluster_file(folder).read_text() + '[[nodes]]\nname = "c"\ncpu_cores = 1\n'
    (folder / "live.toml").write_text(nodes)
    top = f'backend = "ray"\nray_address = "{address}"\ncluster = "{folder / "live.toml"}"\n'
    cfg = service_config(folder, free_port(), {"video": ""}, top=top)
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(cfg)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    said = f"unavailable: ray_address {address}: the live cluster has 3 nodes but Ray has 2 alive"
    assert r.returncode == 4 and said in r.stderr, r.stderr
