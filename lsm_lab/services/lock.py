"""The table lock: one process at a time may plan or commit on a table.

    .hoodie/.lsm_lab.lock      an empty file; `fcntl.flock(LOCK_EX)` on it is the lock

An OS file lock is released by the kernel when its process dies, so a writer
killed with SIGKILL can never leave the table locked.  The lock is re-entrant
within a process (a nested `table_lock` on the same table is a no-op), so a
write that triggers an inline compaction does not deadlock.

Simplified compared with Apache Hudi: Hudi plugs in lock providers (ZooKeeper,
DynamoDB, Hive metastore, file system); lsm_lab only has the local-file one,
which is right for local storage and for one machine.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Iterator

from lsm_lab.errors import ConflictError

LOCK_FILE = ".lsm_lab.lock"
_held: dict[str, int] = {}
_guard = threading.Lock()


@contextlib.contextmanager
def table_lock(base_path: str | os.PathLike[str], *, timeout: float = 120.0) -> Iterator[None]:
    """Hold the table's exclusive lock for the duration of the block (ConflictError on timeout)."""
    key = str(Path(base_path).resolve())
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
    path = Path(base_path) / ".hoodie" / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ConflictError(f"could not take the table lock within {timeout:.0f} s", path=path) from None
                time.sleep(0.02)
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
