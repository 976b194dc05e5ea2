"""Kind × metric profile completion: NCF-MLP vs SVD vs column mean (a script, not a test).

For each seed the simulated profiler measures 2 random metrics of every built-in kind (which
ones is random per seed); each method completes the 21 × 6 matrix and is scored on the entries
that were *not* measured, against the exact profiles. Errors are reported on each metric's
natural scale (speedup as a ratio) and normalised per metric: the error on the completion scale
(log for speedup) divided by that metric's spread across kinds in the truth, so 1.0 is "as far
off as a typical kind is from the average kind".

``--tune`` picks hyper-parameters without looking at the truth: it holds out one measured entry
from a third of the kinds, completes from the rest, and scores the held-out measurements
(normalised by the measured spread); the grid point with the lowest mean error wins.

    python -m experiments.benchmarks.bench_profiles [--seeds 5] [--tune]
"""

from __future__ import annotations

import argparse
import itertools
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from envs.simulated_kind_profiles import profile_kinds, true_profiles
from experiments.report_stats import mean_pm
from models.profile_completion import NcfConfig, SvdConfig
from rlsched.interference.kind_profiles import LOG_METRICS, METRICS, Method, ProfileSamples, complete_profiles
from rlsched.tasks import KindSpec
from rlsched.workloads import KINDS

METHODS: tuple[Method, ...] = ("ncf", "svd", "mean")
_LOG = np.array([m in LOG_METRICS for m in METRICS])


def to_internal(p: np.ndarray) -> np.ndarray:
    """Profiles on the completion scale (log for log metrics)."""
    out = np.array(p, dtype=np.float64)
    out[:, _LOG] = np.log(out[:, _LOG])
    return out


@dataclass
class Score:
    """Errors of one completion on the unobserved entries.

    :param mae: per-metric MAE, natural scale.
    :param rmse: per-metric RMSE, natural scale.
    :param nmae: MAE over all unobserved entries, normalised per metric.
    :param nrmse: RMSE over all unobserved entries, normalised per metric.
    :param seconds: wall time of the completion.
    """

    mae: np.ndarray
    rmse: np.ndarray
    nmae: float
    nrmse: float
    seconds: float


def score(pred: np.ndarray, truth: np.ndarray, observed: np.ndarray, seconds: float) -> Score:
    """Errors of ``pred`` against ``truth`` where ``observed`` is False.

    :param pred: completed profiles, natural scale.
    :param truth: exact profiles, natural scale.
    :param observed: (K, M) mask of measured entries.
    :param seconds: completion wall time.
    """
    hidden = ~observed
    err = np.where(hidden, pred - truth, np.nan)
    mae = np.nanmean(np.abs(err), axis=0)
    rmse = np.sqrt(np.nanmean(err**2, axis=0))
    spread = to_internal(truth).std(axis=0)
    nerr = ((to_internal(pred) - to_internal(truth)) / spread)[hidden]
    return Score(mae, rmse, float(np.abs(nerr).mean()), float(np.sqrt((nerr**2).mean())), seconds)


def complete(
    samples: ProfileSamples,
    kinds: Sequence[KindSpec],
    method: Method,
    seed: int,
    ncf: NcfConfig,
    svd: SvdConfig,
) -> tuple[np.ndarray, float]:
    """Completed profiles and the wall time it took."""
    t0 = time.perf_counter()
    p = complete_profiles(samples, kinds, method, seed=seed, ncf=ncf, svd=svd)
    return p, time.perf_counter() - t0


def evaluate(seeds: int, ncf: NcfConfig, svd: SvdConfig) -> dict[str, list[Score]]:
    """Scores of every method over ``seeds`` profiling draws of the built-in kinds."""
    kinds = list(KINDS.values())
    truth = true_profiles(kinds)
    out: dict[str, list[Score]] = {m: [] for m in METHODS}
    for seed in range(seeds):
        samples = profile_kinds(kinds, 2, rng=seed)
        observed = ~np.isnan(samples.matrix([k.name for k in kinds]))
        for m in METHODS:
            pred, secs = complete(samples, kinds, m, seed, ncf, svd)
            out[m].append(score(pred, truth, observed, secs))
    return out


