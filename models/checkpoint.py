"""Checkpoints: weights plus a JSON of metadata with the sha256 of every file, and of itself.

``meta.json`` says how the weights are built and fed (feature version, layer sizes, the run's
settings), so it is sealed too: its ``meta_sha256`` key holds the sha256 of the rest of it
(:func:`meta_digest`). Loading verifies each checksum before reading, loads weights with
``torch.load(weights_only=True)`` (never unpickling arbitrary objects), and refuses a checkpoint
whose feature-encoder version differs from the caller's — a network trained on other features
would silently mis-schedule.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

WEIGHTS = "weights.pt"
META = "meta.json"
#: The key of ``meta.json`` that holds the sha256 of the rest of it. Checkpoints written before
#: it (2026-12-07) have none and are read as before; one that has it must match.
META_SHA256 = "meta_sha256"


class _Nothing:
    """No offending value to show; pickles as this one object (Ray, multiprocessing)."""

    def __reduce__(self) -> str:
        return "_NOTHING"


_NOTHING: Any = _Nothing()


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt, or incompatible with this build.

    One line of the shape every bad input of rlsched has (``rlsched.errors.InputError``, which
    this package may not import): ``PATH: FIELD: expected WHAT[, got VALUE][; HINT]``. The code
    that reads a user's checkpoint maps it with ``InputError.from_checkpoint``.

    :param path: the file at fault (``meta.json``, ``weights.pt``) or the checkpoint directory.
    :param field: what in it: a key of ``meta.json`` (``feature_version``), ``<file>`` for the file
        as a whole, ``<syntax>`` for a file that does not parse, ``sha256``, ``tensors``.
    :param expected: what a valid checkpoint has there.
    :param got: the offending value (shown with ``repr``, cut to 120 characters), if any.
    :param hint: what to do about it.
    """

    def __init__(
        self, path: str | Path, field: str, expected: str, got: object = _NOTHING, hint: str | None = None
    ) -> None:
        self.path, self.field, self.expected, self.hint = str(path), field, expected, hint
        self.has_got = got is not _NOTHING
        self.got = got if self.has_got else None
        text = f"{self.path}: {field}: expected {expected}"
        if self.has_got:
            r = repr(got)
            text += f", got {r if len(r) <= 120 else r[:117] + '...'}"
        if hint:
            text += f"; {hint}"
        super().__init__(" ".join(text.split()))  # always one line

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        # Exceptions pickle as cls(*args); this one takes more than the message.
        got = self.got if self.has_got else _NOTHING
        return (type(self), (self.path, self.field, self.expected, got, self.hint))


def verify_listed(path: Path, digest: str) -> None:
    """Check a file that a ``meta.json`` lists exists and has the checksum it records.

    :raises CheckpointError: naming the file: missing, or corrupt or modified.
    """
    if not path.is_file():
        raise CheckpointError(path, "<file>", f"an existing file ({META} lists it)")
    if sha256(path) != digest:
        raise CheckpointError(
            path, "sha256", f"the checksum {META} records", hint="the file is corrupt or was modified"
        )


