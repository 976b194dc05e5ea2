"""Side information of the interference model: what a kind's name and the catalog say of kinds and
devices, so that a kind or device never measured together still gets a prediction.

The encoding is versioned with the model (:data:`rlsched.interference.predictor.FEATURE_VERSION`):
change it and bump that.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from rlsched.hardware import device_models
from rlsched.workloads import KINDS

_BATCH = re.compile(r"^(?P<family>.*?)\s*\(batch size (?P<batch>\d+)\)$")
# Side features of a built-in kind after the family one-hot: has-batch, log batch, built-in flag,
# then the nominal cost model.
_KIND_TAIL = 9
DEVICE_DIM = 5


def family_of(kind: str) -> str:
    """Model family of a kind: ``"ResNet-18 (batch size 32)"`` -> ``"ResNet-18"``; otherwise the
    name itself."""
    m = _BATCH.match(kind)
    return m["family"] if m else kind


def kind_name_features(kinds: Sequence[str], families: Sequence[str]) -> np.ndarray:
    """Side features of kinds: one-hot of the family among ``families`` (all zero for a family
    not among them), the batch size when the name carries one, and the nominal cost model of the
    simulator's built-in kinds.

    :param kinds: kind names.
    :param families: the family vocabulary fixed when the model was fitted.
    """
    col = {f: i for i, f in enumerate(families)}
    x = np.zeros((len(kinds), len(families) + _KIND_TAIL), dtype=np.float32)
    for i, k in enumerate(kinds):
        m = _BATCH.match(k)
        j = col.get(m["family"] if m else k)
        if j is not None:
            x[i, j] = 1.0
        t = x[i, len(families) :]
        if m:
            # Batch sizes span 5..8192: log2, centred on 64.
            t[0], t[1] = 1.0, (math.log2(int(m["batch"]) or 1) - 6.0) / 3.0
        spec = KINDS.get(k)
        if spec is not None:
            t[2] = 1.0
            t[3] = math.log10(max(spec.gflop_per_mb, 1e-6)) / 2.0
            t[4] = math.log10(max(spec.gbytes_per_mb, 1e-6)) / 2.0
            t[5] = math.log10(max(spec.intensity, 1e-6)) / 2.0
            t[6] = math.log2(spec.fixed_mem_mb / 256.0) / 2.0
            t[7] = spec.mem_mb_per_mb / 4.0
            t[8] = float(spec.device.value == "gpu")
    return x


def device_features(devices: Sequence[str]) -> np.ndarray:
    """Side features of devices from the catalog's public specs (averaged over the models a name
    covers): has-specs flag, log FP32 TFLOP/s, log memory, log bandwidth, PCIe generation.

    :param devices: device names (catalog names, aliases or prefixes such as ``v100``).
    """
    from rlsched.hardware import CATALOG

    x = np.zeros((len(devices), DEVICE_DIM), dtype=np.float32)
    for i, d in enumerate(devices):
        models = [CATALOG[m] for m in sorted(device_models(d))]
        if not models:
            continue
        x[i, 0] = 1.0
        x[i, 1] = np.mean([math.log2(g.fp32_tflops / 10.0) for g in models])
        x[i, 2] = np.mean([math.log2(g.mem_gib / 16.0) for g in models])
        x[i, 3] = np.mean([math.log2(g.mem_bw_gbs / 600.0) for g in models])
        x[i, 4] = np.mean([g.pcie_gen - 3.0 for g in models])
    return x
