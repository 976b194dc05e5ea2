"""``rlsched serve`` refuses a config it cannot run: exit 2 and one line on stderr that names the
bad key (a missing or mismatched model, a corrupt checkpoint, a learning or profiling setting its
scheduler cannot take), before it serves anything.

No service runs in these tests and nothing in them is paced against the clock, so they run in
``make test``'s parallel pass (``tests/conftest.py``).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from experiments.benchmarks.service_process import ROOT, free_port, write_config
from models import PRETRAINED_LDWP
from runtime.service.config import load_service_config
from runtime.service.models import build_scheduler
from tests.conftest import cli_in_a_fresh_interpreter, toy_recogniser

TOKENS = {"ops": "tok-ops"}


def _serve_exit(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "--config", str(config), *flags]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_ray_address_nothing_answers_at_exits_4_and_leaves_no_queue(tmp_path: Path) -> None:
    """Ray retried for minutes at such an address; and a service that could not get its cluster
    left the queue file it had made (a service that cannot start touches nothing)."""
    pytest.importorskip("ray")
    top = 'backend = "ray"\nray_address = "127.0.0.1:1"\n'
    config = write_config(tmp_path, free_port(), TOKENS, None, top)
    r = _serve_exit(config)
    said = "rlsched: unavailable: ray_address 127.0.0.1:1: no Ray cluster answers there"
    assert r.returncode == 4 and said in r.stderr, r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["service.toml"]


@pytest.fixture(params=["silent", "http/1.1"])
def not_ray(request: pytest.FixtureRequest) -> Iterator[int]:
    """A port on 127.0.0.1 where a server that is not Ray listens: one that reads and never
    answers (a Redis on 6379 waits for a command it can parse), one that answers as HTTP/1.1
    does. Yields the port."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            if request.param == "http/1.1":
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for conn in held:
        conn.close()


def test_a_ray_address_where_another_server_listens_exits_4_and_leaves_no_queue(
    tmp_path: Path, not_ray: int
) -> None:
    """``ray.init`` waited for ever at an address where a plain TCP server listens (found by hand,
    2026-12-07); an HTTP server's answer is refused as quickly. A real Ray head passes the same
    probe (the Ray tests: tests/test_service_ray.py, tests/test_runtime_ray.py)."""
    pytest.importorskip("ray")
    top = f'backend = "ray"\nray_address = "127.0.0.1:{not_ray}"\n'
    config = write_config(tmp_path, free_port(), TOKENS, None, top)
    t0 = time.monotonic()
    r = _serve_exit(config)
    said = f"rlsched: unavailable: ray_address 127.0.0.1:{not_ray}: something listens there but does not"
    assert r.returncode == 4 and said in r.stderr, r.stderr
    assert time.monotonic() - t0 < 60
    assert [p.name for p in tmp_path.iterdir()] == ["service.toml"]


@pytest.mark.parametrize("address", ["127.0.0.1", "head:99999", ":6379"])
def test_a_ray_address_of_no_form_ray_takes_exits_2_naming_it_under_check_too(
    tmp_path: Path, address: str
) -> None:
    """``ray.init`` raised "Invalid address format" at start (an internal error, exit 1) after
    ``--check`` had said "ready to serve"."""
    top = f'backend = "ray"\nray_address = "{address}"\n'
    config = write_config(tmp_path, free_port(), TOKENS, None, top)
    said = f"ray_address: expected auto, local, HOST:PORT or ray://HOST:PORT, got '{address}'"
    for flags in (["--check"], []):
        r = _serve_exit(config, *flags)
        assert r.returncode == 2 and said in r.stderr, r.stderr
    (tmp_path / "flag").mkdir()
    plain = write_config(tmp_path / "flag", free_port(), TOKENS, None, 'backend = "ray"\n')
    r = _serve_exit(plain, "--check", "--ray-address", "nope")
    assert r.returncode == 2 and "--ray-address: ray_address: expected auto" in r.stderr, r.stderr
    r = _serve_exit(plain, "--check", "--ray-address", "10.1.2.3:6379")  # says where, joins nothing
    assert r.returncode == 0 and "on the Ray cluster at 10.1.2.3:6379 (not joined by --check)" in r.stdout


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