def split_observed(samples: ProfileSamples, rng: np.random.Generator) -> tuple[ProfileSamples, np.ndarray]:
    """Hold out one measurement from each of a random third of the kinds.

    :returns: the remaining samples and the boolean mask of held-out rows.
    """
    names = sorted(set(samples.kinds))
    # A list, not a set: set order follows string hashing, which differs between processes.
    chosen = rng.choice(names, size=max(1, len(names) // 3), replace=False).tolist()
    held = np.zeros(len(samples), dtype=bool)
    for k in chosen:
        rows = [i for i, n in enumerate(samples.kinds) if n == k]
        held[rng.choice(rows)] = True
    keep = ~held
    train = ProfileSamples(
        [k for k, h in zip(samples.kinds, held, strict=True) if not h],
        [m for m, h in zip(samples.metric, held, strict=True) if not h],
        samples.value[keep],
    )
    return train, held


def validation_error(method: Method, ncf: NcfConfig, svd: SvdConfig, seeds: int, splits: int = 4) -> float:
    """Normalised MAE on held-out *measurements* (never the truth), averaged over draws."""
    kinds = list(KINDS.values())
    names = [k.name for k in kinds]
    col = {m: j for j, m in enumerate(METRICS)}
    errs = []
    for seed in range(seeds):
        samples = profile_kinds(kinds, 2, rng=seed)
        spread = np.nanstd(to_internal(samples.matrix(names)), axis=0)
        rng = np.random.default_rng(10_000 + seed)
        for _ in range(splits):
            train, held = split_observed(samples, rng)
            try:
                pred = to_internal(complete_profiles(train, kinds, method, seed=seed, ncf=ncf, svd=svd))
            except ValueError:  # a metric lost its only measurement: not a usable split
                continue
            for i in np.nonzero(held)[0]:
                j = col[samples.metric[i]]
                measured = np.log(samples.value[i]) if _LOG[j] else samples.value[i]
                errs.append(abs(pred[names.index(samples.kinds[i]), j] - measured) / spread[j])
    return float(np.mean(errs))


def tune(seeds: int) -> tuple[NcfConfig, SvdConfig]:
    """Grid search of both learned methods on held-out measurements; prints every grid point."""
    ncf_grid = [
        replace(NcfConfig(), emb_dim=d, weight_decay=wd, emb_l2=el)
        for d, wd, el in itertools.product((1, 2, 4), (1.0, 3.0, 10.0), (10.0, 100.0))
    ]
    svd_grid = [
        replace(SvdConfig(), rank=r, reg=g)
        for r, g in itertools.product((1, 2, 3), (0.1, 0.5, 2.0, 5.0, 10.0, 20.0))
    ]
    print("| method | config | validation nMAE |\n|---|---|---|")
    best_ncf = min(ncf_grid, key=lambda c: _show("ncf", c, validation_error("ncf", c, SvdConfig(), seeds)))
    best_svd = min(svd_grid, key=lambda c: _show("svd", c, validation_error("svd", NcfConfig(), c, seeds)))
    print(f"\nchosen: {best_ncf}\nchosen: {best_svd}\n")
    return best_ncf, best_svd


def _show(method: str, config: object, err: float) -> float:
    print(f"| {method} | {config} | {err:.3f} |")
    return err


def _ms(x: Sequence[float]) -> str:
    return mean_pm(x)


def print_tables(scores: dict[str, list[Score]]) -> None:
    """The summary table (normalised, with NCF/SVD ratios) and the per-metric natural-scale table."""
    print("| method | nMAE | nRMSE | ms per completion (warm) |\n|---|---|---|---|")
    for m in METHODS:
        s = scores[m]
        t = [x.seconds * 1e3 for x in s]
        print(f"| {m} | {_ms([x.nmae for x in s])} | {_ms([x.nrmse for x in s])} | {np.mean(t):.0f} |")
    for name, field in (("nMAE", "nmae"), ("nRMSE", "nrmse")):
        r = [getattr(a, field) / getattr(b, field) for a, b in zip(scores["ncf"], scores["svd"], strict=True)]
        q = [
            getattr(a, field) / getattr(b, field) for a, b in zip(scores["ncf"], scores["mean"], strict=True)
        ]
        print(f"\nNCF/SVD {name}: {_ms(r)};  NCF/mean {name}: {_ms(q)}", end="")
    print("\n\nPer metric, natural scale (unobserved entries; speedup as a ratio):\n")
    print("| metric | " + " | ".join(f"{m} MAE | {m} RMSE" for m in METHODS) + " |")
    print("|---|" + "---|" * (2 * len(METHODS)))
    for j, metric in enumerate(METRICS):
        cells = [
            f"{_ms([x.mae[j] for x in scores[m]])} | {_ms([x.rmse[j] for x in scores[m]])}" for m in METHODS
        ]
        print(f"| {metric} | " + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=5, help="profiling draws (which metrics are observed)")
    p.add_argument("--tune", action="store_true", help="choose hyper-parameters on held-out measurements")
    args = p.parse_args()
    torch.set_num_threads(1)
    print("# command: " + " ".join(["python -m experiments.benchmarks.bench_profiles", *sys.argv[1:]]))
    print(f"# machine: {platform.processor() or platform.machine()}, torch threads 1\n")
    ncf, svd = tune(args.seeds) if args.tune else (NcfConfig(), SvdConfig())
    # One throwaway completion, so the timings leave out torch's first-call set-up.
    kinds = list(KINDS.values())
    complete_profiles(profile_kinds(kinds, 2, rng=0), kinds, "ncf", ncf=ncf)
    print_tables(evaluate(args.seeds, ncf, svd))


if __name__ == "__main__":
    main()
