"""LDWP ablations against the strongest heuristics, on test seeds (a script, not a test).

Trains LDWP variants on one scenario — the full method (behaviour cloning of a teacher, then
double DQN with semi-MDP discounting), without the horizon fix (per-decision ``gamma``, plain
DQN targets, as before), without pretraining — then evaluates each variant's ``best/`` (chosen on
validation seeds) and the cloned network before DQN, next to the stage-1 heuristics, on the same
test seeds (``rlsched.seeds``: disjoint from training and validation). Prints one table (mean and
sample std over seeds, ratio to the best heuristic) and the training wall time of each variant.

    python -m experiments.benchmarks.ldwp_ablation --scenario alibaba-dense --steps 20000 \
        --out runs/ablation-alibaba-dense [--seeds 5] [--jobs 2] [--teacher mct-mem]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments.evaluate import EvalConfig, evaluate
from experiments.suites import TEST_SEED_BASE
from experiments.train import TrainConfig, train

HEURISTICS = ("mct", "mct-mem", "least-loaded", "pats", "mlsm+mlsm")


def variants(base: TrainConfig) -> dict[str, TrainConfig]:
    """The trained variants, by name."""
    return {
        "full": base,
        "no-horizon": replace(base, half_life_s=None, double_q=False),
        "no-pretrain": replace(base, pretrain=None),
    }


def _rows(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["rows"]


def _stats(rows: list[dict], key: str, scale: float = 1.0) -> tuple[float, float]:
    v = np.array([r[key] * scale for r in rows if r["status"] == "ok"], dtype=float)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="alibaba-dense")
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--teacher", default="mct-mem")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    out = Path(args.out)
    seeds = list(range(TEST_SEED_BASE, TEST_SEED_BASE + args.seeds))
    base = TrainConfig(scenario=args.scenario, rate_per_min=None, steps=args.steps, pretrain=args.teacher)
    models: dict[str, Path] = {}
    wall: dict[str, float] = {}
    for name, cfg in variants(base).items():
        # A variant trained by an earlier, interrupted invocation is kept, not retrained.
        record = out / name / "ablation.json"
        if record.exists():
            wall[name] = json.loads(record.read_text())["train_wall_s"]
        else:
            t0 = time.perf_counter()
            print(f"ablation: training {name}", file=sys.stderr)
            train(cfg, out / name)
            wall[name] = time.perf_counter() - t0
            record.write_text(json.dumps({"train_wall_s": wall[name]}))
        models[name] = out / name / "best"
    models["cloned only (no DQN)"] = out / "full" / "pretrained"
    table: dict[str, list[dict]] = {}
    common = {"scenarios": [args.scenario], "seeds": seeds, "jobs": args.jobs}
    (out / "eval-heuristics").mkdir(exist_ok=True)
    evaluate(EvalConfig(schedulers=list(HEURISTICS), **common), out / "eval-heuristics", progress=False)
    for r in _rows(out / "eval-heuristics"):
        table.setdefault(r["scheduler"], []).append(r)
    for name, model in models.items():
        d = out / f"eval-{name.split()[0]}"
        d.mkdir(exist_ok=True)
        evaluate(EvalConfig(schedulers=["ldwp"], model=str(model), **common), d, progress=False)
        table[f"ldwp ({name})"] = _rows(d)
    best_h = max(HEURISTICS, key=lambda h: _stats(table[h], "throughput")[0])
    ref = _stats(table[best_h], "throughput", 60.0)[0]
    print(f"\n{args.scenario}, test seeds {seeds[0]}-{seeds[-1]} (rlsched.seeds), best heuristic: {best_h}")
    print(f"{'scheduler':32} {'tasks/min':>16} {'p95 s':>14} {'x best':>7} {'of bound':>8}")
    for name, rows in table.items():
        thr, thr_sd = _stats(rows, "throughput", 60.0)
        p95, p95_sd = _stats(rows, "latency_p95_s")
        frac = _stats(rows, "frac_of_bound")[0]
        print(f"{name:32} {thr:9.1f} ± {thr_sd:4.1f} {p95:7.1f} ± {p95_sd:4.1f} {thr / ref:7.3f} {frac:8.3f}")
    print("\ntraining wall time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in wall.items()))
    print("command: python -m experiments.benchmarks.ldwp_ablation " + shlex.join(argv or sys.argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
