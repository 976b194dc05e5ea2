"""Synthetic faces with known identities and positions, for the face recognition kernels.

A face is an opaque ``P x P`` patch (:data:`~runtime.kernels.face_kernels.FACE_SIZE`): a template
shared by all faces (an oval with two eyes and a mouth) plus a smooth random pattern of similar
strength that makes the identity. A stream has a fixed template, a gallery of known identities
(their encodings) and a fixed random projection as "encoder"; keyframes paste faces of known and
some unknown identities onto the video background texture at separate places.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from runtime.kernels.face_kernels import FACE_SIZE, chips_at, encode
from runtime.kernels.video import NOISE_SIGMA, background_texture


@dataclass(frozen=True)
class FaceStream:
    """The constants of a face recognition stream.

    :param template: ``(P, P)`` float32 detector template.
    :param faces: ``(G, P, P)`` float32 clean grey faces of the gallery's identities.
    :param encoder: ``(P*P, E)`` float32 projection.
    :param gallery: ``(G, E)`` float32 encodings of ``faces``.
    """

    template: np.ndarray
    faces: np.ndarray
    encoder: np.ndarray
    gallery: np.ndarray


def _template(p: int) -> np.ndarray:
    y, x = (np.mgrid[0:p, 0:p] - p // 2) / (p / 2)
    t = np.where(x**2 / 0.7 + y**2 < 0.95, 0.6, -0.4)
    for ex in (-0.38, 0.38):  # eyes
        t = np.where((x - ex) ** 2 + (y + 0.3) ** 2 < 0.03, -0.9, t)
    t = np.where((np.abs(y - 0.4) < 0.07) & (np.abs(x) < 0.35), -0.8, t)  # mouth
    return t.astype(np.float32)


def _identity(rng: np.random.Generator, p: int) -> np.ndarray:
    """A smooth zero-mean pattern of unit standard deviation."""
    z = rng.normal(size=(p, p))
    for _ in range(2):
        z = (z + np.roll(z, 1, 0) + np.roll(z, -1, 0) + np.roll(z, 1, 1) + np.roll(z, -1, 1)) / 5
    z -= z.mean()
    return z / z.std()


def _face(template: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    return np.clip(128.0 + 60.0 * template + 30.0 * pattern, 0, 255).astype(np.float32)


def face_stream(seed: int, identities: int, dim: int = 128) -> FaceStream:
    """The template, gallery faces, encoder and gallery encodings of stream ``seed``.

    :param seed: stream seed.
    :param identities: gallery size G.
    :param dim: encoding dimension E.
    """
    rng = np.random.default_rng([seed, 0xFACE])
    p = FACE_SIZE
    template = _template(p)
    faces = np.stack([_face(template, _identity(rng, p)) for _ in range(identities)])
    encoder = (rng.normal(size=(p * p, dim)) / np.sqrt(dim)).astype(np.float32)
    centres = np.array([[i, p // 2, p // 2] for i in range(identities)])
    gallery = encode(np, chips_at(np, faces / np.float32(255.0), centres, p), encoder)
    return FaceStream(template, faces, encoder, gallery)


def generate_keyframes(
    stream: FaceStream,
    seed: int,
    frames: int,
    height: int,
    width: int,
    faces_per_frame: int,
    unknown_fraction: float = 0.2,
) -> tuple[np.ndarray, np.ndarray]:
    """Keyframes with faces pasted at separate places.

    :param stream: the stream's constants.
    :param seed: seed of this chunk.
    :param frames: number of keyframes.
    :param height: frame height, px.
    :param width: frame width, px.
    :param faces_per_frame: faces per keyframe (each in its own cell of a grid).
    :param unknown_fraction: probability that a face is not in the gallery.
    :returns: ``(keyframes (n, H, W) uint8, truth (m, 4) int64 of (frame, row, col, identity))``,
        identity -1 for faces not in the gallery.
    :raises ValueError: when the faces do not fit.
    """
    p = FACE_SIZE
    cell = p + 8  # cells keep faces 8 px apart and the detector's peaks distinct
    grid_r, grid_c = (height - 2) // cell, (width - 2) // cell
    if grid_r * grid_c < faces_per_frame:
        raise ValueError(f"{faces_per_frame} faces of {p} px do not fit a {height}x{width} frame")
    rng = np.random.default_rng([seed, 0xFAC1])
    bg = background_texture(np.random.default_rng([seed, 0xFAC2]), height, width)
    out = np.empty((frames, height, width), np.uint8)
    truth = []
    for f in range(frames):
        img = bg + rng.normal(0.0, NOISE_SIGMA, bg.shape)
        for k in rng.choice(grid_r * grid_c, faces_per_frame, replace=False):
            r0 = 1 + (k // grid_c) * cell + int(rng.integers(0, cell - p + 1))
            c0 = 1 + (k % grid_c) * cell + int(rng.integers(0, cell - p + 1))
            if rng.random() < unknown_fraction:
                ident, face = -1, _face(stream.template, _identity(rng, p))
            else:
                ident = int(rng.integers(len(stream.faces)))
                face = stream.faces[ident]
            img[r0 : r0 + p, c0 : c0 + p] = face + rng.normal(0.0, NOISE_SIGMA, face.shape)
            truth.append((f, r0 + p // 2, c0 + p // 2, ident))
        out[f] = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    return out, np.array(truth, dtype=np.int64).reshape(-1, 4)
