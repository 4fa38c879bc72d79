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
timeout.  The heartbeat file is opened with O_NOFOLLOW in a folder that must
resolve inside the table (`paths.open_nofollow`): a symbolic link planted at
`.hoodie/.heartbeat` or at `.hoodie/.heartbeat/<instant>` raises
`UnsafePathError` instead of truncating a file elsewhere (`is_alive` only reads
and locks, and may follow a link).  Checks are made while holding the table lock, and an owner creates
its heartbeat before its instant becomes visible, so "no heartbeat file" also
means dead.

On an object store there is no OS lock: the heartbeat is a file holding the
time of the owner's last beat, rewritten every `REMOTE_INTERVAL` seconds by a
thread, and judged by age (older than `REMOTE_TOLERANCE`: dead), as Hudi's
`HoodieHeartbeatClient` does.

Simplified compared with Apache Hudi: Hudi writes a heartbeat file every
`hoodie.client.heartbeat.interval_in_ms` and declares a writer dead after
`hoodie.client.heartbeat.tolerable.misses` missed beats (that works on object
stores); an OS lock on local storage needs neither interval nor tolerance.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
import time
from typing import IO

from lsm_lab.errors import ConflictError
from lsm_lab.storage import StoragePath, TablePath, path_of, paths

HEARTBEAT_FOLDER = ".heartbeat"

_mine: dict[str, Heartbeat] = {}
_guard = threading.Lock()


#: object stores: seconds between two beats, and the age after which a heartbeat is dead (Hudi: 60 s, 2 misses);
#: the environment variables LSM_LAB_HEARTBEAT_INTERVAL_S and LSM_LAB_HEARTBEAT_TOLERANCE_S override them
REMOTE_INTERVAL = 5.0
REMOTE_TOLERANCE = 30.0


def _interval() -> float:
    return float(os.environ.get("LSM_LAB_HEARTBEAT_INTERVAL_S") or REMOTE_INTERVAL)


def _tolerance() -> float:
    return float(os.environ.get("LSM_LAB_HEARTBEAT_TOLERANCE_S") or REMOTE_TOLERANCE)


def heartbeat_path(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> TablePath:
    return path_of(base_path) / ".hoodie" / HEARTBEAT_FOLDER / paths.instant_time(instant, field="heartbeat")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _age_s(path: StoragePath) -> float | None:
    """Seconds since the object-store heartbeat at `path` was last written (None: no heartbeat)."""
    try:
        text = path.read_bytes().decode("ascii", errors="replace").strip()
    except FileNotFoundError:
        return None
    try:
        return (_now_ms() - int(text)) / 1000.0
    except ValueError:
        return float("inf")  # unreadable: treat as dead


class Heartbeat:
    """The liveness signal of one pending instant, held by the process working on it."""

    def __init__(self, base_path: str | os.PathLike[str] | StoragePath, instant: str) -> None:
        self.path = heartbeat_path(base_path, instant)
        self.instant = instant
        self._fh: IO[str] | None = None
        self._beating: threading.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        return self._fh is not None or self._beating is not None

    def start(self) -> Heartbeat:
        """Take the heartbeat lock (ConflictError when another live process holds it)."""
        if isinstance(self.path, StoragePath):
            return self._start_remote(self.path)
        paths.make_folders(self.path.parent)  # never through a link out of the table
        fd = paths.open_nofollow(self.path, os.O_RDWR | os.O_CREAT)  # a link as heartbeat: UnsafePathError
        fh = os.fdopen(fd, "r+")
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

    def _start_remote(self, path: StoragePath) -> Heartbeat:
        """Object stores: a file holding the time of the last beat, rewritten by a thread (Hudi's scheme)."""
        age = _age_s(path)
        if age is not None and age < _tolerance():
            raise ConflictError(f"instant {self.instant} is being worked on by a live process", path=path)
        path.write_bytes(str(_now_ms()).encode("ascii"))
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(_interval()):
                try:
                    path.write_bytes(str(_now_ms()).encode("ascii"))
                except Exception:  # noqa: BLE001 - a failed beat: try again at the next one
                    continue

        self._beating = stop
        self._thread = threading.Thread(target=beat, name=f"lsm_lab-heartbeat-{self.instant}", daemon=True)
        self._thread.start()
        with _guard:
            _mine[str(self.path)] = self
        return self

    def stop(self) -> None:
        """Release the heartbeat and remove its file (idempotent)."""
        if self._beating is not None:
            stop, self._beating = self._beating, None
            stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None
            with _guard:
                _mine.pop(str(self.path), None)
            self.path.unlink(missing_ok=True)
            return
        fh, self._fh = self._fh, None
        with _guard:
            _mine.pop(str(self.path), None)
        if fh is None:
            return
        try:
            paths.unlink(self.path)
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            fh.close()

    def __enter__(self) -> Heartbeat:
        return self if self.held else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def is_alive(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> bool:
    """True when a live process (this one included) holds the heartbeat of `instant`."""
    path = heartbeat_path(base_path, instant)
    with _guard:
        if str(path) in _mine:
            return True
    if isinstance(path, StoragePath):  # judged by age: a beat within the tolerance means alive
        age = _age_s(path)
        return age is not None and age < _tolerance()
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


def clear(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> None:
    """Remove the heartbeat file of a dead instant (after its rollback)."""
    if not is_alive(base_path, instant):
        # a link as heartbeat file goes itself; a linked folder is refused (a store: one DELETE)
        paths.unlink(heartbeat_path(base_path, instant))
