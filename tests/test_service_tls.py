"""``rlsched serve`` over HTTPS (``tls_certfile``, ``tls_keyfile``), as an operator runs it: a real
service with a self-signed certificate, the CLI client trusting it through ``SSL_CERT_FILE``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from runtime.service.client import Client, ServiceError
from runtime.service.server import is_loopback
from tests.service_helpers import TOKENS, Server, free_port, headers, service_config

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_service_serves_https_and_the_client_trusts_it_through_ssl_cert_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    port = free_port()
    top = f'tls_certfile = "{cert.name}"\ntls_keyfile = "{key.name}"'
    s = Server(service_config(tmp_path, port, top=top), port)
    s.url = f"https://127.0.0.1:{port}"
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # wait_ready and httpx below trust it
    s.start()
    try:
        assert httpx.get(f"{s.url}/healthz").json()["status"] == "ok"
        with pytest.raises(httpx.HTTPError):  # nothing in clear text on that port
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        env = {**os.environ, "RLSCHED_TOKEN": TOKENS["batch"]}
        r = _cli("submit", "--url", s.url, "--app", "matmul", "--wait", env=env)
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
        assert httpx.get(f"{s.url}/v1/tasks", headers=headers("batch")).json()["tasks"][0]["state"] == "done"
        env.pop("SSL_CERT_FILE")  # a client that does not trust the certificate is told how to
        r = _cli("submit", "--url", s.url, "--app", "matmul", env=env)
        assert r.returncode == 4 and "CERTIFICATE_VERIFY_FAILED" in r.stderr, r.stderr
        assert "set SSL_CERT_FILE to the PEM file of the CA that signed its certificate" in r.stderr
        env["SSL_CERT_FILE"] = str(cert)
        top = _cli("top", "--once", "--interval", "0.1", "--url", s.url, env=env)
        assert f" at {s.url}: " in top.stdout.splitlines()[0], top.stderr
        monkeypatch.delenv("SSL_CERT_FILE")  # the Python client names its CA itself
        with Client(s.url, TOKENS["batch"], ca_file=str(cert)) as c:
            assert c.cluster()["version"]
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"), Client(s.url, "x") as c:
            c.cluster()
    finally:
        s.stop()
    assert f"on https://127.0.0.1:{port}" in s.log.read_text() and "without TLS" not in s.log.read_text()


def test_tls_files_are_checked_before_the_service_starts(tmp_path: Path) -> None:
    """One file without the other, or a pair that does not load, is refused naming the key."""
    cert, key = _self_signed(tmp_path)
    c, k = f'tls_certfile = "{cert.name}"', f'tls_keyfile = "{key.name}"'
    cases = {
        c: "tls_keyfile: expected tls_certfile and tls_keyfile together",
        f'tls_certfile = "{key.name}"\n{k}': "tls_certfile: expected a PEM certificate",
        f'{c}\ntls_keyfile = "nope.pem"': "tls_keyfile: expected an existing PEM file",
    }
    for top, message in cases.items():
        config = service_config(tmp_path, free_port(), top=top)
        r = _cli("serve", "--config", str(config), "--check", env=dict(os.environ))
        assert r.returncode == 2 and message in r.stderr, (top, r.stderr)


def test_loopback_hosts() -> None:
    """The warning about clear text goes to every host but this machine's own."""
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "example.org"))


def test_a_renewed_certificate_is_served_after_a_reload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A certificate renewed into the same files is served to new connections after ``rlsched
    reload``, without a restart; a pair that does not load refuses the reload and the old one stays."""
    import ssl

    cert, key = _self_signed(tmp_path)
    first = cert.read_text()
    renewed = tmp_path / "renewed"
    renewed.mkdir()
    new_cert, new_key = _self_signed(renewed)
    (tmp_path / "both.pem").write_text(first + new_cert.read_text())  # the client trusts either
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "both.pem"))
    port = free_port()
    top = f'tls_certfile = "{cert.name}"\ntls_keyfile = "{key.name}"'
    s = Server(service_config(tmp_path, port, {"video": "admin = true\n"}, top=top), port)
    s.url = f"https://127.0.0.1:{port}"
    s.start()

    def served() -> str:
        return ssl.get_server_certificate(("127.0.0.1", port)).strip()

    try:
        assert served() == first.strip()
        with Client(s.url, TOKENS["video"]) as c:
            assert c.reload()["applied"] == []  # unchanged files: nothing to load
            key.write_text(new_key.read_text())  # half renewed: the new key, the old certificate
            with pytest.raises(ServiceError) as e:
                c.reload()
            assert e.value.status == 409 and "tls_certfile" in e.value.detail
            assert served() == first.strip()
            cert.write_text(new_cert.read_text())
            assert c.reload(dry_run=True)["applied"] == [f"tls certificate reloaded from {cert}"]
            assert served() == first.strip()  # a dry run loads nothing
            assert c.reload()["applied"] == [f"tls certificate reloaded from {cert}"]
        assert served() == new_cert.read_text().strip()
    finally:
        s.stop()
