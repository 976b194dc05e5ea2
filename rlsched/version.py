"""The installed rlsched's version, for ``rlsched --version`` and the service's ``/healthz`` and
``/metrics`` (which build is answering is the first thing a bug report needs)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The version of the installed ``rlsched`` distribution (``"unknown"`` when it was never
    installed, e.g. a source tree on ``PYTHONPATH``)."""
    try:
        return version("rlsched")
    except PackageNotFoundError:
        return "unknown"
