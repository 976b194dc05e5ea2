"""A report's figures, scenario by scenario: drawn over processes with progress on stderr, and a
scenario whose figures fail, or whose drawing process dies, costs only its own figures
(:func:`experiments.worker_pool.run_surviving`)."""

from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path

import numpy as np
from tqdm import tqdm

from experiments.configs import EvalConfig
from experiments.evaluation import CaseResult
from experiments.report_stats import Summary, summarise, summarise_key
from experiments.worker_pool import run_surviving


def draw_all(
    grouped: dict[str, dict[str, list[dict]]],
    results: list[CaseResult],
    cfg: EvalConfig,
    out: Path,
    progress: bool,
) -> tuple[dict[str, list[tuple[str, str]]], dict[str, str]]:
    """Every scenario's figures, drawn over ``cfg.jobs`` processes, with a bar on stderr (a plain
    line per scenario off a terminal); and, by scenario, why its figures could not be drawn (the
    traceback goes to stderr; the other scenarios' figures and the report are still made)."""
    mine: dict[str, list[CaseResult]] = {sc: [] for sc in grouped}
    for r in results:
        if r.case.scenario in mine:
            mine[r.case.scenario].append(r)
    bar = tqdm(total=len(grouped), desc="report", unit="scenario", disable=None if progress else True)
    plain = progress and bar.disable
    t0 = time.perf_counter()
    figs: dict[str, list[tuple[str, str]]] = {}
    undrawn: dict[str, str] = {}

    def take(sc: str, drawn: tuple[list[tuple[str, str]], str | None]) -> None:
        figs[sc], trace = drawn
        if trace is not None:
            undrawn[sc] = trace.strip().splitlines()[-1]
            bar.write(f"report: the figures of {sc} could not be drawn:\n{trace}", file=sys.stderr)
        bar.update()
        if plain:
            done = f"report: {len(figs)}/{len(grouped)} scenarios drawn, {time.perf_counter() - t0:.0f} s"
            print(f"{done}: {sc}", file=sys.stderr)

    try:
        jobs = min(cfg.jobs, len(grouped))
        if jobs <= 1:
            for sc, runs in grouped.items():
                take(sc, _figures_or_trace(sc, runs, mine[sc], cfg, out))
        else:
            # Spawned, as the runs' workers are (matplotlib's Agg backend draws in any process).
            names = list(grouped)

            def lost(i: int, why: str) -> None:
                take(names[i], ([], why))

            def on_break(n: int) -> None:
                what = f"a drawing process died; the {n} scenarios left are drawn again"
                bar.write(f"report: {what} (those it had started, one process each)", file=sys.stderr)

            items = [(sc, grouped[sc], mine[sc], cfg, out) for sc in names]
            run_surviving(items, _figures_of, jobs, lambda i, drawn: take(names[i], drawn), lost, on_break)
    finally:
        bar.close()
    return figs, undrawn


def _figures_of(
    item: tuple[str, dict[str, list[dict]], list[CaseResult], EvalConfig, Path],
) -> tuple[list[tuple[str, str]], str | None]:
    return _figures_or_trace(*item)


def _figures_or_trace(
    sc: str, runs: dict[str, list[dict]], results: list[CaseResult], cfg: EvalConfig, out: Path
) -> tuple[list[tuple[str, str]], str | None]:
    """:func:`_scenario_figures`, or none and the traceback of what stopped them: the runs are
    measured and written by now, and one figure must not cost the whole report."""
    figs: list[tuple[str, str]] = []
    try:
        _scenario_figures(sc, runs, results, cfg, out, figs)
        return figs, None
    except Exception:
        for path, _ in figs:  # those drawn before the failure: the report shows none of them
            (out / path).unlink(missing_ok=True)
        return [], traceback.format_exc()


