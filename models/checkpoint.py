"""Checkpoints: weights plus a JSON of metadata with the sha256 of every file.

Loading verifies each checksum before reading, loads weights with ``torch.load(weights_only=True)``
(never unpickling arbitrary objects), and refuses a checkpoint whose feature-encoder version
differs from the caller's — a network trained on other features would silently mis-schedule.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch

WEIGHTS = "weights.pt"
META = "meta.json"


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt, or incompatible with this build."""


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_checkpoint(directory: str | Path, state_dict: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Write ``weights.pt`` and ``meta.json`` (with checksums) into ``directory``.

    Files are written to temporary names and renamed, so a crash never leaves a half-written
    checkpoint that looks complete.

    :param directory: created if missing.
    :param state_dict: the network's weights.
    :param meta: JSON-serialisable metadata (feature version, scenario, hyper-parameters, ...).
    """
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / (WEIGHTS + ".tmp")
    torch.save({k: v.detach().cpu() for k, v in state_dict.items()}, tmp)
    os.replace(tmp, d / WEIGHTS)
    full = {**meta, "files": {WEIGHTS: sha256(d / WEIGHTS)}}
    tmp_meta = d / (META + ".tmp")
    tmp_meta.write_text(json.dumps(full, indent=2, sort_keys=True))
    os.replace(tmp_meta, d / META)
    return d


def load_checkpoint(
    directory: str | Path, feature_version: int
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Verify and load a checkpoint.

    :param directory: a directory written by :func:`save_checkpoint`.
    :param feature_version: the feature-encoder version of the caller.
    :raises CheckpointError: naming the file and what is wrong.
    """
    d = Path(directory)
    meta_path = d / META
    if not meta_path.is_file():
        raise CheckpointError(f"{meta_path}: not found (is {d} a checkpoint directory?)")
    try:
        meta = json.loads(meta_path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{meta_path}: not valid JSON ({e})") from None
    files = meta.get("files")
    if not isinstance(files, dict) or WEIGHTS not in files:
        raise CheckpointError(f"{meta_path}: no checksum for {WEIGHTS}")
    for name, digest in files.items():
        p = d / name
        if not p.is_file():
            raise CheckpointError(f"{p}: missing")
        if sha256(p) != digest:
            raise CheckpointError(f"{p}: sha256 does not match {meta_path} (corrupt or modified)")
    got = meta.get("feature_version")
    if got != feature_version:
        raise CheckpointError(
            f"{meta_path}: trained with feature version {got}, this build encodes version {feature_version}; "
            "retrain (rlsched train) or use a build with matching features"
        )
    state = torch.load(d / WEIGHTS, map_location="cpu", weights_only=True)
    return state, meta
