"""``rlsched train --stage 2``: the learned placer ``iawp-rl``, trained by random search.

Augmented Random Search (Mania et al. 2018, "Simple random search provides a competitive approach
to reinforcement learning"), version V1-t: each iteration draws ``directions`` Gaussian
perturbations ``d`` of the parameter vector, runs whole simulated episodes with ``w + noise * d``
and ``w - noise * d`` on the same training seeds (common random numbers), and moves ``w`` along
the ``top`` directions whose two returns differ most, weighted by that difference over the
returns' standard deviation. An episode's return is the log of its throughput, averaged over the
training scenarios, so every scenario counts by its relative change whatever its scale.

The placer's rule is linear in a handful of features (:mod:`rlsched.policies.iawp_rl`), which
is what random search needs: few parameters, and an exact starting point (``iawp-pass``).
Validation seeds (never trained on) select ``best/``; the starting point is evaluated too, so
``best/`` keeps ``iawp-pass``'s rule when training finds nothing better there.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from experiments.configs import PlacerTrainConfig
from experiments.worker_pool import worker_init
from rlsched.policies.iawp_rl import INITIAL, PARAM_NAMES, LearnedIawpPlacer, load_params, save_params
from rlsched.policies.registry import PolicyOptions, make_selector
from rlsched.seeds import describe, training_seed


def run_episode(
    entry: str, rate: float | None, selector: str, selector_model: str | None, params: list[float], seed: int
) -> tuple[float, float]:
    """(tasks/min, p95 s) of one simulated run with the placer at ``params`` (worker side)."""
    from envs.simulator import Simulator
    from experiments.evaluation import load_entry
    from experiments.fit_cache import install
    from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
    from rlsched.scheduler import TwoStageScheduler

    install()
    sel = make_selector(selector, PolicyOptions(selector_model=selector_model))
    base = scenario_for_seed(load_entry(entry, rate), seed)
    placer = LearnedIawpPlacer(np.array(params))
    m = Simulator(base, generate_tasks(base, seed), placer, seed=seed).run(TwoStageScheduler(sel, placer))
    return m.throughput * 60.0, m.latency_p95_s


class _Runner:
    """Runs batches of (params, entry, seed) episodes on a worker pool."""

    def __init__(self, cfg: PlacerTrainConfig) -> None:
        self.cfg = cfg
        # Spawned, not forked: `--stage both` trains LDWP in this process first, and a fork of a
        # process whose torch or BLAS thread pools have started can deadlock. worker_init: one
        # BLAS thread a worker, and a worker exits once this process is gone.
        ctx = multiprocessing.get_context("spawn")
        self.pool = ProcessPoolExecutor(cfg.jobs, mp_context=ctx, initializer=worker_init)
        self.episodes = 0

    def returns(self, thetas: list[np.ndarray], seeds: list[int]) -> list[dict[str, Any]]:
        """For each parameter vector: mean log throughput over entries x seeds, and the figures."""
        cfg, entries = self.cfg, self.cfg.entries()
        jobs = [(k, e, s) for k in range(len(thetas)) for e in entries for s in seeds]
        futs = [
            self.pool.submit(
                run_episode, e, cfg.rate_per_min, cfg.selector, cfg.selector_model, thetas[k].tolist(), s
            )
            for k, e, s in jobs
        ]
        res = [f.result() for f in futs]
        self.episodes += len(jobs)
        out = []
        for k in range(len(thetas)):
            mine = [(e, r) for (kk, e, _), r in zip(jobs, res, strict=True) if kk == k]
            per = {e: [r for ee, r in mine if ee == e] for e in entries}
            out.append(
                {
                    "return": float(np.mean([math.log(max(r[0], 1e-9)) for _, r in mine])),
                    "tasks_per_min": {e: float(np.mean([r[0] for r in rs])) for e, rs in per.items()},
                    "latency_p95_s": {e: float(np.mean([r[1] for r in rs])) for e, rs in per.items()},
                }
            )
        return out

    def close(self) -> None:
        # Queued episodes are dropped: after Ctrl-C nobody wants them run.
        self.pool.shutdown(wait=True, cancel_futures=True)


def ars_update(
    w: np.ndarray, deltas: np.ndarray, r_plus: np.ndarray, r_minus: np.ndarray, cfg: PlacerTrainConfig
) -> np.ndarray:
    """One ARS V1-t step: the ``top`` directions by ``max(r+, r-)``, scaled by the returns' std.

    :param w: current parameters.
    :param deltas: (directions, params) perturbation directions.
    :param r_plus: returns at ``w + noise * deltas``.
    :param r_minus: returns at ``w - noise * deltas``.
    """
    order = np.argsort(-np.maximum(r_plus, r_minus))[: cfg.top]
    used = np.concatenate([r_plus[order], r_minus[order]])
    sigma = float(used.std())
    if sigma <= 1e-12:  # every perturbation scored the same: nothing to follow
        return w
    step = ((r_plus[order] - r_minus[order])[:, None] * deltas[order]).sum(axis=0)
    return w + cfg.step_size / (cfg.top * sigma) * step


def _save(directory: Path, w: np.ndarray, cfg: PlacerTrainConfig, iteration: int, ev: dict | None) -> None:
    meta = {
        "config": {**asdict(cfg), "eval_seeds": list(cfg.eval_seeds)},
        "iteration": iteration,
        "validation": ev,
    }
    save_params(directory, w, meta)


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    os.replace(tmp, path)


def train_placer(cfg: PlacerTrainConfig, out: str | Path, init: str | Path | None = None) -> dict[str, Any]:
    """Train ``iawp-rl`` and write ``best/``, ``last/``, ``history.json`` and ``summary.json``.

    :param cfg: the run's settings (checked first).
    :param out: output directory (created).
    :param init: a placer checkpoint to start from (``None`` = ``iawp-pass``'s rule).
    :returns: the summary (also in ``summary.json``).
    """
    cfg.check()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    w = load_params(init) if init is not None else INITIAL.copy()
    runner = _Runner(cfg)
    history: list[dict[str, Any]] = []
    best: tuple[float, int] = (-math.inf, -1)
    t0 = time.perf_counter()
    eval_seeds = list(cfg.eval_seeds)

    def validate(iteration: int) -> None:
        nonlocal best
        ev = runner.returns([w], eval_seeds)[0]
        start = history[0]["validation"]["return"] if history else ev["return"]
        ev["ratio_to_start"] = math.exp(ev["return"] - start)
        history.append(
            {
                "iteration": iteration,
                "params": w.tolist(),
                "validation": ev,
                "wall_s": time.perf_counter() - t0,
            }
        )
        if ev["return"] > best[0]:
            best = (ev["return"], iteration)
            _save(out / "best", w, cfg, iteration, ev)
        _save(out / "last", w, cfg, iteration, ev)
        _write_json(out / "history.json", history)
        print(
            f"[stage 2] iteration {iteration}/{cfg.iterations}: validation ({describe(eval_seeds)} seeds "
            f"{eval_seeds[0]}-{eval_seeds[-1]}) throughput x{ev['ratio_to_start']:.3f} of the start; "
            f"best at iteration {best[1]} ({time.perf_counter() - t0:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    try:
        validate(0)
        for it in range(1, cfg.iterations + 1):
            seeds = [
                training_seed(cfg.seed, (it - 1) * cfg.seeds_per_iteration + j)
                for j in range(cfg.seeds_per_iteration)
            ]
            deltas = rng.standard_normal((cfg.directions, len(w)))
            thetas = [w + cfg.noise * d for d in deltas] + [w - cfg.noise * d for d in deltas]
            rs = np.array([r["return"] for r in runner.returns(thetas, seeds)])
            w = ars_update(w, deltas, rs[: cfg.directions], rs[cfg.directions :], cfg)
            if it % cfg.eval_every == 0 or it == cfg.iterations:
                validate(it)
            else:
                print(
                    f"[stage 2] iteration {it}/{cfg.iterations}: training ({describe(seeds)} seeds) "
                    f"returns {rs.min():.4f}..{rs.max():.4f} ({time.perf_counter() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    except KeyboardInterrupt as e:
        if (out / "last" / "meta.json").is_file():  # the CLI names it as the --resume argument
            e.saved = str(out / "last")  # type: ignore[attr-defined]
            e.into = "another --out (a stage-2 run starts a new history)"  # type: ignore[attr-defined]
        raise
    finally:
        runner.close()
    summary = {
        "seed_sets": {
            "training": "training seeds (rlsched.seeds.TRAINING)",
            "validation": f"validation seeds {', '.join(map(str, eval_seeds))} (select best/)",
        },
        "params": list(PARAM_NAMES),
        "start": history[0]["validation"],
        "best_iteration": best[1],
        "best": history[[h["iteration"] for h in history].index(best[1])]["validation"],
        "episodes": runner.episodes,
        "wall_s": time.perf_counter() - t0,
    }
    _write_json(out / "summary.json", summary)
    (out / "curve.svg").write_text(learning_curve(history, eval_seeds))
    return summary


def learning_curve(history: list[dict[str, Any]], eval_seeds: list[int]) -> str:
    """An SVG of validation throughput per scenario, in % of the start, against the iteration."""
    from experiments.plot import line_chart

    start = history[0]["validation"]["tasks_per_min"]
    series = {
        entry: [
            (h["iteration"], 100.0 * (h["validation"]["tasks_per_min"][entry] / base - 1.0)) for h in history
        ]
        for entry, base in start.items()
    }
    series["mean (log)"] = [
        (h["iteration"], 100.0 * (h["validation"]["ratio_to_start"] - 1.0)) for h in history
    ]
    title = f"iawp-rl: validation throughput (seeds {eval_seeds[0]}-{eval_seeds[-1]})"
    return line_chart(series, title, "random-search iteration", "% vs the start (iawp-pass)")
