"""Synthetic surveillance video whose right answers are known.

A stream (one ``seed``) is an endless video: a static textured background, mild sensor noise in
every frame and ``n_objects`` bright or dark objects (filled discs or rectangles of 5-9 px radius)
moving with constant velocity and bouncing off the borders of their region. Everything is a
closed-form function of the absolute frame index — positions by a triangle wave, noise from a
generator seeded by ``(seed, frame)`` — so chunk ``k`` (``start_frame = k * frames``) continues
chunk ``k - 1`` exactly, and chunks can be generated in any order.

Objects stay separable: object ``i`` lives in horizontal lane ``i`` (rows
``[i * H // n, (i + 1) * H // n)``) and bounces between the lane's borders vertically and the
frame's borders horizontally, at least :data:`LANE_MARGIN` px inside each, so two objects never
come closer than ``2 * LANE_MARGIN`` px and a tracker can tell them apart. A frame therefore needs
``H // n_objects >= 2 * (MIN_RADIUS + LANE_MARGIN) + 2``.

With ``duty < 1`` each object is visible only part of the time (on for ``duty`` of a period of
12-24 frames, with a random phase), which gives video synopsis separate tubes to rearrange; the
trajectories stay defined (finite) while an object is hidden.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Smallest and largest object radius, px.
MIN_RADIUS, MAX_RADIUS = 5.0, 9.0
#: Gap between an object and the border of its lane or of the frame, px.
LANE_MARGIN = 3.0
#: Sensor noise standard deviation, grey levels.
NOISE_SIGMA = 2.0
#: Speeds along the lane and across it, px per frame.
SPEED_X, SPEED_Y = (1.5, 3.5), (0.2, 0.8)


@dataclass(frozen=True)
class Video:
    """One chunk of a synthetic stream and its ground truth.

    :param frames: ``(T, H, W)`` uint8 grey frames.
    :param trajectories: ``(n_objects, T, 2)`` float64 true ``(row, col)`` centres.
    :param background: ``(H, W)`` float32 clean background (no noise, no objects).
    :param visible: ``(n_objects, T)`` bool, whether the object is drawn in the frame.
    :param object_ids: ``(T, H, W)`` uint8, 0 = background, ``i + 1`` = pixel of object ``i``.
    :param radii: ``(n_objects,)`` object radii (half the larger side for rectangles), px.
    """

    frames: np.ndarray
    trajectories: np.ndarray
    background: np.ndarray
    visible: np.ndarray
    object_ids: np.ndarray
    radii: np.ndarray


@dataclass(frozen=True)
class _Objects:
    """Per-object constants of a stream (arrays of length n)."""

    radius: np.ndarray
    half: np.ndarray  # (n, 2) half-extent of rectangles (row, col)
    is_disc: np.ndarray
    level: np.ndarray  # grey level
    lo: np.ndarray  # (n, 2) smallest centre (row, col)
    span: np.ndarray  # (n, 2) range of the centre
    p0: np.ndarray  # (n, 2) unfolded position at frame 0
    vel: np.ndarray  # (n, 2) px per frame
    period: np.ndarray
    on: np.ndarray
    phase: np.ndarray


def _objects(rng: np.random.Generator, n: int, h: int, w: int, duty: float) -> _Objects:
    lane = h // n
    if lane < 2 * (MIN_RADIUS + LANE_MARGIN) + 2:
        need = n * (2 * (MIN_RADIUS + LANE_MARGIN) + 2)
        raise ValueError(f"{n} objects need a frame of at least {need:.0f} rows, got {h}")
    r_max = min(MAX_RADIUS, (lane - 2 * LANE_MARGIN - 2) / 2, (w - 2 * LANE_MARGIN - 2) / 4)
    radius = rng.uniform(MIN_RADIUS, max(MIN_RADIUS, r_max), n)
    is_disc = rng.random(n) < 0.5
    half = np.stack([np.where(is_disc, radius, 0.8 * radius), radius], axis=1)
    bright = rng.random(n) < 0.5
    level = np.where(bright, rng.uniform(225, 250, n), rng.uniform(5, 30, n))
    lane_lo = np.arange(n) * lane
    lo = np.stack([lane_lo + half[:, 0] + LANE_MARGIN, half[:, 1] + LANE_MARGIN], axis=1)
    hi = np.stack([lane_lo + lane - 1 - half[:, 0] - LANE_MARGIN, w - 1 - half[:, 1] - LANE_MARGIN], axis=1)
    span = np.maximum(hi - lo, 1e-6)
    p0 = rng.random((n, 2)) * 2 * span
    speed = np.stack([rng.uniform(*SPEED_Y, n), rng.uniform(*SPEED_X, n)], axis=1)
    vel = speed * rng.choice([-1.0, 1.0], (n, 2))
    period = rng.integers(12, 25, n)
    on = period if duty >= 1.0 else np.clip(np.round(duty * period), 4, period).astype(np.int64)
    phase = rng.integers(0, 1_000_000, n)
    return _Objects(radius, half, is_disc, level, lo, span, p0, vel, period, on, phase)


def background_texture(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    """A static scene: smooth texture plus a few flat patches with sharp edges (clutter that a
    background model must learn and a detector must ignore), grey levels in [70, 180].

    :param rng: generator of the scene.
    :param h: height, px.
    :param w: width, px.
    """
    noise = rng.normal(0.0, 1.0, (h, w))
    for _ in range(3):  # cheap smoothing: average with the four neighbours (wrap-around is fine)
        noise = (noise + sum(np.roll(noise, s, ax) for s in (1, -1) for ax in (0, 1))) / 5
    bg = 125.0 + 18.0 * noise / max(float(noise.std()), 1e-9)
    rows, cols = np.mgrid[0:h, 0:w]
    for _ in range(2):
        ky, kx, ph = rng.uniform(0.02, 0.15), rng.uniform(0.02, 0.15), rng.uniform(0, 2 * np.pi)
        bg += 10.0 * np.cos(ky * rows + kx * cols + ph)
    for _ in range(4):
        r0, c0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        dr, dc = int(rng.integers(4, h // 3 + 5)), int(rng.integers(4, w // 3 + 5))
        bg[r0 : r0 + dr, c0 : c0 + dc] += rng.uniform(-20, 20)
    return np.clip(bg, 70.0, 180.0).astype(np.float32)


def _positions(obj: _Objects, t: np.ndarray) -> np.ndarray:
    """Centres ``(n, len(t), 2)`` at absolute frames ``t``: a triangle wave bounces off the ends."""
    x = obj.p0[:, None, :] + obj.vel[:, None, :] * t[None, :, None]
    span = obj.span[:, None, :]
    return obj.lo[:, None, :] + span - np.abs(np.mod(x, 2 * span) - span)


def _paint(frame: np.ndarray, ids: np.ndarray, obj: _Objects, i: int, centre: np.ndarray) -> None:
    """Draw object ``i`` centred at ``centre`` into ``frame`` and its id into ``ids``."""
    h, w = frame.shape
    hr, hc = obj.half[i]
    r0, r1 = max(0, int(centre[0] - hr) - 1), min(h, int(centre[0] + hr) + 2)
    c0, c1 = max(0, int(centre[1] - hc) - 1), min(w, int(centre[1] + hc) + 2)
    dr = np.arange(r0, r1)[:, None] - centre[0]
    dc = np.arange(c0, c1)[None, :] - centre[1]
    disc = dr**2 + dc**2 <= obj.radius[i] ** 2
    m = disc if obj.is_disc[i] else (np.abs(dr) <= hr) & (np.abs(dc) <= hc)
    frame[r0:r1, c0:c1][m] = obj.level[i]
    ids[r0:r1, c0:c1][m] = i + 1


def generate_video(
    seed: int,
    frames: int,
    height: int,
    width: int,
    n_objects: int,
    start_frame: int = 0,
    *,
    duty: float = 1.0,
) -> Video:
    """Frames ``[start_frame, start_frame + frames)`` of stream ``seed``.

    :param seed: the stream; the same seed gives the same background and objects.
    :param frames: number of frames T.
    :param height: frame height H, px.
    :param width: frame width W, px.
    :param n_objects: number of moving objects (one per horizontal lane).
    :param start_frame: absolute index of the first frame (chunk k of T frames: ``k * T``).
    :param duty: fraction of the time each object is visible (1 = always).
    :raises ValueError: when the frame is too small for the objects.
    """
    if frames < 1 or n_objects < 1 or start_frame < 0 or not 0.0 < duty <= 1.0:
        raise ValueError("generate_video: need frames >= 1, n_objects >= 1, start_frame >= 0, 0 < duty <= 1")
    rng = np.random.default_rng([seed, 0x71DE0])
    background = background_texture(rng, height, width)
    obj = _objects(rng, n_objects, height, width, duty)
    t_abs = np.arange(start_frame, start_frame + frames)
    traj = _positions(obj, t_abs.astype(np.float64))
    visible = np.mod(t_abs[None, :] + obj.phase[:, None], obj.period[:, None]) < obj.on[:, None]
    out = np.empty((frames, height, width), dtype=np.uint8)
    ids = np.zeros((frames, height, width), dtype=np.uint8)
    for k, t in enumerate(t_abs):
        noise_rng = np.random.default_rng([seed, 0x71DE1, int(t)])
        f = background.astype(np.float64)
        for i in np.flatnonzero(visible[:, k]):
            _paint(f, ids[k], obj, int(i), traj[i, k])
        f += noise_rng.normal(0.0, NOISE_SIGMA, f.shape)
        out[k] = np.clip(np.rint(f), 0, 255).astype(np.uint8)
    return Video(out, traj, background, visible, ids, obj.radius.copy())
