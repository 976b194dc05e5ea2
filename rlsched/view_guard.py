"""What a policy from outside rlsched reads: the cluster view with its arrays read-only.

A world's :class:`~rlsched.view.ClusterView` is its own state: feasibility, the placers and the
simulator's physics read it back. A selector or placer written elsewhere (a plug-in, a
researcher's class) that writes into an array it was handed — one missing ``.copy()`` before an
in-place ``-=`` — changed the run it was judged on, without an error (176 of 200 tasks
"unschedulable" in one such run). Through :func:`guarded_view` the slip raises numpy's
"assignment destination is read-only" at the line that made it (``view.fast``'s per-event
lists: ``TypeError``, no item assignment). rlsched's own policies get the
view itself (their hot paths read it on every decision; the tests hold them to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast, overload

import numpy as np

from rlsched import OUR_PACKAGES
from rlsched.view import ClusterView


def is_ours(policy: object) -> bool:
    """Whether ``policy``'s class is defined in rlsched's own packages."""
    return type(policy).__module__.split(".", 1)[0] in OUR_PACKAGES


class ReadOnlyView:
    """A :class:`ClusterView` whose numpy arrays read as read-only views of the same memory
    (every other attribute as it is)."""

    __slots__ = ("_view",)

    def __init__(self, view: ClusterView) -> None:
        object.__setattr__(self, "_view", view)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._view, name)
        if isinstance(value, np.ndarray):
            value = value.view()
            value.flags.writeable = False
        elif name == "fast":
            value = ReadOnlyFast(value)
        return value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"the cluster view is read-only to a policy: cannot set {name!r}")


class ReadOnlyList(Sequence[Any]):
    """One of ``view.fast``'s lists as a policy from outside rlsched reads it: indexing, ``len``,
    iteration and comparison as the list's, no item assignment (a list of lists reads as these
    too). A slip such as ``view.fast.cpu_busy[n] += 1`` raises ``TypeError`` at that line: the
    world's mirrors change what feasibility and the physics read next."""

    __slots__ = ("_items",)

    def __init__(self, items: list[Any]) -> None:
        self._items = items

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Any]: ...
    def __getitem__(self, i: int | slice) -> Any:
        item = self._items[i]
        if isinstance(i, slice):
            return tuple(ReadOnlyList(x) if isinstance(x, list) else x for x in item)
        return ReadOnlyList(item) if isinstance(item, list) else item

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReadOnlyList):
            other = other._items
        return bool(self._items == other) if isinstance(other, list | tuple) else NotImplemented

    def __hash__(self) -> int:  # a view of changing state: unhashable, as the list is
        raise TypeError("unhashable type: 'ReadOnlyList'")

    def __repr__(self) -> str:
        return f"ReadOnlyList({self._items!r})"


class ReadOnlyFast:
    """``view.fast`` (:class:`~rlsched.view_mirrors.FastState`) with each list read-only."""

    __slots__ = ("_fast",)

    def __init__(self, fast: Any) -> None:
        object.__setattr__(self, "_fast", fast)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._fast, name)
        return ReadOnlyList(value) if isinstance(value, list) else value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"the cluster view is read-only to a policy: cannot set fast.{name}")


def guarded_view(view: ClusterView, policy: object) -> ClusterView:
    """``view`` as ``policy`` may see it: itself for rlsched's own, read-only for any other."""
    if is_ours(policy):
        return view
    return cast(ClusterView, ReadOnlyView(view))


class GuardedPlacer:
    """A placer from outside rlsched, handed the view read-only on every ``place`` (its other
    attributes are its own)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    def place(self, task: Any, sub: Any, node: int, view: ClusterView) -> int | None:
        return self.inner.place(task, sub, node, cast(ClusterView, ReadOnlyView(view)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def guarded_placer(placer: Any) -> Any:
    """``placer`` as a world's dispatch calls it: itself if rlsched's own, else guarded."""
    return placer if is_ours(placer) else GuardedPlacer(placer)
