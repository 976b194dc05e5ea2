"""An admin tenant's commands against a running service: ``rlsched drain | resume`` (a node),
``rlsched switch`` (the scheduler), ``rlsched tenants`` and ``rlsched reload`` (the service
re-reads its config)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from experiments.commands.client import CLIENT_EXITS, STATES, ClientArgs, with_client
from experiments.commands.command import Command
from experiments.commands.flags import flag

if TYPE_CHECKING:
    from runtime.service.client import Client


@dataclass(kw_only=True)
class NodeArgs(ClientArgs):
    """Options of ``rlsched drain`` and ``rlsched resume``.

    :param node: the node's name (as rlsched top shows it)
    :param json: print the service's answer as JSON
    """

    node: str = flag(positional=True)
    json: bool = False


@dataclass(kw_only=True)
class SwitchArgs(ClientArgs):
    """Options of ``rlsched switch``.

    :param scheduler: SELECTOR+PLACER or auto, as the config's scheduler
    :param json: print the service's answer as JSON
    """

    scheduler: str = flag(positional=True)
    json: bool = False


@dataclass(kw_only=True)
class TenantsArgs(ClientArgs):
    """Options of ``rlsched tenants``.

    :param json: print the service's answer as JSON
    """

    json: bool = False


@dataclass(kw_only=True)
class ReloadArgs(ClientArgs):
    """Options of ``rlsched reload``.

    :param dry_run: only show what a reload would apply and what would wait for a restart
    :param json: print the service's answer as JSON
    """

    dry_run: bool = False
    json: bool = False


def drain(args: NodeArgs, argv: Sequence[str]) -> int:
    """Stop giving a node new tasks (an admin tenant's token); what runs there finishes."""
    return _node(args, on=True)


def resume(args: NodeArgs, argv: Sequence[str]) -> int:
    """Give a drained node new tasks again (an admin tenant's token)."""
    return _node(args, on=False)


def _node(args: NodeArgs, on: bool) -> int:
    def act(c: Client) -> None:
        out = c.drain(args.node, on)
        what = "draining: it takes no new tasks, what runs there finishes" if on else "takes new tasks again"
        if out.get("kept") is False:  # the queue file took no writes: said, not hidden
            what += " (not kept across a restart: the queue file takes no writes; see the service log)"
        print(json.dumps(out) if args.json else f"node {out['name']}: {what}")

    return with_client(args.url, args.token_env, act)


def switch(args: SwitchArgs, argv: Sequence[str]) -> int:
    """Run another scheduler for every task placed from now on (an admin tenant's token)."""

    def act(c: Client) -> None:
        out = c.switch_scheduler(args.scheduler)
        kept = (
            "it outlives a restart, until the config's scheduler is edited"
            if out.get("kept")
            else "not kept across a restart: the queue file takes no writes; see the service log"
        )
        print(
            json.dumps(out)
            if args.json
            else f"scheduler {out['scheduler']} for every task placed now ({kept})"
        )

    return with_client(args.url, args.token_env, act)


def tenants(args: TenantsArgs, argv: Sequence[str]) -> int:
    """The service's tenants, their limits and tasks (an admin tenant's token)."""

    def act(c: Client) -> None:
        rows = c.tenants()
        # --json prints the service's answer, as every client command does (it printed the list alone).
        print(json.dumps({"tenants": rows}) if args.json else tenant_table(rows))

    return with_client(args.url, args.token_env, act)


def tenant_table(rows: list[dict[str, Any]]) -> str:
    """Tenants as a table, one line each; a tenant no longer configured is marked ``*``."""
    lines = [
        f"{'tenant':<16} {'weight':>6} {'max queued':>10} {'max running':>11} {'gpu share':>9} "
        f"{'admin':<5} {'tokens':>6} " + " ".join(f"{s:>9}" for s in STATES)
    ]
    for r in rows:
        name = r["name"] + ("" if r["configured"] else "*")
        lines.append(
            f"{name:<16} {r['weight']:>6g} {r['max_queued']:>10} {r['max_running']:>11} {r['gpu_share']:>9g} "
            f"{'yes' if r['admin'] else 'no':<5} {r['tokens']:>6} " + " ".join(f"{r[s]:>9}" for s in STATES)
        )
    if any(not r["configured"] for r in rows):
        lines.append("* no longer in the config: its accepted tasks still run")
    return "\n".join(lines)


def reload(args: ReloadArgs, argv: Sequence[str]) -> int:
    """Have the service re-read its config file (an admin tenant's token); say what changed."""

    def act(c: Client) -> None:
        out = c.reload(args.dry_run)
        print(json.dumps(out) if args.json else reload_text(out))

    return with_client(args.url, args.token_env, act)


def reload_text(out: dict[str, Any]) -> str:
    """The service's answer to a reload, a line per change."""
    head = f"{'would reload' if out.get('dry_run') else 'reloaded'} {out['config']}"
    lines = [head + ("" if out["applied"] or out["needs_restart"] else ": no change")]
    done = "would apply     " if out.get("dry_run") else "applied         "
    lines += [f"  {done} {a}" for a in out["applied"]]
    lines += [f"  needs a restart  {p}" for p in out["needs_restart"]]
    return "\n".join(lines)


COMMANDS = (
    Command(
        "drain",
        "stop giving a node of a running service new tasks (admin); what runs there finishes",
        NodeArgs,
        drain,
        CLIENT_EXITS,
    ),
    Command("resume", "give a drained node new tasks again (admin)", NodeArgs, resume, CLIENT_EXITS),
    Command(
        "switch",
        "run another scheduler on a running service for every task placed from now on (admin)",
        SwitchArgs,
        switch,
        CLIENT_EXITS,
    ),
    Command(
        "tenants",
        "a running service's tenants, limits and tasks by state (admin)",
        TenantsArgs,
        tenants,
        CLIENT_EXITS,
    ),
    Command(
        "reload",
        "have a running service re-read its config file (tenants, tokens, limits) without a restart",
        ReloadArgs,
        reload,
        CLIENT_EXITS,
    ),
)
