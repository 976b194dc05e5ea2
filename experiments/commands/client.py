"""The service's client commands: ``rlsched submit | status | tasks | cancel | top`` and
``rlsched token`` (an admin tenant's are in :mod:`experiments.commands.admin`)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help
from experiments.commands.flags import flag
from experiments.commands.top_frames import fit, frame, unreachable_frame
from rlsched.errors import InputError, Refused, Unavailable
from runtime.service.task_limits import MAX_CHUNK, MAX_ID, MAX_PRIORITY, MAX_STREAM, MIN_PRIORITY

if TYPE_CHECKING:
    from runtime.service.client import Client, PartlySubmitted


#: Tasks one ``rlsched tasks`` call lists at most (the API's page).
MAX_PAGE = 1000
#: Tasks one ``rlsched submit`` sends at most (the default queue bound; the tasks are built in
#: memory first).
MAX_SUBMIT = 100_000
#: States a task can be in (the store's ``STATES``; the client does not import the server's
#: modules, and a test keeps the two equal).
STATES = ("queued", "running", "done", "failed", "cancelled")


@dataclass(kw_only=True)
class ClientArgs:
    """Options every client command has.

    :param url: service URL (default: $RLSCHED_URL, else http://127.0.0.1:8470)
    :param token_env: environment variable holding the bearer token (not a flag, so it stays out
        of the process list)
    """

    url: str | None = None
    token_env: str = "RLSCHED_TOKEN"


@dataclass(kw_only=True)
class SubmitArgs(ClientArgs):
    """Options of ``rlsched submit``.

    :param app: app of the tasks
    :param stream: stream id
    :param chunks: how many chunks of the stream: FIRST..FIRST+N-1
    :param first_chunk: the first chunk's index (a stream's later chunks, as they come)
    :param priority: priority of the tasks (higher first)
    :param deadline: seconds after submission by which each task should finish (LDWP sees the
        slack; /metrics counts deadlines met and missed; --wait counts the missed)
    :param key: idempotency key of this submission: task k gets KEY/APP/STREAM/k, and the same
        command run again with the same key (after a failure) queues only what the first run did
        not; default: a new random key, so that the command's own resends never queue twice
    :param retry_for: keep sending a batch the service refuses for now (429 at a queue bound,
        503, 507) or whose answer was lost, for up to this many seconds without progress; 0:
        give up at once
    :param wait: wait until every task has finished (through restarts of the service)
    :param timeout: with --wait: give up after this many seconds (exit 4, the unfinished counted;
        the tasks stay queued); default: wait until they finish or Ctrl-C
    :param json: print the full task records as JSON
    """

    app: str = flag()
    stream: int = flag(0, parse=values.int_at_least(0, MAX_STREAM))
    chunks: int = flag(1, parse=values.int_at_least(1, MAX_SUBMIT))
    first_chunk: int = flag(0, parse=values.int_at_least(0, MAX_CHUNK))
    priority: int = flag(0, parse=values.int_at_least(MIN_PRIORITY, MAX_PRIORITY))
    deadline: float | None = flag(None, parse=values.positive_float)
    key: str | None = flag(None, parse=values.idempotency_prefix)
    retry_for: float = flag(60.0, parse=values.nonneg_float)
    wait: bool = False
    timeout: float | None = flag(None, parse=values.positive_float)
    json: bool = False


@dataclass(kw_only=True)
class StatusArgs(ClientArgs):
    """Options of ``rlsched status``.

    :param ids: the tasks' ids (as submit printed them), one or more
    :param key: instead of ids: every task of the submission made with submit --key KEY, and a
        line counting them by state
    :param json: print the full task records as JSON (a list for several)
    """

    ids: list[int] = flag([], positional=True, repeat=True, parse=values.int_at_least(1))  # noqa: RUF009 (flag() copies it)
    key: str | None = flag(None, parse=values.idempotency_prefix)
    json: bool = False


@dataclass(kw_only=True)
class CancelArgs(ClientArgs):
    """Options of ``rlsched cancel``.

    :param ids: the tasks' ids (as submit printed them); one that already started is refused
        (exit 5), of several those that started are shown as they are
    :param key: instead of ids: every queued task of the submission made with submit --key KEY
    :param json: print the full task records as JSON
    """

    ids: list[int] = flag([], positional=True, repeat=True, parse=values.int_at_least(1))  # noqa: RUF009 (flag() copies it)
    key: str | None = flag(None, parse=values.idempotency_prefix)
    json: bool = False


@dataclass(kw_only=True)
class TopArgs(ClientArgs):
    """Options of ``rlsched top``.

    :param once: print one frame and exit
    :param interval: seconds between frames
    """

    once: bool = False
    interval: float = flag(1.0, parse=values.positive_float)


#: Tasks ``rlsched tasks`` lists on a page unless ``--limit`` says otherwise.
TASKS_LIMIT = 50


@dataclass(kw_only=True)
class TasksArgs(ClientArgs):
    """Options of ``rlsched tasks``.

    :param state: only tasks in this state
    :param after: tasks with ids above this one (the line after a page names the next)
    :param limit: tasks to list, oldest first
    :param key: only the tasks of the submission made with submit --key KEY
    :param json: print the service's page as JSON (tasks and next_after)
    """

    state: str | None = flag(None, choices=STATES)
    after: int = flag(0, parse=values.int_at_least(0, MAX_ID))
    limit: int = flag(TASKS_LIMIT, parse=values.int_at_least(1, MAX_PAGE))
    key: str | None = flag(None, parse=values.idempotency_prefix)
    json: bool = False


@dataclass(kw_only=True)
class TokenArgs:
    """Options of ``rlsched token`` (none)."""


#: The service a client command talks to without ``--url`` or ``$RLSCHED_URL``.
DEFAULT_URL = "http://127.0.0.1:8470"


def with_client(given: str | None, token_env: str, act: Callable[[Client], None]) -> int:
    """Run ``act`` against the service (``--url``, else ``$RLSCHED_URL``, else the default); its
    absence or trouble is exit 4, its refusal of the request as asked (a 4xx) exit 5."""
    url = given or os.environ.get("RLSCHED_URL") or DEFAULT_URL
    source = "--url" if given else "$RLSCHED_URL"
    if not url.startswith(("http://", "https://")):  # else "cannot reach": exit 4, "retry later"
        raise InputError(source, "value", "an http:// or https:// URL, e.g. http://127.0.0.1:8470", url)
    try:
        port = urllib.parse.urlsplit(url).port  # raises for a port past 65535
    except ValueError:
        port = 0
    if port == 0:
        raise InputError(source, "value", "a URL whose port is from 1 to 65535", url)
    from runtime.service.extra import CLIENT_MODULES, require_serve_extra

    require_serve_extra("the rlsched client commands", CLIENT_MODULES)
    import httpx

    from experiments import inputs
    from runtime.service.client import Client, PartlySubmitted, ServiceError

    token = inputs.token(token_env)
    try:
        with Client(url, token) as c:
            act(c)
    # The service is another program: its answer is not a bug here nor a file or flag of ours.
    # A script needs to tell "ask again later" (exit 4: not there, a 5xx, a bound) from "no"
    # (exit 5: a 4xx naming the field, a bad token, a task that already started).
    except ServiceError as e:
        raise (Refused if e.refused else Unavailable)(url, f"the service answered {e}") from None
    except httpx.HTTPError as e:  # the service is not there, or the connection broke
        why = f"cannot reach the service ({type(e).__name__}: {e})"
        if "CERTIFICATE_VERIFY_FAILED" in str(e):
            why += "; set SSL_CERT_FILE to the PEM file of the CA that signed its certificate"
        raise Unavailable(url, why) from None
    except PartlySubmitted as e:
        refused = isinstance(e.cause, ServiceError) and e.cause.refused
        raise (Refused if refused else Unavailable)(url, _partly(e)) from None
    except TimeoutError as e:  # submit --wait --timeout: the tasks did not finish in time
        raise Unavailable(url, str(e)) from None
    return EXIT_OK


def _partly(e: PartlySubmitted) -> str:
    ids = [r["id"] for r in e.accepted]
    key = e.accepted[0].get("idempotency_key") or ""
    prefix = key.split("/", 1)[0]
    which = f"id {ids[0]}" if len(ids) == 1 else f"ids {min(ids)}-{max(ids)}"
    return f"{e} (queued: {which}); the same command with --key {prefix} queues only the rest"


def _told(stream: TextIO = sys.stderr, every_s: float = 5.0) -> Callable[[str], None]:
    """A ``on_retry`` that says why on ``stream``: at once when the reason changes, else at most
    every ``every_s`` seconds (a long wait on a queue bound is not a line a second)."""
    last: list[Any] = [None, -math.inf]

    def say(why: str) -> None:
        head = re.sub(r"\d+", "#", why.split(";", 1)[0])  # "(1472 queued)" is the same reason
        now = time.monotonic()
        if head != last[0] or now - last[1] >= every_s:
            print(f"rlsched: {why}", file=stream, flush=True)
            last[:] = [head, now]

    return say


def _say_key(key: str, n: int) -> None:
    """Name the key a submission made up: the user's one handle on its tasks."""
    print(
        f"rlsched: key {key} names the {n} task{'' if n == 1 else 's'} queued: rlsched status --key "
        f"{key} shows them, rlsched cancel --key {key} cancels those not started",
        file=sys.stderr,
        flush=True,
    )


