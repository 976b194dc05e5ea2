"""Checks of a task's final outputs against ground truth or an independent NumPy reference.

Each checker raises ``AssertionError`` with a message saying what is wrong; use them through
:func:`check_result`.
"""

from __future__ import annotations

import numpy as np

from runtime.kernels.generic_kernels import fft_size
from runtime.kernels.task_data import TaskData

#: Largest mean distance between a track and its object's true centres, px.
TRACK_TOLERANCE_PX = 2.0
#: Smallest share of a chunk's frames a track must cover.
TRACK_COVERAGE = 0.8


def _track_error(track: np.ndarray, truth: np.ndarray) -> tuple[float, int]:
    """Mean distance over the frames where ``track`` is defined, and their number."""
    ok = ~np.isnan(track[:, 0])
    n = int(ok.sum())
    if n == 0:
        return float("inf"), 0
    return float(np.linalg.norm(track[ok] - truth[ok], axis=1).mean()), n


def check_intrusion(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """Every object has a track covering most frames within :data:`TRACK_TOLERANCE_PX`, and no
    track of 3 or more points follows nothing."""
    tracks = np.asarray(data["tracks"], dtype=np.float64)
    gt = task.truth["trajectories"]
    n_obj, t_len = gt.shape[:2]
    assert tracks.ndim == 3 and tracks.shape[1:] == (t_len, 2), f"tracks shape {tracks.shape}"
    errors = np.array([[_track_error(tr, gt[i]) for tr in tracks] for i in range(n_obj)]).reshape(
        n_obj, len(tracks), 2
    )
    for i in range(n_obj):
        good = (errors[i, :, 0] <= TRACK_TOLERANCE_PX) & (errors[i, :, 1] >= TRACK_COVERAGE * t_len)
        assert good.any(), (
            f"{task.app} stream {task.stream} chunk {task.chunk}: object {i} has no track within "
            f"{TRACK_TOLERANCE_PX} px over {TRACK_COVERAGE:.0%} of {t_len} frames; "
            f"(error, frames) of the tracks: {errors[i].round(2).tolist()}"
        )
    for k in range(len(tracks)):
        if errors[0, k, 1] >= 3:
            assert (errors[:, k, 0] <= 2 * TRACK_TOLERANCE_PX).any(), (
                f"{task.app} stream {task.stream} chunk {task.chunk}: track {k} of {int(errors[0, k, 1])} "
                f"points follows no object (errors {errors[:, k, 0].round(2).tolist()})"
            )


def _runs(visible: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs ``(first, last)`` of True."""
    edges = np.diff(np.concatenate([[0], visible.astype(np.int8), [0]]))
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1, strict=True))


def check_synopsis(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """Every visible run of every object became one tube (IoU >= 0.7 with its true pixels), no
    other tube exists, and each run's pixels show at the tube's place in the synopsis."""
    labels, syn = np.asarray(data["tube_labels"]), np.asarray(data["synopsis"])
    shifts, boxes = np.asarray(data["tube_shifts"]), np.asarray(data["tube_boxes"])
    frames, ids = task.inputs["frames"], task.truth["object_ids"]
    where = f"{task.app} stream {task.stream} chunk {task.chunk}"
    length = int(np.asarray(data["synopsis_length"])[0])
    assert syn.shape == (length, *frames.shape[1:]), f"{where}: synopsis shape {syn.shape}, length {length}"
    assert length <= frames.shape[0], f"{where}: synopsis of {length} frames is longer than the chunk"
    matched: list[int] = []
    for i, vis in enumerate(task.truth["visible"]):
        for a, b in _runs(vis):
            gt = ids[a : b + 1] == i + 1
            lab = labels[a : b + 1]
            votes = np.bincount(lab[gt], minlength=2)
            j = int(np.argmax(votes[1:])) + 1
            tube = labels == j
            iou = votes[j] / (gt.sum() + tube.sum() - votes[j])
            assert iou >= 0.7, f"{where}: object {i} frames {a}-{b}: best tube {j} has IoU {iou:.2f}"
            assert j not in matched, f"{where}: tube {j} covers two objects or runs"
            matched.append(j)
            first = int(np.flatnonzero(boxes[j - 1, :, 0] >= 0)[0])
            shown = []
            for t in range(a, b + 1):
                m = ids[t] == i + 1
                k = int(shifts[j - 1]) + t - first
                assert 0 <= k < length, f"{where}: tube {j} frame {t} lands outside the synopsis ({k})"
                shown.append(np.abs(syn[k][m].astype(np.int16) - frames[t][m]) <= 2)
            frac = float(np.concatenate(shown).mean())
            assert frac >= 0.5, f"{where}: only {frac:.0%} of object {i}'s pixels show in the synopsis"
    assert len(matched) == boxes.shape[0], f"{where}: {boxes.shape[0]} tubes for {len(matched)} object runs"


def check_faces(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """Every face is found within 1 px and identified (or reported unknown) correctly; nothing else
    is reported."""
    truth = task.truth["faces"]
    boxes, idents = np.asarray(data["face_boxes"]), np.asarray(data["identities"])
    where = f"{task.app} stream {task.stream} chunk {task.chunk}"
    assert len(boxes) == len(truth) == len(idents), (
        f"{where}: {len(boxes)} detections and {len(idents)} identities for {len(truth)} faces"
    )
    for f, r, c, ident in truth:
        d = np.abs(boxes[:, 1] - r) + np.abs(boxes[:, 2] - c) + 1000 * (boxes[:, 0] != f)
        k = int(np.argmin(d))
        assert d[k] <= 2, f"{where}: face at frame {f} ({r}, {c}) not found (nearest off by {d[k]})"
        assert idents[k] == ident, f"{where}: face at frame {f} ({r}, {c}) is {ident}, reported {idents[k]}"


def check_matmul(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """The output equals a float64 forward pass."""
    h = task.inputs["rows"].astype(np.float64)
    ws = task.inputs["weights"].astype(np.float64)
    for layer in range(len(ws)):
        h = h @ ws[layer]
        if layer < len(ws) - 1:
            h = np.maximum(h, 0.0)
    out = np.asarray(data["output"], dtype=np.float64)
    assert out.shape == h.shape, f"matmul output shape {out.shape}, expected {h.shape}"
    err = float(np.abs(out - h).max() / max(float(np.abs(h).max()), 1e-30))
    assert err <= 1e-4, f"matmul stream {task.stream} chunk {task.chunk}: relative error {err:.2e}"


def check_fft(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """The outputs equal direct linear convolutions: all of them against a float64 FFT
    convolution, and at least one per segment and per filter against ``np.convolve`` itself; beyond
    the convolution's length they are zero (no wrap-around)."""
    sig, h = task.inputs["signal"].astype(np.float64), task.truth["filters"].astype(np.float64)
    out = np.asarray(data["convolved"], dtype=np.float64)
    (s, n), (f, taps) = sig.shape, h.shape
    nfft = fft_size(n)
    assert out.shape == (s, f, nfft), f"fft output shape {out.shape}, expected {(s, f, nfft)}"
    full = n + taps - 1
    ref = np.fft.irfft(np.fft.rfft(sig, nfft)[:, None, :] * np.fft.rfft(h, nfft)[None, :, :], nfft)
    tol = 1e-4 * max(float(np.abs(ref).max()), 1.0)
    for p in range(max(s, f)):
        direct = np.convolve(sig[p % s], h[p % f])
        err = float(np.abs(out[p % s, p % f, :full] - direct).max())
        assert err <= tol, f"fft segment {p % s} filter {p % f}: off direct convolution by {err:.2e}"
    err = np.abs(out - ref).max(axis=2)
    worst = np.unravel_index(int(np.argmax(err)), err.shape)
    assert err[worst] <= tol, f"fft segment {worst[0]} filter {worst[1]}: off by {err[worst]:.2e}"


def _lloyd(points: np.ndarray, cen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One float64 Lloyd step with the kernels' convention for empty clusters."""
    d2 = (points**2).sum(1)[:, None] + (cen**2).sum(1)[None, :] - 2.0 * points @ cen.T
    lab = np.argmin(d2, axis=1)
    counts = np.bincount(lab, minlength=len(cen))
    sums = np.zeros_like(cen)
    np.add.at(sums, lab, points)
    new = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], cen)
    return lab, new


def check_kmeans(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """Assignments and centroids of both iterations equal a float64 Lloyd reference."""
    pts = np.concatenate([task.inputs["points_0"], task.inputs["points_1"]]).astype(np.float64)
    cen = task.inputs["centroids"].astype(np.float64)
    half = len(task.inputs["points_0"])
    for it in (1, 2):
        lab, cen = _lloyd(pts, cen)
        got = np.concatenate([np.asarray(data[f"assign_{it}_0"]), np.asarray(data[f"assign_{it}_1"])])
        bad = int((got != lab).sum())
        assert bad == 0, (
            f"kmeans iteration {it}: {bad} of {len(lab)} points assigned differently ({half} per half)"
        )
        err = float(np.abs(np.asarray(data[f"centroids_{it}"], dtype=np.float64) - cen).max())
        assert err <= 1e-4, f"kmeans iteration {it}: centroids off by {err:.2e}"


#: The checker of each app.
CHECKERS = {
    "intrusion_detection": check_intrusion,
    "video_synopsis": check_synopsis,
    "face_recognition": check_faces,
    "matmul": check_matmul,
    "fft": check_fft,
    "kmeans": check_kmeans,
}


def check_result(task: TaskData, data: dict[str, np.ndarray]) -> None:
    """Check a finished task's outputs (host NumPy arrays) against the truth.

    intrusion_detection: every object has a track within 2 px (mean) over >= 80% of the frames,
    and no long track follows nothing; video_synopsis: every visible run of every object is one
    tube and shows in the synopsis; face_recognition: every face found and identified; matmul:
    equals a float64 forward pass; fft: equals direct convolution; kmeans: assignments and
    centroids equal a float64 Lloyd reference.

    :param task: the task.
    :param data: its arrays after all stages (inputs may be absent).
    :raises AssertionError: naming what is wrong.
    """
    CHECKERS[task.app](task, data)
