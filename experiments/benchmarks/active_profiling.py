"""Interference-model error at a fixed profiling budget, random against active surveys (a script).

For each scenario, budget and survey seed, fits ``iawp``'s model (NCF ensemble) on a random
survey and on an active one of the same size (:mod:`rlsched.interference.active`), and scores
both against every (device, kind, partner) triple measured without noise (the simulator's
instrument at noise 0: what a perfect micro-benchmark would read). Prints the mean absolute error
of the normalised throughput, on all triples and on those the survey did not measure; the error
of the slowdown ``1/n - 1`` the placer reads; and how well the ensemble's spread ranks the errors
(Spearman), each as mean ± sample std over survey seeds.

    python -m experiments.benchmarks.active_profiling --scenarios hetero-saturated --fractions 0.25,0.5
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np

from envs.simulated_instrument import SimulatedProfiler
from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.report_stats import mean_pm
from rlsched.interference.active import active_colocation
from rlsched.interference.measurements import ColocationData
from rlsched.interference.predictor import fit_interference
from rlsched.policies.registry import make_placer
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed


def _instrument(scenario: str, noise: float | None = None) -> SimulatedProfiler:
    base = scenario_for_seed(load_entry(f"{scenario}#200", None), 0)
    sim = Simulator(base, generate_tasks(base, 0), make_placer("speedup"), seed=0)
    bed = sim.testbed()
    return SimulatedProfiler(bed) if noise is None else SimulatedProfiler(bed, noise=noise)


def _slow(n: np.ndarray) -> np.ndarray:
    return np.where(n < 0.05, 4.0, np.maximum(1.0 / np.maximum(n, 0.05) - 1.0, 0.0))


def score(data: ColocationData, truth: ColocationData, seed: int) -> dict[str, float]:
    """Errors of the model fitted on ``data`` against ``truth`` (every triple, noise-free)."""
    from scipy.stats import spearmanr

    pred = fit_interference(data, "ncf", seed)
    mean, spread = pred.predict_spread(truth.device, truth.kind, truth.partner)
    err = np.abs(mean - truth.y)
    seen = set(zip(data.device, data.kind, data.partner, strict=True))
    unseen = np.array([t not in seen for t in zip(truth.device, truth.kind, truth.partner, strict=True)])
    return {
        "mae": float(err.mean()),
        "mae_unmeasured": float(err[unseen].mean()) if unseen.any() else 0.0,
        "slowdown_mae": float(np.abs(_slow(mean) - _slow(truth.y)).mean()),
        "spearman": float(spearmanr(spread, err).statistic),
        "rows": float(len(data)),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="hetero-saturated")
    p.add_argument("--fractions", default="0.25,0.5")
    p.add_argument("--seeds", type=int, default=5, help="survey seeds 1..N")
    args = p.parse_args(argv)
    shown = shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"$ python -m experiments.benchmarks.active_profiling {shown}")
    t0 = time.perf_counter()
    keys = ("mae", "mae_unmeasured", "slowdown_mae", "spearman")
    print(
        "| scenario | budget | survey | co-runs | MAE | MAE unmeasured | slowdown MAE "
        "| Spearman(spread, error) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for scenario in args.scenarios.split(","):
        inst, exact = _instrument(scenario), _instrument(scenario, noise=0.0)
        truth = exact.colocation(1.0, 0)
        for fraction in (float(f) for f in args.fractions.split(",")):
            for name, survey in (
                ("random", lambda s, f=fraction, i=inst: i.colocation(f, s)),
                ("active", lambda s, f=fraction, i=inst: active_colocation(i, f, s)),
            ):
                runs = [score(survey(s), truth, s) for s in range(1, args.seeds + 1)]
                cells = []
                for k in keys:
                    x = np.array([r[k] for r in runs])
                    cells.append(mean_pm(x, ".4f"))
                rows = int(np.mean([r["rows"] for r in runs]))
                print(f"| {scenario} | {fraction:g} | {name} | {rows} | " + " | ".join(cells) + " |")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