def submit(args: SubmitArgs, argv: Sequence[str]) -> int:
    """Submit chunks FIRST..FIRST+N-1 of one stream; print their records (after they finished with
    ``--wait``)."""

    def act(c: Client) -> None:
        from runtime.service.client import keyed

        body = [
            {"app": args.app, "stream": args.stream, "chunk": k, "priority": args.priority}
            | ({"deadline_s": args.deadline} if args.deadline is not None else {})
            for k in range(args.first_chunk, args.first_chunk + args.chunks)
        ]
        told = _told()
        key = args.key or uuid.uuid4().hex  # the command's own resends never queue twice
        try:
            rows = c.submit(keyed(body, key), retry_for_s=args.retry_for, on_retry=told)
            if args.wait:
                if args.key is None:  # said before the wait: a SIGTERM or kill ends it unannounced
                    _say_key(key, len(rows))
                timeout = math.inf if args.timeout is None else args.timeout
                rows = c.wait([r["id"] for r in rows], timeout, on_retry=told)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(
                f"interrupted; what was queued stays queued: rlsched tasks --key {key} shows it, "
                f"rlsched cancel --key {key} cancels what has not started"
            ) from None
        except Exception as e:
            # A lost answer or --timeout may leave tasks queued: without the key the user has no
            # handle on them, and the same command again (a new key) would queue them twice.
            named = args.key is not None or hasattr(e, "accepted")  # given, or PartlySubmitted names it
            if not named and not getattr(e, "refused", False):
                print(
                    f"rlsched: what was queued (if anything) has the key {key}: rlsched status --key "
                    f"{key} shows it; the same command with --key {key} queues only the rest",
                    file=sys.stderr,
                )
            raise
        print(json.dumps(rows) if args.json else task_table(rows))
        if args.key is None and not args.json and not args.wait:  # a key it made up: their handle
            _say_key(key, len(rows))

    return with_client(args.url, args.token_env, act)


