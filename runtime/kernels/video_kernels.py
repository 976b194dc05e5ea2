"""Video analytics kernels: intrusion detection and video synopsis.

Each kernel is ``fn(xp, data, params) -> dict`` (see :mod:`runtime.kernels.pipelines`); the
GPU-capable ones use only whole-array operations of ``xp``; the CPU-only ones (tracking,
tube_optimisation, stitching) receive NumPy and may loop over frames and objects.

Arrays passed between stages (T frames of H x W):

==================  ===========================  =========  ===========================================
name                shape                        dtype      written by
==================  ===========================  =========  ===========================================
frames              (T, H, W)                    uint8      task input
background          (H, W)                       float32    task input (per stream)
fg_mask             (T, H, W)                    uint8      gmm (1 = foreground)
bg_model            (H, W)                       float32    gmm (mean of the dominant Gaussian)
motion_mask         (T, H, W)                    uint8      frame_diff
pyramid             (S, T, H, W)                 float32    gaussian_pyramid (S = len(PYRAMID_SIGMAS))
dog                 (S - 1, T, H, W)             float32    dog_pyramid
blob_response       (T, H, W)                    float32    extrema_detection (0 outside object maps)
tracks              (n_tracks, T, 2)             float32    tracking ((row, col), NaN where absent)
tube_labels         (T, H, W)                    int32      tube_extraction (0 = none, i + 1 = tube i)
tube_boxes          (n_tubes, T, 4)              int32      tube_extraction ((r0, c0, r1, c1), -1 absent)
tube_shifts         (n_tubes,)                   int32      tube_optimisation (first synopsis frame)
synopsis_length     (1,)                         int32      tube_optimisation
synopsis            (L, H, W)                    uint8      stitching
==================  ===========================  =========  ===========================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from runtime.kernels.ops import (
    Array,
    bincount,
    compact_labels,
    dilate,
    erode,
    gaussian_blur,
    label_boxes,
    label_components,
)

#: Blur scales of the Gaussian pyramid, px; DoG levels are differences of neighbours. Scales 2-8
#: make the DoG peak on objects of radius 5-9 px.
PYRAMID_SIGMAS = (1.0, 2.0, 4.0, 8.0)

# GMM: learning rate, initial and smallest standard deviation, match distance in sigmas, the
# weight the dominant component needs to be the only background component.
GMM_ALPHA = 0.01
GMM_SIGMA0, GMM_SIGMA_MIN = 5.0, 4.0
GMM_MATCH = 2.5
GMM_BG_WEIGHT = 0.7
# Initial weight of the spare Gaussian (the stream's background image starts dominant).
GMM_W_SPARE = 0.05
# Grey-level change between consecutive frames that counts as motion (5 noise sigmas of a
# difference of two frames).
DIFF_THRESHOLD = 15.0
# Blob response (DoG, grey levels) above which a pixel belongs to an object map; objects of
# contrast >= 45 respond with >= 15 at their centre.
BLOB_THRESHOLD = 4.0
# Motion is seen only at the leading and trailing edges of a flat object: grow it by an object
# diameter so the whole object counts as moving.
MOTION_REACH = 18
MOTION_FRAMES = 2
# Smallest tube kept, voxels (noise specks are removed earlier by the opening).
MIN_TUBE_VOXELS = 40


def _u8(xp: ModuleType, mask: Array) -> Array:
    return mask.astype(xp.uint8)


def _first_is_0(w: Array, var: Array) -> Array:
    """Whether Gaussian 0 ranks first by ``w / sigma`` (squares compared: no square roots)."""
    return w[0] ** 2 * var[1] >= w[1] ** 2 * var[0]


def _gmm_step(
    xp: ModuleType, x: Array, mu: Array, var: Array, w: Array, alpha: float
) -> tuple[Array, Array, Array, Array]:
    """One frame ``x`` through the two-Gaussian model: ``(foreground, mu, var, w)``."""
    d2 = (x - mu) ** 2
    match = d2 < GMM_MATCH**2 * var
    first0 = _first_is_0(w, var)
    m_first = xp.where(first0, match[0], match[1])
    m_second = xp.where(first0, match[1], match[0])
    w_first = xp.where(first0, w[0], w[1])
    # Background: the first Gaussian, and the second too while the first is not dominant.
    fg = ~(m_first | (m_second & (w_first < GMM_BG_WEIGHT)))
    # The best-ranked match learns x; without a match the last-ranked Gaussian restarts at x.
    k1 = xp.where(m_first, ~first0, first0)
    hit = xp.stack([~k1, k1])
    fresh = hit & ~(m_first | m_second)[None]
    learn = hit & ~fresh
    w = (1.0 - alpha) * w + alpha * hit.astype(xp.float32)
    mu = xp.where(learn, mu + alpha * (x - mu), mu)
    var = xp.where(learn, xp.maximum(var + alpha * (d2 - var), GMM_SIGMA_MIN**2), var)
    mu = xp.where(fresh, x, mu)
    var = xp.where(fresh, GMM_SIGMA0**2, var).astype(xp.float32)
    w = xp.where(fresh, alpha, w)
    return fg, mu, var, (w / w.sum(axis=0)).astype(xp.float32)


def gmm(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Per-pixel mixture of two Gaussians (Stauffer-Grimson), initialised from the stream's
    background, run over the chunk's frames in order.

    Reads ``frames``, ``background``; writes ``fg_mask``, ``bg_model``.
    """
    frames, bg = data["frames"], data["background"].astype(xp.float32)
    alpha = float(params.get("alpha", GMM_ALPHA))
    mu = xp.stack([bg, bg])
    var = xp.full(mu.shape, GMM_SIGMA0**2, dtype=xp.float32)
    w = xp.stack(
        [xp.full(bg.shape, 1.0 - GMM_W_SPARE, xp.float32), xp.full(bg.shape, GMM_W_SPARE, xp.float32)]
    )
    fg = xp.empty(frames.shape, dtype=xp.uint8)
    for t in range(frames.shape[0]):
        mask, mu, var, w = _gmm_step(xp, frames[t].astype(xp.float32), mu, var, w, alpha)
        fg[t] = _u8(xp, mask)
    return {"fg_mask": fg, "bg_model": xp.where(_first_is_0(w, var), mu[0], mu[1]).astype(xp.float32)}


