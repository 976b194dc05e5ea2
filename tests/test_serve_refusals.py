"""``rlsched serve`` refuses a config it cannot run: exit 2 and one line on stderr that names the
bad key (a missing or mismatched model, a corrupt checkpoint, a learning or profiling setting its
scheduler cannot take), before it serves anything.

No service runs in these tests and nothing in them is paced against the clock, so they run in
``make test``'s parallel pass; the tests of a running service are serial (``tests/conftest.py``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from experiments.benchmarks.service_process import ROOT, free_port, write_config
from models import PRETRAINED_LDWP
from runtime.service.config import load_service_config
from runtime.service.models import build_scheduler
from tests.conftest import toy_recogniser

TOKENS = {"ops": "tok-ops"}


def _serve_exit(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(config), *flags]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("scheduler", "flags", "key"),
    [
        ("ldwp+iawp", ("--selector-model", "no/such/run"), "selector_model"),
        ("mct+iawp", ("--selector-model", str(PRETRAINED_LDWP)), "selector_model"),
        ("ldwp+iawp-rl", ("--placer-model", "no/such/run"), "placer_model"),
        ("mct+mlsm", ("--interference-model", "no/such/model"), "interference_model"),
        ("mct+iawp", ("--interference-model", "no/such/model"), "interference_model"),
    ],
)
def test_a_missing_or_mismatched_model_exits_2_naming_its_key(
    tmp_path: Path, scheduler: str, flags: tuple[str, ...], key: str
) -> None:
    config = write_config(tmp_path, free_port(), TOKENS, None, "", scheduler)
    r = _serve_exit(config, *flags)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_selector_learning_without_an_ldwp_selector_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = write_config(tmp_path, free_port(), TOKENS, None, "selector_learning = true\n", "mct+mlsm")
    r = _serve_exit(config)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "selector_learning" in lines[0], r.stderr


def test_active_profiling_reaches_the_placer_and_needs_one_that_calibrates(tmp_path: Path) -> None:
    config = write_config(tmp_path, free_port(), TOKENS, None, "active_profiling = true\n", "mct+iawp")
    cfg = load_service_config(config)
    scheduler, _ = build_scheduler(cfg.scheduler, None, None, cfg.source, cfg.active_profiling)
    assert scheduler.placer.survey_request().active  # the service's calibration runs it (run_survey)
    (tmp_path / "b").mkdir()
    bad = write_config(tmp_path / "b", free_port(), TOKENS, None, "active_profiling = true\n", "mct+mlsm")
    r = _serve_exit(bad)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "active_profiling" in lines[0], r.stderr


def test_prediction_fallback_reaches_the_placer_and_needs_one_that_predicts(tmp_path: Path) -> None:
    """``prediction_fallback`` sets the placer's fallback line (``ldwp+iawp`` and the learned
    ``iawp-rl`` alike); a placer without predictions, or a negative line, exits 2 naming the key."""
    for spec in ("ldwp+iawp", "mct+iawp-rl"):
        (tmp_path / spec).mkdir()
        config = write_config(tmp_path / spec, free_port(), TOKENS, None, "prediction_fallback = 0.5\n", spec)
        cfg = load_service_config(config)
        args = (cfg.source, cfg.active_profiling, cfg.prediction_fallback)
        scheduler, _ = build_scheduler(cfg.scheduler, None, None, *args)
        assert scheduler.placer.fallback == 0.5, spec
    for spec, line in (("mct+mlsm", "0.5"), ("ldwp+iawp", "-1")):
        (tmp_path / line).mkdir(exist_ok=True)
        bad = write_config(
            tmp_path / line, free_port(), TOKENS, None, f"prediction_fallback = {line}\n", spec
        )
        r = _serve_exit(bad)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "prediction_fallback" in lines[0], r.stderr


def test_a_corrupt_checkpoint_exits_2_naming_the_file_and_the_key(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for f in ("meta.json", "weights.pt"):
        (run / f).write_bytes((PRETRAINED_LDWP / f).read_bytes())
    with (run / "weights.pt").open("r+b") as f:  # one byte changed
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    config = write_config(tmp_path, free_port(), TOKENS, None, "", "ldwp+mlsm")
    r = _serve_exit(config, "--selector-model", str(run))
    assert r.returncode == 2, r.stderr
    assert "weights.pt: sha256" in r.stderr and "selector_model" in r.stderr, r.stderr


def test_a_bad_recogniser_or_one_without_auto_exits_2_naming_the_key(tmp_path: Path) -> None:
    for name, scheduler, value in (("missing", "auto", "no/such/rec"), ("other", "mct+iawp", "rec")):
        folder = tmp_path / name
        folder.mkdir()
        toy_recogniser(folder)
        config = write_config(folder, free_port(), TOKENS, None, f'recogniser_model = "{value}"\n', scheduler)
        r = _serve_exit(config)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "recogniser_model" in lines[0], (name, r.stderr)


def test_a_config_it_cannot_read_is_refused_before_the_services_heavy_imports(tmp_path: Path) -> None:
    """An operator's typo costs a fraction of a second: the file is read before torch, scipy and
    the server are imported (they took 2.4 of the 2.7 s such a refusal once took)."""
    bad = tmp_path / "service.toml"
    bad.write_text('port = "x"\n')
    code = (
        "import sys\nfrom experiments.cli import main\n"
        f"rc = main(['serve', '--config', {str(bad)!r}])\n"
        "print(rc, *(m in sys.modules for m in ('torch', 'scipy.stats', 'uvicorn')))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["2", "False", "False", "False"], (r.stdout, r.stderr)
    assert "tenants" in r.stderr and "Traceback" not in r.stderr, r.stderr
