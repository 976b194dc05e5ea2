"""Whether a Ray cluster's address answers, and as Ray does, before ``ray.init`` is handed it:
given an address nothing listens on, ``ray.init`` retries for minutes (6.5 were seen) with a page
of Ray's log and no answer; given one where another server listens (a Redis on 6379, a web
server) and never answers gRPC, it waited for ever. Imports no Ray."""

from __future__ import annotations

import os
import socket

from rlsched.errors import InputError, Unavailable

#: Seconds a TCP connection to the address may take before the cluster counts as unreachable.
CONNECT_TIMEOUT_S = 5.0
#: What a client sends first on an HTTP/2 connection (gRPC's, so Ray's): the preface and an empty
#: SETTINGS frame. A server answers with a SETTINGS frame of its own (frame type 4, stream 0).
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
#: The forms of a Ray address ``ray.init`` takes.
EXPECTED = "auto, local, HOST:PORT or ray://HOST:PORT"


def ray_address(given: str | None) -> str | None:
    """The address ``ray.init`` will use: ``given``, else ``$RAY_ADDRESS``, else ``None``."""
    return given if given is not None else os.environ.get("RAY_ADDRESS") or None


def well_formed(address: str) -> bool:
    """Whether ``address`` has a form ``ray.init`` takes (:data:`EXPECTED`): anything else made
    it raise a ``ValueError`` (``Invalid address format``), reported as a bug."""
    if address in ("auto", "local"):
        return True
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return bool(host.strip("[]")) and port.isdigit() and 1 <= int(port) <= 65535


def check_address_form(address: str | None, source: str, field: str = "value") -> None:
    """Refuse a Ray address of no form ``ray.init`` takes (``None``: none given, nothing to check).

    :param address: the address.
    :param source: where it was given: ``RAY_ADDRESS``, ``--ray-address``, or the config file.
    :param field: the key (``ray_address``), or ``value`` for a flag or variable.
    :raises InputError: naming ``source`` and ``field`` (exit 2).
    """
    if address is not None and not well_formed(address):
        raise InputError(source, field, EXPECTED, address)


def check_ray_address(given: str | None, what: str) -> None:
    """Refuse an address of the form ``[ray://]HOST:PORT`` that no TCP connection reaches within
    :data:`CONNECT_TIMEOUT_S`, or where what listens does not answer HTTP/2 as Ray's gRPC servers
    do (:func:`answers_http2`; not under ``RAY_USE_TLS``). ``auto``, ``local`` and none are Ray's
    to resolve.

    :param given: the address the caller passes to ``ray.init`` (``None``: ``$RAY_ADDRESS``).
    :param what: how the user named it, for the message (``--ray-address``, ``RAY_ADDRESS``).
    :raises InputError: an address of no form Ray takes (exit 2).
    :raises Unavailable: naming ``what``, the address and why (exit 4).
    """
    address = ray_address(given)
    check_address_form(address, what)
    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S)
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise Unavailable(f"{what} {address}", f"no Ray cluster answers there ({why})") from None
    with conn:
        if not _tls() and not answers_http2(conn):
            raise Unavailable(
                f"{what} {address}",
                f"something listens there but does not answer as a Ray cluster does (no gRPC answer "
                f"within {CONNECT_TIMEOUT_S:g} s): is it the port of Ray's head (`ray start --head "
                "--port`, 6379 unless set), or of its client server (ray://HOST:10001)?",
            )


def answers_http2(conn: socket.socket) -> bool:
    """Whether the server at the other end of ``conn`` answers an HTTP/2 client preface with a
    SETTINGS frame within :data:`CONNECT_TIMEOUT_S`, as every gRPC server (Ray's head, its client
    server) does at once."""
    conn.settimeout(CONNECT_TIMEOUT_S)
    got = b""
    try:
        conn.sendall(HTTP2_PREFACE)
        while len(got) < 9:  # a frame header: length (3), type (1), flags (1), stream (4)
            chunk = conn.recv(9 - len(got))
            if not chunk:
                break
            got += chunk
    except OSError:  # a timeout, or the connection reset
        return False
    return len(got) == 9 and got[3] == 4 and got[5:9] == bytes(4)


def _tls() -> bool:
    """Whether Ray speaks TLS here (``RAY_USE_TLS``): the probe speaks plain HTTP/2, which a TLS
    server refuses, so it is left to ``ray.init``."""
    return os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true")


def ray_init(address: str | None, what: str, **kwargs: object) -> None:
    """``ray.init`` after :func:`check_ray_address`; a cluster it cannot join (something answers
    at the address, but no Ray: it gives up after ~20 s) is :class:`Unavailable` too, not a bug.

    :param address: for ``ray.init`` (``None``: ``$RAY_ADDRESS``, else a new local Ray).
    :param what: how the user named the address, for the message.
    :param kwargs: more arguments of ``ray.init``.
    :raises Unavailable: naming ``what`` and the address (exit 4).
    """
    import ray

    check_ray_address(address, what)
    try:
        ray.init(address=address, **kwargs)  # type: ignore[arg-type]
    except ConnectionError as e:
        raise Unavailable(
            f"{what} {ray_address(address)}", f"cannot join a Ray cluster there ({e}){_auth_hint(address)}"
        ) from None


def _auth_hint(address: str | None) -> str:
    """What to try when joining by an address failed: ``ray start`` (Ray 2.60) turns token
    authentication on, and a machine without the token is refused with the same error as a
    wrong address (Ray's log lines above it say ``Unauthenticated``)."""
    given = ray_address(address)
    if given in (None, "auto", "local") or os.environ.get("RAY_AUTH_MODE") == "token":
        return ""
    return (
        "; if Ray's lines above say Unauthenticated, the cluster asks for its token: set "
        "RAY_AUTH_MODE=token here, with the token (`ray get-auth-token` on the head prints it) in "
        "RAY_AUTH_TOKEN or ~/.ray/auth_token"
    )
