"""Array building blocks shared by the kernels, written once for NumPy and CuPy.

Every function takes the array namespace ``xp`` (the ``numpy`` or ``cupy`` module) first and uses
only what both provide: slicing, ``pad``, ``cumsum``, ``minimum``, ``bincount``, ``unique``,
``searchsorted``, ``nonzero``. Filters are shifted-slice sums over a zero-padded copy, which is
how a separable filter looks without scipy/cupyx; the cost per tap is one fused multiply-add over
the array, so the FLOP count of a kernel can be read off its tap counts.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np

Array = Any


def _along(ndim: int, axis: int, sl: slice) -> tuple[slice, ...]:
    """An index that applies ``sl`` on ``axis`` and takes everything elsewhere."""
    axis %= ndim
    return tuple(sl if d == axis else slice(None) for d in range(ndim))


def bincount(xp: ModuleType, x: Array, length: int, weights: Array | None = None) -> Array:
    """``xp.bincount`` with exactly ``length`` bins (all of ``x`` must be below ``length``), also
    for an empty ``x`` (``cupy.bincount`` takes the maximum of ``x``, which fails when empty).

    :param xp: array namespace.
    :param x: 1-D non-negative integers.
    :param length: number of bins.
    :param weights: optional weights like ``x``; the sums are float64.
    """
    if x.size == 0:
        return xp.zeros(length, dtype=xp.int64 if weights is None else xp.float64)
    return xp.bincount(x, weights=weights, minlength=length)[:length]


def gaussian_taps(sigma: float, truncate: float = 4.0) -> tuple[float, ...]:
    """Normalised taps of a sampled 1-D Gaussian (radius ``ceil(truncate * sigma)``, like scipy).

    :param sigma: standard deviation, pixels (> 0).
    :param truncate: radius in standard deviations.
    """
    r = max(1, math.ceil(truncate * sigma))
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-0.5 * (x / sigma) ** 2)
    return tuple(float(v) for v in g / g.sum())


def correlate1d(xp: ModuleType, a: Array, taps: tuple[float, ...], axis: int) -> Array:
    """Correlate ``a`` with symmetric odd-length ``taps`` along ``axis``, zero padding, same size.

    :param xp: array namespace.
    :param a: float32 array.
    :param taps: symmetric taps (a Gaussian); symmetry halves the multiplies.
    :param axis: axis to filter.
    """
    r = (len(taps) - 1) // 2
    n = a.shape[axis]
    widths = [(0, 0)] * a.ndim
    widths[axis % a.ndim] = (r, r)
    p = xp.pad(a, widths)
    out = taps[r] * a
    tmp = xp.empty_like(out)
    for k in range(r):
        lo = p[_along(a.ndim, axis, slice(k, k + n))]
        hi = p[_along(a.ndim, axis, slice(2 * r - k, 2 * r - k + n))]
        # In-place into one scratch buffer: a tap costs one pass over memory, not three.
        xp.add(lo, hi, out=tmp)
        tmp *= taps[k]
        out += tmp
    return out


def gaussian_blur(xp: ModuleType, a: Array, sigma: float, axes: tuple[int, ...] = (-2, -1)) -> Array:
    """Separable Gaussian blur of ``a`` over ``axes`` (zero padding).

    :param xp: array namespace.
    :param a: float32 array.
    :param sigma: standard deviation, pixels.
    :param axes: axes to blur.
    """
    taps = gaussian_taps(sigma)
    for ax in axes:
        a = correlate1d(xp, a, taps, ax)
    return a


def box_sum(xp: ModuleType, a: Array, r: int, axis: int) -> Array:
    """Sum over a window of ``2r + 1`` along ``axis`` (zeros outside), by a cumulative sum: O(1)
    per element whatever ``r``.

    :param xp: array namespace.
    :param a: integer or float array (integers are summed as int32).
    :param r: window radius.
    :param axis: axis.
    """
    n = a.shape[axis]
    dtype = xp.int32 if a.dtype.kind in "biu" else a.dtype
    a = a.astype(dtype, copy=False)
    if r <= 2:  # a few shifted adds beat a cumulative sum over the whole array
        out = a.copy()
        for k in range(1, min(r, n - 1) + 1):
            head, tail = _along(a.ndim, axis, slice(None, n - k)), _along(a.ndim, axis, slice(k, None))
            out[head] += a[tail]
            out[tail] += a[head]
        return out
    widths = [(0, 0)] * a.ndim
    widths[axis % a.ndim] = (r + 1, r)
    c = xp.cumsum(xp.pad(a, widths), axis=axis)
    return c[_along(a.ndim, axis, slice(2 * r + 1, 2 * r + 1 + n))] - c[_along(a.ndim, axis, slice(0, n))]


def box_count(xp: ModuleType, mask: Array, r: int, axes: tuple[int, ...] = (-2, -1)) -> Array:
    """Number of set pixels of ``mask`` in a ``(2r+1)``-wide box around each pixel, over ``axes``.

    :param xp: array namespace.
    :param mask: boolean array.
    :param r: box radius.
    :param axes: axes of the box.
    """
    out = mask
    for ax in axes:
        out = box_sum(xp, out, r, ax)
    return out


def dilate(xp: ModuleType, mask: Array, r: int, axes: tuple[int, ...] = (-2, -1)) -> Array:
    """Binary dilation by a square of radius ``r`` over ``axes``.

    :param xp: array namespace.
    :param mask: boolean array.
    :param r: radius.
    :param axes: axes of the structuring element.
    """
    return box_count(xp, mask, r, axes) > 0


def erode(xp: ModuleType, mask: Array, r: int, axes: tuple[int, ...] = (-2, -1)) -> Array:
    """Binary erosion by a square of radius ``r`` over ``axes`` (outside the array counts as unset).

    :param xp: array namespace.
    :param mask: boolean array.
    :param r: radius.
    :param axes: axes of the structuring element.
    """
    return box_count(xp, mask, r, axes) == (2 * r + 1) ** len(axes)


def _min3(xp: ModuleType, a: Array, axis: int) -> Array:
    """Minimum of each element and its two neighbours along ``axis``."""
    out = a.copy()
    head, tail = _along(a.ndim, axis, slice(None, -1)), _along(a.ndim, axis, slice(1, None))
    out[head] = xp.minimum(out[head], a[tail])
    out[tail] = xp.minimum(out[tail], a[head])
    return out


def label_components(xp: ModuleType, mask: Array, axes: tuple[int, ...], max_iter: int = 10_000) -> Array:
    """Connected components of ``mask`` by label propagation with pointer jumping.

    Two set elements are connected when they are neighbours in the box of radius 1 over ``axes``
    (8-connectivity in 2-D, 26 in 3-D); elements are never connected across other axes, so a stack
    of frames with ``axes=(1, 2)`` is labelled frame by frame. This is the GPU-friendly
    formulation: every step is a whole-array operation, and the number of steps grows with the
    logarithm of the component diameter rather than with the number of pixels.

    :param xp: array namespace.
    :param mask: boolean array (fewer than 2**31 - 1 elements).
    :param axes: axes along which neighbours connect.
    :param max_iter: safety bound on propagation rounds.
    :returns: int32 array, 0 where unset, elsewhere 1 + the flat index of the component's first
        element (so labels sort components by their first element in C order).
    """
    size = int(mask.size)
    if size >= 2**31 - 1:
        raise ValueError(f"label_components: array of {size} elements is too large for int32 labels")
    big = size + 1
    lab = xp.where(mask, xp.arange(1, size + 1, dtype=xp.int32).reshape(mask.shape), big).astype(xp.int32)
    for _ in range(max_iter):
        new = lab
        for ax in axes:
            new = _min3(xp, new, ax)
        new = xp.where(mask, new, big)
        # Pointer jumping: every label is the 1-based flat index of an element of the same
        # component, whose own label is no larger, so following it is always safe.
        hop = new.ravel()[(xp.where(mask, new, 1) - 1).ravel()].reshape(mask.shape)
        new = xp.where(mask, hop, big)
        if not bool((new != lab).any()):
            break
        lab = new
    return xp.where(mask, lab, 0).astype(xp.int32)


def compact_labels(xp: ModuleType, labels: Array) -> tuple[Array, Array, int]:
    """Renumber nonzero labels to ``1..n`` in increasing order of the old label.

    :param xp: array namespace.
    :param labels: non-negative integer labels, 0 = background.
    :returns: ``(new_labels int32, ids, n)`` where ``ids`` holds the 0-based new id of every
        nonzero element in ``xp.nonzero(labels)`` order.
    """
    coords = xp.nonzero(labels)
    out = xp.zeros(labels.shape, dtype=xp.int32)
    vals = labels[coords]
    if vals.size == 0:
        return out, xp.zeros(0, dtype=xp.int32), 0
    uniq = xp.unique(vals)
    ids = xp.searchsorted(uniq, vals).astype(xp.int32)
    out[coords] = ids + 1
    return out, ids, int(uniq.size)


def label_boxes(xp: ModuleType, labels: Array, n: int) -> Array:
    """Per-label, per-frame bounding boxes of a ``(T, H, W)`` label stack with labels ``1..n``.

    :param xp: array namespace.
    :param labels: int labels, 0 = background.
    :param n: number of labels.
    :returns: int32 ``(n, T, 4)`` of ``(row0, col0, row1, col1)`` (inclusive), ``-1`` where the
        label is absent from a frame.
    """
    t_len, h, w = labels.shape
    if n == 0:  # argmax over the rows of an empty stack is not portable
        return xp.full((0, t_len, 4), -1, dtype=xp.int32)
    t, r, c = xp.nonzero(labels)
    lab = labels[t, r, c].astype(xp.int64) - 1
    rows = bincount(xp, (lab * t_len + t) * h + r, n * t_len * h)
    cols = bincount(xp, (lab * t_len + t) * w + c, n * t_len * w)
    rows = (rows.reshape(n, t_len, h) > 0).astype(xp.int8)
    cols = (cols.reshape(n, t_len, w) > 0).astype(xp.int8)
    boxes = xp.stack(
        [
            xp.argmax(rows, axis=2),
            xp.argmax(cols, axis=2),
            h - 1 - xp.argmax(rows[..., ::-1], axis=2),
            w - 1 - xp.argmax(cols[..., ::-1], axis=2),
        ],
        axis=-1,
    ).astype(xp.int32)
    present = rows.max(axis=2) > 0
    return xp.where(present[..., None], boxes, -1).astype(xp.int32)


def max_filter(xp: ModuleType, a: Array, r: int, axes: tuple[int, ...] = (-2, -1)) -> Array:
    """Maximum over a square window of radius ``r`` over ``axes`` (the array's edge is not padded:
    windows are clipped at the border).

    :param xp: array namespace.
    :param a: array.
    :param r: radius.
    :param axes: axes of the window.
    """
    for ax in axes:
        n = a.shape[ax]
        out = a.copy()
        for k in range(1, min(r, n - 1) + 1):
            head, tail = _along(a.ndim, ax, slice(None, n - k)), _along(a.ndim, ax, slice(k, None))
            out[head] = xp.maximum(out[head], a[tail])
            out[tail] = xp.maximum(out[tail], a[head])
        a = out
    return a
