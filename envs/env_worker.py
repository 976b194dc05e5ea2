"""The process the simulated Gym environment's worlds live in: the simulator sealed away.

An RL library holds the environment object, and in Python everything an object references is
reachable from it. So :class:`envs.gym_env.ClusterSchedulingEnv` references no simulator — no
ground truth, no future arrivals, no true remaining work: each of its worlds runs in a worker
process (the one :func:`serve` loop), and the env holds a pipe to it (:class:`EnvWorker`).

The worker answers a fixed set of requests with plain data: ``reset``, ``step``, ``view`` (a copy of
the observable :class:`~rlsched.view.ClusterView`), ``task`` (a copy of the task awaiting a node,
one that has arrived) and ``close``. No request names an attribute, so the pipe is no path to the
simulator either (unlike stable-baselines3's ``SubprocVecEnv``, whose ``get_attr`` fetches any
attribute of the env it wraps).

Workers are forked by a launcher: one helper per process, ``python -m envs.env_worker --launcher``,
started with the first env from a clean interpreter that imports this package once. So a new env
costs milliseconds rather than an interpreter start; forking never copies the env's process
(its threads: torch, tqdm); and unlike multiprocessing's spawn and forkserver methods nothing
re-imports the user's main script, so an env works in a script without a ``__main__`` guard and
inside a daemonic process (stable-baselines3's ``SubprocVecEnv`` workers). Unix only (file
descriptors are passed over a Unix socket).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from envs.simulated_worlds import SimulatedWorlds
from rlsched.features import FEATURE_VERSION
from rlsched.scenarios.spec import Scenario
from rlsched.scheduling_env import SchedulingEnv

#: Seconds a closing env waits for its worker to say it is done before killing it.
CLOSE_TIMEOUT_S = 5.0


def _plain(x: object) -> bool:
    """Plain data only: what an exception may carry across the pipe."""
    if x is None or isinstance(x, str | int | float | bool | bytes):
        return True
    if isinstance(x, list | tuple):
        return all(_plain(v) for v in x)
    if isinstance(x, dict):
        return all(_plain(k) and _plain(v) for k, v in x.items())
    return False


def _portable(e: BaseException) -> BaseException:
    """``e`` with the worker's traceback as a note, if it carries plain data only and crosses the
    pipe intact; else a RuntimeError that says what it was (an exception's arguments are objects
    of the world: one must not carry the simulator over)."""
    e.add_note("in the simulated env's worker process:\n" + "".join(traceback.format_exception(e)))
    if _plain(e.args) and _plain(vars(e)):
        try:
            pickle.loads(pickle.dumps(e))
            return e
        except Exception:
            pass  # a type that does not rebuild from its arguments
    out = RuntimeError(f"{type(e).__name__}: {e}")
    out.add_note(e.__notes__[-1])
    return out


def serve(
    conn: Connection,
    scenarios: Sequence[Scenario],
    placer: str,
    max_tasks: int | None,
    reward: str,
    threads: int | None,
    feature_version: int = FEATURE_VERSION,
) -> None:
    """The worker: one :class:`~rlsched.scheduling_env.SchedulingEnv` over simulated worlds,
    driven by requests from ``conn`` until ``close`` or until the env's process is gone.

    :param conn: the worker's end of the pipe.
    :param scenarios: the env's scenarios.
    :param placer: stage-2 policy name.
    :param max_tasks: cap on tasks per episode.
    :param reward: ``"latency"`` or ``"throughput"``.
    :param threads: torch threads of the env's process (interference-aware placers use torch
        here as they would in-process), or ``None`` to leave the default.
    :param feature_version: the observations' feature version.
    """
    if threads is not None:  # read by torch when (if) a placer imports it
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(threads)
    worlds = SimulatedWorlds(scenarios, placer, max_tasks)
    env = SchedulingEnv(worlds, reward, feature_version)

    def reset(seed: int | None, options: dict[str, Any] | None) -> tuple:
        obs, info = env.reset(seed=seed, options=options)
        return obs, info, env.action_masks(), worlds.index

    def step(action: int) -> tuple:
        obs, reward, terminated, truncated, info = env.step(action)
        return obs, reward, terminated, truncated, info, env.action_masks(), env.metrics

    handlers: dict[str, Callable[..., Any]] = {
        "reset": reset,
        "step": step,
        "view": lambda: env.view,
        "task": lambda: env.task,
    }
    while True:
        try:
            cmd, args = conn.recv()
        except (EOFError, OSError):
            return  # the env's process closed the pipe or died
        if cmd == "close":
            env.close()
            _answer(conn, ("ok", None))
            return
        try:
            reply: tuple[str, Any] = ("ok", handlers[cmd](*args))
        except Exception as e:
            reply = ("error", _portable(e))
        if not _answer(conn, reply):
            return


def _answer(conn: Connection, reply: tuple[str, Any]) -> bool:
    """Send a reply; False when the env's process has gone (interrupted, it closes the pipe
    without waiting for the answer), which is an ordinary way for a worker to end."""
    try:
        conn.send(reply)
    except (BrokenPipeError, ConnectionResetError):
        return False
    return True


class _Launcher:
    """The process that forks this process's workers (one per process, started on first use)."""

    _lock = threading.Lock()
    _current: _Launcher | None = None

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        fd = theirs.fileno()
        # The launcher imports what this process would (an uninstalled checkout, a test's path).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        cmd = [sys.executable, "-m", "envs.env_worker", "--launcher", str(fd)]
        self.process = subprocess.Popen(cmd, pass_fds=(fd,), env=env)
        theirs.close()
        self.sock, self.owner = mine, os.getpid()
        atexit.register(self.stop)

    def stop(self) -> None:
        """Close the launcher's socket (it exits on that) and reap it; a second Ctrl-C while it
        waits (at exit, after the first stopped a run) kills it rather than print a traceback."""
        self.sock.close()
        try:
            self.process.wait(CLOSE_TIMEOUT_S)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            self.process.kill()
            self.process.wait()

    @classmethod
    def fork_worker(cls) -> tuple[Connection, int]:
        """A new worker: the env's end of its pipe, and its process id."""
        with cls._lock:
            launcher = cls._current
            if launcher is None or launcher.owner != os.getpid() or launcher.process.poll() is not None:
                if launcher is not None and launcher.owner == os.getpid():
                    launcher.stop()  # it died: release its socket
                launcher = cls._current = cls()  # none yet, inherited through a fork, or gone
            mine, theirs = socket.socketpair()
            try:
                socket.send_fds(launcher.sock, [b"f"], [theirs.fileno()])
                pid = int.from_bytes(_recv_exactly(launcher.sock, 8), "little")
            finally:
                theirs.close()
        return Connection(mine.detach()), pid


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise RuntimeError("the simulated env's launcher process is gone")
        out += chunk
    return out