def frame_diff(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Thresholded absolute difference of consecutive frames, AND the GMM foreground.

    The first frame of a chunk has no predecessor in the task; it uses its successor instead.
    Reads ``frames``, ``fg_mask``; writes ``motion_mask``.
    """
    f = data["frames"].astype(xp.float32)
    thr = float(params.get("threshold", DIFF_THRESHOLD))
    diff = xp.empty(f.shape, dtype=xp.float32)
    diff[1:] = xp.abs(f[1:] - f[:-1])
    diff[0] = diff[1] if f.shape[0] > 1 else 0.0
    return {"motion_mask": _u8(xp, (diff > thr) & (data["fg_mask"] != 0))}


def gaussian_pyramid(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Gaussian scale space of the foreground saliency ``|frame - background| * fg`` at
    :data:`PYRAMID_SIGMAS` (full resolution, separable blurs with taps out to 4 sigma).

    Reads ``frames``, ``fg_mask``, ``bg_model``; writes ``pyramid``.
    """
    sal = xp.abs(data["frames"].astype(xp.float32) - data["bg_model"][None]) * (data["fg_mask"] != 0)
    sal = sal.astype(xp.float32)
    sigmas = params.get("sigmas", PYRAMID_SIGMAS)
    return {"pyramid": xp.stack([gaussian_blur(xp, sal, float(s)) for s in sigmas])}


def dog_pyramid(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Differences of adjacent pyramid levels (band-pass blob responses).

    Reads ``pyramid``; writes ``dog``.
    """
    p = data["pyramid"]
    return {"dog": p[:-1] - p[1:]}


def extrema_detection(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Per-frame object maps: pixels whose strongest DoG response over scales exceeds a threshold,
    restricted to foreground near motion; the map keeps the response as a weight.

    Reads ``dog``, ``motion_mask``, ``fg_mask``; writes ``blob_response``.
    """
    resp = data["dog"].max(axis=0)
    reach = int(params.get("motion_reach", MOTION_REACH))
    # Grown across frames too: a flat object that turns at a border barely changes for a frame.
    near = dilate(xp, dilate(xp, data["motion_mask"] != 0, reach), MOTION_FRAMES, axes=(0,))
    moving = near & (data["fg_mask"] != 0)
    keep = moving & (resp > float(params.get("threshold", BLOB_THRESHOLD)))
    return {"blob_response": xp.where(keep, resp, 0.0).astype(xp.float32)}


def _detections(resp: np.ndarray, min_pixels: int) -> list[np.ndarray]:
    """Response-weighted centroids ``(m, 2)`` of the 8-connected components of each frame."""
    t_len = resp.shape[0]
    labels = label_components(np, resp > 0, axes=(1, 2))
    t, r, c = np.nonzero(labels)
    out = [np.zeros((0, 2)) for _ in range(t_len)]
    if t.size == 0:
        return out
    uniq, ids = np.unique(labels[t, r, c], return_inverse=True)
    wgt = resp[t, r, c].astype(np.float64)
    mass = np.bincount(ids, wgt)
    cent = np.stack([np.bincount(ids, wgt * r), np.bincount(ids, wgt * c)], axis=1) / mass[:, None]
    area = np.bincount(ids)
    frame = (uniq - 1) // (resp.shape[1] * resp.shape[2])
    for k in range(t_len):
        out[k] = cent[(frame == k) & (area >= min_pixels)]
    return out


@dataclass
class _Track:
    pos: np.ndarray
    last: int
    vel: np.ndarray = field(default_factory=lambda: np.zeros(2))
    points: dict[int, np.ndarray] = field(default_factory=dict)

    def predict(self, t: int) -> np.ndarray:
        return self.pos + self.vel * (t - self.last)

    def add(self, t: int, p: np.ndarray) -> None:
        if self.points:
            self.vel = (p - self.pos) / (t - self.last)
        self.pos, self.last = p, t
        self.points[t] = p


def _greedy_match(dist: np.ndarray, gate: float) -> list[tuple[int, int]]:
    """Pairs ``(row, col)`` of ``dist`` taken in increasing distance, each row and column once."""
    rows: set[int] = set()
    cols: set[int] = set()
    pairs = []
    for flat in np.argsort(dist, axis=None, kind="stable"):
        a, j = divmod(int(flat), dist.shape[1])
        if dist[a, j] > gate:
            break
        if a not in rows and j not in cols:
            rows.add(a)
            cols.add(j)
            pairs.append((a, j))
    return pairs


def tracking(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Track objects across the chunk (CPU): per-frame connected components of the object maps,
    response-weighted centroids, greedy nearest-neighbour association to constant-velocity
    predictions; a track survives ``max_gap`` frames without a detection.

    Reads ``blob_response``; writes ``tracks``.
    """
    resp = np.asarray(data["blob_response"])
    gate, max_gap = float(params.get("gate", 12.0)), int(params.get("max_gap", 2))
    dets = _detections(resp, int(params.get("min_pixels", 5)))
    tracks: list[_Track] = []
    for t, d in enumerate(dets):
        active = [tr for tr in tracks if t - tr.last <= max_gap + 1]
        used = np.zeros(len(d), dtype=bool)
        if active and len(d):
            pred = np.array([tr.predict(t) for tr in active])
            for a, j in _greedy_match(np.linalg.norm(pred[:, None, :] - d[None, :, :], axis=2), gate):
                active[a].add(t, d[j])
                used[j] = True
        for new in np.flatnonzero(~used).tolist():
            tracks.append(_Track(d[new], t))
            tracks[-1].add(t, d[new])
    out = np.full((len(tracks), len(dets), 2), np.nan, dtype=np.float32)
    for k, tr in enumerate(tracks):
        for t, p in tr.points.items():
            out[k, t] = p
    return {"tracks": out}


def tube_extraction(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Object tubes: the GMM foreground cleaned by a 3x3 opening and closing, cut into
    spatio-temporal connected components (26-connectivity across frames); components without
    motion or smaller than ``min_voxels`` are dropped.

    Reads ``fg_mask``, ``motion_mask``; writes ``tube_labels``, ``tube_boxes``.
    """
    fg = data["fg_mask"] != 0
    fg = dilate(xp, erode(xp, fg, 1), 1)  # opening: removes specks
    fg = erode(xp, dilate(xp, fg, 1), 1)  # closing: fills pinholes
    labels, ids, n = compact_labels(xp, label_components(xp, fg, axes=(0, 1, 2)))
    coords = xp.nonzero(labels)
    volume = bincount(xp, ids, n)
    moving = bincount(xp, ids, n, weights=(data["motion_mask"][coords] != 0).astype(xp.float32))
    keep = (volume >= int(params.get("min_voxels", MIN_TUBE_VOXELS))) & (moving > 0)
    new_id = (xp.cumsum(keep.astype(xp.int32)) * keep).astype(xp.int32)
    out = xp.zeros(labels.shape, dtype=xp.int32)
    out[coords] = new_id[ids]
    n_kept = int(keep.sum())
    return {"tube_labels": out, "tube_boxes": label_boxes(xp, out, n_kept)}


def _occupancy(labels: np.ndarray, i: int, span: tuple[int, int], cell: int) -> np.ndarray:
    """Tube ``i``'s frames downsampled to cells of ``cell x cell`` px: ``(len, cells)`` float32."""
    m = labels[span[0] : span[1] + 1] == i + 1
    t_len, h, w = m.shape
    hp, wp = -h % cell, -w % cell
    m = np.pad(m, ((0, 0), (0, hp), (0, wp)))
    blocks = m.reshape(t_len, (h + hp) // cell, cell, (w + wp) // cell, cell).any(axis=(2, 4))
    return blocks.reshape(t_len, -1).astype(np.float32)


def _overlap_tables(occ: list[np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
    """For tubes i < j, the overlap (in cells) when tube j starts ``d`` frames after tube i in the
    synopsis, as an array indexed by ``d + len_j - 1`` for ``-len_j < d < len_i``."""
    tables = {}
    for i in range(len(occ)):
        for j in range(i + 1, len(occ)):
            m = occ[i] @ occ[j].T  # m[u, v]: frame u of i against frame v of j
            li, lj = m.shape
            # i at s_i, j at s_j = s_i + d: frame u of i meets frame v = u - d of j.
            tables[i, j] = np.array([np.trace(m, offset=-d) for d in range(-(lj - 1), li)])
    return tables


def tube_optimisation(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Choose each tube's start frame in a synopsis of ``ratio`` times the chunk length (at least
    the longest tube) minimising overlaps between tubes, plus a small penalty for reordering
    tubes in time: simulated annealing with a fixed seed over tube masks downsampled 4x per axis.

    Reads ``tube_labels``, ``tube_boxes``; writes ``tube_shifts``, ``synopsis_length``.
    """
    labels, boxes = np.asarray(data["tube_labels"]), np.asarray(data["tube_boxes"])
    n, t_len = boxes.shape[0], labels.shape[0]
    present = boxes[..., 0] >= 0
    spans = [(int(np.argmax(p)), int(t_len - 1 - np.argmax(p[::-1]))) for p in present]
    lens = np.array([b - a + 1 for a, b in spans], dtype=np.int64)
    length = max(int(lens.max()) if n else 1, math.ceil(float(params.get("ratio", 0.5)) * t_len))
    if n == 0:
        return {"tube_shifts": np.zeros(0, np.int32), "synopsis_length": np.array([length], np.int32)}
    cell = int(params.get("cell", 4))
    tables = _overlap_tables([_occupancy(labels, i, spans[i], cell) for i in range(n)])
    order = np.array([a for a, _ in spans])
    chrono = float(params.get("chronology_weight", 0.5))

    def pair_cost(i: int, j: int, s: np.ndarray) -> float:
        a, b = min(i, j), max(i, j)
        d = int(s[b] - s[a])
        tab = tables[a, b]
        k = d + int(lens[b]) - 1
        clash = float(tab[k]) if 0 <= k < tab.size else 0.0
        flipped = (order[a] - order[b]) * (s[a] - s[b]) < 0
        return clash + chrono * float(flipped)

    def tube_cost(i: int, s: np.ndarray) -> float:
        return sum(pair_cost(i, j, s) for j in range(n) if j != i)

    rng = np.random.default_rng(int(params.get("seed", 0)))
    top = length - lens
    s = np.minimum(order * top // max(t_len - 1, 1), top)  # start from the original order
    cost = sum(tube_cost(i, s) for i in range(n)) / 2
    best, best_cost = s.copy(), cost
    iters = int(params.get("iterations", 60)) * n
    temp0 = max(1.0, cost / max(n, 1))
    for it in range(iters):
        temp = temp0 * (0.01 ** (it / max(iters - 1, 1)))
        i = int(rng.integers(n))
        cand = s.copy()
        cand[i] = rng.integers(0, top[i] + 1)
        delta = tube_cost(i, cand) - tube_cost(i, s)
        if delta <= 0 or rng.random() < math.exp(-delta / temp):
            s, cost = cand, cost + delta
            if cost < best_cost - 1e-9:
                best, best_cost = s.copy(), cost
    return {"tube_shifts": best.astype(np.int32), "synopsis_length": np.array([length], np.int32)}


def stitching(xp: ModuleType, data: dict[str, Array], params: dict[str, Any]) -> dict[str, Array]:
    """Paste every tube's pixels at its synopsis time onto the GMM background (CPU); where tubes
    overlap, their pixels are averaged (alpha blending with equal weights).

    Reads ``bg_model``, ``frames``, ``tube_labels``, ``tube_boxes``, ``tube_shifts``,
    ``synopsis_length``; writes ``synopsis``.
    """
    frames, labels = np.asarray(data["frames"]), np.asarray(data["tube_labels"])
    boxes, shifts = np.asarray(data["tube_boxes"]), np.asarray(data["tube_shifts"])
    length = int(np.asarray(data["synopsis_length"])[0])
    h, w = labels.shape[1:]
    acc = np.zeros((length, h, w), np.float32)
    cnt = np.zeros((length, h, w), np.float32)
    for i in range(boxes.shape[0]):
        frames_i = np.flatnonzero(boxes[i, :, 0] >= 0)
        for t in frames_i:
            r0, c0, r1, c1 = (int(v) for v in boxes[i, t])
            m = labels[t, r0 : r1 + 1, c0 : c1 + 1] == i + 1
            k = int(shifts[i]) + int(t - frames_i[0])
            acc[k, r0 : r1 + 1, c0 : c1 + 1][m] += frames[t, r0 : r1 + 1, c0 : c1 + 1][m]
            cnt[k, r0 : r1 + 1, c0 : c1 + 1][m] += 1.0
    bg = np.broadcast_to(np.asarray(data["bg_model"], np.float32), acc.shape)
    syn = np.where(cnt > 0, acc / np.maximum(cnt, 1.0), bg)
    return {"synopsis": np.clip(np.rint(syn), 0, 255).astype(np.uint8)}
