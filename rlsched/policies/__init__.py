"""Scheduling policies: stage-1 node selectors and stage-2 subtask placers, and their registry.

Everything outside this folder reaches a policy by name, through the registry (checked by
``tests/test_layers.py``)::

    from rlsched.policies import parse_scheduler
    sched = parse_scheduler("ldwp+iawp")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlsched.lazy import lazy_dir, lazy_exports

if TYPE_CHECKING:
    from rlsched.policies.registry import (
        DEFAULT_PLACER,
        ENTRY_POINT_GROUP,
        SHIPPED,
        PolicyOptions,
        make_placer,
        make_selector,
        parse_scheduler,
        placer_names,
        register_placer,
        register_selector,
        selector_names,
    )

__all__ = [
    "DEFAULT_PLACER",
    "ENTRY_POINT_GROUP",
    "SHIPPED",
    "PolicyOptions",
    "ldwp_from_network",
    "make_placer",
    "make_selector",
    "parse_scheduler",
    "placer_names",
    "register_placer",
    "register_selector",
    "selector_names",
]
# The registry's names are imported on first use (PEP 562): a light module of this folder
# (``names``, read by the CLI as it builds its parser) must not bring in the registry and every
# policy with it.
_EXPORTS = {n: "rlsched.policies.registry" for n in __all__ if n != "ldwp_from_network"}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__dir__ = lazy_dir(__name__, _EXPORTS)


def ldwp_from_network(net: object, meta: dict, source: str) -> object:
    """An ``ldwp`` selector over a network already loaded or learnt (the service's online
    learner); imported on use, as torch is heavy."""
    from rlsched.policies.ldwp import LdwpSelector

    return LdwpSelector.from_network(net, meta, source)  # type: ignore[arg-type]