def _launch(sock: socket.socket) -> None:
    """The launcher: fork a worker for each file descriptor received, until the socket closes.
    Every worker starts with what this module imports (the simulator, the policies) loaded."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    # Ctrl-C is the env's process's to handle (training saves its weights): the launcher and its
    # workers (which inherit this) exit when that process closes their pipes or exits.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, 1, 1)
        if not msg:
            return  # the process that started it is gone
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                conn = Connection(fds[0])
                serve(conn, *conn.recv())
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)  # never return into the launcher's loop
        os.close(fds[0])
        sock.sendall(pid.to_bytes(8, "little"))


class EnvWorker:
    """The env's side of a worker: starts it, sends it requests, stops it.

    :param scenarios: the env's scenarios.
    :param placer: stage-2 policy name.
    :param max_tasks: cap on tasks per episode.
    :param reward: ``"latency"`` or ``"throughput"``.
    :param feature_version: the observations' feature version.
    """

    def __init__(
        self,
        scenarios: Sequence[Scenario],
        placer: str,
        max_tasks: int | None,
        reward: str,
        feature_version: int = FEATURE_VERSION,
    ) -> None:
        torch = sys.modules.get("torch")
        self.conn, self.pid = _Launcher.fork_worker()
        threads = torch.get_num_threads() if torch else None
        self.conn.send((list(scenarios), placer, max_tasks, reward, threads, feature_version))
        self.closed = False

    def call(self, cmd: str, *args: Any) -> Any:
        """Send one request and return its answer.

        :raises RuntimeError: if the worker is closed or gone.
        :raises Exception: whatever the request raised in the worker (with its traceback as a note).
        """
        if self.closed:
            raise RuntimeError("the simulated env's worker is closed")
        try:
            self.conn.send((cmd, args))
            status, value = self.conn.recv()
        except (EOFError, OSError) as e:
            self.close()
            raise RuntimeError(f"the simulated env's worker process died ({e!r})") from None
        if status == "error":
            raise value
        return value

    def close(self) -> None:
        """Stop the worker (idempotent): ask it to exit; kill it if it does not answer in time."""
        if self.closed:
            return
        self.closed = True
        answered = False
        try:
            self.conn.send(("close", ()))
            answered = self.conn.poll(CLOSE_TIMEOUT_S)
        except (EOFError, OSError):
            answered = True  # already gone
        self.conn.close()
        if not answered:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.kill(self.pid, signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--launcher"] or len(sys.argv) != 3:
        raise SystemExit("usage: python -m envs.env_worker --launcher FD (started by envs.gym_env)")
    _launch(socket.socket(fileno=int(sys.argv[2])))
