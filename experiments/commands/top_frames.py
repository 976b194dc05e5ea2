"""What ``rlsched top`` prints: a frame of the service's state (text only, no requests)."""

from __future__ import annotations

import time
from typing import Any


def unreachable_frame(since: float, e: Exception, interval: float) -> str:
    """The frame shown while the service does not answer."""
    when = time.strftime("%H:%M:%S", time.localtime(since))
    return f"service unreachable since {when} ({type(e).__name__}: {e}); trying again every {interval:g} s"


def frame(state: dict[str, Any], rate: float, url: str, tenants: list[dict[str, Any]] | None = None) -> str:
    """One frame: the service, its queue and rate, a line per GPU, the drained nodes (if any),
    and for an admin a line per tenant (``tenants``: ``GET /v1/admin/tenants``)."""
    lines = [
        # two lines: one ran to about 100 columns and wrapped in an 80-column terminal
        f"rlsched {state.get('version', '?')} at {url}: {state['scheduler']} on {state['backend']}",
        f"{state['queued']} queued, {state['running']} running, {state['done']} done ({rate:.1f}/s)",
        "node        gpu model      streams running mem MiB        speed  rate",
    ]
    for n in state["nodes"]:
        for j, g in enumerate(n["gpus"]):
            mem = f"{g['mem_used_mib']:.0f}/{g['mem_mib']:.0f}"
            lines.append(
                f"{n['name']:<11} {j:<3} {g['model']:<10} {g['streams']:>7} {g['running']:>7} "
                f"{mem:<14} {g.get('speed', float('nan')):>5.2f} {g.get('rate', float('nan')):>5.2f}"
            )
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
