"""One operation, each listing and each small object requested once: the request scope of an object store.

A write on an object store asks the same questions many times: the timeline is
listed to find the snapshot, again to find pending writers, again for the
schema, again for the file groups ...  Each answer is a LIST or a GET that costs
a round trip (and money).  Inside a request scope the first answer is kept and
the later questions are answered from it:

    with request_scope():                       (a Table verb: lsm_lab.api opens one per operation)
        LIST .hoodie/timeline/          → sent, kept
        LIST .hoodie/timeline/          → from the scope
        HEAD p/.hoodie_partition_metadata → from a kept LIST of an enclosing folder: no request
        GET  a key a kept LIST lacks    → absent, no request; but a heartbeat (.heartbeat/<t>) is always asked
        GET  .hoodie/timeline/<t>_<c>.deltacommit  (≤ 1 MiB) → sent once, kept
        PUT  .hoodie/timeline/<t>.deltacommit.inflight
             └─ added to every kept LIST of an enclosing folder (a DELETE removes it): no LIST again
        ── table lock taken (services.lock) ──  everything kept is dropped:
        LIST .hoodie/timeline/          → sent again: the conflict check sees the other writers

Why this keeps optimistic concurrency and crash safety whole: the answers that
must be current — the conflict check, the heartbeats of pending writers, the
lock's own object — are asked with the table lock held, and taking the lock
empties the scope, so they are asked of the store again.  What is answered from
the scope outside the lock is what the operation read at its start, exactly what
a snapshot is; and this process's own writes (from any of its threads) drop the
answers they change, so an operation reads its own writes.  The lock object is
read with `read_versioned`, which is never kept.  A heartbeat is never taken
for absent because a kept listing lacks it: writers start without the lock
(heartbeat first, then the requested instant), so a LIST may see a new
instant and not yet its heartbeat; the GET that judges the writer alive goes
to the store.  Outside a scope nothing is kept, so two operations never share
an answer.

Simplified compared with Apache Hudi: Hudi keeps a timeline and a file-system
view per `HoodieTableMetaClient` (refreshed with `reloadActiveTimeline`) and
serves listings from its metadata table (so does lsm_lab when the table has one:
table/mdt_listing.py); lsm_lab keeps the raw answers of one operation.

Taught in: no chapter (it changes how many requests chapter 12 counts, not what it teaches; docs/PERFORMANCE.md)
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: folders whose objects are liveness signals that other writers write without the table lock: a heartbeat
#: written after a kept LIST and before the instant it guards must be seen by the GET that decides whether
#: its writer is alive, so a kept listing never answers "absent" for them (services.heartbeat, rollback)
LIVENESS_FOLDERS = (".heartbeat",)


def is_liveness(key: str) -> bool:
    """Whether `key` lies in a liveness folder (`LIVENESS_FOLDERS`): always asked of the store."""
    return any(f"{folder}/" in f"/{key}" for folder in LIVENESS_FOLDERS)


#: what a scope keeps for a GET that found no object (an empty `bytes` is a real, empty object)
ABSENT = memoryview(b"")

#: objects larger than this are not kept (instant files, properties and manifests are far smaller)
MAX_KEPT_OBJECT = 1 << 20


class RequestScope:
    """The answers one operation got from a store: listings and small objects, by (store, full key)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.lists: dict[tuple[int, str, str], Any] = {}  # (store id, mode, prefix) → result
        self.objects: dict[tuple[int, str], bytes | memoryview] = {}  # (store id, key) → content, or ABSENT
        self.saved = 0  # requests answered from the scope (for the tests and the curious)
        self.durable: dict[str, Any] = {}  # decoded immutable objects (completed instants): kept past `clear`
        self.too_big: set[tuple[int, str]] = set()  # folders a prefetch found too large for one LIST
        self.at_end: list[Callable[[], None]] = []  # run when the scope closes (a lingering lock's release)

    def get_list(self, store: int, mode: str, prefix: str) -> Any:
        with self._mutex:
            found = self.lists.get((store, mode, prefix))
            if found is not None:
                self.saved += 1
            return found

    def put_list(self, store: int, mode: str, prefix: str, result: Any) -> None:
        with self._mutex:
            self.lists[(store, mode, prefix)] = result

    def get_object(self, store: int, key: str) -> bytes | memoryview | None:
        with self._mutex:
            found = self.objects.get((store, key))
            if found is not None:
                self.saved += 1
            return found

    def put_object(self, store: int, key: str, data: bytes | memoryview) -> None:
        if len(data) <= MAX_KEPT_OBJECT:
            with self._mutex:
                self.objects[(store, key)] = data

    def covering(self, store: int, key: str) -> list[Any] | None:
        """The kept entries of the folder that holds `key` (a LIST of that folder, or a recursive LIST of an
        enclosing one), or None when no kept listing covers it."""
        parent = key.rsplit("/", 1)[0] if "/" in key else ""
        with self._mutex:
            kept = self.lists.get((store, "dir", parent))
            if kept is not None:
                self.saved += 1
                return list(kept[0])
            for (sid, mode, prefix), result in self.lists.items():
                if sid == store and mode == "tree" and (not prefix or key.startswith(prefix + "/")):
                    self.saved += 1
                    return [m for m in result if str(m["path"]).rsplit("/", 1)[0] == parent]
        return None

    def tree_from_tree(self, store: int, prefix: str) -> list[Any] | None:
        """A recursive LIST of `prefix`, answered from a kept recursive LIST of an enclosing folder."""
        with self._mutex:
            for (sid, mode, top), result in self.lists.items():
                if sid == store and mode == "tree" and (not top or prefix.startswith(top + "/")):
                    self.saved += 1
                    return [m for m in result if str(m["path"]).startswith(prefix + "/")]
        return None

    def dir_from_tree(self, store: int, prefix: str) -> tuple[list[Any], list[str]] | None:
        """A LIST of the folder `prefix`, answered from a kept recursive LIST of it or of an enclosing folder."""
        with self._mutex:
            for (sid, mode, top), result in self.lists.items():
                if sid == store and mode == "tree" and (not top or prefix == top or prefix.startswith(top + "/")):
                    start = prefix + "/" if prefix else ""
                    metas, folders = [], set()
                    for m in result:
                        path = str(m["path"])
                        if not path.startswith(start):
                            continue
                        rest = path[len(start):]
                        if "/" in rest:
                            folders.add(start + rest.split("/", 1)[0])
                        else:
                            metas.append(m)
                    self.saved += 1
                    return metas, sorted(folders)
        return None

    def changed(self, store: int, key: str, meta: dict[str, Any] | None = None) -> None:
        """This process wrote `key` (full key; `meta`: its listing entry) or deleted it (`meta` None, or
        a write that may have failed half way): the kept answers that hold it are brought up to date."""
        with self._mutex:
            self.objects.pop((store, key), None)
            for entry in [e for e in self.lists if e[0] == store and (not e[2] or key.startswith(e[2] + "/"))]:
                _, mode, prefix = entry
                result = self.lists[entry]
                if mode == "tree":
                    metas = [m for m in result if str(m["path"]) != key]
                    self.lists[entry] = [*metas, meta] if meta is not None else metas
                    continue
                metas, folders = result
                rest = key[len(prefix) + 1:] if prefix else key
                if "/" not in rest:  # directly in the folder
                    metas = [m for m in metas if str(m["path"]) != key]
                    self.lists[entry] = ([*metas, meta] if meta is not None else metas, folders)
                elif meta is not None:  # below a sub-folder: the sub-folder exists now
                    sub = (f"{prefix}/" if prefix else "") + rest.split("/", 1)[0]
                    self.lists[entry] = (metas, folders if sub in folders else [*folders, sub])
                else:  # a sub-folder may have become empty: ask again
                    del self.lists[entry]

    def clear(self) -> None:
        with self._mutex:
            self.lists.clear()
            self.objects.clear()


