"""Face recognition kernels on synthetic faces (see :mod:`runtime.kernels.faces`).

A stand-in for the dlib pipeline with the same data flow and the same kind of work per stage:

- ``load`` (CPU): "decode" uint8 keyframes into float32 images (the JPEG decode is not modelled).
- ``face_locations``: normalised cross-correlation of every image with the stream's face
  template (FFT correlation plus box-sum local energy), peaks by a max filter: ``face_boxes``
  ``(m, 3)`` int32 of ``(frame, row, col)`` face centres.
- ``landmarks``: aligned face chips ``(m, P, P)`` float32 cut around each centre, normalised to
  zero mean and unit norm (the detector is translation-only, so alignment is centring).
- ``encodings``: a fixed linear projection (the stream's ``encoder``, ``(P*P, E)``) of each chip,
  normalised: ``(m, E)`` float32.
- ``distance``: Euclidean distances of the encodings to the stream's ``gallery`` ``(G, E)``:
  ``(m, G)`` float32.
- ``compare`` (CPU): the nearest gallery identity when closer than a tolerance, else -1:
  ``identities`` ``(m,)`` int32.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from runtime.kernels.ops import Array, box_sum, max_filter

#: Side of a face patch and of the template, px (odd: a patch has a centre pixel).
FACE_SIZE = 25
#: Smallest normalised cross-correlation that counts as a face.
DETECT_THRESHOLD = 0.55
#: Largest encoding distance that still identifies a face (same face: ~0.05; another: >= 0.6).
MATCH_TOLERANCE = 0.35


def load(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Keyframes as float32 images in [0, 1] (CPU).

    Reads ``keyframes``; writes ``images``.
    """
    return {"images": np.asarray(data["keyframes"], dtype=np.float32) / np.float32(255.0)}


def _ncc(xp: ModuleType, images: Array, template: Array) -> Array:
    """Normalised cross-correlation of each image with the template, indexed by patch centre;
    -1 where the patch would leave the image."""
    h, w = images.shape[1:]
    p = template.shape[0]
    r = p // 2
    t = template - template.mean()
    t = t / xp.sqrt((t * t).sum())
    tf = xp.fft.rfft2(t, s=(h, w))
    corr = xp.fft.irfft2(xp.fft.rfft2(images) * xp.conj(tf)[None], s=(h, w))
    # Circular correlation is indexed by the patch's top-left corner; move it to the centre.
    corr = xp.roll(corr, (r, r), axis=(1, 2)).astype(xp.float32)
    s1 = box_sum(xp, box_sum(xp, images, r, 1), r, 2)
    s2 = box_sum(xp, box_sum(xp, images * images, r, 1), r, 2)
    energy = xp.maximum(s2 - s1 * s1 / (p * p), 1e-6)
    ncc = corr / xp.sqrt(energy)
    valid = xp.zeros((h, w), dtype=bool)
    valid[r : h - r, r : w - r] = True
    return xp.where(valid[None], ncc, -1.0).astype(xp.float32)


def face_locations(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Face centres: local maxima (radius ``P // 2``) of the template correlation above a threshold.

    Reads ``images``, ``face_template``; writes ``face_boxes``.
    """
    template = data["face_template"]
    ncc = _ncc(xp, data["images"], template)
    peak = (ncc == max_filter(xp, ncc, template.shape[0] // 2)) & (
        ncc > float(params.get("threshold", DETECT_THRESHOLD))
    )
    f, r, c = xp.nonzero(peak)
    return {"face_boxes": xp.stack([f, r, c], axis=1).astype(xp.int32)}


def chips_at(xp: ModuleType, images: Array, centres: Array, size: int) -> Array:
    """Zero-mean, unit-norm ``size x size`` patches of ``images`` around ``centres`` ``(m, 3)``.

    :param xp: array namespace.
    :param images: ``(n, H, W)`` float32.
    :param centres: ``(m, 3)`` int ``(frame, row, col)``; patches must lie inside the image.
    :param size: odd patch side.
    """
    r = size // 2
    off = xp.arange(-r, r + 1)
    f = centres[:, 0][:, None, None]
    rows = centres[:, 1][:, None, None] + off[None, :, None]
    cols = centres[:, 2][:, None, None] + off[None, None, :]
    chips = images[f, rows, cols].astype(xp.float32)
    chips = chips - chips.mean(axis=(1, 2), keepdims=True)
    norm = xp.sqrt((chips * chips).sum(axis=(1, 2), keepdims=True))
    return (chips / xp.maximum(norm, 1e-6)).astype(xp.float32)


def landmarks(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Aligned, normalised face chips around the detected centres.

    Reads ``images``, ``face_boxes``; writes ``chips``.
    """
    return {"chips": chips_at(xp, data["images"], data["face_boxes"], FACE_SIZE)}


def encode(xp: ModuleType, chips: Array, encoder: Array) -> Array:
    """Unit-norm encodings ``(m, E)`` of chips ``(m, P, P)`` by the projection ``encoder``.

    :param xp: array namespace.
    :param chips: normalised chips.
    :param encoder: ``(P*P, E)`` float32.
    """
    e = chips.reshape(chips.shape[0], chips.shape[1] * chips.shape[2]) @ encoder
    norm = xp.sqrt((e * e).sum(axis=1, keepdims=True))
    return (e / xp.maximum(norm, 1e-6)).astype(xp.float32)


def encodings(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Face encodings by the stream's fixed projection.

    Reads ``chips``, ``encoder``; writes ``face_encodings``.
    """
    return {"face_encodings": encode(xp, data["chips"], data["encoder"])}


def distance(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Euclidean distances between encodings and gallery entries (one GEMM).

    Reads ``face_encodings``, ``gallery``; writes ``distances``.
    """
    a, g = data["face_encodings"], data["gallery"]
    d2 = (a * a).sum(axis=1)[:, None] + (g * g).sum(axis=1)[None, :] - 2.0 * (a @ g.T)
    return {"distances": xp.sqrt(xp.maximum(d2, 0.0)).astype(xp.float32)}


def compare(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """The nearest gallery identity of each face, or -1 when none is within the tolerance (CPU).

    Reads ``distances``; writes ``identities``.
    """
    d = np.asarray(data["distances"])
    if d.shape[0] == 0:
        return {"identities": np.zeros(0, np.int32)}
    best = np.argmin(d, axis=1)
    ok = d[np.arange(d.shape[0]), best] <= float(params.get("tolerance", MATCH_TOLERANCE))
    return {"identities": np.where(ok, best, -1).astype(np.int32)}
