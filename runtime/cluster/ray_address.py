"""Whether a Ray cluster's address answers, before ``ray.init`` is handed it: given an address
nothing listens on, ``ray.init`` retries for minutes (6.5 were seen) with a page of Ray's log and
no answer. Imports no Ray."""

from __future__ import annotations

import os
import socket

from rlsched.errors import Unavailable

#: Seconds a TCP connection to the address may take before the cluster counts as unreachable.
CONNECT_TIMEOUT_S = 5.0


def ray_address(given: str | None) -> str | None:
    """The address ``ray.init`` will use: ``given``, else ``$RAY_ADDRESS``, else ``None``."""
    return given if given is not None else os.environ.get("RAY_ADDRESS") or None


def check_ray_address(given: str | None, what: str) -> None:
    """Refuse an address of the form ``[ray://]HOST:PORT`` that no TCP connection reaches within
    :data:`CONNECT_TIMEOUT_S`. ``auto``, ``local`` and none are Ray's to resolve.

    :param given: the address the caller passes to ``ray.init`` (``None``: ``$RAY_ADDRESS``).
    :param what: how the user named it, for the message (``--ray-address``, ``RAY_ADDRESS``).
    :raises Unavailable: naming ``what``, the address and why (exit 4).
    """
    address = ray_address(given)
    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # a form Ray knows and this check does not: Ray says what is wrong with it
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise Unavailable(f"{what} {address}", f"no Ray cluster answers there ({why})") from None


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
            f"{what} {ray_address(address)}", f"cannot join a Ray cluster there ({e})"
        ) from None
