"""The ``rlsched`` command line: parse, run the command, and map what it raises to an exit code.

The commands themselves live in :mod:`experiments.commands`, one module each.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments.commands import parse
from experiments.commands.command import Command
from experiments.commands.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
)
from experiments.commands.flags import path_values
from experiments.process_exit import freeze_heap_at_exit
from rlsched.errors import InputError, Refused, Unavailable


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rlsched`` console script.

    ``--debug`` anywhere on the line shows the traceback of an unexpected internal error.

    :param argv: the arguments (default: ``sys.argv[1:]``).
    :returns: the exit code (README "Exit codes"; :mod:`experiments.commands.exit_codes`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    warnings.showwarning = _show_warning
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    cmd, args = parse(argv)
    out = getattr(args, "out", None)
    if out is None:
        return _dispatch(cmd, args, argv, debug)
    # Made before any work, so that a bad folder never throws a training run or measurements
    # away; removed again if the command fails before writing anything into it.
    made = Path(out)
    try:
        created = not made.exists()
        made.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        err = InputError("--out", "value", "a folder that can be created", out, hint=e.strerror or str(e))
        print(f"rlsched: error: {err}", file=sys.stderr)
        return EXIT_INPUT
    rc = EXIT_INTERNAL
    try:
        rc = _dispatch(cmd, args, argv, debug)
        return rc
    finally:
        if rc != 0 and created and made.is_dir() and not any(made.iterdir()):
            made.rmdir()


#: The project's packages: a warning raised from their code is one ``rlsched: warning:`` line.
_OURS = tuple(
    Path(__file__).resolve().parents[1] / p for p in ("rlsched", "experiments", "runtime", "envs", "models")
)
_default_show = warnings.showwarning


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: Any = None,
) -> None:
    """Our own warnings (a plug-in that does not load, ...) as one line, like the CLI's other
    warnings; a library's keep Python's form (the file and line say where to look)."""
    path = Path(filename).resolve()
    if issubclass(category, UserWarning) and any(root in path.parents for root in _OURS):
        print(f"rlsched: warning: {message}", file=sys.stderr)
        return
    _default_show(message, category, filename, lineno, file, line)


def _user_path(args: Any, e: OSError) -> tuple[str, str] | None:
    """``(path, flag)`` when ``e`` concerns a path the user named on the command line (or one
    under it, such as a file in ``--out``), else ``None``."""
    failed = [Path(f) for f in (e.filename, e.filename2) if isinstance(f, (str, os.PathLike))]
    for value, flag in path_values(args):
        root = Path(value).expanduser().absolute()
        for f in failed:
            path = f.expanduser().absolute()
            if path == root or root in path.parents:
                return str(f), flag
    return None


def _dispatch(cmd: Command, args: Any, argv: Sequence[str], debug: bool) -> int:
    """Run the command; map what it raises to an exit code: the one error boundary.

    Only :class:`~rlsched.errors.InputError` (raised where a file or flag is read) is exit 2, and
    an ``OSError`` on a path the user named; :class:`~rlsched.errors.Unavailable` is exit 4, its
    :class:`~rlsched.errors.Refused` (a service's 4xx) exit 5;
    anything else — a ``ValueError`` from inside a run included — is an internal error (exit 1).
    """
    assert cmd.run is not None
    try:
        return cmd.run(args, argv)
    except InputError as e:
        print(f"rlsched: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except Refused as e:
        print(f"rlsched: refused: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except Unavailable as e:
        print(f"rlsched: unavailable: {e}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as e:
        saved = getattr(e, "saved", None)  # training saved its weights first
        into = getattr(e, "into", None)  # where the resumed run goes, if not the same --out
        resume = f"; continue with --resume {saved}" + (f" into {into}" if into else "") if saved else ""
        print(f"rlsched: {str(e) or 'interrupted'}{resume}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        # A path the user named that the system refuses (no permission, a directory, disk full)
        # is bad input; an OSError anywhere else is ours, as is every other exception.
        where = _user_path(args, e) if isinstance(e, OSError) else None
        if where is not None and isinstance(e, OSError):
            path, flag = where
            err = InputError(
                path, "<file>", f"a path this command can use (given by {flag})", hint=e.strerror or str(e)
            )
            print(f"rlsched: error: {err}", file=sys.stderr)
            return EXIT_INPUT
        if debug:
            raise
        what = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        plugin = _plugin_of(e)
        whose = f"a bug in the plug-in {plugin}, not in rlsched" if plugin else "a bug"
        print(
            f"rlsched: internal error: {type(e).__name__}{': ' + what if what else ''} "
            f"({whose}; rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _plugin_of(e: BaseException) -> str | None:
    """The plug-in policy an error is from, if plug-ins were loaded (the registry knows them)."""
    registry = sys.modules.get("rlsched.policies.registry")
    return None if registry is None else registry.plugin_of(e)


def entry() -> None:
    """The ``rlsched`` console script: :func:`main`, then exit with its code, without the
    interpreter's last walks over every object the command loaded
    (:mod:`experiments.process_exit`)."""
    freeze_heap_at_exit()
    sys.exit(main())


if __name__ == "__main__":
    entry()
