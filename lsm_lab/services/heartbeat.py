"""Heartbeats: is the process that owns a pending instant still alive?

A pending instant on the timeline means either "a writer is working on it" or
"a writer died half way".  Rolling back the first would destroy a live write;
never rolling back the second would leave junk forever.  Each owner of a
pending instant therefore holds an OS lock that dies with its process:

    .hoodie/.heartbeat/<instant>        flock(LOCK_EX) held by the owner for the
                                        whole life of the instant
    another process:  flock(LOCK_EX | LOCK_NB)
        fails  → the owner is alive: leave the instant alone
        works  → nobody holds it: the owner is dead, roll the instant back

The kernel drops the lock when the owner exits for any reason (SIGKILL
included), so a killed writer is detected at once, with no clock and no
timeout.  Checks are made while holding the table lock, and an owner creates
its heartbeat before its instant becomes visible, so "no heartbeat file" also
means dead.

Simplified compared with Apache Hudi: Hudi writes a heartbeat file every
`hoodie.client.heartbeat.interval_in_ms` and declares a writer dead after
`hoodie.client.heartbeat.tolerable.misses` missed beats (that works on object
stores); an OS lock on local storage needs neither interval nor tolerance.
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from typing import IO

from lsm_lab import paths
from lsm_lab.errors import ConflictError

HEARTBEAT_FOLDER = ".heartbeat"

_mine: dict[str, Heartbeat] = {}
_guard = threading.Lock()


def heartbeat_path(base_path: str | os.PathLike[str], instant: str) -> Path:
    return Path(base_path) / ".hoodie" / HEARTBEAT_FOLDER / paths.instant_time(instant, field="heartbeat")


class Heartbeat:
    """The liveness signal of one pending instant, held by the process working on it."""

    def __init__(self, base_path: str | os.PathLike[str], instant: str) -> None:
        self.path = heartbeat_path(base_path, instant)
        self.instant = instant
        self._fh: IO[str] | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None

    def start(self) -> Heartbeat:
        """Take the heartbeat lock (ConflictError when another live process holds it)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held open on purpose
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise ConflictError(f"instant {self.instant} is being worked on by a live process",
                                path=self.path) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._fh = fh
        with _guard:
            _mine[str(self.path)] = self
        return self

    def stop(self) -> None:
        """Release the heartbeat and remove its file (idempotent)."""
        fh, self._fh = self._fh, None
        with _guard:
            _mine.pop(str(self.path), None)
        if fh is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    def __enter__(self) -> Heartbeat:
        return self if self.held else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def is_alive(base_path: str | os.PathLike[str], instant: str) -> bool:
    """True when a live process (this one included) holds the heartbeat of `instant`."""
    path = heartbeat_path(base_path, instant)
    with _guard:
        if str(path) in _mine:
            return True
    try:
        fh = open(path)  # noqa: SIM115 - held open on purpose
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return True
            raise
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False
    finally:
        fh.close()


def clear(base_path: str | os.PathLike[str], instant: str) -> None:
    """Remove the heartbeat file of a dead instant (after its rollback)."""
    if not is_alive(base_path, instant):
        heartbeat_path(base_path, instant).unlink(missing_ok=True)
