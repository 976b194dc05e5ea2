"""The service's optional packages (the ``serve`` extra): whether they are installed, and a clear
refusal when a command that needs them runs without them.

The simulator, training and evaluation never import them; ``rlsched serve`` needs the server's
(fastapi, uvicorn, prometheus-client) and the client commands (``submit``, ``status``, ``cancel``,
``top``) need httpx. This module imports none of them, so a command can check before it imports.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from rlsched.errors import Unavailable

#: Import names of the packages ``rlsched serve`` needs.
SERVER_MODULES = ("fastapi", "uvicorn", "prometheus_client")
#: Import names of the packages :mod:`runtime.service.client` needs.
CLIENT_MODULES = ("httpx",)
#: Import names of every package of the ``serve`` extra (pyproject.toml).
SERVE_MODULES = SERVER_MODULES + CLIENT_MODULES
#: What a command that needs them says when they are missing.
HINT = "the service needs the serve extra: pip install 'rlsched[serve]'"


def missing_serve_modules(modules: Iterable[str] = SERVE_MODULES) -> list[str]:
    """The import names among ``modules`` that cannot be imported here (none are imported).

    :param modules: top-level import names.
    """
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_serve_extra(what: str, modules: Iterable[str] = SERVE_MODULES) -> None:
    """Refuse, before anything imports them, to run ``what`` without the ``serve`` extra.

    :param what: the command asked for, e.g. ``rlsched serve`` (the message starts with it).
    :param modules: the import names it needs (default: the whole extra; the client commands
        need :data:`CLIENT_MODULES` only).
    :raises Unavailable: (exit 4) naming the missing packages and how to install them.
    """
    missing = missing_serve_modules(modules)
    if missing:
        raise Unavailable(what, f"{HINT} ({', '.join(missing)} not installed)")
