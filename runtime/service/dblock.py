"""One service per queue file: an exclusive ``flock`` on ``DB.lock``, taken before the queue is read.

A second ``rlsched serve`` started on the same database (the same config, by mistake) must not
touch it: recovery would put the running service's tasks back in the queue and they would run
twice. The kernel releases a ``flock`` when its holder dies, however it dies, so a ``kill -9``
never leaves a stale lock behind; the file's text only names the holder for the error message.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import socket
from typing import TextIO

from rlsched.errors import InputError


class DatabaseInUse(InputError):
    """Another process holds the queue file (bad input of ``rlsched serve``: exit 2).

    :param path: the database.
    :param holder: what the holder wrote in the lock file (its pid, host, address, start time).
    """

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(
            path,
            "<file>",
            "a queue file no other rlsched serve holds",
            hint=f"in use by {holder or 'a process that did not say'}; one service per database: "
            "stop it, or give this one another db",
        )
        self.holder = holder


class DatabaseLock:
    """The exclusive lock of one queue file, held until :meth:`release` or the process ends.

    :param db: the database file (the lock is the file's real path + ``".lock"``, whatever
        link or spelling names it).
    :param owner: how the holder describes itself (e.g. the address it serves).
    :raises DatabaseInUse: another process holds it.
    """

    def __init__(self, db: str, owner: str = "") -> None:
        # Beside the file itself: a symlink (or another spelling) of the path must meet the same lock.
        self.path = f"{os.path.realpath(db)}.lock"
        #: This lock made the lock file (it did not exist before).
        self.created = not os.path.exists(self.path)
        f: TextIO = open(self.path, "a+")  # noqa: SIM115 (held open for the process's life)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip()
            f.close()
            raise DatabaseInUse(db, holder) from None
        since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} on {socket.gethostname()}{', ' + owner if owner else ''}, since {since}")
        f.flush()
        self._file: TextIO | None = f

    def release(self, remove_created: bool = False) -> None:
        """Drop the lock (closing the file releases the ``flock``).

        :param remove_created: also remove the lock file if this lock made it (a service that
            could not start leaves nothing behind); removed while still held, so no other
            process can hold it then.
        """
        if self._file is not None:
            if remove_created and self.created:
                os.unlink(self.path)
            self._file.close()
            self._file = None