def _scenario_figures(
    sc: str,
    runs: dict[str, list[dict]],
    results: list[CaseResult],
    cfg: EvalConfig,
    out: Path,
    figs: list[tuple[str, str]],
) -> None:
    """Draw ``sc``'s figures, appending each one's (path under ``out``, caption) to ``figs`` as it
    is written."""
    from experiments import report_plots as plots  # matplotlib: imported when a figure is drawn

    ok = {s: [r for r in rs if r["status"] == "ok"] for s, rs in runs.items()}
    ok = {s: rs for s, rs in ok.items() if rs}
    if not ok:
        return
    slug = plots.figure_stem(sc)
    name = figure_labels(ok)
    ub = summarise([r["bound_throughput_ub"] for rs in ok.values() for r in rs]).mean
    p = plots.bars_with_intervals(
        out / "img" / f"{slug}-throughput.png",
        f"{sc}: throughput and p95 latency (intervals over seeds: see the text)",
        [
            (
                "tasks/min",
                {name[s]: _summ(rs, "throughput", 60.0) for s, rs in ok.items()},
                ub * 60.0 if ub == ub else None,
            ),
            ("p95 latency, s", {name[s]: _summ(rs, "latency_p95_s") for s, rs in ok.items()}, None),
        ],
    )
    figs.append((p.relative_to(out).as_posix(), f"{sc}: throughput and p95 latency"))
    p = plots.bars_with_intervals(
        out / "img" / f"{slug}-utilisation.png",
        f"{sc}: GPU utilisation and load balance (intervals over seeds: see the text)",
        [
            ("GPU utilisation", {name[s]: _summ(rs, "gpu_util") for s, rs in ok.items()}, None),
            ("load-balancing degree", {name[s]: _summ(rs, "load_balance") for s, rs in ok.items()}, None),
        ],
    )
    figs.append((p.relative_to(out).as_posix(), f"{sc}: GPU utilisation and load balance"))
    mine = [r for r in results if r.case.scenario == sc and r.status == "ok"]
    lat = {name[s]: [x for r in mine if r.case.scheduler == s for x in r.latencies] for s in ok}
    lb = _latency_lower_bounds(sc, cfg)
    p = plots.latency_cdf(
        out / "img" / f"{slug}-latency-cdf.png",
        f"{sc}: task latency (all seeds)",
        lat,
        lb,
        "lower bound (all seeds)",
    )
    figs.append((p.relative_to(out).as_posix(), f"{sc}: latency CDF"))
    first = cfg.seeds[0]
    churn = _churn_figure(sc, [r for r in mine if r.case.seed == first], cfg, out, slug, name)
    if churn:
        figs.append(churn)
    series = {
        name.get(r.case.scheduler, r.case.scheduler): (r.util_t, r.util) for r in mine if r.case.seed == first
    }
    p = plots.device_utilisation(
        out / "img" / f"{slug}-devices.png", f"{sc}, seed {first}: GPUs busy over time", series
    )
    figs.append((p.relative_to(out).as_posix(), f"{sc}: per-GPU utilisation over time, seed {first}"))


#: Sliding window of the throughput-over-time figure (the cluster-change experiment's).
CHURN_WINDOW_S = 120.0


def figure_labels(runs: dict[str, list[dict]]) -> dict[str, str]:
    """Each scheduler's name in the figures: a clairvoyant reference (it read the simulator's
    truth) is marked, as the tables mark it.

    :param runs: each scheduler's result rows.
    """
    return {s: f"{s} (clairvoyant)" if any(r.get("clairvoyant") for r in rs) else s for s, rs in runs.items()}


def _churn_figure(
    sc: str, runs: list[CaseResult], cfg: EvalConfig, out: Path, slug: str, name: dict[str, str]
) -> tuple[str, str] | None:
    """Throughput over time around nodes joining and leaving (the paper's cluster change);
    ``name``: each scheduler's label."""
    from experiments import report_plots as plots
    from experiments.cluster_change import change_times, windowed_throughput
    from experiments.evaluation import load_entry

    changes = change_times(load_entry(sc, cfg.rate))
    if not changes or not runs:
        return None
    end = max((r.done_s[-1] for r in runs if r.done_s), default=0.0)
    t = np.arange(CHURN_WINDOW_S, end + 1e-9, 10.0)
    series = {
        name.get(r.case.scheduler, r.case.scheduler): (
            t,
            windowed_throughput(np.array(r.done_s), t, CHURN_WINDOW_S),
        )
        for r in runs
    }
    seed = runs[0].case.seed
    p = plots.throughput_over_time(
        out / "img" / f"{slug}-cluster-change.png",
        f"{sc}, seed {seed}: throughput ({CHURN_WINDOW_S:.0f} s window) as nodes join and leave",
        series,
        changes,
    )
    return p.relative_to(out).as_posix(), f"{sc}: throughput over time across cluster changes, seed {seed}"


def _summ(rs: list[dict], key: str, scale: float = 1.0) -> Summary:
    return summarise_key([r[key] for r in rs], key).scaled(scale)


def _latency_lower_bounds(sc: str, cfg: EvalConfig) -> list[float]:
    try:
        from envs.capacity import task_latency_bounds
        from experiments.evaluation import load_entry
        from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed

        out: list[float] = []
        for seed in cfg.seeds:  # the curves above pool every seed's tasks: so does their floor
            scenario = scenario_for_seed(load_entry(sc, cfg.rate), seed)
            lb = task_latency_bounds(scenario, generate_tasks(scenario, seed))
            out += [float(x) for x in lb if x == x]
        return out
    except Exception:  # the bound's own failure is reported in the scenario's text
        return []
