"""The service's client commands: ``rlsched submit | status | cancel | top`` and ``rlsched token``."""

from __future__ import annotations

import argparse
import json
import time

from experiments import inputs
from rlsched.errors import Unavailable


def run_client(args: argparse.Namespace) -> None:
    """``submit``, ``status``, ``cancel`` or ``top`` against a running service."""
    import httpx

    from rlsched.client import Client, ServiceError

    token = inputs.token(args.token_env)
    try:
        with Client(args.url, token) as c:
            if args.command == "submit":
                body = [
                    {"app": args.app, "stream": args.stream, "chunk": k, "priority": args.priority}
                    for k in range(args.chunks)
                ]
                rows = c.submit(body)
                if args.wait:
                    rows = c.wait([r["id"] for r in rows])
                print(json.dumps(rows) if args.json else task_table(rows))
            elif args.command == "status":
                row = c.get(args.id)
                print(json.dumps(row) if args.json else task_table([row]))
            elif args.command == "cancel":
                row = c.cancel(args.id)
                print(json.dumps(row) if args.json else task_table([row]))
            else:
                _top(c, args.once, args.interval)
    # The service is another program: its refusal (a 4xx naming the field, a 5xx) or its absence
    # is the environment's answer, not a bug here and not a file or flag of ours (exit 4).
    except ServiceError as e:
        raise Unavailable(args.url, f"the service answered {e}") from None
    except httpx.HTTPError as e:  # the service is not there, or the connection broke
        raise Unavailable(args.url, f"cannot reach the service ({type(e).__name__}: {e})") from None


def task_table(rows: list[dict]) -> str:
    """Task records as a table (one line each) and, for several, a summary line; ``--json`` gives
    the full records (outputs included)."""
    lines = [
        f"{'id':>8}  {'app':<20} {'stream':>6} {'chunk':>6}  {'state':<9} {'node':<12} "
        f"{'wait s':>7} {'run s':>7}"
    ]
    spans = []
    for r in rows:
        wait = run = ""
        if r.get("started_at") is not None:
            wait = f"{r['started_at'] - r['submitted_at']:.2f}"
            if r.get("finished_at") is not None:
                run = f"{r['finished_at'] - r['started_at']:.2f}"
                spans.append(r["finished_at"] - r["submitted_at"])
        node = r.get("node") or "-"
        lines.append(
            f"{r['id']:>8}  {r['app']:<20} {r['stream']:>6} {r['chunk']:>6}  {r['state']:<9} {node:<12} "
            f"{wait:>7} {run:>7}" + (f"  {r['error']}" if r.get("error") else "")
        )
    if len(rows) > 1:
        states: dict[str, int] = {}
        for r in rows:
            states[r["state"]] = states.get(r["state"], 0) + 1
        summary = f"{len(rows)} tasks: " + ", ".join(f"{n} {k}" for k, n in sorted(states.items()))
        if spans:
            summary += f"; latency mean {sum(spans) / len(spans):.2f} s, max {max(spans):.2f} s"
        lines.append(summary)
    return "\n".join(lines)


def _top(client: object, once: bool, interval: float) -> None:
    """Frames of queue depth, running tasks, per-GPU streams and memory, and completions/s (with
    ``once``, measured over one ``interval`` before the frame)."""
    from rlsched.client import Client

    assert isinstance(client, Client)
    last: tuple[float, int] | None = None
    if once:
        last = (time.monotonic(), client.cluster()["done"])
        time.sleep(interval)
    while True:
        state = client.cluster()
        done = state["done"]
        now = time.monotonic()
        rate = (done - last[1]) / (now - last[0]) if last else 0.0
        last = (now, done)
        lines = [
            f"{state['scheduler']} on {state['backend']}: {state['queued']} queued, "
            f"{state['running']} running, {done} done, {rate:.1f}/s",
            "node        gpu model      streams running mem MiB",
        ]
        for n in state["nodes"]:
            for j, g in enumerate(n["gpus"]):
                lines.append(
                    f"{n['name']:<11} {j:<3} {g['model']:<10} {g['streams']:>7} {g['running']:>7} "
                    f"{g['mem_used_mib']:>7.0f}/{g['mem_mib']:.0f}"
                )
        print("\n".join(lines), flush=True)
        if once:
            return
        time.sleep(interval)
        print("\x1b[2J\x1b[H", end="")  # clear the terminal for the next frame


def new_token() -> None:
    """A new bearer token (256 random bits) and the digest the config keeps instead of it."""
    import secrets

    from runtime.service.config import hash_token

    token = secrets.token_urlsafe(32)
    print(f"token        {token}")
    print(f'token_sha256 = "{hash_token(token)}"   # for the tenant\'s table in the service config')
