"""The report's section on latency against offered load (``rlsched evaluate --loads``)."""

from __future__ import annotations

from pathlib import Path

from experiments.load_curves import KEEP_UP, curves, latency_floor
from experiments.report_stats import INTERVALS
from experiments.report_writer import Block, _fmt

LOAD_RUN_HEAD = (
    "scenario",
    "scheduler",
    "seed",
    "load",
    "arrivals/min",
    "status",
    "mean latency s",
    "p95 s",
    "tasks/min",
    "keeps up",
)

HOW_TO_READ = (
    "Each curve is one scheduler's mean over seeds, with its 95 % interval, at arrival rates set "
    "so that the offered load (arrival rate over {ref}, per seed) takes each value on the x axis. "
    "The dashed line is a lower bound on latency: each task's fastest critical path on an empty "
    "cluster; no scheduler goes below it, and the gap above it at low load is what placement "
    "costs. A cross marks where a scheduler stops keeping up: the lowest load at which most of "
    "its seeds' runs complete, over the middle 80 % of the arrival window, less than {keep:.0%} of "
    "the tasks an ideal scheduler (each task done at its arrival plus its floor) would have "
    "completed there, or leave a task uncompleted (`served_share`; on a run of a few hundred tasks "
    "a steady latency above the floor alone lowers it, so judge a cross there with care). "
    "Past it, queues grow for as long as tasks arrive and latency measures the run's length, not "
    "the scheduler. Judge latency where curves still keep up and have left the floor (near "
    "capacity, where a small gain in effective capacity removes a large share of the queueing)."
)


def load_blocks(rows: list[dict], load_of: str, out: Path) -> list[Block]:
    """Figures and tables of latency against offered load, one scenario at a time."""
    from experiments import report_plots as plots  # matplotlib: imported when a figure is drawn

    ref = (
        "the LP capacity bound"
        if load_of == "bound"
        else f"{load_of}'s knee: the highest arrival rate at which it keeps up on that seed, bisected"
    )
    blocks = [
        Block("h2", "Latency against offered load"),
        Block("p", HOW_TO_READ.format(ref=ref, keep=KEEP_UP)),
    ]
    floors = latency_floor(rows)
    for sc, by_sched in curves(rows).items():
        floor = floors.get(sc, [])
        fl_loads = [x for x, _, _ in floor]
        panels = [
            (
                "mean latency, s",
                {s: (c.loads, c.mean_s) for s, c in by_sched.items()},
                [m for _, m, _ in floor],
            ),
            (
                "p95 latency, s",
                {s: (c.loads, c.p95_s) for s, c in by_sched.items()},
                [p for _, _, p in floor],
            ),
        ]
        slug = plots.figure_stem(sc)
        p = plots.latency_vs_load(
            out / "img" / f"{slug}-latency-vs-load.png",
            f"{sc}: latency against offered load",
            panels,
            fl_loads,
            {s: c.knee for s, c in by_sched.items()},
        )
        loads = sorted({x for c in by_sched.values() for x in c.loads})
        head = ("scheduler", *(f"{x:g}" for x in loads), "stops keeping up at")
        table = []
        for s, c in by_sched.items():
            at = dict(zip(c.loads, c.mean_s, strict=True))
            cells = [at[x].cell(prec=2) if x in at else "–" for x in loads]
            table.append((s, *cells, "–" if c.knee is None else f"{c.knee:g}"))
        floor_at = {x: m for x, m, _ in floor}
        table.append(("lower bound", *(_fmt(floor_at.get(x), 3) for x in loads), ""))
        blocks += [
            Block("h3", f"{sc}: latency against offered load"),
            Block("img", text=p.relative_to(out).as_posix(), head=(f"{sc}: latency against offered load",)),
            Block("p", f"Mean latency in seconds at each offered load. {INTERVALS}"),
            Block("table", head=head, rows=tuple(table)),
        ]
    blocks += [
        Block("h2", "Every run"),
        Block(
            "p",
            "Throughput in tasks/min; `keeps up`: over the middle 80 % of the arrivals, at least "
            f"{KEEP_UP:.0%} of the tasks that arrived completed (`served_share`), and none was lost.",
        ),
        Block("table", head=LOAD_RUN_HEAD, rows=_run_rows(rows)),
    ]
    return blocks


def _run_rows(rows: list[dict]) -> tuple[tuple[str, ...], ...]:
    out = []
    for r in sorted(rows, key=lambda r: (r["scenario"], r["scheduler"], r["load"] or 0.0, r["seed"])):
        thr = None if r["throughput"] is None else r["throughput"] * 60.0
        up = r.get("keeps_up")
        out.append(
            (
                r["scenario"],
                r["scheduler"],
                str(r["seed"]),
                _fmt(r.get("load"), 2),
                _fmt(r.get("bound_arrival_rate_per_min"), 1),
                r["status"],
                _fmt(r["latency_mean_s"], 3),
                _fmt(r["latency_p95_s"], 3),
                _fmt(thr, 1),
                "–" if up is None else ("yes" if up else "no"),
            )
        )
    return tuple(out)
