"""What ``rlsched serve`` checks of its config before it imports the server and torch: an
operator's typo (a model folder that is not there, a key the scheduler cannot use, a state folder
that cannot be written) is refused in a fraction of a second, not after seconds of imports, and
never after the service has started.

Only what needs no network is checked here: the model keys against the scheduler, each model's
files against the checksums its ``meta.json`` records, the recogniser whole (it is plain data),
the live cluster file, that the queue file (``db``) can be opened for writing, and that
``state_dir`` can hold checkpoints. A network's feature version and
weights are checked when it is loaded (:mod:`runtime.service.models`).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

from models.checkpoint import META, CheckpointError, read_verified_meta
from rlsched.errors import InputError
from rlsched.policies.registry import AUTO, recogniser_version
from runtime.service.config import ServiceConfig

#: Placers that take an interference model.
INTERFERENCE_PLACERS = ("iawp", "iawp-rl", "iawp-pass", "iawp-active", "coloc-greedy")
#: The ``format`` of an interference model's ``meta.json`` (``rlsched.interference.predictor``'s
#: ``FORMAT``, which imports torch).
INTERFERENCE_FORMAT = "rlsched-interference"


def given_by(where: str, flags: Collection[str], key: str) -> str:
    """Where ``key``'s value came from: its flag (``--selector-model``) when ``flags`` holds it,
    else ``where`` (the config file): an error names what the operator wrote."""
    return "--" + key.replace("_", "-") if key in flags else where


def check_model_keys(
    spec: str,
    where: str,
    selector_model: str | None = None,
    placer_model: str | None = None,
    recogniser_model: str | None = None,
    interference_model: str | None = None,
    flags: Collection[str] = (),
) -> None:
    """Each model key against the scheduler ``spec`` that would use it.

    :param flags: the keys given by a flag, not the file (named as their flag).
    :raises InputError: naming the key and what scheduler it needs.
    """
    auto = spec == AUTO
    sel, _, plc = spec.partition("+")
    if selector_model is not None and sel != "ldwp" and not auto:
        raise InputError(
            given_by(where, flags, "selector_model"),
            "selector_model",
            "a scheduler whose selector is ldwp (or auto)",
            spec,
        )
    if placer_model is not None and plc != "iawp-rl":
        raise InputError(
            given_by(where, flags, "placer_model"),
            "placer_model",
            "a scheduler whose placer is iawp-rl",
            spec,
        )
    if recogniser_model is not None and not auto:
        raise InputError(
            given_by(where, flags, "recogniser_model"),
            "recogniser_model",
            'scheduler = "auto" (the recogniser is its model)',
            spec,
        )
    if interference_model is not None and plc not in INTERFERENCE_PLACERS:
        raise InputError(
            given_by(where, flags, "interference_model"),
            "interference_model",
            f"a scheduler whose placer is interference-aware ({', '.join(INTERFERENCE_PLACERS)})",
            spec,
        )


def check_service_config(cfg: ServiceConfig, flags: Collection[str] = ()) -> None:
    """Everything :mod:`runtime.service.preflight` checks, in the order an operator reads the file.

    :param flags: the keys given by a flag rather than the file (``db``, ``selector_model``, ...):
        an error names the flag (``--db``), not the file.
    :raises InputError: naming the key (and the file at fault inside a model folder).
    """
    where = cfg.source

    def of(key: str) -> str:  # what a checkpoint's error says it is the checkpoint of
        return given_by(where, flags, key) if key in flags else f"{key} ({where})"

    check_model_keys(
        cfg.scheduler,
        where,
        cfg.selector_model,
        cfg.placer_model,
        cfg.recogniser_model,
        cfg.interference_model,
        flags,
    )
    if cfg.selector_learning and cfg.scheduler.partition("+")[0] != "ldwp":
        raise InputError(where, "selector_learning", "a scheduler whose selector is ldwp", cfg.scheduler)
    for key, kind in (("selector_model", "ldwp"), ("placer_model", "iawp-rl")):
        folder = getattr(cfg, key)
        if folder is not None:
            _checkpoint_files(folder, of(key), kind)
    if cfg.recogniser_model is not None:
        try:
            recogniser_version(cfg.recogniser_model)  # plain data (and its second decision's): no torch
        except CheckpointError as e:
            raise InputError.from_checkpoint(e, of("recogniser_model")) from None
    if cfg.interference_model is not None:
        _interference(cfg.interference_model, where, flags)
    if cfg.cluster is not None:
        from runtime.cluster.config_io import load_live_cluster

        load_live_cluster(cfg.cluster)
    if cfg.backend == "ray":
        _ray_address(cfg.ray_address, where, flags)
    check_host(cfg.host, given_by(where, flags, "host"))
    check_db(cfg.db, given_by(where, flags, "db"))
    check_state_dir(cfg.state_dir, where)
    check_tls(cfg.tls_certfile, cfg.tls_keyfile, where, flags)


def check_tls(certfile: str | None, keyfile: str | None, where: str, flags: Collection[str] = ()) -> None:
    """Both TLS files or neither, and the pair loads as a server's certificate and key.

    :param flags: the keys given by a flag, not the file (named as their flag).
    :raises InputError: naming the key at fault and what :mod:`ssl` said.
    """
    import ssl

    if (certfile is None) != (keyfile is None):
        given, missing = (
            ("tls_certfile", "tls_keyfile") if keyfile is None else ("tls_keyfile", "tls_certfile")
        )
        raise InputError(
            given_by(where, flags, given), missing, "tls_certfile and tls_keyfile together (or neither)"
        )
    if certfile is None or keyfile is None:
        return
    for key, path in (("tls_certfile", certfile), ("tls_keyfile", keyfile)):
        if not Path(path).is_file():
            raise InputError(given_by(where, flags, key), key, "an existing PEM file", path)
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError) as e:
        raise InputError(
            given_by(where, flags, "tls_certfile"),
            "tls_certfile",
            "a PEM certificate that loads with tls_keyfile",
            certfile,
            hint=str(e),
        ) from None


def _checkpoint_files(folder: str, flag: str, kind: str) -> dict[str, object]:
    try:
        return read_verified_meta(folder, kind)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, flag) from None


def _interference(path: str, where: str, flags: Collection[str] = ()) -> None:
    """A folder of ``interference fit`` (its files and format) or an existing file (the
    co-location CSV, read and fitted at start)."""
    p = Path(path)
    source = given_by(where, flags, "interference_model")
    what = source if source != where else f"interference_model ({where})"
    if p.is_dir():
        meta = _checkpoint_files(path, what, "interference")
        if meta.get("format") != INTERFERENCE_FORMAT:
            raise InputError(
                str(p / META),
                "format",
                f"{INTERFERENCE_FORMAT!r} (an interference model)",
                meta.get("format"),
                hint=f"the checkpoint of {what}",
            )
    elif not p.is_file():
        raise InputError(
            source, "interference_model", "a folder of 'rlsched interference fit' or a co-location CSV", path
        )


def _ray_address(address: str | None, where: str, flags: Collection[str]) -> None:
    """The Ray address the service would join has a form Ray takes: ``ray_address`` (or its
    flag), else ``$RAY_ADDRESS``, which Ray follows when the key is left out."""
    from runtime.cluster.ray_address import check_address_form, ray_address

    if address is not None:
        check_address_form(address, given_by(where, flags, "ray_address"), "ray_address")
    else:
        check_address_form(ray_address(None), "RAY_ADDRESS")


def check_host(host: str, where: str) -> None:
    """``host`` names an address of this machine: it resolves, and a socket binds to it (on a
    port the system picks, closed at once). Both were internal errors at the start, after the
    queue's lock was taken, and ``--check`` said "ready to serve".

    :raises InputError: naming ``host`` (or ``--host``).
    """
    import socket

    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as e:
        raise InputError(where, "host", "a name or address that resolves", host, hint=str(e)) from None
    family, _, _, _, addr = infos[0]
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.bind((addr[0], 0))
    except OSError as e:
        raise InputError(
            where, "host", "an address of this machine (or 0.0.0.0 for all)", host, hint=e.strerror or str(e)
        ) from None
    finally:
        s.close()


def check_db(db: str, where: str) -> None:
    """``db`` is a queue file this process can open for writing, or one it can create: the file
    (if it exists) and its folder writable, as SQLite keeps its WAL and the service its lock file
    beside it. A start that met these as OS errors after taking the lock was an internal error,
    and ``--check`` said "ready to serve".

    :raises InputError: naming ``db`` (or ``--db``).
    """
    path = Path(db).absolute()
    if path.is_dir():
        raise InputError(where, "db", "a file (the task queue, SQLite)", f"{db} (a folder)")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(
            where, "db", "a file in an existing folder", db, hint=f"{folder} does not exist: create it first"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(
            where,
            "db",
            "a file in a folder the service can write (SQLite's WAL and the lock file go beside it)",
            db,
            hint=f"{folder} is not a folder it can write",
        )
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise InputError(
            where, "db", "a queue file the service can read and write", db, hint="permission denied"
        )


def check_state_dir(folder: str, where: str) -> None:
    """``state_dir`` is a folder this process can write, or one it can create (its first
    checkpoint does; nothing is created here): a service whose learned state cannot be
    checkpointed would lose it at the next restart.

    :raises InputError: naming ``state_dir``.
    """
    d = Path(folder).absolute()
    if d.exists() and not d.is_dir():
        raise InputError(
            where, "state_dir", "a folder (the learned state's checkpoints)", f"{folder} (a file)"
        )
    parent = next(p for p in (d, *d.parents) if p.exists())  # the root always exists
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        what = "a folder the service can write" if parent == d else "a folder the service can create"
        raise InputError(where, "state_dir", what, folder, hint=f"{parent} is not a folder it can write")
