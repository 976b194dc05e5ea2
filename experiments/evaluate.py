"""``rlsched evaluate``: schedulers over scenarios and seeds, with capacity bounds, as a report.

Validates everything first (scenarios, schedulers, the LDWP model, the output folder), then runs
the grid in parallel (``experiments.evaluation``) and writes ``results.csv``, ``results.json``,
``report.md``, ``report.html`` and ``img/`` (``experiments.report_writer``). Runs finished so far
are kept as they arrive (``runs.jsonl``, ``run-details/``), so an interrupted evaluation keeps them
and ``--resume`` runs only the rest (``experiments.evaluate_resume``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from experiments.case_folders import case_info, expand_folders
from experiments.commands.version import shipped_models
from experiments.configs import EvalConfig
from experiments.evaluate_resume import RUNS, RunLog, fingerprint, held_runs
from experiments.evaluation import BoundCase, Case, CaseResult, run_grid
from experiments.paper_suite import convergence_note, paper_blocks
from experiments.report_by_family import family_blocks
from experiments.report_cross_seed import CrossSeedRatio, cross_seed_blocks, cross_seed_ratios
from experiments.report_figures import draw_all
from experiments.report_generalisation import CaseRatio, case_ratios, generalisation_blocks
from experiments.report_writer import (
    RUN_HEAD,
    Block,
    Meta,
    build_rows,
    headroom_blocks,
    meta_blocks,
    render_html,
    render_md,
    run_rows,
    scenario_blocks,
    write_results,
)
from rlsched.errors import InputError
from rlsched.version import package_version


class EvaluateError(InputError):
    """Bad input to ``rlsched evaluate`` that no file reader names (a missing flag, a bad
    ``--runs`` entry, an unwritable ``--out``), found before any work starts."""


def validate(cfg: EvalConfig, out: Path) -> None:
    """Check every input before any run starts.

    :param cfg: the evaluation.
    :param out: the output folder.
    :raises InputError: naming the flag (or file) and the field of the first bad input: scenarios
        and schedulers by the readers of :mod:`experiments.inputs`, the rest as
        :class:`EvaluateError`.
    """
    from experiments import inputs

    if not cfg.scenarios:
        raise EvaluateError("--scenarios", "value", "at least one scenario")
    if not cfg.schedulers:
        raise EvaluateError("--schedulers", "value", "at least one scheduler")
    # Each case is one run per worker process: one run's memory at a time per job.
    inputs.scenario_entries(",".join(cfg.scenarios), cfg.rate, "--scenarios")
    for s in cfg.schedulers:
        inputs.scheduler(s, "--schedulers")
    inputs.policy_options(cfg.schedulers, cfg.model, cfg.placer_model, cfg.recogniser)
    if cfg.loads:
        from experiments.load_curves import check_entries

        check_entries(cfg.scenarios)
        if cfg.load_of != "bound":
            inputs.scheduler(cfg.load_of, "--load-of")
            sel, _, plc = cfg.load_of.partition("+")
            inputs.policy_options(
                [cfg.load_of],
                cfg.model if sel == "ldwp" else None,
                cfg.placer_model if plc == "iawp-rl" else None,
            )
    for name, d in cfg.runs.items():
        _check_history(name, d)
    runs = held_runs(out)
    if (runs or (out / "results.json").is_file()) and not cfg.resume:
        held = f"{RUNS}: {runs} runs" if runs else "results.json"
        raise EvaluateError(
            "--out",
            "value",
            "a folder without an earlier evaluation",
            str(out),
            hint=f"it holds one ({held}); --resume keeps the runs that match and runs the rest, "
            "or choose another folder",
        )
    probe = out / ".rlsched-write-test"
    try:
        out.mkdir(parents=True, exist_ok=True)  # the CLI makes it first; a library caller may not
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise EvaluateError(
            "--out", "value", "a folder this process can write", str(out), hint=e.strerror or str(e)
        ) from None


def git_revision(out: Path | None = None, checkout: Path | None = None) -> str:
    """The checkout's commit (``-dirty`` with uncommitted changes), or ``unknown``.

    :param out: the report's folder: changes inside it (an earlier report replaced, as
        ``make report-example`` does with the committed one) are not changes to the code.
    :param checkout: the checkout (default: the one this code runs from).
    """
    root = str(checkout or Path(__file__).resolve().parents[1])
    exclude: list[str] = []
    if out is not None:
        try:
            inside = Path(out).resolve().relative_to(root)
        except ValueError:
            inside = None  # a folder outside the checkout holds nothing git tracks
        if inside is not None and str(inside) != ".":
            exclude = ["--", ".", f":(exclude){inside.as_posix()}"]

    def git(*args: str) -> str:
        cmd = ["git", "-C", root, *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True)
        return done.stdout.strip()

    try:
        rev = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", *exclude)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def _machine() -> str:
    cores = os.cpu_count()
    return f"{platform.system()} {platform.machine()}, {cores} cores, Python {platform.python_version()}"


def evaluate(cfg: EvalConfig, out: str | Path, progress: bool = True) -> dict:
    """Run the evaluation and write its report into ``out``; returns a short summary. A folder
    among the scenarios stands for its scenario files (:func:`~experiments.case_folders.expand_folders`).

    :raises EvaluateError: bad input, before any run.
    """
    out = Path(out)
    cfg = replace(cfg, scenarios=expand_folders(cfg.scenarios))
    validate(cfg, out)
    t0 = time.perf_counter()
    # (scenario, seed, rate) of every run: each scenario at its own rate, or at each offered load.
    points = _load_points(cfg, progress) if cfg.loads else []
    grid = [(p.scenario, p.seed, p.arrival_scale) for p in points] or [
        (sc, seed, 1.0) for sc in cfg.scenarios for seed in cfg.seeds
    ]
    cases = [
        Case(
            sc,
            s,
            seed,
            cfg.rate,
            cfg.model,
            cfg.timeout_s,
            placer_model=cfg.placer_model,
            arrival_scale=k,
            recogniser=cfg.recogniser,
            rebalance=cfg.rebalance,
        )
        for sc, seed, k in grid
        for s in cfg.schedulers
    ]
    bounds = [BoundCase(sc, seed, cfg.rate, k) for sc, seed, k in grid]
    log = RunLog(out, fingerprint(cfg))
    kept: dict[Case, CaseResult] = {}
    if cfg.resume:
        kept = log.kept(cases)
        if progress:
            print(
                f"evaluate: resuming: {len(kept)} of {len(cases)} runs kept from {out / RUNS}, "
                f"{len(cases) - len(kept)} to run",
                file=sys.stderr,
            )
    else:
        log.start()
    todo = [c for c in cases if c not in kept]
    ran, bound_out = run_grid(todo, bounds, cfg.jobs, progress, log.keep)
    fresh = {r.case: r for r in ran}
    results = [kept[c] if c in kept else fresh[c] for c in cases]
    if cfg.suite == "paper" and not cfg.runs and cfg.convergence_steps > 0:
        cfg = replace(cfg, runs=train_convergence_runs(cfg.convergence_steps, out / "runs"))
    rows = build_rows(results, bound_out)
    if points:
        from experiments.load_curves import tag_rows

        tag_rows(rows, points)
    meta = Meta(
        command=cfg.command,
        seeds=list(cfg.seeds),
        git_revision=git_revision(out),
        created=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=_machine(),
        wall_s=time.perf_counter() - t0,
        kept_runs=len(kept),
        version=f"rlsched {package_version()} (shipped models, sha256: {shipped_models()})",
    )
    ratios = case_ratios(rows, case_info(cfg.scenarios))
    cross = cross_seed_ratios(rows) if ratios else []
    extra = {"against_best_heuristic": [asdict(c) for c in ratios]} if ratios else None
    if extra and cross:
        extra["against_pair_picked_on_other_seeds"] = [asdict(c) for c in cross]
    write_results(rows, meta, out, extra)
    undrawn = write_report(rows, results, cfg, meta, out, ratios, cross, progress)
    failed = sum(r["status"] != "ok" for r in rows)
    over = sum(r["within_bound"] is False for r in rows)
    return {
        "out": str(out),
        "runs": len(rows),
        "failed": failed,
        "above_bound": over,
        "figures_failed": undrawn,
        "kept_runs": len(kept),
        "wall_s": round(meta.wall_s, 1),
    }


def _load_points(cfg: EvalConfig, progress: bool) -> list:
    from experiments.load_curves import capacities, load_points

    if progress:
        print(f"evaluate: measuring each scenario's capacity ({cfg.load_of})", file=sys.stderr)
    caps = capacities(cfg.scenarios, cfg.seeds, cfg.load_of, cfg.jobs, progress, cfg.timeout_s)
    return load_points(cfg.loads, caps)


def train_convergence_runs(steps: int, folder: Path) -> dict[str, str]:
    """The paper's convergence experiment: LDWP on ``paper`` at 50 tasks/min, trained with and
    without pretraining (behaviour cloning of ``mct``) from the same seed; their folders by name.

    :param steps: DQN steps of each run.
    :param folder: where the two run folders go.
    """
    from experiments.train import TrainConfig, train

    runs = {}
    for name, teacher in (("pretrained", "mct"), ("from scratch", None)):
        d = folder / ("pretrained" if teacher else "scratch")
        print(f"evaluate: training LDWP {name} ({steps} DQN steps) into {d}", file=sys.stderr)
        train(TrainConfig(scenario="paper", rate_per_min=50.0, steps=steps, pretrain=teacher), d)
        runs[name] = str(d)
    return runs


def write_report(
    rows: list[dict],
    results: list[CaseResult],
    cfg: EvalConfig,
    meta: Meta,
    out: Path,
    ratios: Sequence[CaseRatio] = (),
    cross: Sequence[CrossSeedRatio] = (),
    progress: bool = False,
) -> int:
    """Figures, ``report.md`` and ``report.html`` from the rows and the runs' details; returns how
    many scenarios' figures could not be drawn (their sections say why; the report is written).

    :param ratios: learned pairs against the best heuristic pair, by case (empty: no section).
    :param cross: the same against the pair chosen on other seeds, and its ceiling (empty: none).
    :param progress: show the scenarios' figures being drawn on stderr (minutes for a generated
        set of 40 cases and 38 schedulers).
    """
    from experiments.report_writer import _group

    img = out / "img"
    img.mkdir(exist_ok=True)
    against = generalisation_blocks(ratios, meta.seeds, out) + family_blocks(ratios)
    against += cross_seed_blocks(cross) if ratios else []
    if cfg.loads:
        from experiments.report_loads import load_blocks

        blocks = meta_blocks(meta, cfg.title) + against + load_blocks(rows, cfg.load_of, out)
        (out / "report.md").write_text(render_md(blocks))
        (out / "report.html").write_text(render_html(blocks, out))
        return 0
    grouped = _group(rows)
    head = meta_blocks(meta, cfg.title)
    figs, undrawn = draw_all(grouped, results, cfg, out, progress)
    if undrawn:  # at the top too: one paragraph among forty scenarios is easy to miss
        names = ", ".join(undrawn)
        head.append(Block("p", f"The figures of {len(undrawn)} scenario(s) could not be drawn: {names}."))
    blocks = head + headroom_blocks(grouped) + against
    for sc, runs in grouped.items():
        blocks += scenario_blocks(sc, runs, figs[sc])
        if sc in undrawn:
            why = f"Its figures could not be drawn ({undrawn[sc]}); the table above is complete."
            blocks.append(Block("p", why))
    blocks += paper_blocks(rows, out)
    if cfg.suite == "paper":
        blocks += convergence_note(bool(cfg.runs) or cfg.model is not None)
    blocks += _curve_blocks(cfg, out)
    blocks += [
        Block("h2", "Every run"),
        Block("p", "Throughput in tasks/min; `of bound` is the run's throughput over its seed's bound."),
        Block("table", head=RUN_HEAD, rows=run_rows(rows)),
    ]
    (out / "report.md").write_text(render_md(blocks))
    (out / "report.html").write_text(render_html(blocks, out))
    return len(undrawn)


def _check_history(name: str, folder: str) -> None:
    """A ``--runs`` folder whose ``history.json`` a curve can be drawn from (LDWP's DQN steps, a
    fine-tuning run's, or stage 2's search iterations), checked before any run starts."""
    want = "a training, fine-tuning or stage-2 run folder with its history.json"
    path = Path(folder, "history.json")
    try:
        hist = json.loads(path.read_text())
    except (OSError, ValueError):
        raise EvaluateError("--runs", name, want, folder) from None
    dqn = {"step", "throughput_per_min"}
    ok = isinstance(hist, list) and all(
        isinstance(h, dict)
        and (dqn <= h.keys() or ("iteration" in h and isinstance(h.get("validation"), dict)))
        for h in hist
    )
    if not ok:
        raise EvaluateError("--runs", name, want + " (each entry a step or an iteration)", folder)


def _curve_blocks(cfg: EvalConfig, out: Path) -> list[Block]:
    runs = dict(cfg.runs)
    if cfg.model is not None:
        parent = Path(cfg.model).resolve().parent
        if (parent / "history.json").is_file() and str(parent) not in {
            str(Path(d).resolve()) for d in runs.values()
        }:
            runs[f"model's run ({parent.name})"] = str(parent)
    if not runs:
        return []
    from experiments import report_plots as plots  # matplotlib and scipy.stats: 1.1 s to import

    dqn: dict[str, list[tuple[float, float]]] = {}
    search: dict[str, list[tuple[float, float]]] = {}
    for name, d in runs.items():
        hist = json.loads(Path(d, "history.json").read_text())
        if hist and "iteration" in hist[0]:  # stage 2 (iawp-rl): a search over placer weights
            search[f"{name} (stage 2)"] = [
                (h["iteration"], statistics.fmean(h["validation"]["tasks_per_min"].values())) for h in hist
            ]
            continue
        kind = "transfer" if Path(d, "transfer.json").is_file() else "training"
        dqn[f"{name} ({kind})"] = sorted({h["step"]: h["throughput_per_min"] for h in hist}.items())
    blocks = [
        Block("h2", "Learning curves"),
        Block(
            "p",
            "From each run's `history.json`: the greedy network's evaluation after each DQN interval "
            "(stage 2: the placer's after each search iteration), on the run's validation seeds (the "
            "ones that choose `best/`; not test seeds).",
        ),
    ]
    for series, file, title, xlabel, ylabel in (
        (
            dqn,
            "learning-curves",
            "Learning and transfer curves (evaluation throughput during DQN)",
            "DQN steps",
            "tasks/min (the run's validation seeds)",
        ),
        (
            search,
            "placer-search-curves",
            "The learned placer's search (stage 2)",
            "iteration",
            "tasks/min, mean over the run's validation cases",
        ),
    ):
        if series:
            p = plots.curves(out / "img" / f"{file}.png", title, xlabel, ylabel, series)
            blocks.append(Block("img", text=p.relative_to(out).as_posix(), head=(title.lower(),)))
    return blocks
