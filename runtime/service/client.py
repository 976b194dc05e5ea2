"""A small Python client of the scheduling service (``rlsched serve``), over httpx.

It needs httpx only (of the ``serve`` extra): importing it brings in neither the server
(fastapi, uvicorn) nor the rest of the service.

    from runtime.service.client import Client
    with Client("http://127.0.0.1:8470", token="my-secret-token") as c:
        ids = [t["id"] for t in c.submit([{"app": "matmul", "stream": 0, "chunk": k} for k in range(10)])]
        print(c.wait(ids))

Every method raises :class:`ServiceError` with the service's status and message on a 4xx/5xx.
:meth:`Client.submit` sends a list of any length in batches the service takes, and with
``retry_for_s`` sends a batch again that the service refused for now or whose answer was lost —
safe because each task then carries an idempotency key (:func:`keyed`). :meth:`Client.wait`
outlives a restart of the service.
"""

from __future__ import annotations

import random
import ssl
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx


class ServiceError(RuntimeError):
    """The service answered with an error.

    :param status: the HTTP status.
    :param detail: the service's message (it names the field at fault).
    :param retry_after_s: with 429, how long the service asks to wait.
    """

    def __init__(self, status: int, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status, self.detail, self.retry_after_s = status, detail, retry_after_s

    @property
    def refused(self) -> bool:
        """The service refused the request as asked (a 4xx but "not now": 408 and 429): the
        same request again will not help."""
        return 400 <= self.status < 500 and self.status not in NOT_NOW


#: The 4xx answers that mean "not now" (a body too slow, a bound reached), not "no".
NOT_NOW = frozenset({408, 429})


#: Ids a lookup request, or tasks a submission, carries at most: the service's batch bound
#: (``runtime.service.app.MAX_BATCH``; a test keeps the two equal).
LOOKUP_BATCH = 1000
SUBMIT_BATCH = 1000
#: Answers that say "not now": the tenant or the service at its queue bound (429), the queue file
#: full (507), the body not received in time (408). Nothing was written; sending again is safe.
NOTHING_WRITTEN = frozenset({408, 429, 507})
#: Longest pause between two tries when the service names none (``Retry-After``).
MAX_PAUSE_S = 8.0


class PartlySubmitted(RuntimeError):
    """A submission of several batches that stopped after some were queued.

    :param accepted: the tasks queued, as recorded, in the order given.
    :param total: the tasks the submission held.
    :param cause: why the next batch was not (a :class:`ServiceError` or an ``httpx`` error).
    """

    def __init__(self, accepted: list[dict[str, Any]], total: int, cause: Exception) -> None:
        super().__init__(f"{len(accepted)} of {total} tasks queued, then: {_said(cause)}")
        self.accepted, self.total, self.cause = accepted, total, cause


def keyed(tasks: Sequence[dict[str, Any]], prefix: str | None = None) -> list[dict[str, Any]]:
    """``tasks`` with an idempotency key each that has none: ``PREFIX/APP/STREAM/CHUNK``.

    A task sent again with its key is found, not queued twice; so a submission can be sent again
    after an answer that was lost, and a command run again with the same ``prefix`` queues only
    what the first run did not.

    :param prefix: the keys' common part (default: a new random one, unique to this call).
    """
    p = prefix if prefix is not None else uuid.uuid4().hex
    return [
        t
        if t.get("idempotency_key")
        else {**t, "idempotency_key": f"{p}/{t['app']}/{t.get('stream', 0)}/{t.get('chunk', 0)}"}
        for t in tasks
    ]


def _said(e: Exception) -> str:
    if isinstance(e, ServiceError):
        return f"the service answered HTTP {e.status}: {e.detail}"
    return f"no answer ({type(e).__name__}: {e})"


def _pause(e: Exception, resend: bool, backoff: float, answered: bool) -> float | None:
    """Seconds to wait before sending a request again after ``e``, or ``None``: do not.

    :param resend: a request that may be applied twice without harm (tasks that all carry
        idempotency keys); otherwise only a request known not to have been applied is sent again.
    :param answered: the service answered an earlier request of this call. One that is not there
        at the first (a wrong URL, a service not started) is said at once; one that goes away
        part-way (a restart) is waited for.
    """
    if isinstance(e, ServiceError):
        # 503: the queue file refused the write (nothing written), or the answer was not ready in
        # time (the request may have been applied): only a request safe to resend.
        if e.status in NOTHING_WRITTEN or (e.status == 503 and resend):
            return e.retry_after_s if e.retry_after_s is not None else backoff
        return None
    if isinstance(e, httpx.ConnectError):  # refused or unreachable: nothing was sent
        return backoff if answered else None
    if isinstance(e, httpx.TransportError) and resend:  # sent, and the answer lost
        return backoff
    return None


def wait_ready(url: str, timeout_s: float = 60.0, alive: Callable[[], bool] | None = None) -> None:
    """Wait until the service at ``url`` answers ``/readyz`` with 200 (queue recovered, agents up).

    :param url: the service's base URL.
    :param timeout_s: how long to wait.
    :param alive: if given, checked between tries; False (the server process exited) stops the wait.
    :raises RuntimeError: when ``alive`` turns False.
    :raises TimeoutError: when the service is not ready in time.
    """
    deadline = time.monotonic() + timeout_s
    # A service binds its port before it loads its models: a request then waits in the listen
    # backlog until the server runs. A short first timeout, grown on each one that expires, finds
    # it ready soon after it is, yet gives a slow host a long enough wait.
    wait = 0.25
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise RuntimeError(f"{url}: the server exited before it was ready")
        try:
            if httpx.get(f"{url.rstrip('/')}/readyz", timeout=wait).status_code == 200:
                return
        except httpx.TimeoutException:
            wait = min(2 * wait, 4.0)
            continue
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.2)
    raise TimeoutError(f"{url}: not ready in {timeout_s:g} s")


