"""What the service learns online, checkpointed atomically and reloaded at start.

Layout of the state folder::

    current.json                 which checkpoints are current, and their update counts
    interference-<n>/            an interference model (``InterferencePredictor.save``)

A checkpoint is written to a new folder; only then is ``current.json`` replaced (written to a
temporary file, flushed to disk, renamed), so a crash at any moment leaves the previous state or
the new one, never a mix. Folders ``current.json`` does not name are removed after the switch.
After a ``kill -9`` the service therefore loses at most what it learnt since the last checkpoint
(``checkpoint_interval_s``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.checkpoint import CheckpointError
from rlsched.interference.predictor import InterferencePredictor

log = logging.getLogger(__name__)

CURRENT = "current.json"


@dataclass
class Learned:
    """Learned state as saved.

    :param interference: the interference model, if one was saved.
    :param interference_updates: online updates it had received.
    :param models: GPU models it was calibrated on (catalog names).
    :param version: the checkpoint's number (grows by one per save).
    :param origin: sha256 of the configured model the learning started from (``None``: from the
        service's own survey).
    """

    interference: InterferencePredictor | None = None
    interference_updates: int = 0
    models: list[str] = field(default_factory=list)
    version: int = 0
    origin: str | None = None


class LearnedState:
    """The service's learned-state folder.

    :param folder: where checkpoints live (created on first save).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.saved_version = 0
        self.saved_at: float | None = None

    def load(self) -> Learned | None:
        """The current checkpoint, or ``None`` when there is none.

        :raises CheckpointError: a ``current.json`` or a checkpoint it names that is unreadable
            or corrupt (the service refuses to start rather than silently forget).
        """
        path = self.folder / CURRENT
        if not path.is_file():
            return None
        try:
            doc: Any = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CheckpointError(path, "<syntax>", "the state's current.json", str(e)) from None
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
            raise CheckpointError(path, "version", "an integer checkpoint number", doc)
        origin = doc.get("origin_sha256")
        out = Learned(
            version=doc["version"],
            models=[str(m) for m in doc.get("models", [])],
            origin=origin if isinstance(origin, str) else None,
        )
        name = doc.get("interference")
        if name is not None:
            if not isinstance(name, str) or "/" in name or name.startswith("."):
                raise CheckpointError(path, "interference", "a checkpoint folder's name", name)
            out.interference = InterferencePredictor.load(self.folder / name)
            out.interference_updates = int(doc.get("interference_updates", 0))
        self.saved_version = out.version
        return out

    def save(self, learned: Learned) -> int:
        """Write ``learned`` as the next checkpoint and make it current; its number."""
        self.folder.mkdir(parents=True, exist_ok=True)
        version = self.saved_version + 1
        doc: dict[str, Any] = {
            "version": version,
            "models": sorted(learned.models),
            "origin_sha256": learned.origin,
            "saved_at": time.time(),
        }
        if learned.interference is not None:
            name = f"interference-{version}"
            target = self.folder / name
            if target.exists():  # left by a crash before current.json named it
                shutil.rmtree(target)
            learned.interference.save(target)
            doc |= {"interference": name, "interference_updates": learned.interference_updates}
        tmp = self.folder / (CURRENT + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.folder / CURRENT)
        self.saved_version, self.saved_at = version, time.time()
        self._prune(doc)
        return version

    def _prune(self, doc: dict[str, Any]) -> None:
        keep = {doc.get("interference")}
        for p in self.folder.iterdir():
            if p.is_dir() and p.name.startswith("interference-") and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)
