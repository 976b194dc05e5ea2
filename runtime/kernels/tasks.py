"""Live task data: the inputs of one task of an app, their cache ids, and the right answers.

``make_task_data(app, stream, chunk)`` is deterministic. Inputs that repeat across the chunks of a
stream (the background image of a video stream, the weights of a matmul stream, the filter bank of
an fft stream, the starting centroids of a kmeans stream, the template/encoder/gallery of a face
stream) carry an id shared by all chunks of the stream, ``"{app}/s{seed}/{stream}/{name}"``;
per-task inputs carry ``"{app}/s{seed}/{stream}/{chunk}/{name}"``.

Sizes, and the nominal input size ``input_mb`` handed to ``rlsched.workloads.build_graph`` (chosen
so that the nominal GFLOP of the app's main GPU stage matches the kernel's real FLOPs; the tests
check a factor of 2):

===================  =============================================  =======================================
app                  small / medium                                 input_mb
===================  =============================================  =======================================
intrusion_detection  12 / 24 frames of 96x128 / 192x256, 3 / 6      analysed pixels / PX_PER_MB; main
                     objects, always visible                        stage gaussian_pyramid: 496 real vs
                                                                    672 nominal flop/px (dog_pyramid is a
                                                                    subtraction, far below its nominal)
video_synopsis       16 / 32 frames of 96x128 / 192x256, 3 / 6      analysed pixels / PX_PER_MB
                     objects, each visible half of the time
face_recognition     4 / 8 keyframes of 180x240 / 360x480, 6 / 12   real face_locations GFLOP / its
                     faces each (1 in 5 unknown), gallery 64 / 256  gflop_per_mb (a toy detector: tiny)
matmul               256 / 512 rows, 4 layers of 768^2 / 1536^2     real GFLOP / KINDS["matmul"]
                     (weights 92% of the input bytes)               .gflop_per_mb
fft                  8 / 16 segments of 7,680 / 15,360 samples,     real ifft GFLOP (2.5 n log2 n per
                     32 / 48 filters of 257 taps, nfft 8192 /       transform) / KINDS["ifft"]
                     16384 (filter spectra 81% / 76% of bytes)      .gflop_per_mb
kmeans               1,024 / 3,072 points of d = 128, k = 2,048 /   real GFLOP of one kmeans_assign half
                     6,144 centroids (centroids 67% of bytes)       / KINDS["kmeans_assign"].gflop_per_mb
===================  =============================================  =======================================

NumPy time of a whole task on one core (``python -m runtime.kernels``): ~5-35 ms at small,
~10x that at medium.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from rlsched.workloads import KINDS, PX_PER_MB
from runtime.kernels.faces import FaceStream, face_stream, generate_keyframes
from runtime.kernels.generic_kernels import fft_size
from runtime.kernels.task_data import TaskData
from runtime.kernels.video import generate_video

SCALES = ("small", "medium")

# (frames, height, width, objects) of one chunk.
_VIDEO = {
    "intrusion_detection": {"small": (12, 96, 128, 3), "medium": (24, 192, 256, 6)},
    "video_synopsis": {"small": (16, 96, 128, 3), "medium": (32, 192, 256, 6)},
}
# (keyframes, height, width, faces per frame, gallery size).
_FACES = {"small": (4, 180, 240, 6, 64), "medium": (8, 360, 480, 12, 256)}
# (rows, width, layers).
_MATMUL = {"small": (256, 768, 4), "medium": (512, 1536, 4)}
# (segments, samples per segment, filters, taps).
_FFT = {"small": (8, 7680, 32, 257), "medium": (16, 15360, 48, 257)}
# (points, dim, centroids).
_KMEANS = {"small": (1024, 128, 2048), "medium": (3072, 128, 6144)}
#: Spread of k-means points around the centroid they were drawn from (centroids are N(0, 1) in
#: 128-d: the nearest centroid is never in doubt, so float32, float64 and GPU GEMMs agree).
KMEANS_SPREAD = 0.3


def _rng(seed: int, app: str, stream: int, *rest: int) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(app.encode()), stream, *rest])


def _stream_seed(seed: int, app: str, stream: int) -> int:
    return int(np.random.SeedSequence([seed, zlib.crc32(app.encode()), stream]).generate_state(1)[0])


def _ids(
    app: str, seed: int, stream: int, chunk: int, shared: frozenset[str], names: list[str]
) -> dict[str, str]:
    base = f"{app}/s{seed}/{stream}"
    return {n: f"{base}/{n}" if n in shared else f"{base}/{chunk}/{n}" for n in names}


def _video(app: str, stream: int, chunk: int, seed: int, scale: str) -> TaskData:
    t, h, w, n = _VIDEO[app][scale]
    duty = 1.0 if app == "intrusion_detection" else 0.5
    v = generate_video(_stream_seed(seed, app, stream), t, h, w, n, start_frame=chunk * t, duty=duty)
    inputs = {"frames": v.frames, "background": v.background}
    truth = {"trajectories": v.trajectories, "visible": v.visible, "object_ids": v.object_ids}
    shared = frozenset({"background"})
    ids = _ids(app, seed, stream, chunk, shared, list(inputs))
    return TaskData(app, stream, chunk, inputs, ids, t * h * w / PX_PER_MB, truth, scale, shared)


def _frozen(*arrays: np.ndarray) -> None:
    # Shared per-stream inputs are cached and handed to every chunk: nobody may write them.
    for a in arrays:
        a.setflags(write=False)


@functools.lru_cache(maxsize=8)
def _face_stream(seed: int, app: str, stream: int, gallery: int) -> FaceStream:
    fs = face_stream(_stream_seed(seed, app, stream), gallery)
    _frozen(fs.template, fs.faces, fs.encoder, fs.gallery)
    return fs


def _faces(app: str, stream: int, chunk: int, seed: int, scale: str) -> TaskData:
    n, h, w, per_frame, gallery = _FACES[scale]
    fs = _face_stream(seed, app, stream, gallery)
    chunk_seed = _stream_seed(seed, app, stream) ^ (chunk * 0x9E3779B1)
    frames, truth = generate_keyframes(fs, chunk_seed, n, h, w, per_frame)
    inputs = {"keyframes": frames, "face_template": fs.template, "encoder": fs.encoder, "gallery": fs.gallery}
    shared = frozenset({"face_template", "encoder", "gallery"})
    ids = _ids(app, seed, stream, chunk, shared, list(inputs))
    # FFT correlation (three 2-D FFTs) plus box sums and the max filter, per keyframe.
    gflop = n * (7.5 * h * w * math.log2(h * w) + 60.0 * h * w) / 1e9
    mb = gflop / KINDS["face_locations"].gflop_per_mb
    return TaskData(app, stream, chunk, inputs, ids, mb, {"faces": truth}, scale, shared)


@functools.lru_cache(maxsize=8)
def _matmul_weights(seed: int, app: str, stream: int, d: int, layers: int) -> np.ndarray:
    # He initialisation keeps activations of order one through the ReLU layers.
    ws = _rng(seed, app, stream).standard_normal((layers, d, d), dtype=np.float32)
    ws *= np.float32(math.sqrt(2.0 / d))
    _frozen(ws)
    return ws


def _matmul(app: str, stream: int, chunk: int, seed: int, scale: str) -> TaskData:
    rows, d, layers = _MATMUL[scale]
    ws = _matmul_weights(seed, app, stream, d, layers)
    x = _rng(seed, app, stream, chunk).standard_normal((rows, d), dtype=np.float32)
    inputs = {"rows": x, "weights": ws}
    gflop = 2.0 * rows * d * d * layers / 1e9
    shared = frozenset({"weights"})
    ids = _ids(app, seed, stream, chunk, shared, list(inputs))
    return TaskData(app, stream, chunk, inputs, ids, gflop / KINDS["matmul"].gflop_per_mb, {}, scale, shared)


@functools.lru_cache(maxsize=8)
def _fft_filters(
    seed: int, app: str, stream: int, filters: int, taps: int, nfft: int
) -> tuple[np.ndarray, np.ndarray]:
    """Windowed random filters ``(F, taps)`` float32 and their spectra ``(F, nfft/2+1)`` complex64."""
    window = np.hanning(taps + 2)[1:-1]
    h = (_rng(seed, app, stream).normal(0.0, 1.0, (filters, taps)) * window / math.sqrt(taps)).astype(
        np.float32
    )
    spectra = np.fft.rfft(h.astype(np.float64), n=nfft, axis=1).astype(np.complex64)
    _frozen(h, spectra)
    return h, spectra


def _fft(app: str, stream: int, chunk: int, seed: int, scale: str) -> TaskData:
    segs, n, filters, taps = _FFT[scale]
    nfft = fft_size(n)
    if taps > nfft - n + 1:
        raise AssertionError(f"fft sizes: {taps} taps wrap around in {nfft}-point FFTs of {n} samples")
    h, spectra = _fft_filters(seed, app, stream, filters, taps, nfft)
    sig = _rng(seed, app, stream, chunk).standard_normal((segs, n), dtype=np.float32)
    inputs = {"signal": sig, "filter_spectra": spectra}
    gflop = segs * filters * 2.5 * nfft * math.log2(nfft) / 1e9
    shared = frozenset({"filter_spectra"})
    ids = _ids(app, seed, stream, chunk, shared, list(inputs))
    return TaskData(
        app, stream, chunk, inputs, ids, gflop / KINDS["ifft"].gflop_per_mb, {"filters": h}, scale, shared
    )


@functools.lru_cache(maxsize=8)
def _kmeans_centroids(seed: int, app: str, stream: int, k: int, d: int) -> np.ndarray:
    cen = _rng(seed, app, stream).standard_normal((k, d), dtype=np.float32)
    _frozen(cen)
    return cen


def _kmeans(app: str, stream: int, chunk: int, seed: int, scale: str) -> TaskData:
    points, d, k = _KMEANS[scale]
    cen = _kmeans_centroids(seed, app, stream, k, d)
    rng = _rng(seed, app, stream, chunk)
    # Points cluster around a quarter as many centroids, so updates move those visibly.
    owners = rng.choice(k, size=points // 4, replace=False)[rng.integers(0, points // 4, points)]
    pts = cen[owners] + KMEANS_SPREAD * rng.standard_normal((points, d), dtype=np.float32)
    inputs = {"points_0": pts[: points // 2].copy(), "points_1": pts[points // 2 :].copy(), "centroids": cen}
    gflop = 2.0 * (points // 2) * k * d / 1e9
    shared = frozenset({"centroids"})
    ids = _ids(app, seed, stream, chunk, shared, list(inputs))
    return TaskData(
        app, stream, chunk, inputs, ids, gflop / KINDS["kmeans_assign"].gflop_per_mb, {}, scale, shared
    )


_MAKERS: dict[str, Callable[[str, int, int, int, str], TaskData]] = {
    "intrusion_detection": _video,
    "video_synopsis": _video,
    "face_recognition": _faces,
    "matmul": _matmul,
    "fft": _fft,
    "kmeans": _kmeans,
}


def make_task_data(app: str, stream: int, chunk: int, seed: int = 0, scale: str = "small") -> TaskData:
    """The inputs and truth of chunk ``chunk`` of stream ``stream`` of ``app``.

    :param app: an app with kernels (``runtime.kernels.LIVE_APPS``).
    :param stream: stream number (>= 0); fixes the repeated inputs.
    :param chunk: chunk number (>= 0) within the stream.
    :param seed: global seed; different seeds give unrelated streams (and ids).
    :param scale: ``"small"`` (~5-40 ms of NumPy per task) or ``"medium"`` (~10x).
    :raises KeyError: for an app without kernels.
    :raises ValueError: for an unknown scale or a negative stream or chunk.
    """
    if app not in _MAKERS:
        raise KeyError(f"no live task data for app {app!r}; apps: {', '.join(_MAKERS)}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if stream < 0 or chunk < 0:
        raise ValueError(f"stream and chunk must be >= 0, got {stream}, {chunk}")
    return _MAKERS[app](app, stream, chunk, seed, scale)


def output_digest(outputs: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """A task's outputs in brief: per array its shape, dtype and CRC-32 of its bytes — enough to
    check them against the same kernels run elsewhere without shipping the arrays (what the
    scheduling service returns, and what a Ray node sends back in place of the arrays when the
    driver needs no more).

    :param outputs: the arrays by name (host NumPy).
    """
    return {
        name: {
            "shape": list(a.shape),
            "dtype": str(a.dtype),
            "crc32": zlib.crc32(np.ascontiguousarray(a).tobytes()),
        }
        for name, a in sorted(outputs.items())
    }
