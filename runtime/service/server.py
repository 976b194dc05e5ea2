"""The ``rlsched serve`` process: take the queue file, bind the address, run the service behind
uvicorn until interrupted, then stop it cleanly (learned state checkpointed, queue closed).

:func:`serve` builds the :class:`~runtime.service.service.Service` and its HTTP API
(:func:`~runtime.service.app.create_app`); neither of those imports this module.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from rlsched.errors import Unavailable
from runtime.service.config import ServiceConfig
from runtime.service.reload import Reloader
from runtime.service.service import Service, store_owner
from runtime.service.store import TaskStore
from runtime.service.tls_reload import CertificateReloader

log = logging.getLogger(__name__)


class AddressInUse(Unavailable):
    """Another process listens on the service's address (``rlsched serve`` exits 4)."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening, before anything else starts.

    :raises AddressInUse: the port is taken.
    :raises OSError: the address cannot be used otherwise (no such interface, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections that say so, and with
    # Nagle on, each answer on a kept-alive connection waited 40 ms for the client's delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise AddressInUse(f"{host}:{port}", "in use by another process") from None
        raise
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


#: glibc's ``mallopt`` parameter of the number of heap arenas.
_M_ARENA_MAX = -8
#: Heap arenas the service's threads share (glibc's default: 8 per core).
ARENAS = 2


def share_heap_arenas() -> bool:
    """Make the service's threads share :data:`ARENAS` glibc heap arenas (True if this is glibc
    and it took the setting).

    A dozen lane threads make and drop task arrays of 0.1-16 MB; with an arena per thread each
    keeps its own free, fragmented heap. A 10-minute soak at 0.8 of capacity saw the service's
    RSS climb from 498 to 735 MB that way while what Python and NumPy held (tracemalloc) stayed
    within the tasks in flight. With two arenas, a 600-task backlog in-process ran at 370-400 MB
    against 480-520 MB, at the same throughput or better (pinning glibc's mmap threshold instead
    halved throughput: every array became fresh zeroed pages). BENCHMARKS "Soak".
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False  # not glibc (musl, macOS): nothing to set
    return bool(libc.mallopt(_M_ARENA_MAX, ARENAS))


def is_loopback(host: str) -> bool:
    """``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def serve(
    config: ServiceConfig,
    announce: Callable[[str], None] | None = None,
    reread: Callable[[], ServiceConfig] | None = None,
) -> None:
    """Run the service in this process until interrupted (uvicorn on ``config.host:port``).

    In this order, so that a service that cannot run changes nothing: take the queue file's lock,
    bind the address, then recover the queue and start the cluster.

    :param config: the service.
    :param announce: called once the service listens and its queue is recovered, with the
        scheduler it runs (the config's, or an admin's switch it restored).
    :param reread: loads the config again as the service was started with it (``SIGHUP`` and
        ``POST /v1/admin/reload`` then apply what can change, :mod:`runtime.service.reload`).
    :raises DatabaseInUse: another service holds the queue file.
    :raises AddressInUse: the port is taken.
    """
    import uvicorn

    from runtime.service.app import create_app

    share_heap_arenas()
    store = TaskStore(config.db, store_owner(config))
    try:
        sock = listen(config.host, config.port)
    except BaseException:
        store.close(remove_created=True)  # a new queue file is not left behind
        raise
    if config.tls_certfile is None and not is_loopback(config.host):
        log.warning(
            "rlsched serve: listening on %s without TLS: bearer tokens and tasks cross the network in "
            "clear text; set tls_certfile and tls_keyfile, or put a TLS proxy in front",
            config.host,
        )
    try:
        service = Service(config, store=store)
    except BaseException:  # a cluster that cannot be had (a Ray address nothing answers at)
        sock.close()
        store.close(remove_created=True)
        raise
    service.start()
    if announce is not None:
        announce(service.scheduler.name)
    # uvicorn shuts down on SIGTERM, then raises the signal again once it has; with the default
    # action that kills the process before the service stops (its last checkpoint unwritten).
    # Raised here instead, it ends the run through the finally below, and the process exits 0.
    previous = signal.signal(signal.SIGTERM, _terminated)
    # SIGHUP would end the process by default; a daemon takes it as "read your config again".
    hangup = signal.signal(signal.SIGHUP, lambda signum, frame: service.request_reload())
    try:
        app = create_app(service)
        # log_config=None: uvicorn's warnings and errors go through the service's own handler
        # and format (runtime.service.log_format), not a second format of its own.
        cfg = uvicorn.Config(
            app,
            log_level="warning",
            log_config=None,
            ssl_certfile=config.tls_certfile,
            ssl_keyfile=config.tls_keyfile,
        )
        server = uvicorn.Server(cfg)
        if reread is not None:
            service.reloader = Reloader(service, reread, _certificate(config, cfg))
        server.run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGHUP, hangup)
        log.info("rlsched serve: stopping (queue %s)", config.db)
        service.stop()
        sock.close()
        log.info("rlsched serve: stopped; learned state checkpointed, queue closed")


def _certificate(config: ServiceConfig, server: Any) -> CertificateReloader | None:
    """What loads a renewed certificate into the server's SSL context (HTTPS only); uvicorn
    makes the context as it starts serving (``Config.load``)."""
    if config.tls_certfile is None or config.tls_keyfile is None:
        return None
    return CertificateReloader(
        config.tls_certfile, config.tls_keyfile, lambda: getattr(server, "ssl", None), config.source
    )


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(0)
