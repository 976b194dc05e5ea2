"""Reading a dataclass field's default, so that each default is written once: in its dataclass."""

from __future__ import annotations

import dataclasses
from typing import Any


def default(cfg: type, name: str) -> Any:
    """The default of field ``name`` of the dataclass ``cfg`` (a default factory is called).

    :raises KeyError: if ``cfg`` has no such field or the field has no default.
    """
    for f in dataclasses.fields(cfg):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{cfg.__name__}.{name} has no default")
    raise KeyError(f"{cfg.__name__} has no field {name!r}")
