"""``rlsched profile``: kernel pairs co-running on the live cluster's GPUs, measured into CSVs."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import BACKEND, EXIT_OK, exit_help
from experiments.commands.flags import flag
from rlsched.errors import InputError


@dataclass(kw_only=True)
class ProfileArgs:
    """Options of ``rlsched profile``.

    :param backend: device backend (default: automatic)
    :param apps: comma-separated apps whose GPU kinds are measured (default: the two video apps)
    :param fraction: share of (device, kind, partner) triples
    :param seed: seed choosing the measured triples
    :param cluster: live cluster file (TOML; default: the embedded cluster)
    :param out: output directory (colocation.csv, solo.csv)
    :param json: print one JSON object instead of lines
    """

    backend: str | None = flag(None, choices=("numpy", "cupy"))
    apps: str = "intrusion_detection,video_synopsis"
    fraction: float = flag(1.0, parse=values.fraction)
    seed: int = flag(0, parse=values.SEED)
    cluster: str | None = flag(None, path=True)
    out: str = flag(path=True)
    json: bool = False


def run(args: ProfileArgs, argv: Sequence[str]) -> int:
    """Measure; write the CSVs; print where they are and what was measured."""
    from experiments import inputs
    from runtime.profiler import LiveProfiler, profile_to_csv

    inputs.unused_output(args.out, ("colocation.csv", "solo.csv"), "measurements")
    apps = inputs.live_apps(args.apps)
    cluster = inputs.live_cluster(args.cluster)
    if not any(n.gpus for n in cluster.nodes):
        raise InputError(args.cluster or "--cluster", "nodes", "a cluster with at least one GPU to profile")
    inputs.device_backend(args.backend)
    t0 = time.perf_counter()
    with LiveProfiler(cluster, args.backend, apps) as prof:
        colo, solo = profile_to_csv(prof, args.out, args.fraction, args.seed, sys.stderr.isatty())
        table = prof.solo_table()
        devices, kinds = prof.devices(), [k.name for k in prof.kinds()]
        out = {
            "colocation": str(colo),
            "solo": str(solo),
            "backend": prof.backend.name,
            "devices": devices,
            "kinds": kinds,
            "rows": prof.measured_pairs,
            "solo_rows": len(table),
        }
    ran = {(d, k) for d, k, _ in table}
    alone = [f"{k} on {d}" for d in devices for k in kinds if (d, k) not in ran]
    if alone:  # its pairs are written as 0 (cannot share): true, but not the whole story
        print(
            f"rlsched: warning: {len(alone)} kind(s) could not run even alone (too little device "
            f"memory): {', '.join(alone[:6])}{', ...' if len(alone) > 6 else ''}; their pairs "
            "are written as 0 (cannot share)",
            file=sys.stderr,
        )
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(out) if args.json else "\n".join(_lines(out)))
    return EXIT_OK


def _lines(out: dict[str, Any]) -> list[str]:
    """What was measured, where it went, and the command that fits a model on it."""
    return [
        f"measured {out['rows']:,} kernel pairs and {out['solo_rows']:,} kernels alone on "
        f"{len(out['devices'])} GPU models ({', '.join(out['devices'])}; {out['backend']}) "
        f"in {out['seconds']:.1f} s",
        f"co-location: {out['colocation']}",
        f"solo: {out['solo']}",
        f"fit a model on it: rlsched interference fit --data {out['colocation']} --out DIR",
    ]


COMMAND = Command(
    "profile",
    "measure kernel pairs co-running on a live cluster's GPUs (the embedded one, or --cluster); write CSVs",
    ProfileArgs,
    run,
    exit_help(unavailable=BACKEND),
)
