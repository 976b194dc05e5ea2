"""Write an evaluation's results and report: results.csv/json, report.md, report.html, img/*.png.

The Markdown and the HTML are rendered from one list of blocks, so every number in them is the
same, and each is a rounding of a value in ``results.json``.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from experiments.evaluation import BoundCase, CaseResult
from experiments.report_stats import (
    ARRIVAL_BOUND,
    INTERVALS,
    Summary,
    not_completed,
    precision,
    summarise,
    summarise_key,
)
from rlsched.metrics import RunMetrics
from rlsched.policies.registry import is_clairvoyant_spec, is_learned_spec
from rlsched.seeds import caption

METRICS = [f.name for f in fields(RunMetrics)]
BOUND_FIELDS = (
    "throughput_ub",
    "capacity_per_min",
    "arrival_rate_per_min",
    "offered_load",
    "arrival_bound",
    "latency_lb_mean_s",
    "latency_lb_p95_s",
    "binding",
    "method",
)
#: Tolerance of the "within bound" check (the LP's own slack is far smaller).
BOUND_TOL = 1e-9


@dataclass(frozen=True)
class Meta:
    """What produced a report."""

    command: str
    seeds: list[int]
    git_revision: str
    created: str
    machine: str
    wall_s: float
    #: Runs kept from an earlier evaluation of the folder (``--resume``), not run by this command.
    kept_runs: int = 0
    #: The installed rlsched and its shipped models' sha256 prefixes (what git cannot say of a
    #: wheel install).
    version: str = ""


# ---- rows ----------------------------------------------------------------------------------------
def build_rows(results: Sequence[CaseResult], bounds: dict[BoundCase, dict | str]) -> list[dict]:
    """One flat row per case: its metrics, the bound of its scenario and seed, and ratios."""
    rows = []
    for r in results:
        c = r.case
        b = bounds.get(BoundCase(c.scenario, c.seed, c.rate, c.arrival_scale))
        row: dict = {"scenario": c.scenario, "scheduler": c.scheduler, "seed": c.seed, "rate": c.rate}
        row["arrival_scale"], row["rebalance"] = c.arrival_scale, c.rebalance
        row["status"], row["error"] = r.status, r.error
        for k in METRICS:
            row[k] = r.metrics.get(k) if r.status == "ok" else None
        thr = row["throughput"]
        row["throughput_per_min"] = thr * 60.0 if thr is not None else None  # as simulate --json says it
        row["not_completed"] = not_completed(r.metrics) if r.status == "ok" else None
        row["served_share"] = r.metrics.get("served_share") if r.status == "ok" else None
        # What the run did (its metrics) or, for a run that failed, what the policy declares.
        row["clairvoyant"] = bool(r.metrics.get("clairvoyant")) or is_clairvoyant_spec(c.scheduler)
        row["chose"] = r.chose
        for k in BOUND_FIELDS:
            row[f"bound_{k}"] = b.get(k) if isinstance(b, dict) else None
        row["bound_error"] = b if isinstance(b, str) else ""
        rows.append(row)
    _ratios(rows)
    return rows


#: Where the best heuristic is this close to the bound, no gap is left to share.
GAP_FLOOR = 1e-3


def _ratios(rows: list[dict]) -> None:
    """Fraction of the bound, share of the gap from the best heuristic pair to the bound, and
    fraction of the best ``oracle`` run, all of the same scenario and seed."""
    oracle: dict[tuple, float] = {}
    heuristic: dict[tuple, float] = {}
    for r in rows:
        if r["throughput"] is None:
            continue
        key = (r["scenario"], r["seed"], r.get("arrival_scale", 1.0))
        if r["scheduler"].split("+")[0] == "oracle":
            oracle[key[:2]] = max(oracle.get(key[:2], 0.0), r["throughput"])
        elif not r["clairvoyant"] and not is_learned_spec(r["scheduler"]) and r["not_completed"] == 0:
            heuristic[key] = max(heuristic.get(key, 0.0), r["throughput"])
    for r in rows:
        thr, ub = r["throughput"], r["bound_throughput_ub"]
        r["frac_of_bound"] = thr / ub if thr is not None and ub else None
        o = oracle.get((r["scenario"], r["seed"]))
        r["frac_of_oracle"] = thr / o if thr is not None and o else None
        h = heuristic.get((r["scenario"], r["seed"], r.get("arrival_scale", 1.0)))
        gap = (ub - h) if ub is not None and h is not None else None
        # Below ARRIVAL_BOUND the bound is the arrivals: what is left is noise, not a gap.
        saturated = (r.get("bound_offered_load") or ARRIVAL_BOUND) >= ARRIVAL_BOUND
        open_gap = saturated and thr is not None and gap is not None and gap > GAP_FLOOR * ub
        r["gap_share"] = (thr - h) / gap if open_gap else None
        complete = r["not_completed"] == 0
        r["within_bound"] = (
            None if thr is None or ub is None or not complete else bool(thr <= ub * (1 + BOUND_TOL))
        )


def write_results(
    rows: list[dict], meta: Meta, out: Path, extra: dict[str, list[dict]] | None = None
) -> None:
    """``results.json`` (rows and how they were made) and ``results.csv`` (the rows).

    :param extra: more lists of records for ``results.json``, by key (e.g. per-case ratios).
    """
    doc = {"meta": meta.__dict__, "rows": [_json_safe(r) for r in rows]}
    doc |= {k: [_json_safe(r) for r in v] for k, v in (extra or {}).items()}
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["scenario"])
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if v is None else v for k, v in r.items()})


def _json_safe(row: dict) -> dict:
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}


# ---- blocks ---------------------------------------------------------------------------------------
@dataclass
class Block:
    """A heading (``h2``/``h3``), paragraph (``p``), code line (``code``), table or image."""

    kind: str
    text: str = ""
    head: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


def _fmt(v: float | None, prec: int = 3) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{prec}f}"


def _group(rows: list[dict]) -> dict[str, dict[str, list[dict]]]:
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[r["scenario"]][r["scheduler"]].append(r)
    return out


def _bound_summary(runs: dict[str, list[dict]]) -> dict[str, Summary | str]:
    per_seed: dict[int, dict] = {}
    for rs in runs.values():
        for r in rs:
            per_seed.setdefault(r["seed"], r)
    seeds = list(per_seed.values())
    out: dict[str, Summary | str] = {
        k: summarise([r[f"bound_{k}"] for r in seeds])
        for k in (
            "capacity_per_min",
            "arrival_rate_per_min",
            "offered_load",
            "throughput_ub",
            "latency_lb_p95_s",
        )
    }
    out["binding"] = ", ".join(sorted({str(r["bound_binding"]) for r in seeds if r["bound_binding"]})) or "–"
    out["method"] = ", ".join(sorted({str(r["bound_method"]) for r in seeds if r["bound_method"]})) or "–"
    errors = sorted({r["bound_error"] for r in seeds if r["bound_error"]})
    out["error"] = "; ".join(errors)
    return out


def headroom_blocks(grouped: dict[str, dict[str, list[dict]]]) -> list[Block]:
    """The summary table: each scenario's offered load, and the best scheduler's share of the bound."""
    head = (
        "scenario",
        "arrivals /min",
        "capacity /min",
        "offered load",
        "regime",
        "best scheduler",
        "of bound",
    )
    rows = []
    for sc, runs in grouped.items():
        b = _bound_summary(runs)
        load = b["offered_load"]
        assert isinstance(load, Summary)
        regime = "–" if load.n == 0 else ("arrival-bound" if load.mean < ARRIVAL_BOUND else "has headroom")
        # A clairvoyant reference is not a scheduler: it is never the best one.
        real = [s for s in runs if not _clairvoyant(runs[s])]
        best = (
            max(
                real,
                key=lambda s: summarise([r["throughput"] for r in runs[s]]).mean if _ok(runs[s]) else -1.0,
            )
            if real
            else "–"
        )
        frac = summarise_key([r["frac_of_bound"] for r in runs.get(best, [])], "frac_of_bound")
        rows.append(
            (
                sc,
                _cell(b["arrival_rate_per_min"]),
                _cell(b["capacity_per_min"]),
                _cell(load),
                regime,
                best,
                frac.cell(),
            )
        )
    return [
        Block("h2", "Headroom"),
        Block(
            "p",
            f"Offered load = arrival rate over the capacity bound (means over seeds). Under {ARRIVAL_BOUND} "
            "a scenario is **arrival-bound**: every reasonable scheduler completes what arrives, so equal "
            "throughput there says nothing about schedulers; compare latency instead. At or above it "
            "a scenario **has headroom**: arrivals approach or pass what the cluster can serve, and "
            "schedulers differ in how much of the bound they reach (`of bound`).",
        ),
        Block("table", head=head, rows=tuple(rows)),
    ]


def _ok(rs: list[dict]) -> bool:
    return any(r["status"] == "ok" for r in rs)


def _clairvoyant(rs: list[dict]) -> bool:
    """Runs of a clairvoyant reference (it read the simulator's ground truth)."""
    return any(r.get("clairvoyant") for r in rs)


def _cell(s: Summary | str) -> str:
    return s if isinstance(s, str) else s.cell(prec=precision(s.mean) if s.n else 3)


SCHED_HEAD = (
    "scheduler",
    "runs ok",
    "tasks/min",
    "of bound",
    "of gap",
    "of oracle",
    "p95 s",
    "GPU util",
    "load bal.",
    "not completed",
    "decision µs",
    "run wall s",
    "≤ bound",
    "errors",
    "clairvoyant",
)


def scenario_blocks(sc: str, runs: dict[str, list[dict]], images: list[tuple[str, str]]) -> list[Block]:
    """A scenario's section: its bound, the scheduler table, its figures."""
    b = _bound_summary(runs)
    load = b["offered_load"]
    assert isinstance(load, Summary)
    label = (
        # the words of the headroom section's definitions: below ARRIVAL_BOUND, or at and above it
        ("**arrival-bound**" if load.n and load.mean < ARRIVAL_BOUND else "has headroom")
        if load.n
        else "bound not available"
    )
    ub = _cell(_scaled(b["throughput_ub"], 60.0))
    text = (
        f"Offered load {_cell(load)} ({label}); capacity bound {_cell(b['capacity_per_min'])} tasks/min; "
        f"run throughput bound {ub} tasks/min (binding: {b['binding']}; "
        f"method: {b['method']}); p95 latency lower bound {_cell(b['latency_lb_p95_s'])} s."
    )
    if b["error"]:
        text += f" Bound failed: {b['error']}."
    rows = []
    for s, rs in runs.items():
        ok = [r for r in rs if r["status"] == "ok"]
        errors = sorted({f"{r['status']}: {r['error']}" for r in rs if r["status"] != "ok"})
        thr = summarise([r["throughput"] for r in ok])
        within = [r["within_bound"] for r in ok if r["within_bound"] is not None]
        check = "–" if not within else ("yes" if all(within) else f"NO ({within.count(False)})")
        rows.append(
            (
                s,
                f"{len(ok)}/{len(rs)}",
                thr.cell(60.0, precision(thr.mean * 60.0) if thr.n else 3),
                summarise_key([r["frac_of_bound"] for r in ok], "frac_of_bound").cell(),
                summarise_key([r["gap_share"] for r in ok], "gap_share").cell(),
                summarise([r["frac_of_oracle"] for r in ok]).cell(),
                summarise([r["latency_p95_s"] for r in ok]).cell(prec=2),
                summarise_key([r["gpu_util"] for r in ok], "gpu_util").cell(),
                summarise_key([r["load_balance"] for r in ok], "load_balance").cell(),
                summarise([r["not_completed"] for r in ok]).cell(prec=1),
                summarise([1e6 / r["decisions_per_s"] for r in ok if r["decisions_per_s"]]).cell(prec=1),
                summarise([r["wall_s"] for r in ok]).cell(prec=2),
                check,
                "; ".join(errors) or "",
                "yes" if _clairvoyant(rs) else "",
            )
        )
    blocks = [
        Block("h2", f"Scenario {sc}"),
        Block("p", text),
        Block(
            "p",
            f"Means over seeds. {INTERVALS} `of bound`: throughput over the "
            "run's throughput bound for the same seed (capacity, arrivals and network; 1 = nothing left to "
            "gain); `of gap`: the share of the gap from the best heuristic pair of the same seed to that "
            "bound which the scheduler closes (1 = reaches the bound, 0 = no better than the best "
            "heuristic, negative = worse; heuristic = neither `ldwp`, `iawp-rl` nor `auto`, not clairvoyant; "
            "empty on arrival-bound seeds and where the best heuristic is within 0.1 % of the bound); "
            "`of oracle`: over the best "
            "`oracle` (clairvoyant greedy "
            "reference, not a bound) of the same seed; `not completed`: lost + unschedulable + failed tasks; "
            "`decision µs`: wall time per stage-1 decision; `run wall s`: the whole simulated run; "
            "`clairvoyant`: a reference that reads the simulator's ground truth, which no real "
            "scheduler can (never counted as the best scheduler).",
        ),
        Block("table", head=SCHED_HEAD, rows=tuple(rows)),
    ]
    blocks += [Block("img", text=path, head=(alt,)) for path, alt in images]
    return blocks


def _scaled(s: Summary | str, k: float) -> Summary | str:
    if isinstance(s, str):
        return s
    return s.scaled(k)


RUN_HEAD = (
    "scenario",
    "scheduler",
    "seed",
    "status",
    "tasks/min",
    "p95 s",
    "GPU util",
    "not completed",
    "bound tasks/min",
    "of bound",
    "clairvoyant",
)


def run_rows(rows: list[dict]) -> tuple[tuple[str, ...], ...]:
    """Every run, one line each, at the precision the test compares with ``results.json``."""
    out = []
    for r in rows:
        thr = None if r["throughput"] is None else r["throughput"] * 60.0
        ub = None if r["bound_throughput_ub"] is None else r["bound_throughput_ub"] * 60.0
        nc = r["not_completed"]
        out.append(
            (
                r["scenario"],
                r["scheduler"],
                str(r["seed"]),
                r["status"],
                _fmt(thr, 3),
                _fmt(r["latency_p95_s"], 3),
                _fmt(r["gpu_util"], 4),
                "–" if nc is None else str(nc),
                _fmt(ub, 3),
                _fmt(r["frac_of_bound"], 4),
                "yes" if r.get("clairvoyant") else "",
            )
        )
    return tuple(out)


def meta_blocks(meta: Meta, title: str) -> list[Block]:
    return [
        Block("h1", title),
        Block("code", meta.command),
        Block(
            "p",
            f"Seeds {meta.seeds} ({caption(meta.seeds)}) · "
            + (f"{meta.version} · " if meta.version else "")
            + f"git revision {meta.git_revision} · {meta.created} · {meta.machine} · {meta.wall_s:.1f} s wall"
            + (
                f" (resumed: {meta.kept_runs} runs kept from an earlier evaluation of this folder, "
                "run by the same code and models; the wall time is this command's)."
                if meta.kept_runs
                else "."
            ),
        ),
    ]


# ---- rendering -------------------------------------------------------------------------------------
def render_md(blocks: Sequence[Block]) -> str:
    out = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            out.append("#" * int(b.kind[1]) + " " + b.text)
        elif b.kind == "p":
            out.append(b.text)
        elif b.kind == "code":
            out.append(f"```\n{b.text}\n```")
        elif b.kind == "table":
            out.append("| " + " | ".join(b.head) + " |")
            out.append("|" + "---|" * len(b.head))
            out.extend("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in b.rows)
        elif b.kind == "img":
            out.append(f"![{b.head[0]}]({b.text})")
        out.append("")
    return "\n".join(out)


def render_html(blocks: Sequence[Block], root: Path) -> str:
    """Self-contained HTML: images embedded as data URIs, so the file opens offline alone."""
    body = []
    for b in blocks:
        if b.kind in ("h1", "h2", "h3"):
            body.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
        elif b.kind == "p":
            body.append(f"<p>{_inline(b.text)}</p>")
        elif b.kind == "code":
            body.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
        elif b.kind == "table":
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.head)
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif b.kind == "img":
            data = base64.b64encode((root / b.text).read_bytes()).decode()
            body.append(
                f'<figure><img alt="{html.escape(b.head[0])}" src="data:image/png;base64,{data}">'
                f"<figcaption>{html.escape(b.head[0])}</figcaption></figure>"
            )
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
        "table{border-collapse:collapse;margin:1em 0;font-size:13px}"
        "th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}"
        "th{background:#f0f0f0}td:first-child,th:first-child{text-align:left}"
        "img{max-width:100%}pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap}"
    )
    title = next((b.text for b in blocks if b.kind == "h1"), "rlsched evaluation")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )


def _inline(text: str) -> str:
    """Markdown ``code`` and **bold** spans to HTML, the rest escaped."""
    out, code = [], False
    for i, part in enumerate(html.escape(text).split("`")):
        if i:
            code = not code
        out.append(f"<code>{part}</code>" if code else part.replace("**", "\u0000"))
    s = "".join(out)
    while "\u0000" in s:
        s = s.replace("\u0000", "<strong>", 1).replace("\u0000", "</strong>", 1)
    return s