def status(args: StatusArgs, argv: Sequence[str]) -> int:
    """Print the records of one or more tasks (one lookup per 1,000), in the order asked, or of
    a submission's tasks (``--key``, oldest first)."""
    _ids_or_key("rlsched status", args.ids, args.key)

    def act(c: Client) -> None:
        if len(args.ids) == 1:
            row = c.get(args.ids[0])
            print(json.dumps(row) if args.json else task_table([row]))
            return
        rows = c.lookup(args.ids) if args.ids else list(c.tasks(page=MAX_PAGE, key_prefix=f"{args.key}/"))
        if args.json:
            print(json.dumps(rows))
        else:
            print(task_table(rows) if rows else f"no tasks of submission {args.key}")

    return with_client(args.url, args.token_env, act)


def cancel(args: CancelArgs, argv: Sequence[str]) -> int:
    """Cancel queued tasks, by id or by submission (``--key``); print their records."""
    _ids_or_key("rlsched cancel", args.ids, args.key)

    def act(c: Client) -> None:
        if len(args.ids) == 1:  # one task: a refusal (it started) is the command's failure
            rows = [c.cancel(args.ids[0])]
        elif args.ids:
            rows = c.cancel_many(args.ids)
        else:
            rows = _cancel_submission(c, f"{args.key}/")
        if args.json:
            print(json.dumps(rows[0] if len(args.ids) == 1 else rows))
        else:
            print(task_table(rows) if rows else f"no queued tasks of submission {args.key}")

    return with_client(args.url, args.token_env, act)


def _ids_or_key(command: str, ids: list[int], key: str | None) -> None:
    if bool(ids) == (key is not None):
        raise InputError(command, "arguments", "task ids or --key KEY (one of the two)")


def _cancel_submission(c: Client, prefix: str) -> list[dict[str, Any]]:
    """Cancel every queued task whose key starts with ``prefix``, a page of 1,000 at a time
    (those cancelled leave the queued state, so each page is the next); the tasks cancelled."""
    out: list[dict[str, Any]] = []
    after = 0
    while True:
        page = c.page("queued", after, MAX_PAGE, prefix)
        if not page["tasks"]:
            return out
        out += c.cancel_many([t["id"] for t in page["tasks"]])
        if page["next_after"] is None:
            return out
        after = page["next_after"]


def top(args: TopArgs, argv: Sequence[str]) -> int:
    """Frames of the service's state until interrupted (one with ``--once``)."""
    return with_client(args.url, args.token_env, lambda c: _top(c, args.once, args.interval))


