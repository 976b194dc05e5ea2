"""What ``rlsched top`` prints: a frame of the service's state (text only, no requests)."""

from __future__ import annotations

import time
from typing import Any


def unreachable_frame(since: float, e: Exception, interval: float) -> str:
    """The frame shown while the service does not answer."""
    when = time.strftime("%H:%M:%S", time.localtime(since))
    return f"service unreachable since {when} ({type(e).__name__}: {e}); trying again every {interval:g} s"


def frame(state: dict[str, Any], rate: float, url: str, tenants: list[dict[str, Any]] | None = None) -> str:
    """One frame: the service, its queue and rate, a line per GPU of each live node (a CPU-only
    node's cores), the nodes gone and drained (if any), and for an admin a line per tenant
    (``tenants``: ``GET /v1/admin/tenants``)."""
    scheduler = state["scheduler"]
    auto = state.get("auto")
    if auto:  # the pair that places tasks now, and while auto still watches, how far it is
        deciding = f", deciding: {auto['tasks_seen']}/{auto['window']} tasks" if auto.get("deciding") else ""
        scheduler = f"{scheduler} ({auto['running']}{deciding})"
    lines = [
        # two lines: one ran to about 100 columns and wrapped in an 80-column terminal
        f"rlsched {state.get('version', '?')} at {url}: {scheduler} on {state['backend']}",
        f"{state['queued']} queued, {state['running']} running, {state['done']} done ({rate:.1f}/s)",
        "node        gpu model      streams running mem MiB        speed  rate",
    ]
    for n in state["nodes"]:
        if not n.get("alive", True):
            continue  # said on the "gone:" line: its last figures are no load
        if not n["gpus"]:  # a CPU-only node had no line at all
            lines.append(f"{n['name']:<11} -   cpu only ({n.get('cpu_cores', '?')} cores)")
        for j, g in enumerate(n["gpus"]):
            mem = f"{g['mem_used_mib']:.0f}/{g['mem_mib']:.0f}"
            lines.append(
                f"{n['name']:<11} {j:<3} {g['model']:<10} {g['streams']:>7} {g['running']:>7} "
                f"{mem:<14} {g.get('speed', float('nan')):>5.2f} {g.get('rate', float('nan')):>5.2f}"
            )
    live = {n["name"] for n in state["nodes"] if n.get("alive", True)}
    gone = sorted({n["name"] for n in state["nodes"] if not n.get("alive", True)} - live)
    if gone:  # removed or lost (a name added again since is live, above)
        lines.append(f"gone: {', '.join(gone)}")
    drained = [n["name"] for n in state["nodes"] if n.get("draining") and n.get("alive", True)]
    waiting = state.get("drains_waiting", [])
    if drained or waiting:  # nodes that take no new tasks, said where an operator looks
        lines.append(
            "drained: "
            + (", ".join(drained) or "none")
            + (f"; drained as they join: {', '.join(waiting)}" if waiting else "")
        )
    if tenants:
        lines.append("tenant           weight  queued running     done  failed cancelled")
        for t in tenants:
            lines.append(
                f"{t['name']:<16} {t['weight']:>6g} {t['queued']:>7} {t['running']:>7} {t['done']:>8} "
                f"{t['failed']:>7} {t['cancelled']:>9}" + ("" if t.get("configured", True) else "  (removed)")
            )
    return "\n".join(lines)


def fit(text: str, columns: int, rows: int) -> str:
    """``text`` cut to a terminal of ``columns`` x ``rows``: a longer line ends in ``…`` rather than
    wrap (wrapped, a GPU line split its figures across two lines), and past the last row a line
    says how many were left out (the header stays in view)."""
    lines = [x if len(x) <= columns else x[: max(columns - 1, 0)] + "…" for x in text.splitlines()]
    room = max(rows - 1, 1)  # the cursor's line after the frame
    if len(lines) > room:
        cut = len(lines) - room + 1
        lines = [*lines[: room - 1], f"… {cut} more lines (a larger terminal shows them)"[:columns]]
    return "\n".join(lines)
