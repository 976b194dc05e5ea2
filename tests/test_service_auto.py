"""``scheduler = "auto"`` through a real ``rlsched serve`` child: the recogniser is read from
``recogniser_model`` (a bad one exits 2 naming the key), the service calibrates auto's
interference-aware candidates as it does ``iawp``, and once its window of tasks has arrived
``/v1/models`` shows the pair it chose and runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from experiments.benchmarks.service_process import ROOT, ServiceProcess, free_port, write_config
from rlsched.policies.case_features import FEATURES
from rlsched.policies.recogniser import Recogniser
from runtime.service.config import load_service_config
from runtime.service.models import build_scheduler

TOKENS = {"ops": "tok-ops"}
H = {"Authorization": "Bearer tok-ops"}
TOP = 'calibration_apps = ["video_synopsis"]\ncalibration_budget_s = 120\n'
F = len(FEATURES)


def _recogniser(folder: Path) -> Path:
    """Every training case says ``mct+iawp-pass`` beats the default ``mct+iawp`` by far."""
    rows = np.arange(2 * F, dtype=float).reshape(2, F)
    scores = np.log(np.array([[0.5, 1.0, 0.6], [0.5, 1.0, 0.6]]))
    pairs = ("mct+iawp", "mct+iawp-pass", "mct+speedup")
    r = Recogniser(pairs, pairs[0], 12, 2, 0.0, rows.mean(axis=0), np.ones(F), rows, scores, ("a", "b"))
    return r.save(folder / "rec")


def _models(s: ServiceProcess) -> dict[str, Any]:
    return dict(httpx.get(f"{s.url}/v1/models", headers=H, timeout=30).json())


def test_auto_serves_the_pair_it_recognises(tmp_path: Path) -> None:
    rec = _recogniser(tmp_path)
    port = free_port()
    top = TOP + f'recogniser_model = "{rec}"\n'
    s = ServiceProcess(write_config(tmp_path, port, TOKENS, {"ops": "admin = true"}, top, "auto"), port)
    s.start()
    try:
        m = _models(s)
        assert m["auto"]["running"] == "mct+iawp" and m["auto"]["choice"] is None, m["auto"]
        assert m["models"]["recogniser"]["source"] == str(rec), m["models"]
        with httpx.Client(timeout=30) as c:
            body = [{"app": "video_synopsis", "stream": k % 4, "chunk": k} for k in range(16)]
            r = c.post(f"{s.url}/v1/tasks", json=body, headers=H)
            assert r.status_code == 201, r.text
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and _models(s)["auto"]["choice"] is None:
            time.sleep(0.25)
        m = _models(s)
        assert m["auto"]["choice"]["pair"] == "mct+iawp-pass" and m["auto"]["running"] == "mct+iawp-pass", m[
            "auto"
        ]
        assert set(m["auto"]["choice"]["features"]) == set(FEATURES)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(
            v["state"] == "calibrated" for v in (_models(s)["calibration"] or {"x": {"state": ""}}).values()
        ):
            time.sleep(0.25)
        assert _models(s)["calibration"], "auto's interference-aware candidates were never calibrated"
        assert _models(s)["placer"] == "auto"
        assert httpx.get(f"{s.url}/v1/cluster", headers=H, timeout=30).json()["scheduler"] == "auto"
        for spec in ("mct+speedup", "auto"):  # an admin's switch back to auto takes the configured recogniser
            r = httpx.put(f"{s.url}/v1/admin/scheduler", json={"scheduler": spec}, headers=H, timeout=30)
            assert r.status_code == 200 and r.json() == {"scheduler": spec}, r.text
        m = _models(s)
        assert m["auto"]["candidates"] == ["mct+iawp", "mct+iawp-pass", "mct+speedup"], m["auto"]
    finally:
        s.stop()


def test_a_bad_recogniser_or_one_without_auto_exits_2_naming_the_key(tmp_path: Path) -> None:
    for name, scheduler, value in (("missing", "auto", "no/such/rec"), ("other", "mct+iawp", "rec")):
        folder = tmp_path / name
        folder.mkdir()
        _recogniser(folder)
        config = write_config(folder, free_port(), TOKENS, None, f'recogniser_model = "{value}"\n', scheduler)
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(config)]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "recogniser_model" in lines[0], (name, r.stderr)


def test_auto_takes_the_services_fallback_line_on_each_of_its_predicting_placers(tmp_path: Path) -> None:
    rec = _recogniser(tmp_path)
    config = write_config(
        tmp_path,
        free_port(),
        TOKENS,
        None,
        f'recogniser_model = "{rec}"\nprediction_fallback = 0.4\n',
        "auto",
    )
    cfg = load_service_config(config)
    sched, versions = build_scheduler(
        cfg.scheduler,
        None,
        None,
        cfg.source,
        cfg.active_profiling,
        cfg.prediction_fallback,
        cfg.recogniser_model,
    )
    placers = sched.placer.board.placers  # type: ignore[attr-defined]
    assert placers["iawp"].fallback == 0.4 and placers["iawp-pass"].fallback == 0.4
    assert [v.role for v in versions] == ["recogniser"]
    meta = json.loads((rec / "meta.json").read_text())
    assert versions[0].sha256 == meta["files"]["recogniser.json"]
