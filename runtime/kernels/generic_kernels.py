"""Generic GPU kernels: dense network inference, FFT convolution, k-means (Lloyd) steps.

Arrays (see :mod:`runtime.kernels.tasks` for sizes):

================  =================  =========  ==================================================
name              shape              dtype      role
================  =================  =========  ==================================================
rows              (N, D)             float32    matmul input (per task)
weights           (L, D, D)          float32    matmul layers (per stream)
output            (N, D)             float32    matmul result
signal            (S, N)             float32    fft input: S segments (per task)
filter_spectra    (F, nfft/2 + 1)    complex64  rfft of F filters of <= nfft - N + 1 taps (per stream)
spectrum          (S, nfft/2 + 1)    complex64  fft
filtered          (S, F, nfft/2+1)   complex64  spectral_filter
convolved         (S, F, nfft)       float32    ifft: full linear convolutions, zero beyond N + M - 1
points_0/1        (P/2, d)           float32    kmeans: the two halves of the points (per task)
centroids         (k, d)             float32    kmeans starting centroids (per stream)
assign_<i>_<h>    (P/2,)             int32      kmeans_assign of iteration i, half h
centroids_<i>     (k, d)             float32    kmeans_update of iteration i (1-based)
================  =================  =========  ==================================================

The k-means kinds appear several times in one task, so they read and write through the name map
``params["names"]`` (generic name -> concrete array name), which :func:`stage_plan
<runtime.kernels.pipelines.stage_plan>` fills in.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from runtime.kernels.ops import Array, bincount


def fft_size(n: int) -> int:
    """FFT length for segments of ``n`` samples: the power of two >= ``n + n // 16``, so filters of
    up to ``fft_size(n) - n + 1`` taps convolve without wrap-around.

    :param n: samples per segment.
    """
    need = n + n // 16
    return 1 << max(0, (need - 1).bit_length())


def _name(params: dict[str, Any], generic: str) -> str:
    names: dict[str, str] = params.get("names", {})
    return names.get(generic, generic)


def matmul(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Dense network inference: ``rows @ W0``, ReLU, ``@ W1``, ... (no ReLU after the last layer).

    Reads ``rows``, ``weights``; writes ``output``.
    """
    h, weights = data["rows"], data["weights"]
    for layer in range(weights.shape[0]):
        h = h @ weights[layer]
        if layer < weights.shape[0] - 1:
            h = xp.maximum(h, 0.0)
    return {"output": h.astype(xp.float32, copy=False)}


def fft(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Real FFT of every zero-padded signal segment (length :func:`fft_size`).

    Reads ``signal``; writes ``spectrum``.
    """
    sig = data["signal"]
    spec = xp.fft.rfft(sig, n=fft_size(sig.shape[-1]), axis=-1)
    return {"spectrum": spec.astype(xp.complex64, copy=False)}


def spectral_filter(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Multiply every segment's spectrum by every filter of the bank.

    Reads ``spectrum``, ``filter_spectra``; writes ``filtered``.
    """
    out = data["spectrum"][:, None, :] * data["filter_spectra"][None, :, :]
    return {"filtered": out.astype(xp.complex64, copy=False)}


def ifft(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Inverse real FFTs of all filtered spectra: the linear convolutions of each segment with
    each filter.

    Reads ``filtered``; writes ``convolved``.
    """
    spec = data["filtered"]
    out = xp.fft.irfft(spec, n=2 * (spec.shape[-1] - 1), axis=-1)
    return {"convolved": out.astype(xp.float32, copy=False)}


def kmeans_assign(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Nearest centroid of every point: ``argmin_k |c_k|^2 - 2 p . c_k`` (one GEMM; ``|p|^2`` does
    not change the argmin).

    Reads ``points``, ``centroids``; writes ``assign`` (through ``params["names"]``).
    """
    pts, cen = data[_name(params, "points")], data[_name(params, "centroids")]
    score = (cen * cen).sum(axis=1)[None, :] - 2.0 * (pts @ cen.T)
    return {_name(params, "assign"): xp.argmin(score, axis=1).astype(xp.int32)}


def kmeans_update(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """New centroids: the mean of the points assigned to each (both halves); centroids without
    points keep their position (a streaming vocabulary keeps its unseen words).

    Reads ``points_a``, ``points_b``, ``assign_a``, ``assign_b``, ``centroids``; writes
    ``centroids_out`` (through ``params["names"]``).
    """
    cen = data[_name(params, "centroids")]
    k, d = cen.shape
    pts = xp.concatenate([data[_name(params, "points_a")], data[_name(params, "points_b")]])
    lab = xp.concatenate([data[_name(params, "assign_a")], data[_name(params, "assign_b")]]).astype(xp.int64)
    # One weighted bincount over (centroid, dim) cells sums every coordinate at once.
    flat = (lab[:, None] * d + xp.arange(d)[None, :]).ravel()
    sums = bincount(xp, flat, k * d, weights=pts.ravel()).reshape(k, d)
    counts = bincount(xp, lab, k)
    mean = sums / xp.maximum(counts, 1)[:, None]
    out = xp.where(counts[:, None] > 0, mean, cen).astype(xp.float32)
    return {_name(params, "centroids_out"): out}