def tasks(args: TasksArgs, argv: Sequence[str]) -> int:
    """List the caller's tasks, oldest first, a page at a time."""

    def act(c: Client) -> None:
        page = c.page(args.state, args.after, args.limit, None if args.key is None else f"{args.key}/")
        if args.json:
            print(json.dumps(page))
            return
        print(task_table(page["tasks"]) if page["tasks"] else "no tasks")
        if page["next_after"] is not None:
            print(
                f"more: rlsched tasks --after {page['next_after']}"
                + (f" --state {args.state}" if args.state else "")
                + (f" --key {args.key}" if args.key else "")
                + (f" --limit {args.limit}" if args.limit != TASKS_LIMIT else "")
            )

    return with_client(args.url, args.token_env, act)


def task_table(rows: list[dict[str, Any]]) -> str:
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
        timed = [r for r in rows if r.get("deadline_s") is not None and r["state"] in ("done", "failed")]
        if timed:
            summary += f"; deadline missed by {sum(map(_missed, timed))} of {len(timed)}"
        lines.append(summary)
    return "\n".join(lines)


def _missed(r: dict[str, Any]) -> bool:
    """A finished task with a deadline did not meet it: it failed, or finished late."""
    return bool(r["state"] == "failed" or r["finished_at"] - r["submitted_at"] > r["deadline_s"])


def _top(client: Client, once: bool, interval: float) -> None:
    """Frames of queue depth, running tasks, per-GPU streams, memory, measured speed and the rate
    its streams delivered, and completions/s (with ``once``, measured over one ``interval`` before
    the frame). A service that stops answering (a restart, a kill -9 and its recovery) gets a
    frame saying so, and the frames resume once it is back; ``once`` and a refusal (a bad token)
    end the command instead (exit 4; a refusal exit 5)."""
    last: tuple[float, int] | None = None
    tty = sys.stdout.isatty()

    def show(text: str) -> None:  # to a terminal, cut to its size; to a file or pipe, whole
        if tty:
            size = shutil.get_terminal_size()
            text = fit(text, size.columns, size.lines)
        print(text, flush=True)

    if once:
        last = (time.monotonic(), client.cluster()["done"])
        time.sleep(interval)
    lost: float | None = None  # wall time the service stopped answering
    admin = True  # until the service says otherwise (403): then no tenant lines
    while True:
        try:
            state = client.cluster()
            tenants, admin = _tenants(client) if admin else (None, False)
        except Exception as e:
            if once or not _transient(e):
                raise
            lost = lost or time.time()
            last = None  # no rate across the gap
            show(unreachable_frame(lost, e, interval))
        else:
            lost = None
            done, now = state["done"], time.monotonic()
            rate = (done - last[1]) / (now - last[0]) if last else 0.0
            last = (now, done)
            show(frame(state, rate, client.url, tenants))
        if once:
            return
        time.sleep(interval)
        # A terminal is cleared for the next frame; a file or pipe gets no escape codes, only a
        # blank line between frames.
        print("\x1b[2J\x1b[H" if tty else "", end="" if tty else "\n")


def _tenants(client: Client) -> tuple[list[dict[str, Any]] | None, bool]:
    """The tenants' limits and tasks by state, and whether the caller may read them (an admin)."""
    from runtime.service.client import ServiceError

    try:
        return client.tenants(), True
    except ServiceError as e:
        if e.status == 403:
            return None, False
        raise


def _transient(e: Exception) -> bool:
    """The service is away for now (not listening, the connection broke, a 5xx while it
    recovers), not refusing this client (a 4xx: a bad token, a tenant it does not know)."""
    import httpx

    from runtime.service.client import ServiceError

    return isinstance(e, httpx.TransportError) or (isinstance(e, ServiceError) and e.status >= 500)


def token(args: TokenArgs, argv: Sequence[str]) -> int:
    """A new bearer token (256 random bits) and the digest the config keeps instead of it."""
    import secrets

    from runtime.service.config import hash_token

    new = secrets.token_urlsafe(32)
    print(f"token        {new}")
    print(f'token_sha256 = "{hash_token(new)}"   # for the tenant\'s table in the service config')
    return EXIT_OK


CLIENT_EXITS = exit_help(
    unavailable="the service cannot be reached or cannot take the request now (5xx, 429, 408)",
    refused=True,
)
COMMANDS = (
    Command("submit", "submit tasks to a running service", SubmitArgs, submit, CLIENT_EXITS),
    Command("status", "tasks' states on a running service", StatusArgs, status, CLIENT_EXITS),
    Command("cancel", "cancel queued tasks on a running service", CancelArgs, cancel, CLIENT_EXITS),
    Command("top", "live view of a running service: queue, devices, throughput", TopArgs, top, CLIENT_EXITS),
    Command(
        "tasks", "list your tasks on a running service, a page at a time", TasksArgs, tasks, CLIENT_EXITS
    ),
    Command(
        "token",
        "print a new bearer token and the token_sha256 line a service config stores for it",
        TokenArgs,
        token,
        exit_help(),
    ),
)
