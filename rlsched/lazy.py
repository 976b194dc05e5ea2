"""Package namespaces that import their public names on first use (PEP 562)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` (a module path) when ``name`` is
    first read, so that a package can expose names whose modules bring in heavy dependencies
    (torch, ray) without importing them with the package.

    :param package: the package's ``__name__`` (for the error message).
    :param exports: public name -> module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


def lazy_dir(package: str, exports: dict[str, str]) -> Callable[[], list[str]]:
    """A module ``__dir__`` that lists the lazy exports beside what the module holds, so that
    ``dir()`` and tab completion show them (they are not attributes until first read).

    :param package: the package's ``__name__``.
    :param exports: public name -> module that defines it.
    """

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __dir__
