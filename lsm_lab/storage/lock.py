"""A table lock that needs nothing but conditional writes: the storage-based lock.

On one machine a kernel file lock (`fcntl.flock`) serialises writers.  Writers on
several machines sharing a bucket have no kernel in common, so the lock is an
object whose every change is a conditional write:

    .hoodie/.locks/table_lock.json   {"owner": "<uuid>", "validUntil": <epoch ms>, "expired": false}

    acquire:  GET lock ── absent?              ── create (If-None-Match: *) ──┐
                        ├─ expired or stale?   ── replace (If-Match: etag) ───┤ 412 → someone else won: wait, retry
                        └─ held by a live owner ── wait, retry                 │
              this process released it last? replace (If-Match: the etag it left), no GET ┘
                                                                               ▼
    hold:     a heartbeat thread re-writes validUntil = now + validity every `heartbeat` seconds (If-Match)
    release:  replace with "expired": true (If-Match); stop the heartbeat

A writer that dies stops renewing; once `validUntil` (plus a clock-drift margin)
has passed, the next writer takes the lock over.  A holder whose renewal fails
(it was too slow and another writer took over) has *lost* the lock: `check()`
raises `ConflictError`, and the commit step calls it right before the
create-if-absent of the completed instant, which stays the final arbiter.

This follows Apache Hudi's `StorageBasedLockProvider` (same folder and file
name, same fields, a 500 ms clock-drift margin).  Simplified: no audit log, no
metrics, and re-entrancy is per thread, as in `services.lock`.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass

from lsm_lab.errors import ConflictError
from lsm_lab.storage.base import ConflictError as _StorageConflict
from lsm_lab.storage.base import ObjectInfo, Storage

LOCK_KEY = ".hoodie/.locks/table_lock.json"
CLOCK_DRIFT_MS = 500


@dataclass(frozen=True)
class LockState:
    """The decoded lock file."""

    owner: str
    valid_until_ms: int
    expired: bool

    @staticmethod
    def decode(data: bytes) -> LockState | None:
        """None for a lock file that cannot be decoded (treated as free: it protects nothing)."""
        try:
            obj = json.loads(data)
            return LockState(str(obj["owner"]), int(obj["validUntil"]), bool(obj["expired"]))
        except (ValueError, KeyError, TypeError):
            return None

    def encode(self) -> bytes:
        return json.dumps({"owner": self.owner, "validUntil": self.valid_until_ms, "expired": self.expired}).encode()

    def free(self, now_ms: int) -> bool:
        return self.expired or self.valid_until_ms + CLOCK_DRIFT_MS < now_ms


#: lock URL → the version this process left when it released the lock: while the object still has that
#: version (a conditional PUT checks it), nobody took the lock since, so it is free without a GET
_released: dict[str, ObjectInfo] = {}


def _now_ms() -> int:
    return int(time.time() * 1000)


class StorageLock:
    """The exclusive lock of one table, built on `Storage.create` and `Storage.replace`."""

    def __init__(self, storage: Storage, *, validity: float = 30.0, heartbeat: float | None = None,
                 key: str = LOCK_KEY) -> None:
        self.storage = storage
        self.key = key
        self.validity = validity
        self.heartbeat = heartbeat if heartbeat is not None else validity / 3
        self.owner = uuid.uuid4().hex
        self._info: ObjectInfo | None = None
        self._depth = 0
        self._lost = False
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"StorageLock({self.storage.url(self.key)!r}, held={self.held})"

    @property
    def held(self) -> bool:
        return self._depth > 0 and not self._lost

    def _state(self) -> bytes:
        return LockState(self.owner, _now_ms() + int(self.validity * 1000), False).encode()

    def try_acquire(self) -> bool:
        """One attempt: True when this lock now holds the table (or already did)."""
        if self._depth:
            self._depth += 1
            return True
        left = _released.get(self.storage.url(self.key))
        if left is not None:  # this process released it last: one conditional PUT, no GET (412: look again)
            try:
                self._info = self.storage.replace(self.key, self._state(), expected=left)
            except (_StorageConflict, FileNotFoundError):
                _released.pop(self.storage.url(self.key), None)
            else:
                self._depth, self._lost = 1, False
                self._start_heartbeat()
                return True
        try:
            data, info = self.storage.read_versioned(self.key)
        except FileNotFoundError:
            try:
                self._info = self.storage.create(self.key, self._state())
            except _StorageConflict:
                return False
        else:
            state = LockState.decode(data)
            if state is not None and not state.free(_now_ms()) and state.owner != self.owner:
                return False
            try:
                self._info = self.storage.replace(self.key, self._state(), expected=info)
            except _StorageConflict:
                return False
        self._depth, self._lost = 1, False
        self._start_heartbeat()
        return True

    def acquire(self, timeout: float = 120.0, poll: float = 0.05) -> None:
        """Wait until the lock is held (ConflictError after `timeout` seconds)."""
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise ConflictError(f"could not take the table lock within {timeout:g} s (another writer holds it)",
                                    path=self.storage.url(self.key))
            time.sleep(poll)
            poll = min(poll * 2, 1.0)

    def check(self) -> None:
        """Raise ConflictError when the lock was lost (a renewal failed); call before committing."""
        if self._lost or not self._depth:
            raise ConflictError("the table lock was lost (its renewal failed; another writer may have taken it)",
                                path=self.storage.url(self.key))

    def release(self) -> None:
        """Give the lock up (the outermost release of a re-entrant hold writes `expired: true`)."""
        if not self._depth:
            return
        self._depth -= 1
        if self._depth:
            return
        self._stop_heartbeat()
        with self._mutex:
            if not self._lost and self._info is not None:
                try:
                    _released[self.storage.url(self.key)] = self.storage.replace(
                        self.key, LockState(self.owner, _now_ms(), True).encode(), expected=self._info)
                except (_StorageConflict, FileNotFoundError):
                    pass  # taken over meanwhile: nothing of ours to release
            self._info = None

    def __enter__(self) -> StorageLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # -- heartbeat -------------------------------------------------------------------------
    def renew(self) -> bool:
        """Extend the lease once (the heartbeat calls this); False when the lock was lost."""
        with self._mutex:
            if self._info is None or self._lost:
                return False
            try:
                self._info = self.storage.replace(self.key, self._state(), expected=self._info)
                return True
            except (_StorageConflict, FileNotFoundError):
                self._lost = True
                return False

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name="lsm_lab-lock-heartbeat", daemon=True)
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            try:
                if not self.renew():
                    return
            except Exception:  # noqa: BLE001 - a failed request: try again at the next beat, until the lease ends
                continue