def test_a_recogniser_without_auto_exits_2_naming_the_key(tmp_path: Path) -> None:
    toy_recogniser(tmp_path)
    config = write_config(tmp_path, free_port(), TOKENS, None, 'recogniser_model = "rec"\n', "mct+iawp")
    r = _serve_exit(config)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "recogniser_model" in lines[0], r.stderr


def _corrupt_checkpoint(folder: Path) -> Path:
    """A copy of the shipped LDWP checkpoint with one byte of its weights changed."""
    folder.mkdir()
    for f in ("meta.json", "weights.pt"):
        (folder / f).write_bytes((PRETRAINED_LDWP / f).read_bytes())
    with (folder / "weights.pt").open("r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    return folder


#: Configs an operator may get wrong, and the key the refusal must name: (scheduler, extra TOML
#: lines, flags, key). ``CORRUPT`` stands for a corrupt checkpoint's folder.
CORRUPT = "<corrupt>"
FAST_REFUSALS = {
    "unreadable": ("mct+iawp", 'port = "x"\n', (), "port"),
    "missing recogniser": ("auto", 'recogniser_model = "no/such/rec"\n', (), "recogniser_model"),
    # A flag's value is blamed on the flag, not on a key the file does not hold.
    "missing selector": (
        "ldwp+iawp",
        "",
        ("--selector-model", "no/such/run"),
        "the checkpoint of --selector-model",
    ),
    "corrupt selector": ("ldwp+mlsm", "", ("--selector-model", CORRUPT), "--selector-model"),
    "selector of mct": (
        "mct+iawp",
        "",
        ("--selector-model", str(PRETRAINED_LDWP)),
        "--selector-model: selector_model: expected a scheduler whose selector is ldwp",
    ),
    "missing placer": ("ldwp+iawp-rl", "", ("--placer-model", "no/such/run"), "--placer-model"),
    "interference of mlsm": (
        "mct+mlsm",
        "",
        ("--interference-model", "no/such/model"),
        "--interference-model: interference_model",
    ),
    "missing interference": (
        "mct+iawp",
        "",
        ("--interference-model", "no/such/model"),
        "--interference-model",
    ),
    "missing cluster": ("mct+iawp", 'cluster = "no-such-live.toml"\n', (), "no-such-live.toml"),
    "tls cert alone by flag": (
        "mct+mlsm",
        "",
        ("--tls-certfile", "/no/cert.pem"),
        "--tls-certfile: tls_keyfile",
    ),
    "host that does not resolve": (
        "mct+mlsm",
        "",
        ("--host", "nosuchhost.invalid"),
        "--host: host: expected a name",
    ),
    "host not of this machine": (
        "mct+mlsm",
        "",
        ("--host", "192.0.2.1"),
        "--host: host: expected an address of this",
    ),
    "db in no folder": ("mct+mlsm", "", ("--db", "/no/such/folder/q.db"), "--db: db: expected a file in an"),
    "db a folder": ("mct+mlsm", "", ("--db", "/"), "--db: db: expected a file (the task queue"),
    "state_dir a file": ("mct+iawp", 'state_dir = "service.toml"\n', (), "state_dir"),
    "state_dir under a file": ("mct+iawp", 'state_dir = "service.toml/state"\n', (), "state_dir"),
}


@pytest.mark.parametrize("case", sorted(FAST_REFUSALS))
def test_a_config_it_cannot_run_is_refused_before_the_services_heavy_imports(
    tmp_path: Path, case: str
) -> None:
    """An operator's typo costs a fraction of a second: the file, its model folders (their files
    against their checksums), the cluster file and ``state_dir`` are checked before torch, scipy
    and the server are imported (they took 2.3-2.8 of the 2.7-3.1 s such a refusal once took),
    and before anything is served."""
    scheduler, extra, flags, key = FAST_REFUSALS[case]
    if extra.startswith("port"):
        config = tmp_path / "service.toml"
        config.write_text(extra)
        key = "tenants"  # the first thing wrong with a file holding one bad line
    else:
        config = write_config(tmp_path, free_port(), TOKENS, None, extra, scheduler)
    flags = tuple(str(_corrupt_checkpoint(tmp_path / "run")) if f == CORRUPT else f for f in flags)
    argv = ["serve", "--config", str(config), *flags]
    rc, loaded, err = cli_in_a_fresh_interpreter(argv, ("torch", "scipy.stats", "uvicorn"))
    assert (rc, loaded) == (2, []), (rc, loaded, err)
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and key in lines[0] and "Traceback" not in err, err
    if case == "corrupt selector":
        assert "weights.pt: sha256" in lines[0], err


def test_a_service_whose_state_dir_it_cannot_write_is_refused_naming_it(tmp_path: Path) -> None:
    """Not only ``rlsched serve``: a service built in code refuses a ``state_dir`` that is a file,
    where it once started and then failed every checkpoint of what it learnt (a warning a minute,
    the learned state lost at the next restart); and the queue it had opened is closed again
    (left open, its lock file's handle is an unraisable ResourceWarning, an error under pytest's
    ``filterwarnings``)."""
    from rlsched.errors import InputError
    from rlsched.policies import parse_scheduler
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.local import LocalCluster
    from runtime.service.config import ServiceConfig, Tenant, hash_token
    from runtime.service.service import Service

    taken = tmp_path / "taken"
    taken.write_text("a file where the state folder should be\n")
    cfg = ServiceConfig(
        tenants=(Tenant("a", hash_token("t")),), db=str(tmp_path / "q.db"), state_dir=str(taken)
    )
    with pytest.raises(InputError, match="state_dir"):
        Service(
            cfg, cluster=LocalCluster(default_live_cluster(), "numpy"), scheduler=parse_scheduler("mct+mlsm")
        )


def test_the_preflight_knows_the_interference_models_format() -> None:
    """The preflight keeps its own copy of the format name (the predictor's module imports torch);
    a copy that drifted would refuse every good interference model."""
    from rlsched.interference.predictor import FORMAT
    from runtime.service.preflight import INTERFERENCE_FORMAT

    assert INTERFERENCE_FORMAT == FORMAT


def test_check_loads_what_a_start_would_and_serves_nothing(tmp_path: Path) -> None:
    """``rlsched serve --check``: exit 0 with what it would run, the queue file not created (it
    can run beside the service it would replace); a learned state that cannot be read, which only
    a start used to find, exits 2 naming ``state_dir``."""
    config = write_config(tmp_path, free_port(), TOKENS, None, "", "auto")
    r = _serve_exit(config, "--check")
    assert r.returncode == 0, r.stderr
    assert "ready to serve (scheduler auto; recogniser shipped" in r.stdout, r.stdout
    assert "1 tenant" in r.stdout, r.stdout
    port = config.read_text().split("\n")[0].split(" = ")[1]  # where and how it would listen, and keep
    assert f"; http://127.0.0.1:{port}; " in r.stdout and "finished tasks kept 7 days)" in r.stdout, r.stdout
    assert not (tmp_path / "queue.db").exists()
    (tmp_path / "rlsched-state").mkdir()
    (tmp_path / "rlsched-state" / "current.json").write_text("{not json")
    r = _serve_exit(config, "--check")
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "state_dir" in lines[0], r.stderr
    r = _serve_exit(config, "--check", "--db", str(tmp_path / "no" / "queue.db"))  # it said "ready"
    assert r.returncode == 2 and "does not exist: create it first" in r.stderr, r.stderr
