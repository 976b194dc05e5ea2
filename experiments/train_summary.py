"""What ``rlsched train`` prints when it ends: the figures a researcher reads off a training run
(which network ``best/`` is, and how it and the cloned start compare with the reference on the
validation seeds), a few lines instead of the summary's JSON (``--json`` prints that)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from experiments.train_evaluation import best_evaluation


def _ratio(ev: dict[str, Any], key: str) -> str:
    return f"{ev[key]:.3f}x" if key in ev else "-"


def stage1_lines(summary: dict[str, Any], out: Path, objective: str, since: float) -> list[str]:
    """The end of a stage-1 run.

    :param summary: what :func:`experiments.train.train` returned (``summary.json``).
    :param out: its output folder.
    :param since: when the run started (``time.time()``): the "wrote" line names what changed since.
    :param objective: what ``best/`` was chosen on.
    """
    history = summary["best"]
    best, start, last = best_evaluation(history, objective), summary["before_dqn"], summary["after_dqn"]
    cases = len(start.get("scenarios", {})) or 1
    ref = summary["reference"]["selector"]
    ref = "each case's best heuristic selector" if ref == "per scenario" else f"`{ref}`"
    began = summary.get("started_from", "cloned")
    first = {
        "cloned": "cloned (step 0)",
        "resumed": f"resumed (step {start['step']:,.0f})",
        "weights": "start weights (step 0)",
    }[began]
    rows = [(first, start), (f"best/ (step {best['step']:,.0f})", best)]
    rows.append((f"last/ (step {last['step']:,.0f})", last))
    lines = [
        f"LDWP: best/ is the network at step {best['step']:,.0f} of {last['step']:,.0f}, chosen on "
        f"{objective} over {cases} case{'s' if cases > 1 else ''}",
        f"  figures from {summary['seed_sets']['evaluations']}",
        f"  against {ref} on the same cases and seeds:      throughput   mean latency   p95 latency",
    ]
    lines += [
        f"  {name:<49} {_ratio(ev, 'relative_throughput'):>10}   {_ratio(ev, 'relative_latency'):>12}"
        f"   {_ratio(ev, 'relative_p95'):>11}"
        for name, ev in rows
    ]
    if summary.get("bc_accuracy") is not None:
        agreed = 100 * summary["bc_accuracy"]
        when = "" if began == "cloned" else " (when the network it started from was cloned)"
        lines.append(f"  behaviour cloning agreed with the teacher on {agreed:.1f} % of decisions{when}")
    lines.append(_wrote(out, since))
    return lines


def stage2_lines(summary: dict[str, Any], out: Path, since: float) -> list[str]:
    """The end of a stage-2 run.

    :param summary: what :func:`experiments.train_placer.train_placer` returned.
    :param out: its output folder.
    :param since: when the run started (``time.time()``): the "wrote" line names what changed since.
    """
    best = summary["best"]
    return [
        f"iawp-rl: best/ holds the parameters of iteration {summary['best_iteration']}",
        f"  figures from {summary['seed_sets']['validation']}",
        f"  validation throughput {best['ratio_to_start']:.3f}x the parameters it started from "
        f"(geometric mean over cases; {summary['episodes']} episodes, {summary['wall_s']:.0f} s)",
        _wrote(out, since),
    ]


def _wrote(out: Path, since: float) -> str:
    """The line naming what the run wrote into ``out``: the entries changed from ``since`` (the
    run's start, from ``time.time()``) on, not what the folder held before (a note, a README)."""
    names = sorted(
        p.name + ("/" if p.is_dir() else "")
        for p in out.iterdir()
        if not p.name.startswith(".") and _changed_since(p, since)
    )
    return f"wrote {out}: {', '.join(names)} (--json prints the summary's figures as JSON)"


def _changed_since(path: Path, since: float) -> bool:
    # A folder counts when it or an entry directly in it changed (checkpoints replace files).
    entries = [path, *path.iterdir()] if path.is_dir() else [path]
    return any(e.stat().st_mtime >= since - 1.0 for e in entries)  # coarse file-system clocks


def finetune_lines(report: dict[str, Any], out: Path, since: float) -> list[str]:
    """The end of ``rlsched finetune`` in the simulator: the network zero-shot, ``mct`` and the
    fine-tuned ``best/`` on the target's validation seeds.

    :param report: what :func:`experiments.finetune.finetune` returned (``transfer.json``).
    :param out: its output folder.
    :param since: when the run started (``time.time()``): the "wrote" line names what changed since.
    """
    best = report["fine_tuned_best"]
    rows = [
        ("mct", report["mct"]),
        (f"{report['source']} zero-shot", report["zero_shot"]),
        (f"fine-tuned best/ (step {best['step']:,.0f})", best),
    ]
    width = max(len(name) for name, _ in rows)
    lines = [
        f"finetune: {report['target_scenario']} ({report['target_nodes']} nodes), validation seeds "
        f"{', '.join(map(str, report['seeds']))} for each",
        f"  {'':<{width}}  tasks/min  mean latency s  p95 latency s",
    ]
    lines += [
        f"  {name:<{width}}  {ev['throughput_per_min']:>9.2f}  {ev.get('latency_mean_s', math.nan):>14.2f}"
        f"  {ev['latency_p95_s']:>13.2f}"
        for name, ev in rows
    ]
    return [*lines, _wrote(out, since)]


def live_finetune_lines(report: dict[str, Any], out: Path, since: float) -> list[str]:
    """The end of ``rlsched finetune --live``: the selectors on the live cluster's held-out
    workloads, and the interference model's error on held-out live co-runs.

    :param report: what :func:`experiments.finetune_live.finetune_live` returned.
    :param out: its output folder.
    :param since: when the run started (``time.time()``): the "wrote" line names what changed since.
    """
    rows = [
        ("mct", report["mct"]),
        ("zero-shot", report["zero_shot"]),
        ("fine-tuned last/", report["fine_tuned"]),
    ]
    ix = report["interference"]
    lines = [
        f"finetune --live: {len(report['live_cluster'])} live nodes, held-out workloads",
        "                     tasks/s   p95 latency s   tasks lost",
    ]
    lines += [
        f"  {name:<17} {ev['throughput_per_s']:>9.2f}   {ev['latency_p95_s']:>13.3f}   {ev['tasks_lost']:>10}"
        for name, ev in rows
    ]
    lines.append(
        f"  interference model on {ix['held_out_rows']} held-out live co-runs: mean abs. error "
        f"{ix['sim_pretrained']['mae']:.3f} (simulator-trained) -> "
        f"{ix['sim_pretrained_then_live_update']['mae']:.3f} (updated on live rows)"
    )
    return [*lines, _wrote(out, since)]