def _detail(detail: Any) -> str:
    """The service's message in one line: a request the API's schema refused (422) comes as a
    list of errors, each said as ``where: what (got VALUE)``, e.g. ``[0].app: one of fft, ...
    (got 'nope')``, not as the list itself."""
    if not isinstance(detail, list) or not all(isinstance(e, dict) and "msg" in e for e in detail):
        return str(detail)
    out = []
    for e in detail:
        where = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e.get("loc", ())[1:])
        got = f" (got {e['input']!r})" if "input" in e and not isinstance(e["input"], dict | list) else ""
        out.append(f"{where.lstrip('.') or 'body'}: {e['msg']}{got}")
    return "; ".join(out)


class Client:
    """A tenant's connection to the service.

    :param url: the service's base URL.
    :param token: the tenant's bearer token.
    :param timeout_s: per-request timeout.
    :param ca_file: PEM file of the CA that signed an HTTPS service's certificate (default: the
        system's trust store, or ``$SSL_CERT_FILE``).
    """

    def __init__(self, url: str, token: str, timeout_s: float = 30.0, ca_file: str | None = None) -> None:
        verify: ssl.SSLContext | bool = True
        if ca_file is not None:
            verify = ssl.create_default_context(cafile=ca_file)
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            verify=verify,
        )

    @property
    def url(self) -> str:
        """The service's base URL (``https://`` when it is reached over TLS)."""
        return str(self._http.base_url).rstrip("/")

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        r = self._http.request(method, path, **kw)
        if r.status_code >= 400:
            try:
                detail = _detail(r.json().get("detail", r.text))
            except (ValueError, AttributeError):  # not JSON, or not an object
                detail = r.text
            retry = r.headers.get("Retry-After")
            raise ServiceError(r.status_code, detail, float(retry) if retry else None)
        return r.json()

    def submit(
        self,
        tasks: Sequence[dict[str, Any]],
        retry_for_s: float = 0.0,
        on_retry: Callable[[str], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Queue tasks (``app``, ``stream``, ``chunk``, optional ``priority``, ``deadline_s``,
        ``idempotency_key``); the tasks as recorded, in the order given.

        More than :data:`SUBMIT_BATCH` go in batches of that many, one after another. With
        ``retry_for_s``, a batch refused for now (429 at a queue bound, 507, 503, 408) or whose
        answer was lost is sent again after the pause the service asks for (``Retry-After``), for
        up to ``retry_for_s`` seconds without a batch queued; after a 429 the next try sends half
        as many tasks (a tenant's ``max_queued`` may hold fewer than a batch), and each batch
        queued doubles it again. A batch is sent again after a lost answer only when every task
        carries an idempotency key (give the tasks :func:`keyed`): the service then finds the
        tasks it queued, and queues none twice.

        :param retry_for_s: how long to keep trying without progress; 0: one try per batch.
        :param on_retry: told why, each time a batch is to be sent again.
        :raises ServiceError: the first batch was refused (nothing queued).
        :raises PartlySubmitted: a later batch was refused; ``accepted`` holds what was queued.
        """
        todo = list(tasks)
        out: list[dict[str, Any]] = []
        size, backoff = SUBMIT_BATCH, 0.25
        give_up = time.monotonic() + retry_for_s
        answered = False  # by the service, to any request of this call
        while len(out) < len(todo):
            part = todo[len(out) : len(out) + size]
            resend = all(t.get("idempotency_key") for t in part)
            try:
                out += self._call("POST", "/v1/tasks", json=part)
            except (ServiceError, httpx.TransportError) as e:
                answered |= isinstance(e, ServiceError)
                pause = _pause(e, resend, backoff, answered)
                if pause is not None:
                    # Up to a quarter more, drawn: clients refused together do not all come back
                    # in the same instant (Retry-After is a least wait).
                    pause = round(pause * (1 + random.random() / 4), 2)
                if pause is None or time.monotonic() + pause > give_up:
                    if out:
                        raise PartlySubmitted(out, len(todo), e) from e
                    raise
                if isinstance(e, ServiceError) and e.status == 429:
                    size = max(1, len(part) // 2)  # of what was sent: fewer may be left than a batch
                if on_retry is not None:
                    on_retry(f"{_said(e)}; sending {len(todo) - len(out)} tasks again in {pause:g} s")
                time.sleep(pause)
                backoff = min(2 * backoff, MAX_PAUSE_S)
                continue
            size, backoff, answered = min(2 * size, SUBMIT_BATCH), 0.25, True
            give_up = time.monotonic() + retry_for_s
        return out

    def get(self, task_id: int) -> dict[str, Any]:
        """One task's state and timings."""
        out: dict[str, Any] = self._call("GET", f"/v1/tasks/{task_id}")
        return out

    def lookup(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The tasks ``ids``, in that order, in as few requests as the service's batch bound
        allows (:data:`LOOKUP_BATCH` ids each).

        :raises ServiceError: 404 naming the first id that is not the tenant's.
        """
        out: list[dict[str, Any]] = []
        for k in range(0, len(ids), LOOKUP_BATCH):
            out += self._call("POST", "/v1/tasks/lookup", json={"ids": list(ids[k : k + LOOKUP_BATCH])})
        return out

    def tasks(
        self, state: str | None = None, page: int = 100, key_prefix: str | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every task of the tenant (optionally in one state, or of one submission), oldest first,
        page by page."""
        after = 0
        while True:
            body = self.page(state, after, page, key_prefix)
            yield from body["tasks"]
            if body["next_after"] is None:
                return
            after = body["next_after"]

    def page(
        self, state: str | None = None, after: int = 0, limit: int = 100, key_prefix: str | None = None
    ) -> dict[str, Any]:
        """One page of the tenant's tasks with ids above ``after``, oldest first: ``tasks`` and
        ``next_after`` (``None``: no more).

        :param key_prefix: only tasks whose idempotency key starts with it (those of
            ``keyed(tasks, K)`` start with ``K/``).
        """
        params: dict[str, Any] = {"after": after, "limit": limit}
        if state is not None:
            params["state"] = state
        if key_prefix is not None:
            params["key_prefix"] = key_prefix
        out: dict[str, Any] = self._call("GET", "/v1/tasks", params=params)
        return out

    def drain(self, node: str, on: bool = True) -> dict[str, Any]:
        """Stop (``on``) or restart giving ``node`` new tasks (admin); what runs there finishes."""
        name = urllib.parse.quote(node, safe="")  # one path segment, whatever the name holds
        out: dict[str, Any] = self._call("POST", f"/v1/admin/nodes/{name}/{'drain' if on else 'resume'}")
        return out

    def switch_scheduler(self, spec: str) -> dict[str, Any]:
        """Run scheduler ``spec`` (``SELECTOR+PLACER`` or ``auto``) for every task placed from now
        on (admin): ``scheduler``, and ``kept`` (whether it outlives a restart)."""
        out: dict[str, Any] = self._call("PUT", "/v1/admin/scheduler", json={"scheduler": spec})
        return out

    def cancel(self, task_id: int) -> dict[str, Any]:
        """Cancel a queued task (409 once it started)."""
        out: dict[str, Any] = self._call("POST", f"/v1/tasks/{task_id}/cancel")
        return out

    def cancel_many(self, ids: Sequence[int]) -> list[dict[str, Any]]:
        """Cancel those of the tasks ``ids`` that are queued; every task as it now is, in order
        (one that had started keeps its state). :data:`LOOKUP_BATCH` ids a request.

        :raises ServiceError: 404 naming the first id that is not the tenant's (in that batch,
            nothing was cancelled).
        """
        out: list[dict[str, Any]] = []
        for k in range(0, len(ids), LOOKUP_BATCH):
            out += self._call("POST", "/v1/tasks/cancel", json={"ids": list(ids[k : k + LOOKUP_BATCH])})
        return out

    def cluster(self) -> dict[str, Any]:
        """Nodes, GPUs, streams, memory and queue depth."""
        out: dict[str, Any] = self._call("GET", "/v1/cluster")
        return out

    def tenants(self) -> list[dict[str, Any]]:
        """Each tenant's limits and tasks by state (admin)."""
        out: list[dict[str, Any]] = self._call("GET", "/v1/admin/tenants")["tenants"]
        return out

    def reload(self, dry_run: bool = False) -> dict[str, Any]:
        """Have the service re-read its config file (admin): ``applied`` (with ``dry_run``: what
        it would apply, nothing applied) and ``needs_restart``."""
        params = {"dry_run": "true"} if dry_run else {}
        out: dict[str, Any] = self._call("POST", "/v1/admin/reload", params=params)
        return out

    def wait(
        self,
        ids: Sequence[int],
        timeout_s: float = 600.0,
        poll_s: float = 0.2,
        on_retry: Callable[[str], None] | None = None,
    ) -> list[dict[str, Any]]:
        """Poll until every task is done, failed or cancelled; the tasks.

        A service that stops answering for a while (a restart, a kill -9 and its recovery: the
        queue keeps the tasks) is asked again until ``timeout_s``; ``on_retry`` is told once per
        outage.

        :raises TimeoutError: naming how many are unfinished.
        :raises ServiceError: the service refused the lookup (4xx: a bad token, an id not the
            tenant's).
        """
        deadline = time.monotonic() + timeout_s
        rows: dict[int, dict[str, Any]] = {}
        left = list(dict.fromkeys(ids))
        away: str | None = None  # why the service has not answered, since it stopped
        pause = poll_s
        while True:
            try:
                # Only the unfinished are asked again, in batches: a request per task and round
                # made `submit --chunks 300 --wait` take 28 s for work that took 3.
                rows |= {r["id"]: r for r in self.lookup(left)}
            except (ServiceError, httpx.TransportError) as e:
                if isinstance(e, ServiceError) and e.status < 500:
                    raise
                if away is None and on_retry is not None:
                    on_retry(f"{_said(e)}; asking again until it answers")
                away, pause = _said(e), min(2 * pause, 2.0)
            else:
                away, pause = None, poll_s
                left = [i for i in left if rows[i]["state"] in ("queued", "running")]
                if not left:
                    return [rows[i] for i in ids]
            if time.monotonic() > deadline:
                why = f"; the service has not answered since: {away}" if away else ""
                raise TimeoutError(f"{len(left)} of {len(ids)} tasks unfinished after {timeout_s:g} s{why}")
            time.sleep(pause)