_local = threading.local()
_active: set[RequestScope] = set()
_active_guard = threading.Lock()


def current() -> RequestScope | None:
    """The request scope of this thread, if one is open."""
    return getattr(_local, "scope", None)


@contextlib.contextmanager
def request_scope() -> Iterator[RequestScope]:
    """Keep listings and small objects for the duration of the block (re-entrant: an inner block joins)."""
    scope = current()
    if scope is not None:
        yield scope
        return
    scope = RequestScope()
    _local.scope = scope
    with _active_guard:
        _active.add(scope)
    try:
        yield scope
    finally:
        _local.scope = None
        with _active_guard:
            _active.discard(scope)
        for fn in scope.at_end:
            fn()


def at_end(fn: Callable[[], None]) -> bool:
    """Run `fn` when this thread's request scope closes; False (and `fn` not kept) when no scope is open."""
    scope = current()
    if scope is None:
        return False
    scope.at_end.append(fn)
    return True


def changed(store: int, key: str, meta: dict[str, Any] | None = None) -> None:
    """A write (`meta`: the new object's listing entry) or a delete of `key` by any thread of this process:
    every open scope brings what it kept of it up to date."""
    with _active_guard:
        scopes = list(_active)
    for scope in scopes:
        scope.changed(store, key, meta)


def recall(name: str) -> Any:
    """A decoded immutable object kept by `remember` in this thread's scope (None: not kept, or no scope)."""
    scope = current()
    return scope.durable.get(name) if scope is not None else None


def remember(name: str, value: Any) -> None:
    """Keep a decoded object that never changes once written (a completed instant's content) for the rest
    of this thread's scope, past the table lock: what never changes needs no second GET."""
    scope = current()
    if scope is not None:
        scope.durable[name] = value


def forget() -> None:
    """Drop what this thread's scope kept (the table lock was just taken: ask the store again)."""
    scope = current()
    if scope is not None:
        scope.clear()


__all__ = ["ABSENT", "LIVENESS_FOLDERS", "MAX_KEPT_OBJECT", "RequestScope", "at_end", "changed", "current", "forget",
           "is_liveness", "recall", "remember", "request_scope"]
