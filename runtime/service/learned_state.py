"""What the service learns online, checkpointed atomically and reloaded at start.

Layout of the state folder::

    current.json                 which checkpoints are current, and their update counts
    interference-<n>/            an interference model (``InterferencePredictor.save``)
    ldwp-<n>/                    the selector learner's network (an LDWP checkpoint)
    promoted-<n>/                a network the learner proposed and the canary promoted: the
                                 incumbent selector after a restart

``current.json`` also holds ``auto``'s decision (``scheduler = "auto"``): the pair it chose and
the recogniser that chose it, so that a restarted service runs that pair at once.

A checkpoint is written to a new folder; only then is ``current.json`` replaced (written to a
temporary file, flushed to disk, renamed), so a crash at any moment leaves the previous state or
the new one, never a mix. Folders ``current.json`` does not name are removed after the switch.
After a ``kill -9`` the service therefore loses at most what it learnt since the last checkpoint
(``checkpoint_interval_s``).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.checkpoint import CheckpointError, save_checkpoint
from rlsched.errors import InputError
from runtime import failpoints
from runtime.service.preflight import check_state_dir

if TYPE_CHECKING:  # torch: imported only when there is a learned model to read
    from models.qnet import NodeScorer
    from rlsched.interference.predictor import InterferencePredictor

log = logging.getLogger(__name__)

CURRENT = "current.json"
#: A network and its checkpoint metadata.
Network = tuple["NodeScorer", dict[str, Any]]


@dataclass
class Learned:
    """Learned state as saved.

    :param interference: the interference model, if one was saved.
    :param interference_updates: online updates it had received.
    :param models: GPU models it was calibrated on (catalog names).
    :param version: the checkpoint's number (grows by one per save).
    :param origin: sha256 of the configured model the learning started from (``None``: from the
        service's own survey).
    :param selector: the selector learner's network and its checkpoint metadata.
    :param selector_updates: the learner's gradient steps.
    :param promoted: a learnt network the canary promoted (network, metadata).
    :param selector_origin: sha256 of the selector checkpoint its learning started from.
    :param auto: ``auto``'s decision: ``{"recogniser_sha256": ..., "choice": Choice.to_dict()}``.
    """

    interference: InterferencePredictor | None = None
    interference_updates: int = 0
    models: list[str] = field(default_factory=list)
    version: int = 0
    origin: str | None = None
    selector: Network | None = None
    selector_updates: int = 0
    promoted: Network | None = None
    selector_origin: str | None = None
    auto: dict[str, Any] | None = None


class LearnedState:
    """The service's learned-state folder.

    :param folder: where checkpoints live (created on first save).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.saved_version = 0
        self.saved_at: float | None = None
        self._attempts = 0  # the failpoint state-full fails the first ones

    def load_at_start(self, where: str) -> Learned | None:
        """:meth:`load` as a start reads it (the service's, and ``rlsched serve --check``'s): a
        ``state_dir`` that cannot hold checkpoints, or a state that cannot be read, is an
        :class:`~rlsched.errors.InputError` naming ``state_dir``.

        :param where: the config file (named in errors).
        """
        check_state_dir(str(self.folder), where)
        try:
            return self.load()
        except CheckpointError as e:
            hint = f"state_dir ({self.folder}); move it aside to start afresh"
            raise InputError.from_checkpoint(e, hint) from None

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
        name = self._folder(path, doc, "interference")
        if name is not None:
            out.interference = _interference(self.folder / name)
            out.interference_updates = int(doc.get("interference_updates", 0))
        name = self._folder(path, doc, "selector")
        if name is not None:
            out.selector = _network(self.folder / name)
            out.selector_updates = int(doc.get("selector_updates", 0))
            origin = doc.get("selector_origin_sha256")
            out.selector_origin = origin if isinstance(origin, str) else None
        name = self._folder(path, doc, "promoted")
        if name is not None:
            out.promoted = _network(self.folder / name)
        auto = doc.get("auto")
        if auto is not None:
            if not isinstance(auto, dict) or not isinstance(auto.get("choice"), dict):
                raise CheckpointError(path, "auto", "auto's decision: {recogniser_sha256, choice}", auto)
            out.auto = auto
        self.saved_version = out.version
        saved_at = doc.get("saved_at")
        self.saved_at = float(saved_at) if isinstance(saved_at, int | float) else None
        return out

    @staticmethod
    def _folder(path: Path, doc: dict[str, Any], key: str) -> str | None:
        name = doc.get(key)
        if name is not None and (not isinstance(name, str) or "/" in name or name.startswith(".")):
            raise CheckpointError(path, key, "a checkpoint folder's name", name)
        return name

    def save(self, learned: Learned) -> int:
        """Write ``learned`` as the next checkpoint and make it current; its number.

        :raises OSError: the folder cannot take it (a full disk); nothing current changed.
        """
        self._attempts += 1
        full = failpoints.value("state-full")
        if full is not None and self._attempts <= int(full):
            raise OSError(errno.ENOSPC, "No space left on device (failpoint state-full)")
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
        if learned.selector is not None:
            doc |= {
                "selector": self._network(f"ldwp-{version}", learned.selector),
                "selector_updates": learned.selector_updates,
                "selector_origin_sha256": learned.selector_origin,
            }
        if learned.promoted is not None:
            doc["promoted"] = self._network(f"promoted-{version}", learned.promoted)
        if learned.auto is not None:
            doc["auto"] = learned.auto
        tmp = self.folder / (CURRENT + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.folder / CURRENT)
        self.saved_version, self.saved_at = version, time.time()
        self._prune(doc)
        return version

    def _network(self, name: str, network: Network) -> str:
        target = self.folder / name
        if target.exists():  # left by a crash before current.json named it
            shutil.rmtree(target)
        net, meta = network
        save_checkpoint(target, net.state_dict(), {k: v for k, v in meta.items() if k != "files"})
        return name

    def _prune(self, doc: dict[str, Any]) -> None:
        keep = {doc.get("interference"), doc.get("selector"), doc.get("promoted")}
        for p in self.folder.iterdir():
            if p.is_dir() and p.name.startswith(_PREFIXES) and p.name not in keep:
                shutil.rmtree(p, ignore_errors=True)


#: Checkpoint folders this module writes (and prunes).
_PREFIXES = ("interference-", "ldwp-", "promoted-")


def _interference(folder: Path) -> InterferencePredictor:
    """A saved interference model (torch is imported here, not by a service that has none)."""
    from rlsched.interference.predictor import InterferencePredictor

    return InterferencePredictor.load(folder)


def _network(folder: Path) -> Network:
    """A saved selector network and its metadata (torch is imported here, as above)."""
    from rlsched.scorer_io import scorer_from_checkpoint

    return scorer_from_checkpoint(folder)
