"""The table lock: one process at a time may plan or commit on a table.

    .hoodie/.lsm_lab.lock      an empty file; `fcntl.flock(LOCK_EX)` on it is the lock

An OS file lock is released by the kernel when its process dies, so a writer
killed with SIGKILL can never leave the table locked.  The lock is re-entrant
within one *thread* (a nested `table_lock` on the same table is a no-op), so a
write that triggers an inline compaction does not deadlock; two threads of one
process each open their own file description, and `flock` makes the second
one wait exactly as a second process would.

What the lock protects is short: creating an instant, the conflict check and
the completion of a write, the planning and the completion of a table
service.  Data files are written *outside* the lock (optimistic concurrency,
see `services.occ`), so writers only queue for milliseconds.

On an object store (a table at `s3://…`, `gs://…`, `az://…`) there is no
kernel in common between writers: the lock is `storage.StorageLock`, Hudi's
storage-based lock (`.hoodie/.locks/table_lock.json`, written only by
conditional PUTs, a lease renewed by a heartbeat thread, taken over when
expired).  `check_table_lock` is called right before a commit, so a writer
whose lease was taken over does not commit.  Every acquisition and release
is a request there, so a release lingers 0.1 s (`LOCK_LINGER`): a table
service that plans, claims and completes in quick succession keeps one lease.

Simplified compared with Apache Hudi: Hudi plugs in lock providers (ZooKeeper,
DynamoDB, Hive metastore, file system, storage-based); lsm_lab has the
local-file one and the storage-based one.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from lsm_lab.errors import ConflictError, LsmLabError
from lsm_lab.storage import StorageLock, StoragePath, at_scope_end, forget_kept, path_of, paths, storage_of

LOCK_FILE = ".lsm_lab.lock"
LOCK_VALIDITY = 30.0  # seconds an object-store lock lease lasts unless renewed (env LSM_LAB_LOCK_VALIDITY_S)
_held: dict[tuple[str, int], int] = {}
_guard = threading.Lock()


_remote: dict[tuple[str, int], StorageLock] = {}
LOCK_LINGER = 0.1  # seconds an object-store lock is kept after its release for this thread to take again
#: (table, thread) → a released object-store lock still held for `LOCK_LINGER` seconds, and its release timer
_lingering: dict[tuple[str, int], tuple[StorageLock, threading.Timer]] = {}


def _key(base_path: str | os.PathLike[str] | StoragePath) -> tuple[str, int]:
    return str(path_of(base_path).resolve()), threading.get_ident()  # (a StoragePath resolves to itself)


def check_table_lock(base_path: str | os.PathLike[str] | StoragePath) -> None:
    """Raise `ConflictError` when this thread's storage-based lock of an object-store table was lost.

    Called right before a commit; a local `flock` cannot be lost, so this is a no-op locally."""
    with _guard:
        lock = _remote.get(_key(base_path))
    if lock is not None:
        lock.check()


@contextlib.contextmanager
def table_lock(base_path: str | os.PathLike[str] | StoragePath, *, timeout: float = 120.0) -> Iterator[None]:
    """Hold the table's exclusive lock for the duration of the block (ConflictError on timeout)."""
    key = _key(base_path)
    with _guard:
        if _held.get(key):
            _held[key] += 1
            reentrant = True
        else:
            reentrant = False
    if reentrant:
        try:
            yield
        finally:
            with _guard:
                _held[key] -= 1
        return
    if isinstance(base_path, StoragePath):
        with _remote_lock(base_path, key, timeout):
            yield
        return
    path = Path(base_path) / ".hoodie" / LOCK_FILE
    paths.make_folders(path.parent)  # never through a link out of the table
    fh = os.fdopen(paths.open_nofollow(path, os.O_RDWR | os.O_CREAT), "r+")  # a link as lock file: refused
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConflictError(f"could not take the table lock within {timeout:.0f} s", path=path) from None
                time.sleep(0.005)
        with _guard:
            _held[key] = 1
        try:
            yield
        finally:
            with _guard:
                _held.pop(key, None)
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def _linger() -> float:
    return float(os.environ.get("LSM_LAB_LOCK_LINGER_S") or LOCK_LINGER)


def _release_later(key: tuple[str, int], lock: StorageLock) -> None:
    """Inside an operation (a request scope): keep the lease `LOCK_LINGER` seconds more, or until the operation
    ends, then release it, unless this thread takes it again first.  Outside one: release it now."""
    delay = _linger()

    def release() -> None:
        with _guard:
            mine = _lingering.get(key)
            if mine is None or mine[0] is not lock:
                return  # taken again meanwhile: the new holder releases it
            del _lingering[key]
            mine[1].cancel()
        try:
            lock.release()
        except LsmLabError:
            pass  # (the store is gone: the lease runs out by itself)

    if delay <= 0 or not at_scope_end(release):
        lock.release()
        return
    timer = threading.Timer(delay, release)  # not a daemon: a process that ends still releases the lock
    timer.name = "lsm_lab-lock-release"
    with _guard:
        _lingering[key] = (lock, timer)
    timer.start()


@contextlib.contextmanager
def _remote_lock(base_path: StoragePath, key: tuple[str, int], timeout: float) -> Iterator[None]:
    """The storage-based lock (`storage.StorageLock`): `.hoodie/.locks/table_lock.json` by conditional writes.

    A release lingers `LOCK_LINGER` seconds: a service that takes the lock again at once (plan, then
    claim, then complete) keeps its lease, with no request, instead of a release PUT and an acquire PUT."""
    with _guard:
        kept = _lingering.pop(key, None)
    lock: StorageLock | None = None
    if kept is not None:
        kept[1].cancel()
        lock = kept[0]
        if not lock.held:  # its renewal failed meanwhile: give it up, take the lock anew
            lock.release()
            lock = None
    if lock is None:
        validity = float(os.environ.get("LSM_LAB_LOCK_VALIDITY_S") or LOCK_VALIDITY)
        lock = StorageLock(storage_of(base_path), validity=validity)
        lock.acquire(timeout=timeout)
    forget_kept()  # under the lock, the timeline and the heartbeats are asked of the store again (storage.scope)
    with _guard:
        _held[key] = 1
        _remote[key] = lock
    try:
        yield
    finally:
        with _guard:
            _held.pop(key, None)
            _remote.pop(key, None)
        _release_later(key, lock)
