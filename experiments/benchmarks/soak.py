"""Soak of ``rlsched serve`` (a script, not a test): a long run at a share of its measured capacity,
sampling what drifts when something leaks.

    python -m experiments.benchmarks.soak [--minutes 10] [--load 0.8] [--sample-s 60]
        [--plot docs/figures/soak.png] [--json OUT] [--retention-s S] [--reload-every S]

First the service's capacity is measured: a backlog of the load's task mix, and the rate at
which it completes. Then a client offers ``--load`` times that rate, open loop, for ``--minutes``,
and every ``--sample-s`` seconds the script samples the server's RSS and open file descriptors
(``/proc``), the queue depth, the accept latency (p50, p99 of the interval's submissions) and
the task latency (submission to completion, p50 and p99 of the interval's completions).

Pass, on the samples after the warm-up (the first one): RSS and file descriptors flat within
10 % (the mean of the last third of the samples against the mean of the first third; the widest
swing from the warm-up sample is printed too), p99 accept latency never above twice the median
p99 of those samples, nothing accepted lost and nothing finished twice. With ``--reload-every S``
the config is rewritten every S seconds (a second tenant added or removed, the queue's bound
changed) and the service sent ``SIGHUP``: every reload must be applied, and no submission refused
for its token (401) while the tenants change.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.benchmarks.service_load import Load, audit, percentiles, wait_drained
from experiments.benchmarks.service_process import (
    ServiceProcess,
    cpu_seconds,
    free_port,
    proc_figures,
    write_config,
)

TOKEN = "soak-token"
#: Tasks per submission.
BATCH = 4


def host_ticks() -> tuple[int, int]:
    """(all, stolen) CPU ticks of the machine since boot: time the hypervisor gave to others
    shows as steal, which tells a slow minute of the host from one of the service."""
    f = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return sum(f[:8]), f[7] if len(f) > 7 else 0


def measure_capacity(s: ServiceProcess, db: Path, tasks: int = 400) -> tuple[float, set[int]]:
    """Tasks per second the service completes with a backlog of the load's mix (the middle half
    of the backlog's completions, so start-up and the tail do not count), and the backlog's ids."""
    load = Load(s.url, TOKEN, batch=100, interval_s=0.0, prefix="capacity").start()
    while len(load.accepted) < tasks:
        time.sleep(0.05)
    load.stop()
    wait_drained(db, load.accepted)
    con = sqlite3.connect(db)
    done = sorted(t for (t,) in con.execute("SELECT finished_at FROM tasks WHERE state = 'done'"))
    con.close()
    middle = done[len(done) // 4 : 3 * len(done) // 4]
    return (len(middle) - 1) / (middle[-1] - middle[0]), set(load.accepted)


def absent(db: Path, ids: set[int]) -> set[int]:
    """Those of ``ids`` no longer in the queue file (with a retention: pruned, if nothing is lost)."""
    con = sqlite3.connect(db)
    try:
        return ids - {i for (i,) in con.execute("SELECT id FROM tasks")}
    finally:
        con.close()


def wait_finished_or_pruned(db: Path, ids: set[int], timeout_s: float = 300.0) -> None:
    """:func:`wait_drained` for a service that prunes: a task gone from the file counts as
    finished here, and is accounted for against the service's pruned count afterwards."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            wait_drained(db, ids - absent(db, ids), timeout_s=5.0)
            return
        except TimeoutError:
            if time.monotonic() > deadline:
                raise


def settled_pruning(s: ServiceProcess, db: Path, ids: set[int]) -> tuple[set[int], int]:
    """The tasks of ``ids`` gone from the file and the service's pruned count, once two readings
    2.5 s apart (longer than the service's 2-s pruning period) agree: no pruning in flight. With a
    retention, tasks that finished within it are pruned over the next minutes, so this may wait
    that long."""
    last: tuple[int, int] | None = None
    while True:
        said, gone = pruned_total(s), absent(db, ids)
        if last == (said, len(gone)):
            return gone, said
        last = (said, len(gone))
        time.sleep(2.5)


