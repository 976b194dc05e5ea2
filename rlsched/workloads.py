"""Streaming applications, the subtask kinds they are made of, and their subtask DAGs.

A task of an app decomposes (MLSM fine-grained task mapping) into the app's stages; every stage is
a :class:`~rlsched.tasks.KindSpec` whose nominal cost scales with the task's input size:
``gflop = kind.gflop_per_mb * input_mb``, ``gbytes = kind.gbytes_per_mb * input_mb`` and
``mem_mb = kind.fixed_mem_mb + kind.mem_mb_per_mb * input_mb``. Stages that handle only part of the
input (the two halves of a k-means assignment) carry that fraction in their kind's per-MB figures,
so this identity holds for every subtask and a kind's cost can be predicted from the input size.

What a MB of input is
---------------------
- Video apps (intrusion detection, video synopsis): 1 MB of a 4 Mbit/s H.264 surveillance stream
  is 2 s of 1080p at 30 fps = 60 frames, analysed at 960x540 grayscale (0.52 Mpx), so
  :data:`PX_PER_MB` = 3.1e7 analysed pixels. Kind costs are written per pixel and scaled by it.
- Face recognition: JPEG keyframes of ~200 KB, i.e. 5 frames of 1080p per MB with ~3 faces each
  (:data:`FACES_PER_MB` = 15).
- Generic apps say what they assume next to their kinds.

Calibration target (checked by ``tests/test_workloads.py``)
-----------------------------------------------------------
At the mean of an app's default input range, the GPU-capable stages of each video app take
roughly 8-20 s on a Tesla P4 (5.5 TFLOP/s, 192 GB/s) by a roofline at 50% of peak FLOP/s and
bandwidth, and its CPU-only stages a few seconds (1-8 s) on one 25 GFLOP/s core. Figures at the
mean input size (P4 at 50%/50%; CPU at 25 GFLOP/s, traffic ignored):

=====================  =======  =========  ======  =========  =====  =====
app                    mean MB  GPU GFLOP  GPU GB  CPU GFLOP  GPU s  CPU s
=====================  =======  =========  ======  =========  =====  =====
intrusion_detection    125      15,008     717     78         10.4   3.1
video_synopsis         160      1,081      833     98         8.7    3.9
face_recognition       125      24,386     595     78         9.0    3.1
matmul                 100      5,150      50      0          1.9    0
fft                    250      301        182     0          1.9    0
kmeans                 125      8,200      101     0          3.0    0
=====================  =======  =========  ======  =========  =====  =====

The generic apps are shorter: they exercise scheduling of compute-bound, chained and
fan-out/fan-in work rather than reproduce the paper's task sizes.

Device memory per GPU-capable subtask lies between ~0.2 and 2 GB over the default input ranges,
so four subtasks share an 8 GB P4.

Co-location apps: ``colo:<kind>`` names one GPU-only subtask of kind ``<kind>`` (a kind measured in
a co-location CSV such as ``ResNet-18 (batch size 32)``); see :func:`colo_kind`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlsched.tasks import Device, KindSpec, Subtask, SubtaskGraph

#: Analysed pixels per MB of video input (60 frames of 960x540 grayscale; see the module docstring).
PX_PER_MB = 3.1e7
#: Faces per MB of face-recognition input (5 JPEG keyframes of 1080p, ~3 faces each).
FACES_PER_MB = 15.0
#: Prefix of co-location apps: ``colo:<kind>``.
COLO_PREFIX = "colo:"
#: Default input range of apps that do not set one, MB.
DEFAULT_INPUT_MB = (50.0, 200.0)


def _video(
    name: str, device: Device, flop_px: float, bytes_px: float, mem_mb_per_mb: float, fixed_mem_mb: float
) -> KindSpec:
    """A video kind from its per-analysed-pixel FLOPs and memory traffic (bytes)."""
    return KindSpec(
        name, device, flop_px * PX_PER_MB / 1e9, bytes_px * PX_PER_MB / 1e9, mem_mb_per_mb, fixed_mem_mb
    )


def _faces(
    name: str,
    device: Device,
    gflop_face: float,
    gbytes_face: float,
    mem_mb_per_mb: float,
    fixed_mem_mb: float,
) -> KindSpec:
    """A face-recognition kind from its per-face GFLOP and GB of traffic."""
    return KindSpec(
        name, device, gflop_face * FACES_PER_MB, gbytes_face * FACES_PER_MB, mem_mb_per_mb, fixed_mem_mb
    )


B, G, C = Device.BOTH, Device.GPU, Device.CPU
# Memory: most video stages hold the compressed chunk (1 MB/MB) plus decoded frame batches on the
# device; fixed parts are decoder surfaces, model state, cuDNN/cuBLAS workspaces.
_KIND_LIST: tuple[KindSpec, ...] = (
    # --- video analytics (intrusion detection, video synopsis) ----------------------------------
    # Background model: K=3 Gaussians/pixel, fp32 (weight, mean, var) = 36 B state read and written,
    # plus 1 B frame in and 1 B mask out = 74 B/px; match test + update + re-sort ~60 flop/px.
    # Intensity 0.8: memory-bound everywhere.
    _video("gmm", B, 60, 74, 3.0, 256.0),
    # |f_t - f_t-1| on fp32 frames AND-ed with the GMM mask, thresholded: reads 2x4 B + 1 B mask,
    # writes a 4 B difference and a 1 B mask = 14 B/px for ~8 flop. Intensity 0.6: the most
    # memory-bound kind.
    _video("frame_diff", B, 8, 14, 2.0, 128.0),
    # 4 octaves (x4/3 pixels), 6 levels each, separable Gaussians of 9-31 taps (mean ~21):
    # 2 passes x 21 taps x 2 flop = 84 flop/level -> 504 flop/px/octave -> 672 flop/px. One fused
    # kernel per octave keeps levels in shared memory: reads the base (4 B), writes 6 levels
    # (24 B) -> 37 B/px. Intensity 18: compute-bound on Volta/Ampere, near the ridge on P4/T4.
    _video("gaussian_pyramid", B, 672, 37, 6.0, 256.0),
    # DoG kernels are not separable: 5 direct 15x15 convolutions per octave from the octave base
    # (5 x 225 x 2 = 2,250 flop/px, x4/3 = 3,000); reads the base, writes 5 levels (32 B/px with
    # the 4/3). Intensity 94: strongly compute-bound.
    _video("dog_pyramid", B, 3000, 32, 5.0, 256.0),
    # 26-neighbour max/min over 3 inner DoG scales (~90 flop) + contrast and edge tests on
    # candidates (~10), x4/3 = 133 flop/px; reads 5 DoG levels (20 B) + keypoints, x4/3 = 28 B/px.
    # Intensity 4.8: memory-bound.
    _video("extrema_detection", B, 133, 28, 4.0, 128.0),
    # CPU: connected components of the motion mask (~10 op/px), blob features, keypoint matching
    # between frames and Kalman updates (~10 flop/px amortised); reads mask and labels (2 B/px).
    _video("tracking", C, 20, 2, 1.0, 64.0),
    # Morphological open/close 5x5 on the mask (4 x 25 op), label-propagation CCL (~8 iterations
    # of 4 B labels read+written = 64 B/px), cropping object patches (~4 B/px + 50 flop):
    # ~150 flop, 80 B/px. Intensity 1.9: memory-bound.
    _video("tube_extraction", B, 150, 80, 4.0, 256.0),
    # CPU: simulated annealing over tube time shifts (collision, chronology and activity costs
    # evaluated on tube masks downsampled 4x per axis, which stay in cache); work grows with the
    # tubes, i.e. with the input: ~16 flop and ~2 B per analysed pixel amortised.
    _video("tube_optimisation", C, 16, 2, 1.5, 128.0),
    # CPU: paste tubes onto the GMM background with alpha blending; the synopsis is ~1/16 of the
    # input length, 3 channels, ~60 flop and ~36 B per output pixel -> ~3.75 flop and 2.25 B per
    # analysed input pixel.
    _video("stitching", C, 3.75, 2.25, 1.0, 128.0),
    # --- face recognition ----------------------------------------------------------------------
    # CPU: JPEG decode + colour conversion, ~5 ms per 1080p frame on one core (libjpeg-turbo)
    # = 0.125 GFLOP-equivalent/frame x 5 frames/MB; writes 6 MB RGB per frame. Host memory:
    # the compressed chunk plus a batch of 64 decoded frames.
    KindSpec("load", C, 0.125 * 5, 0.006 * 5, 1.0, 400.0),
    # GPU only (face_recognition's batch_face_locations needs CUDA): the dlib MMOD CNN detector
    # over an image pyramid of a 1080p frame, ~30 GFLOP/frame; batched activations give an
    # intensity of ~40. Memory: network + activations of a batch of 8 frames + uploaded frames.
    KindSpec("face_locations", G, 30.0 * 5, 0.75 * 5, 5.0, 768.0),
    # 68-point ERT shape predictor (15 cascades x 500 trees, ~1 MFLOP/face) + warping a 150x150
    # face chip (~1 MFLOP); random pixel gathers cost a 32 B sector per byte and the 95 MB model
    # streams through L2: ~7 MB/face. Intensity 0.3: latency/memory-bound, cheap.
    _faces("landmarks", B, 0.002, 0.007, 1.0, 160.0),
    # ResNet-29 face encoder (dlib) on 150x150 chips, ~3 GFLOP/face with jitter, intensity ~50.
    # GPU only in the batched pipeline (chips and activations stay on the device).
    _faces("encodings", G, 3.0, 0.06, 2.0, 512.0),
    # 128-d encodings against a gallery of 10,000 known faces: 3 x 128 x 1e4 = 3.84 MFLOP/face;
    # the 5 MB gallery is read once per batch of faces (~0.13 MB/face) -> intensity ~29.
    _faces("distance", B, 0.00384, 0.00013, 1.0, 192.0),
    # CPU: argmin and tolerance test over 10,000 distances per face plus identity bookkeeping.
    _faces("compare", C, 0.0001, 0.00008, 0.1, 64.0),
    # --- generic GPU apps ----------------------------------------------------------------------
    # A 24-layer dense network of 4096x4096 fp32 weights over input rows (64 rows of 16 KB per
    # MB): 2 x 4096^2 x 64 x 24 = 51.5 GFLOP/MB; weights re-read per row tile and activations
    # give ~0.5 GB/MB (intensity ~100). Memory: two layers double-buffered + workspace, in/out
    # activations.
    KindSpec("matmul", B, 51.5, 0.5, 2.0, 512.0),
    # Overlap-save FFT convolution with a bank of 64 filters (e.g. trial dispersion measures of
    # a pulsar search) on real fp32 samples (2.6e5 per MB, 2^20-point chunks, 25% overlap):
    # forward FFT 2.5 N log2 N = 50 flop/sample x 1.33; 3 passes of 8 B -> intensity ~2.
    KindSpec("fft", B, 0.0175, 0.0084, 2.0, 192.0),
    # Complex multiply of the spectrum by 64 filters (6 flop/bin); writes 64 spectra (90 MB/MB)
    # and streams the filter coefficients (~90 MB/MB). Intensity 0.4: memory-bound.
    KindSpec("spectral_filter", B, 0.067, 0.18, 3.0, 320.0),
    # 64 inverse FFTs: 64x the forward FFT's work and traffic. Intensity 2.
    KindSpec("ifft", B, 1.12, 0.54, 3.0, 320.0),
    # Streaming k-means building a visual vocabulary: k = 65,536 centroids of 128-d SIFT
    # descriptors (1,953 per MB), centroids carried over from the previous chunk. Full
    # assignment is 2 x 1953 x 65536 x 128 = 32.8 GFLOP/MB; each subtask assigns *half* of the
    # points (16.4 GFLOP per MB of task input). Fused GEMM + argmin re-streams the 32 MB of
    # centroids per point tile: ~0.2 GB/MB, intensity ~80. GPU only: a CPU vocabulary of this
    # size is impractically slow.
    KindSpec("kmeans_assign", G, 16.4, 0.2, 1.0, 192.0),
    # Scatter-add of the points into centroid sums (atomics, ~4x effective traffic) and division:
    # ~0.5 MFLOP, ~5 MB per MB. Intensity 0.1. Memory: sums and counts of 65,536 centroids.
    KindSpec("kmeans_update", B, 0.0005, 0.005, 1.0, 192.0),
)
del B, G, C

#: Every built-in subtask kind by name.
KINDS: dict[str, KindSpec] = {k.name: k for k in _KIND_LIST}


@dataclass(frozen=True)
class Stage:
    """One stage of an app: a subtask kind and the stages it depends on.

    :param kind: the subtask kind.
    :param parents: indices of earlier stages whose output it needs.
    """

    kind: KindSpec
    parents: tuple[int, ...] = ()


@dataclass(frozen=True)
class AppSpec:
    """A streaming application: its stages in topological order and its default input size.

    :param name: app name used in scenarios.
    :param stages: stages, parents before children.
    :param input_mb: (low, high) of the uniform default input size per task, MB.
    :param description: one line on what a task of the app does.
    """

    name: str
    stages: tuple[Stage, ...]
    input_mb: tuple[float, float] = DEFAULT_INPUT_MB
    description: str = ""

    def __post_init__(self) -> None:
        for i, st in enumerate(self.stages):
            if any(p < 0 or p >= i for p in st.parents):
                raise ValueError(f"app {self.name!r}: stage {i} has a parent that does not precede it")
        lo, hi = self.input_mb
        if not 0 < lo <= hi:
            raise ValueError(f"app {self.name!r}: input_mb must satisfy 0 < low <= high, got {self.input_mb}")


def _app(
    name: str, stages: list[tuple[str, tuple[int, ...]]], input_mb: tuple[float, float], desc: str
) -> AppSpec:
    return AppSpec(name, tuple(Stage(KINDS[k], p) for k, p in stages), input_mb, desc)


_APP_LIST: tuple[AppSpec, ...] = (
    # The pyramid runs on GMM-masked frames and the frame difference restricts extrema to moving
    # regions, so gmm fans out to frame_diff and gaussian_pyramid and extrema_detection fans in.
    _app(
        "intrusion_detection",
        [
            ("gmm", ()),
            ("frame_diff", (0,)),
            ("gaussian_pyramid", (0,)),
            ("dog_pyramid", (2,)),
            ("extrema_detection", (1, 3)),
            ("tracking", (4,)),
        ],
        (50.0, 200.0),
        "detect and track moving objects entering a scene",
    ),
    # Stitching pastes the optimised tubes onto the GMM's background image: a second edge from gmm.
    _app(
        "video_synopsis",
        [
            ("gmm", ()),
            ("frame_diff", (0,)),
            ("tube_extraction", (1,)),
            ("tube_optimisation", (2,)),
            ("stitching", (0, 3)),
        ],
        (80.0, 240.0),
        "condense a long recording into a short video of all its activity",
    ),
    _app(
        "face_recognition",
        [
            ("load", ()),
            ("face_locations", (0,)),
            ("landmarks", (1,)),
            ("encodings", (2,)),
            ("distance", (3,)),
            ("compare", (4,)),
        ],
        (50.0, 200.0),
        "find faces in keyframes and match them against a gallery",
    ),
    _app("matmul", [("matmul", ())], (40.0, 160.0), "dense network inference over a batch of rows"),
    _app(
        "fft",
        [("fft", ()), ("spectral_filter", (0,)), ("ifft", (1,))],
        (100.0, 400.0),
        "FFT convolution of a signal with a bank of 64 filters",
    ),
    # Two Lloyd iterations, each assigning two halves of the points in parallel (two roots).
    _app(
        "kmeans",
        [
            ("kmeans_assign", ()),
            ("kmeans_assign", ()),
            ("kmeans_update", (0, 1)),
            ("kmeans_assign", (2,)),
            ("kmeans_assign", (2,)),
            ("kmeans_update", (3, 4)),
        ],
        (50.0, 200.0),
        "two streaming k-means iterations over a chunk of descriptors",
    ),
)

#: Built-in apps by name.
APPS: dict[str, AppSpec] = {a.name: a for a in _APP_LIST}
#: The three video-analytics apps of the TPDS paper.
PAPER_APPS: tuple[str, ...] = ("intrusion_detection", "video_synopsis", "face_recognition")

_COLO_KINDS: dict[str, KindSpec] = {}
_COLO_APPS: dict[str, AppSpec] = {}
# Per app: (kind, gflop/MB, GB/MB, mem MB/MB, fixed mem MB, parents) for each stage.
_Plan = tuple[tuple[KindSpec, float, float, float, float, tuple[int, ...]], ...]
_PLANS: dict[str, _Plan] = {}


def colo_kind(kind: str) -> KindSpec:
    """The GPU-only kind of a co-location measurement, created once and cached.

    Its nominal cost is a placeholder (1 GFLOP and 0.05 GB per MB, 1 GiB fixed memory): measured
    kinds are judged by their measured throughputs, not by a roofline.

    :param kind: the kind as written in a co-location CSV, e.g. ``"ResNet-18 (batch size 32)"``.
    :raises ValueError: if ``kind`` is empty or is the name of a built-in kind.
    """
    spec = _COLO_KINDS.get(kind)
    if spec is None:
        if not kind or kind in KINDS:
            raise ValueError(f"co-location kind must be non-empty and not a built-in kind, got {kind!r}")
        spec = _COLO_KINDS[kind] = KindSpec(kind, Device.GPU, 1.0, 0.05, 0.0, 1024.0)
    return spec


def app_spec(app: str) -> AppSpec:
    """The spec of a built-in app or of a ``colo:<kind>`` app.

    :param app: app name.
    :raises KeyError: naming the known apps when ``app`` is unknown.
    """
    spec = APPS.get(app) or _COLO_APPS.get(app)
    if spec is not None:
        return spec
    if app.startswith(COLO_PREFIX):
        try:
            kind = colo_kind(app[len(COLO_PREFIX) :])
        except ValueError as e:
            raise KeyError(f"unknown app {app!r}: {e}") from None
        spec = _COLO_APPS[app] = AppSpec(
            app, (Stage(kind),), DEFAULT_INPUT_MB, "one measured co-location kind"
        )
        return spec
    known = ", ".join(sorted(APPS))
    raise KeyError(f"unknown app {app!r}; known: {known}, or {COLO_PREFIX}<kind of a co-location CSV>")


def is_known_app(name: str) -> bool:
    """Whether ``name`` is a built-in app or a valid ``colo:<kind>`` app.

    :param name: app name.
    """
    try:
        app_spec(name)
    except KeyError:
        return False
    return True


def default_input_mb(app: str) -> tuple[float, float]:
    """(low, high) default input size of ``app``, MB.

    :param app: app name.
    """
    return app_spec(app).input_mb


def _plan(app: str) -> _Plan:
    spec = app_spec(app)
    plan = tuple(
        (
            s.kind,
            s.kind.gflop_per_mb,
            s.kind.gbytes_per_mb,
            s.kind.mem_mb_per_mb,
            s.kind.fixed_mem_mb,
            s.parents,
        )
        for s in spec.stages
    )
    _PLANS[app] = plan
    return plan


def build_graph(app: str, input_mb: float) -> SubtaskGraph:
    """The subtask DAG of one task of ``app`` with ``input_mb`` of input.

    :param app: app name (built-in or ``colo:<kind>``).
    :param input_mb: task input size, MB (> 0).
    :raises KeyError: for an unknown app.
    :raises ValueError: for a non-positive or non-finite size.
    """
    plan = _PLANS.get(app) or _plan(app)
    if not 0.0 < input_mb < float("inf"):
        raise ValueError(f"input_mb must be positive and finite, got {input_mb!r}")
    x = float(input_mb)
    return SubtaskGraph(
        tuple(Subtask(i, k, g * x, b * x, f + m * x, p) for i, (k, g, b, m, f, p) in enumerate(plan))
    )
