"""The fit store of the simulation commands (``evaluate``, ``simulate``, ``train --stage 2``): each
fitted interference model is a checkpoint folder under the cache (``fits/KEY``, the cache folder
of :mod:`experiments.bound_cache`), so every worker process and every later command reuses the
model one of them fitted instead of fitting it again (:mod:`rlsched.interference.fit_store`).

A stored model is read as any checkpoint is (checksums verified, ``weights_only``); one that
cannot be read is fitted again, and a cache that cannot be written is skipped. ``RLSCHED_FIT_CACHE=0``
turns the store off.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.bound_cache import cache_dir
from models.checkpoint import CheckpointError
from rlsched.interference import fit_store

if TYPE_CHECKING:  # torch: imported only once a model is read
    from rlsched.interference.predictor import InterferencePredictor

#: The environment variable that turns the store off (``0``).
ENV = "RLSCHED_FIT_CACHE"


class DiskFitStore:
    """Fitted models as checkpoint folders under ``folder``.

    :param folder: created on the first write.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str) -> InterferencePredictor | None:
        path = self.folder / key
        if not path.is_dir():
            return None
        from rlsched.interference.predictor import InterferencePredictor

        try:
            return InterferencePredictor.load(path)
        except (CheckpointError, OSError):  # torn or corrupt: fitted again, then replaced
            return None

    def put(self, key: str, predictor: InterferencePredictor) -> None:
        tmp = self.folder / f".{key}.{os.getpid()}.tmp"
        try:
            predictor.save(tmp)
            shutil.rmtree(self.folder / key, ignore_errors=True)  # a torn copy get() refused
            os.replace(tmp, self.folder / key)
        except OSError:  # read-only or full: the next run fits again
            shutil.rmtree(tmp, ignore_errors=True)


def install() -> None:
    """Use the disk store in this process (unless ``RLSCHED_FIT_CACHE=0``)."""
    if os.environ.get(ENV, "1") != "0":
        fit_store.use_store(DiskFitStore(cache_dir() / "fits"))
