"""The ``rlsched`` commands' input layer: every flag and file a command reads is read and checked
here, before any work starts, and a bad one raises :class:`~rlsched.errors.InputError` naming the
flag (or file) and the field. The CLI turns exactly that type into exit 2; anything else raised
later is a bug (exit 1). Environmental refusals (a backend that cannot run on this machine) raise
:class:`~rlsched.errors.Unavailable` (exit 4).

The checks call the same readers the runs use (the scenario loader, the checkpoint loaders, the
live cluster reader), so what passes here is what the run reads.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rlsched.errors import InputError, Unavailable

if TYPE_CHECKING:
    from rlsched.policies.registry import PolicyOptions
    from rlsched.scenarios.spec import Scenario
    from runtime.cluster.config import LiveClusterSpec

#: Names listed in a message before it says "...".
_LISTED = 24


def _known(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown + (", ..." if len(names) > _LISTED else "")


def split_list(text: str | None) -> list[str]:
    """The comma-separated entries of a flag's value, stripped, empty ones dropped.

    :param text: the flag's value (``None``: not given).
    """
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def scenario(value: str, rate: float | None, flag: str = "--scenario", processes: int = 1) -> Scenario:
    """The scenario ``value`` names (a built-in name or a TOML file, or an entry
    ``NAME[@RATE|~LOAD][#TASKS]`` as ``evaluate`` and ``train`` take), checked to fit in memory.

    :param value: the flag's value.
    :param rate: ``--rate`` (``None``: the scenario's own); an entry's ``@RATE`` wins over it.
    :param flag: the flag, for messages about the value itself.
    :param processes: runs held in memory at once (``--jobs``).
    :raises InputError: a bad file, entry or override
        (:class:`~rlsched.config_reader.ConfigError`), or a run that would not fit in memory
        (:class:`~rlsched.footprint.RunTooLarge`).
    """
    from experiments.evaluation import load_entry
    from rlsched.footprint import check_fits

    if not value.strip():
        raise InputError(flag, "value", "a built-in scenario name or a scenario file", value)
    sc = load_entry(value, rate, flag)
    check_fits(sc, processes)
    return sc


def scenario_entries(text: str, rate: float | None, flag: str, processes: int = 1) -> list[Scenario]:
    """The scenarios of a comma-separated ``NAME[@RATE][#TASKS]`` list (a folder of cases stands
    for its scenario files), each checked to fit.

    :param text: the flag's value.
    :param rate: ``--rate``.
    :param flag: the flag (``--scenario``, ``--scenarios``).
    :param processes: runs held in memory at once.
    :raises InputError: an empty list, a bad entry, a bad scenario, or one that does not fit.
    """
    from experiments.case_folders import expand_folders
    from experiments.evaluation import load_entry
    from rlsched.footprint import check_fits

    entries = expand_folders(split_list(text), flag)
    if not entries:
        raise InputError(flag, "value", "one or more comma-separated scenario entries", text)
    out = []
    for e in entries:
        sc = load_entry(e, rate, flag)
        check_fits(sc, processes)
        out.append(sc)
    return out


#: What a training or fine-tuning run leaves in its ``--out`` (and a checkpoint folder holds: a
#: shipped one is no ``--out``).
RUN_FILES = ("best", "last", "history.json", "summary.json", "transfer.json", "meta.json", "weights.pt")


def new_run_folder(
    out: str | Path, resume: str | None = None, flag: str = "--out", resumable: bool = True
) -> None:
    """``--out`` of a training or fine-tuning run: refused if it holds an earlier run (its
    ``best/`` and ``history.json`` would be overwritten), unless ``--resume`` continues a
    checkpoint inside it.

    :param out: the folder.
    :param resume: the ``--resume`` checkpoint, if any.
    :param resumable: the command can continue a run in place (said in the message).
    :raises InputError: naming ``flag`` and what the folder holds.
    """
    folder = Path(out)
    held = [n + ("/" if (folder / n).is_dir() else "") for n in RUN_FILES if (folder / n).exists()]
    if not held:
        return
    if resume is not None and Path(resume).resolve().is_relative_to(folder.resolve()):
        return
    raise InputError(
        flag,
        "value",
        "a folder without an earlier run",
        str(out),
        hint=f"it holds {', '.join(held)}: give another {flag}"
        + (f", or go on with --resume {folder / 'last'}" if resumable else ""),
    )


def warn_before_learning(steps: int, learning_starts: int, network: str) -> None:
    """Warn that a DQN run of ``steps`` ends before its first gradient step (it gathers
    ``learning_starts`` steps first): its "trained" network is the one it started from.

    :param network: what becomes of the network then (said after the warning).
    """
    if steps <= learning_starts:
        print(
            f"rlsched: warning: --steps {steps:,} is not above the {learning_starts:,} steps DQN "
            f"gathers before its first gradient step: DQN does not change the network ({network})",
            file=sys.stderr,
        )


def unused_output(out: str | Path, names: Sequence[str], what: str, flag: str = "--out") -> None:
    """``--out`` of a command that writes ``names`` (a checkpoint, measurements): refused if it
    already holds one of them, so that no earlier result is replaced without a word.

    :param out: the folder.
    :param names: the files the command writes.
    :param what: what they are, for the message (``"a checkpoint"``).
    :raises InputError: naming ``flag`` and the files it holds.
    """
    folder = Path(out)
    held = [n for n in names if (folder / n).exists()]
    if held:
        raise InputError(
            flag,
            "value",
            f"a folder without {what}",
            str(out),
            hint=f"it holds {', '.join(held)}: give another {flag}, or move them aside first",
        )


def selector(name: str, flag: str, others: str = "") -> str:
    """A stage-1 policy name, checked against the registry (built-ins and plug-ins).

    :param name: the name.
    :param flag: the flag that gave it.
    :param others: what else the flag takes, for the message (``" or 'auto'"``).
    :raises InputError: naming the flag and listing the known selectors.
    """
    from rlsched.policies.registry import selector_names

    names = selector_names()
    if name not in names:
        raise InputError(flag, "selector", f"a known selector ({_known(names)}){others}", name)
    return name


def scheduler(spec: str, flag: str) -> str:
    """A ``SELECTOR[+PLACER]`` spec, its names checked against the registry (nothing is built:
    a learned policy's checkpoint is checked by :func:`policy_options`).

    :param spec: the spec.
    :param flag: the flag that gave it.
    :raises InputError: naming the flag, the part at fault and the known names.
    """
    from rlsched.policies.registry import AUTO, placer_names

    if spec == AUTO:
        return spec
    sel, plus, plc = spec.partition("+")
    if sel == AUTO:
        raise InputError(flag, "placer", "'auto' alone (it chooses its own pair)", spec)
    selector(sel, flag, " or 'auto'")
    names = placer_names()
    if plus and plc not in names:
        raise InputError(flag, "placer", f"a known placer after '+' ({_known(names)})", plc)
    return spec


def schedulers(text: str | None, default: Sequence[str], flag: str) -> list[str]:
    """The specs of a comma-separated ``--schedulers`` list (``default`` when not given).

    :param text: the flag's value, or ``None``.
    :param default: the specs used without the flag.
    :param flag: the flag.
    :raises InputError: for an empty list or a bad spec.
    """
    specs = list(default) if text is None else split_list(text)
    if not specs:
        raise InputError(flag, "value", "one or more comma-separated SELECTOR[+PLACER] specs", text)
    return [scheduler(s, flag) for s in specs]


def live_schedulers(text: str | None, default: Sequence[str], flag: str = "--schedulers") -> list[str]:
    """As :func:`schedulers`, and each one able to run live: none declared clairvoyant (a
    reference that reads the simulator's ground truth, such as ``oracle``).

    :param text: the flag's value, or ``None``.
    :param default: the specs used without the flag.
    :param flag: the flag.
    :raises InputError: for an empty list, a bad spec, or a clairvoyant one.
    """
    from rlsched.policies.registry import is_clairvoyant_spec

    specs = schedulers(text, default, flag)
    for s in specs:
        if is_clairvoyant_spec(s):
            raise InputError(
                flag,
                "value",
                "schedulers that read only what a live cluster shows (no clairvoyant reference)",
                s,
            )
    return specs


def ldwp_model(path: str | None, flag: str = "--model") -> None:
    """Load the LDWP checkpoint at ``path`` (``None``: the shipped one) as ``ldwp`` will.

    :param path: the checkpoint directory.
    :param flag: the flag that named it.
    :raises InputError: naming the checkpoint's file and what is wrong with it.
    """
    from models import PRETRAINED_LDWP
    from models.checkpoint import CheckpointError, read_verified_meta

    try:
        read_verified_meta(PRETRAINED_LDWP if path is None else path, "ldwp")  # a bad path: before torch
        from rlsched.scorer_io import scorer_from_checkpoint

        scorer_from_checkpoint(PRETRAINED_LDWP if path is None else path)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, flag) from None


def ldwp_weights(path: str, net_arch: Sequence[int], flag: str = "--resume") -> int:
    """Load the LDWP checkpoint at ``path`` into a network of ``net_arch``, as resuming a training
    run of that shape will; its DQN steps.

    :param path: the checkpoint directory.
    :param net_arch: hidden sizes of the network being trained.
    :param flag: the flag that named it.
    :raises InputError: naming the checkpoint's file and what is wrong with it.
    """
    from models.checkpoint import CheckpointError, load_checkpoint, load_weights
    from models.qnet import NodeScorer
    from rlsched.features import CLUSTER_FEATURES, NODE_FEATURES, READABLE_FEATURE_VERSIONS, TASK_FEATURES

    try:
        state, meta = load_checkpoint(path, READABLE_FEATURE_VERSIONS, kind="ldwp")
        net = NodeScorer(len(NODE_FEATURES), len(TASK_FEATURES), len(CLUSTER_FEATURES), list(net_arch))
        load_weights(net, state, path)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, flag) from None
    return int(meta.get("dqn_steps") or 0)


def placer_model(path: str, flag: str = "--placer-model") -> None:
    """Load the ``iawp-rl`` placer checkpoint at ``path`` as the placer will.

    :param path: the checkpoint directory.
    :param flag: the flag that named it.
    :raises InputError: naming the checkpoint's file and what is wrong with it.
    """
    from models.checkpoint import CheckpointError, read_verified_meta

    try:
        read_verified_meta(path, "iawp-rl")  # a bad path: before the placer's modules load
        from rlsched.policies.iawp_rl import load_params

        load_params(path)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, flag) from None


def recogniser(path: str | None, flag: str = "--recogniser") -> None:
    """Load the ``auto`` scheduler's recogniser at ``path`` (``None``: the shipped one) as it will be.

    :raises InputError: naming the recogniser's file and what is wrong with it.
    """
    from models.checkpoint import CheckpointError
    from rlsched.policies.recogniser import load_recogniser

    try:
        load_recogniser(path)
    except CheckpointError as e:
        raise InputError.from_checkpoint(e, flag) from None


def policy_options(
    specs: Sequence[str], model: str | None, placer: str | None, recogniser_dir: str | None = None
) -> PolicyOptions:
    """The checkpoints the learned policies of ``specs`` read, each loaded and checked now.

    :param specs: the checked scheduler specs of the run.
    :param model: ``--model`` (LDWP; ``None``: shipped); checked when given or when a spec uses
        ``ldwp`` (``auto`` may).
    :param placer: ``--placer-model`` (``iawp-rl``; ``None``: shipped); checked when given.
    :param recogniser_dir: ``--recogniser`` (``auto``; ``None``: shipped); checked when ``auto``
        runs.
    :raises InputError: for a checkpoint that does not load, or one that no spec would use.
    """
    from rlsched.policies.registry import AUTO, PolicyOptions

    auto = AUTO in specs
    if recogniser_dir is not None and not auto:
        raise InputError("--recogniser", "value", "a run of the auto scheduler", recogniser_dir)
    if auto:
        recogniser(recogniser_dir)
    if model is not None and not auto and not any(s.partition("+")[0] == "ldwp" for s in specs):
        raise InputError("--model", "value", "a run with an ldwp selector (--model is its checkpoint)", model)
    if placer is not None and not any(s.partition("+")[2] == "iawp-rl" for s in specs):
        raise InputError(
            "--placer-model",
            "value",
            "a run with the iawp-rl placer (--placer-model is its checkpoint)",
            placer,
        )
    if model is not None or any(s.partition("+")[0] == "ldwp" for s in specs):
        ldwp_model(model)
    if placer is not None:
        placer_model(placer)
    return PolicyOptions(model, placer, recogniser_dir)


def live_cluster(path: str | None) -> LiveClusterSpec:
    """The live cluster of ``--cluster PATH``, or the embedded default.

    :param path: the cluster file, or ``None``.
    :raises InputError: naming the file and field (:class:`~rlsched.config_reader.ConfigError`).
    """
    from runtime.cluster.config import default_live_cluster
    from runtime.cluster.config_io import load_live_cluster

    return default_live_cluster() if path is None else load_live_cluster(path)


def device_backend(name: str | None, flag: str = "--backend") -> str | None:
    """The device backend a live command asks for, checked to run on this machine.

    :param name: ``numpy``, ``cupy`` (argparse checked the choice) or ``None`` (``$RLSCHED_BACKEND``,
        else the best available).
    :param flag: the flag.
    :raises InputError: ``$RLSCHED_BACKEND`` names no backend.
    :raises Unavailable: ``cupy`` where CuPy or a CUDA device is missing.
    """
    from runtime.backends.base import BACKEND_ENV
    from runtime.backends.select import BACKENDS, cupy_unavailable_reason

    asked, source = name, flag
    if asked is None:
        asked, source = os.environ.get(BACKEND_ENV, "").strip() or None, f"${BACKEND_ENV}"
    if asked is None:
        return name
    if asked.strip().lower() not in BACKENDS:
        raise InputError(source, "value", f"a device backend ({', '.join(BACKENDS)})", asked)
    if asked.strip().lower() == "cupy":
        reason = cupy_unavailable_reason()
        if reason is not None:
            raise Unavailable(f"{source} cupy", f"the cupy backend cannot run here: {reason}")
    return name


def cluster_backend(name: str, flag: str = "--backend") -> str:
    """A live cluster backend, checked to be installed (``ray`` needs the ``ray`` package).

    :param name: ``local`` or ``ray``.
    :param flag: the flag.
    :raises Unavailable: ``ray`` without Ray installed.
    """
    if name == "ray" and importlib.util.find_spec("ray") is None:
        raise Unavailable(f"{flag} ray", "Ray is not installed (pip install 'ray==2.60.0')")
    if name == "ray":
        from runtime.cluster.ray_address import check_ray_address

        check_ray_address(None, "RAY_ADDRESS")
    return name


def live_apps(text: str, flag: str = "--apps") -> tuple[str, ...]:
    """Apps with live kernels, from a comma-separated list.

    :param text: the flag's value.
    :param flag: the flag.
    :raises InputError: for an empty list or an app without live kernels.
    """
    from runtime.profiler import LIVE_APPS

    apps = tuple(split_list(text))
    if not apps:
        raise InputError(flag, "value", f"one or more apps with live kernels ({', '.join(LIVE_APPS)})", text)
    for a in apps:
        if a not in LIVE_APPS:
            raise InputError(flag, "app", f"an app with live kernels ({', '.join(LIVE_APPS)})", a)
    return apps


def token(env: str, flag: str = "--token-env") -> str:
    """The bearer token held in the environment variable ``env``.

    :param env: the variable's name.
    :param flag: the flag that named it.
    :raises InputError: when the variable is unset or empty.
    """
    value = os.environ.get(env)
    if not value:
        state = "it is unset" if value is None else "it is empty"
        raise InputError(flag, f"${env}", "an environment variable holding the bearer token", hint=state)
    return value