def pruned_total(s: ServiceProcess) -> int:
    """``rlsched_tasks_pruned_total`` of the running service."""
    return int(metric(s, "rlsched_tasks_pruned_total"))


def metric(s: ServiceProcess, name: str) -> float:
    """One sample of the running service's ``/metrics`` (the line that starts with ``name``)."""
    import httpx

    for line in httpx.get(f"{s.url}/metrics", timeout=10).text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return 0.0


class Reloads:
    """Every ``every_s`` seconds, a changed config and ``SIGHUP`` (a thread beside the load).

    :param s: the service.
    :param top: the config's top-level lines.
    """

    def __init__(self, s: ServiceProcess, top: str, every_s: float) -> None:
        import threading

        self.s, self.top, self.every_s, self.sent = s, top, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-reloads", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import signal

        while not self._stop.wait(self.every_s):
            k = self.sent + 1
            tokens = {"soak": TOKEN, **({f"extra{k}": f"tok-{k}"} if k % 2 else {})}
            bound = f"queue_bound = {1_000_000 - k % 2}\n"
            write_config(
                self.s.config.parent,
                self.s.port,
                tokens,
                top=self.top.replace("queue_bound = 1000000\n", bound),
            )
            os.kill(self.s.pid, signal.SIGHUP)
            self.sent = k

    def stop(self) -> dict[str, int]:
        """Stop; how many were sent and how many the service says it applied (or refused)."""
        self._stop.set()
        self._thread.join()
        time.sleep(1.0)  # the feedback tick applies a SIGHUP within 0.25 s
        applied = metric(self.s, 'rlsched_config_reloads_total{result="applied"}')
        refused = metric(self.s, 'rlsched_config_reloads_total{result="refused"}')
        return {"reloads": self.sent, "reloads_applied": int(applied), "reloads_refused": int(refused)}


def sample(
    s: ServiceProcess, db: Path, load: Load, since: float, now: float, cpu: tuple[float, int, int]
) -> dict[str, float]:
    """One row of figures for the interval ``[since, now)`` (``time.time()`` seconds); ``cpu``
    is ``(service CPU seconds, host ticks, stolen ticks)`` at ``since``."""
    rss, fds = proc_figures(s.pid)
    ticks, stolen = host_ticks()
    service_cpu = cpu_seconds(s.pid)
    con = sqlite3.connect(db)
    queued = con.execute("SELECT COUNT(*) FROM tasks WHERE state = 'queued'").fetchone()[0]
    task = [
        f - t
        for f, t in con.execute(
            "SELECT finished_at, submitted_at FROM tasks WHERE state = 'done' AND finished_at >= ? "
            "AND finished_at < ? AND idem_key LIKE 'soak-%'",
            (since, now),
        )
    ]
    con.close()
    accept = [x for t, x in load.latencies if since <= t < now]
    a50, a99 = percentiles(accept)
    t50, t99 = percentiles(task)
    return {
        "t_min": 0.0,
        "rss_mb": rss,
        "fds": fds,
        "queued": queued,
        "accept_p50_ms": a50 * 1e3,
        "accept_p99_ms": a99 * 1e3,
        "task_p50_s": t50,
        "task_p99_s": t99,
        "submitted": len(accept) * BATCH,
        "completed": len(task),
        "service_cpu": (service_cpu - cpu[0]) / max(now - since, 1e-9),
        "steal_pct": 100.0 * (stolen - cpu[2]) / max(ticks - cpu[1], 1),
    }


def cpu_mark(pid: int) -> tuple[float, int, int]:
    """What :func:`sample` measures CPU use from."""
    return (cpu_seconds(pid), *host_ticks())