def sha256(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def meta_digest(meta: dict[str, Any]) -> str:
    """The sha256 of ``meta`` without its :data:`META_SHA256` key, over its canonical JSON (keys
    sorted, no spaces), so that re-indenting the file changes nothing and a changed value does."""
    rest = {k: v for k, v in meta.items() if k != META_SHA256}
    # As the file will read back (tuples as lists, int keys as strings), then canonical.
    rest = json.loads(json.dumps(rest))
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_meta(directory: str | Path, meta: dict[str, Any]) -> Path:
    """Write ``meta`` as the folder's ``meta.json``, sealed with :data:`META_SHA256`, under a
    temporary name then renamed (a crash leaves the old file or the new one, never half of one).

    :returns: the file's path.
    """
    path = Path(directory) / META
    sealed = {**meta, META_SHA256: meta_digest(meta)}
    tmp = path.with_name(META + ".tmp")
    tmp.write_text(json.dumps(sealed, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def check_meta_seal(meta: dict[str, Any], meta_path: Path) -> None:
    """Refuse a ``meta.json`` whose :data:`META_SHA256` does not match the rest of it.

    :raises CheckpointError: naming the file and the key.
    """
    if META_SHA256 in meta and meta[META_SHA256] != meta_digest(meta):
        raise CheckpointError(
            meta_path,
            META_SHA256,
            "the sha256 of the rest of the file",
            hint="it was modified after it was written, or is corrupt: write the checkpoint again "
            "with the command that made it",
        )


def save_checkpoint(directory: str | Path, state_dict: dict[str, torch.Tensor], meta: dict[str, Any]) -> Path:
    """Write ``weights.pt`` and ``meta.json`` (with checksums) into ``directory``.

    Files are written to temporary names and renamed, so a crash never leaves a half-written
    checkpoint that looks complete.

    :param directory: created if missing.
    :param state_dict: the network's weights.
    :param meta: JSON-serialisable metadata (feature version, scenario, hyper-parameters, ...).
    """
    import torch  # on use: the CLI imports this module's error type, and torch takes seconds

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / (WEIGHTS + ".tmp")
    torch.save({k: v.detach().cpu() for k, v in state_dict.items()}, tmp)
    os.replace(tmp, d / WEIGHTS)
    write_meta(d, {**meta, "files": {WEIGHTS: sha256(d / WEIGHTS)}})
    return d


#: The kinds of checkpoint, what each is called, and what takes it (a flag, where commands have one).
KINDS: dict[str, tuple[str, str]] = {
    "ldwp": ("an LDWP network (rlsched train)", "--model"),
    "iawp-rl": ("a learned placer (rlsched train --stage 2)", "--placer-model"),
    "interference": (
        "an interference model (rlsched interference fit)",
        "rlsched interference evaluate --model or the service's interference_model key",
    ),
    "recogniser": ("auto's recogniser (rlsched fit-recogniser)", "--recogniser"),
}


def checkpoint_kind(meta: dict[str, Any]) -> str | None:
    """Which of :data:`KINDS` a ``meta.json`` describes, from the keys each kind writes (``None``:
    none of them)."""
    files = meta.get("files")
    if "params" in meta and "iteration" in meta:
        return "iawp-rl"
    if "net_arch" in meta and "node_dim" in meta:
        return "ldwp"
    if "model_class" in meta and "kinds" in meta:
        return "interference"
    if isinstance(files, dict) and "recogniser.json" in files:
        return "recogniser"
    return None


def check_kind(meta: dict[str, Any], meta_path: Path, kind: str | None) -> None:
    """Refuse another kind of checkpoint by name, before its version or files say less.

    :param meta: the folder's ``meta.json``.
    :param meta_path: its path (the error names it).
    :param kind: the kind expected (``None``: any).
    :raises CheckpointError: naming the kind found and what takes it.
    """
    found = checkpoint_kind(meta)
    if kind is None or found is None or found == kind:
        return
    raise CheckpointError(
        meta_path,
        "<kind>",
        f"a checkpoint of {KINDS[kind][0]}",
        found,
        hint=f"the folder holds {KINDS[found][0]}, which {KINDS[found][1]} takes",
    )


def read_verified_meta(directory: str | Path, kind: str | None = None) -> dict[str, Any]:
    """A checkpoint's ``meta.json``, with every file it lists checked against its checksum; no
    weights are read, so it is cheap (a service checks its models with it before importing torch).

    :param directory: a directory written by :func:`save_checkpoint` (or the same layout).
    :param kind: the kind of :data:`KINDS` the caller reads (another is refused by name).
    :raises CheckpointError: naming the file and what is wrong.
    """
    d = Path(directory)
    meta_path = d / META
    if not meta_path.is_file():
        raise CheckpointError(
            meta_path,
            "<file>",
            "a checkpoint's meta.json",
            hint=f"not found (is {d} a checkpoint directory?)",
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(meta_path, "<syntax>", f"valid JSON ({e})") from None
    except OSError as e:  # unreadable (no permission): still one line naming the file
        raise CheckpointError(meta_path, "<file>", "a readable file", e.strerror or str(e)) from None
    if not isinstance(meta, dict):
        raise CheckpointError(meta_path, "<syntax>", "a JSON object", type(meta).__name__)
    check_meta_seal(meta, meta_path)
    check_kind(meta, meta_path, kind)
    files = meta.get("files")
    if not isinstance(files, dict) or WEIGHTS not in files:
        raise CheckpointError(meta_path, "files", f"a table with the sha256 checksum of {WEIGHTS}", files)
    for name, digest in files.items():
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            raise CheckpointError(meta_path, "files", "plain file names", name)
        verify_listed(d / name, digest)
    return meta


def load_checkpoint(
    directory: str | Path,
    feature_version: int | tuple[int, ...],
    retrain: str = "rlsched train",
    kind: str | None = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Verify and load a checkpoint.

    :param directory: a directory written by :func:`save_checkpoint`.
    :param feature_version: the feature-encoder version of the caller, or the versions it encodes.
    :param retrain: the command that makes a checkpoint of this kind (named in the version error).
    :param kind: as :func:`read_verified_meta`.
    :raises CheckpointError: naming the file and what is wrong.
    """
    d = Path(directory)
    meta = read_verified_meta(d, kind)
    meta_path = d / META
    got = meta.get("feature_version")
    accepted = (feature_version,) if isinstance(feature_version, int) else feature_version
    if got not in accepted or isinstance(got, bool):
        raise CheckpointError(
            meta_path,
            "feature_version",
            f"{_one_of(accepted)}, the feature version this build encodes",
            got,
            hint=f"retrain ({retrain}) or use a build with matching features",
        )
    import torch

    try:
        with warnings.catch_warnings():  # a refused file is one line of ours, not torch's warnings too
            warnings.simplefilter("ignore")
            state = torch.load(d / WEIGHTS, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a file that is not its weights format
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CheckpointError(
            d / WEIGHTS, "<file>", "a weights file this build can read", first[:200]
        ) from None
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise CheckpointError(d / WEIGHTS, "<file>", "a mapping of names to tensors")
    return state, meta


def load_weights(module: torch.nn.Module, state: dict[str, torch.Tensor], directory: str | Path) -> None:
    """Load verified weights into the network their ``meta.json`` describes.

    :raises CheckpointError: naming ``meta.json`` when the shapes or names do not fit (the file
        was edited, e.g. its ``net_arch``, or comes from another build).
    """
    try:
        module.load_state_dict(state)
    except (RuntimeError, KeyError, ValueError) as e:
        first = str(e).strip().splitlines()[0]
        raise CheckpointError(
            Path(directory) / META, "<file>", "weights that fit the network it describes", first[:200]
        ) from None


def _one_of(values: tuple[int, ...]) -> str:
    """``2``, ``2 or 3``, ``2, 3 or 4``: the accepted versions as an error message reads them."""
    words = [str(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"
