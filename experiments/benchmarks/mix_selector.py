"""Would a selector that prices a GPU by what its streams deliver co-running beat the others?
(a probe, not a policy)

    python -m experiments.benchmarks.mix_selector --scenarios gen-val13 --seeds 2 \\
        --first-seed 10001 --jobs 2 --out mix-val13.json

``mct-drain`` divides a node's GPU backlog by what its GPUs were seen to deliver (per-run speed
times co-runners: use, not capacity); ``mct-cap`` by per-run speed times streams (capacity if
co-running cost nothing). This probe's ``mct-mix`` divides by ``mct-cap``'s rate discounted by the
slowdown the placer's calibrated interference model predicts for a full GPU of the task's GPU kind
(``S / (1 + (S - 1) s)`` per-run speeds on a GPU of ``S`` streams, ``s`` the additive pairwise
slowdown), never below what ``mct-drain`` measured. It reads only the placer's model and the
speeds the schedulers observe, never ground truth. The selector needs the placer's model, so for
this process the ``iawp-pass`` placer is built to hand its model to a ``mct-mix`` selector built
just before it; every other pair runs as shipped. BENCHMARKS.md, "A selector that prices what
co-running streams deliver", has the rule it was judged by and what it found.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from experiments import inputs
from experiments.simulate import simulate
from rlsched.estimates import _etc_after_gpu_wait, subtask_gpu_seconds
from rlsched.policies import registry
from rlsched.policies.iawp import IawpPassPlacer, IawpPlacer
from rlsched.policies.selectors import EtcSelector, masked_argmin
from rlsched.tasks import Device, Task
from rlsched.view import ClusterView

#: The pairs the probe's rule compares (all with the ``iawp-pass`` placer).
SELECTORS = ("mct-mix", "mct-drain", "mct-cap", "mct-mem", "mct")
_PENDING: list[MixSelector] = []


def task_gpu_kind(task: Task) -> str | None:
    """The kind of the task's GPU-capable subtask with the most nominal GPU work (``None``: none)."""
    best, best_w = None, -1.0
    for sub in task.graph.subtasks:
        if sub.device is Device.CPU:
            continue
        w = subtask_gpu_seconds(sub, 1.0, 1.0)
        if w > best_w:
            best, best_w = sub.kind.name, w
    return best


def mix_rate(view: ClusterView, slowdown: np.ndarray) -> np.ndarray:
    """Per node: the GPUs' summed rate, each ``max(measured, speed * S / (1 + (S - 1) s))``.

    :param slowdown: per GPU model index, the predicted pairwise slowdown ``s`` of the task's kind.
    """
    s = slowdown[np.maximum(view.gpu_model, 0)]
    streams = view.gpu_streams
    full = view.speed_gpu * streams / (1.0 + np.maximum(streams - 1, 0) * s)
    per_gpu = np.maximum(view.gpu_rate, full) * view.gpu_valid
    return per_gpu.sum(axis=1)


class MixSelector(EtcSelector):
    """``mct-mem``'s ETC whose GPU wait is the backlog over :func:`mix_rate`."""

    name = "mct-mix"

    def __init__(self) -> None:
        super().__init__()
        self.placer: IawpPlacer | None = None
        _PENDING.append(self)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        if self.placer is None:
            raise RuntimeError("mct-mix runs only beside this probe's iawp-pass (it reads its model)")
        kind = task_gpu_kind(task)
        slow = np.zeros(max(len(view.model_names), 1))
        if kind is not None:
            for m, device in enumerate(view.model_names):
                slow[m] = self.placer._pair_slowdown(device, kind, kind)
        rate = mix_rate(view, slow)
        wait = np.where(view.n_gpus > 0, view.backlog_gpu_s / np.maximum(rate, 1e-6), 0.0)
        return masked_argmin(_etc_after_gpu_wait(task, view, wait, self.parallel), mask)


def _iawp_pass_shared(_o: registry.PolicyOptions) -> IawpPassPlacer:
    placer = IawpPassPlacer()
    while _PENDING:
        _PENDING.pop().placer = placer
    return placer


def install() -> None:
    """Register ``mct-mix`` and the model-sharing ``iawp-pass`` in this process."""
    registry.register_selector("mct-mix", MixSelector)
    registry.PLACERS["iawp-pass"] = _iawp_pass_shared


def _run(job: tuple[str, str, int]) -> tuple[str, str, int, float, float]:
    case, spec, seed = job
    m = simulate(inputs.scenario(case, None), spec, seed)
    return Path(case).stem, spec, seed, m.throughput, m.latency_mean_s


def _init() -> None:
    install()


def summarise(rows: list[tuple[str, str, int, float, float]]) -> dict[str, Any]:
    """Per pair: geometric mean, min and per-case ratios of mean throughput to each other pair."""
    cases = sorted({r[0] for r in rows})
    pairs = sorted({r[1] for r in rows})
    tp = {
        (c, p): float(np.mean([r[3] for r in rows if r[0] == c and r[1] == p])) for c in cases for p in pairs
    }
    mix = f"mct-mix+{pairs[0].partition('+')[2]}"
    out: dict[str, Any] = {"cases": cases, "throughput": {f"{c}|{p}": v for (c, p), v in tp.items()}}
    for p in pairs:
        if p == mix:
            continue
        r = np.array([tp[(c, mix)] / tp[(c, p)] for c in cases])
        out[f"mix/{p}"] = {
            "geomean": float(np.exp(np.log(r).mean())),
            "min": float(r.min()),
            "median": float(np.median(r)),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenarios", required=True, help="a folder of scenario files")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first-seed", type=int, default=10001, help="default: the first validation seed")
    ap.add_argument("--placer", default="iawp-pass")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", required=True, help="JSON file of every run and the summary")
    args = ap.parse_args(argv)
    print(
        "# " + shlex.join(["python", "-m", "experiments.benchmarks.mix_selector", *sys.argv[1:]]), flush=True
    )
    cases = sorted(str(p) for p in Path(args.scenarios).glob("*.toml"))
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    jobs = [(c, f"{s}+{args.placer}", seed) for c in cases for seed in seeds for s in SELECTORS]
    if args.jobs <= 1:  # in this process: no pool to start
        install()
        rows = [_run(j) for j in tqdm(jobs, mininterval=10)]
    else:
        with mp.get_context("spawn").Pool(args.jobs, initializer=_init) as pool:
            rows = list(tqdm(pool.imap_unordered(_run, jobs), total=len(jobs), mininterval=10))
    summary = summarise(rows)
    Path(args.out).write_text(json.dumps({"runs": rows, "summary": summary}, indent=1))
    for k, v in summary.items():
        if k.startswith("mix/"):
            print(f"{k}: geomean {v['geomean']:.3f}  min {v['min']:.3f}  median {v['median']:.3f}")


if __name__ == "__main__":
    main()