def verdict(rows: list[dict[str, float]]) -> dict[str, Any]:
    """The pass criteria of the module docstring, on the samples after the first (warm-up).

    "Flat" is judged by drift, not by the widest swing: the mean of the last third of the samples
    against the mean of the first third (a leak shows as growth from one to the other; RSS also
    swings by a tenth from minute to minute as the allocator takes and returns memory). The widest
    swing from the warm-up sample is reported too.
    """
    rest = rows[1:] or rows
    third = max(1, len(rest) // 3)

    def drift(key: str) -> float:
        first = sum(r[key] for r in rest[:third]) / third
        last = sum(r[key] for r in rest[-third:]) / third
        return (last - first) / first if first else 0.0

    def swing(key: str) -> float:
        warm = rows[0][key]
        return max(abs(r[key] - warm) / warm for r in rest) if warm else 0.0

    p99 = sorted(r["accept_p99_ms"] for r in rest)
    median = p99[len(p99) // 2]
    worst = max(r["accept_p99_ms"] / median for r in rest) if median else 0.0
    out = {
        "rss_drift": drift("rss_mb"),
        "fd_drift": drift("fds"),
        "rss_swing": swing("rss_mb"),
        "fd_swing": swing("fds"),
        "p99_worst_over_median": worst,
    }
    out["pass"] = abs(out["rss_drift"]) <= 0.10 and abs(out["fd_drift"]) <= 0.10 and worst <= 2.0
    return out


def plot(rows: list[dict[str, float]], out: Path, title: str) -> None:
    """RSS and file descriptors, accept latency, queue depth and task latency against time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_min"] for r in rows]
    fig, ax = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
    ax[0].plot(t, [r["rss_mb"] for r in rows], "o-", label="RSS (MB)")
    ax[0].set_ylabel("RSS (MB)")
    ax[0].set_ylim(bottom=0)
    fd = ax[0].twinx()
    fd.plot(t, [r["fds"] for r in rows], "s--", color="tab:orange", label="open fds")
    fd.set_ylabel("open file descriptors")
    fd.set_ylim(bottom=0)
    ax[0].legend(loc="lower left")
    fd.legend(loc="lower right")
    ax[1].plot(t, [r["accept_p50_ms"] for r in rows], "o-", label="accept p50")
    ax[1].plot(t, [r["accept_p99_ms"] for r in rows], "s-", label="accept p99")
    ax[1].set_ylabel("accept latency (ms)")
    ax[1].set_ylim(bottom=0)
    ax[1].legend()
    ax[2].plot(t, [r["task_p50_s"] for r in rows], "o-", label="task p50")
    ax[2].plot(t, [r["task_p99_s"] for r in rows], "s-", label="task p99")
    ax[2].set_ylabel("task latency (s)")
    ax[2].set_ylim(bottom=0)
    q = ax[2].twinx()
    q.plot(t, [r["queued"] for r in rows], "^:", color="tab:gray", label="queued")
    q.set_ylabel("queued tasks")
    q.set_ylim(0, max(1.0, 1.1 * max(r["queued"] for r in rows)))
    ax[2].legend(loc="upper left")
    q.legend(loc="upper right")
    ax[2].set_xlabel("minutes into the soak (each point: the interval ending there)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def soak(
    minutes: float,
    share: float,
    sample_s: float,
    folder: Path,
    retention_s: float = 0.0,
    reload_every_s: float = 0.0,
) -> dict[str, Any]:
    """Run the soak in ``folder``; the figures, the samples and the verdict.

    :param retention_s: the service's ``finished_retention_s`` (0: every task kept, and audited
        one by one). With a retention, the tasks gone from the file must be exactly as many as
        the service says it pruned, and the audit covers the rest.
    :param reload_every_s: seconds between two reloads of a changed config (0: none).
    """
    port = free_port()
    top = f"queue_bound = 1000000\nfinished_retention_s = {retention_s:g}\n"
    s = ServiceProcess(write_config(folder, port, {"soak": TOKEN}, top=top), port)
    s.start()
    db = folder / "queue.db"
    try:
        capacity, backlog = measure_capacity(s, db)
        rate = share * capacity
        load = Load(s.url, TOKEN, batch=BATCH, interval_s=BATCH / rate, prefix="soak").start()
        reloads = Reloads(s, top, reload_every_s) if reload_every_s > 0 else None
        rows, t0 = [], time.time()
        since, mark = t0, cpu_mark(s.pid)
        while time.time() - t0 < minutes * 60 - 1e-6:
            time.sleep(min(sample_s, max(0.0, t0 + minutes * 60 - time.time())))
            now = time.time()
            rows.append({**sample(s, db, load, since, now, mark), "t_min": (now - t0) / 60})
            since, mark = now, cpu_mark(s.pid)
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        load.stop()
        reloaded = reloads.stop() if reloads is not None else {}
        wait_finished_or_pruned(db, load.accepted)
        gone, said = settled_pruning(s, db, load.accepted | backlog)
        outcome = {
            **audit(db, load.accepted - gone),
            "accepted": len(load.accepted),
            "pruned": len(gone & load.accepted),
            # Every task gone from the file is one the service says it pruned: none was lost.
            "unaccounted": abs(len(gone) - said),
            "unauthorised": load.statuses[401],
            **reloaded,
        }
        outcome["completed"] += outcome["pruned"]  # pruned tasks had finished (done or failed)
    finally:
        s.stop()
    return {
        "capacity_tasks_per_s": capacity,
        "offered_tasks_per_s": rate,
        "samples": rows,
        **outcome,
        **verdict(rows),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--load", type=float, default=0.8, help="share of the measured capacity offered")
    p.add_argument("--sample-s", type=float, default=60.0)
    p.add_argument(
        "--plot",
        default="docs/figures/soak.png",
        help="the figure to write (default: the one BENCHMARKS.md shows; give another path to keep it)",
    )
    p.add_argument("--json", help="write the figures here too")
    p.add_argument(
        "--reload-every",
        type=float,
        default=0.0,
        help="seconds between two reloads of a changed config by SIGHUP (0: none)",
    )
    p.add_argument(
        "--retention-s",
        type=float,
        default=0.0,
        help="the service's finished_retention_s (0: keep every task)",
    )
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rlsched-soak-") as tmp:
        r = soak(args.minutes, args.load, args.sample_s, Path(tmp), args.retention_s, args.reload_every)
    cmd = " ".join(["python -m experiments.benchmarks.soak", *(argv if argv is not None else sys.argv[1:])])
    machine = f"{platform.node()}: {os.cpu_count()} cores, {platform.platform()}"
    print(f"# {cmd}\n# {machine}\n")
    print(
        f"capacity {r['capacity_tasks_per_s']:.1f} tasks/s, offered {r['offered_tasks_per_s']:.1f} tasks/s "
        f"({args.load:g}x) for {args.minutes:g} min\n"
    )
    print(
        "| minute | RSS MB | fds | queued | accept p50 ms | accept p99 ms | task p50 s | task p99 s "
        "| service CPU (cores) | host steal % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for x in r["samples"]:
        print(
            f"| {x['t_min']:.1f} | {x['rss_mb']:.0f} | {x['fds']} | {x['queued']} | "
            f"{x['accept_p50_ms']:.1f} | {x['accept_p99_ms']:.1f} | "
            f"{x['task_p50_s']:.2f} | {x['task_p99_s']:.2f} | {x['service_cpu']:.2f} | "
            f"{x['steal_pct']:.1f} |"
        )
    ok = (
        r["pass"] and not r["lost"] and not r["duplicated"] and not r["unaccounted"] and not r["unauthorised"]
    )
    if args.reload_every > 0:
        ok = ok and r["reloads_applied"] == r["reloads"] > 0 and not r["reloads_refused"]
        print(
            f"reloads: {r['reloads']} sent by SIGHUP, {r['reloads_applied']} applied, "
            f"{r['reloads_refused']} refused; submissions refused for their token: {r['unauthorised']}"
        )
    print(
        f"\naccepted {r['accepted']}, completed {r['completed']} (pruned after finishing {r['pruned']}, "
        f"unaccounted {r['unaccounted']}), lost {r['lost']}, duplicated {r['duplicated']}; "
        f"RSS drift {r['rss_drift']:+.1%} (widest swing from warm-up {r['rss_swing']:.1%}), "
        f"fd drift {r['fd_drift']:+.1%}, worst p99 / median p99 "
        f"{r['p99_worst_over_median']:.2f}: {'PASS' if ok else 'FAIL'}"
    )
    title = f"rlsched serve soak: {args.load:g}x of {r['capacity_tasks_per_s']:.1f} tasks/s, {machine}"
    plot(r["samples"], Path(args.plot), title)
    print(f"plot: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
