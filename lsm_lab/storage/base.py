"""The storage seam: every byte of a table goes through one `Storage` object.

A table lives under one *root* (a local folder or an object-store prefix).  Code
above this layer names files by *keys*: POSIX paths relative to the root
(`.hoodie/timeline/20261125081500000.deltacommit.requested`,
`city=chennai/ab12..._0-1-0_20261125081500000.parquet`).  A backend turns a key
into a request:

    Table / services / readers
            │  list_files · read · read_range · head · write · create · replace · delete
            ▼
        Storage ── LocalStorage    (os calls; create = temp file + link)
                └─ ObjectStorage   (S3, GCS, Azure through obstore; create = If-None-Match: *)

Three kinds of write, because a lake table needs exactly these:

* `write(key, data)` — plain put.  Data files have unique names, so a put that
  overwrites never happens in practice; on object stores a PUT is atomic (a
  reader sees the old object or the new one, never half), locally the bytes go
  to a temp file that is renamed into place.
* `create(key, data)` — create-if-absent.  This is what makes a commit atomic
  without a shared file system: two writers completing the same instant race
  on one key and exactly one wins; the loser gets `AlreadyExistsError` (a
  `ConflictError`).
* `replace(key, data, expected=info)` — compare-and-swap on the version a
  reader saw (`ObjectInfo.etag`); the basis of the storage lock.

Every request is counted in `Storage.counts` (LIST, GET, HEAD, PUT, DELETE), so
benchmarks can report what an operation costs on a metered store.

Simplified compared with Apache Hudi: Hudi's `HoodieStorage` also opens output
streams, renames and sets permissions; lsm_lab needs neither streams (Parquet
goes through `arrow_filesystem()`) nor renames (object stores have none).

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import posixpath
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from lsm_lab.errors import ConflictError as ConflictError  # re-exported: the storage layer's errors
from lsm_lab.errors import StorageError as StorageError

if TYPE_CHECKING:  # pyarrow.fs is only needed by callers that read Parquet
    import pyarrow.fs


NO_CREDENTIALS = "no credentials:"  # how the error of lsm_lab's refusing S3 credential provider starts


class AlreadyExistsError(ConflictError):
    """`Storage.create` lost the race: the key exists (another writer created it first)."""


class VersionMismatchError(ConflictError):
    """`Storage.replace` found a different version than the caller had read."""


@dataclass(frozen=True)
class ObjectInfo:
    """What a listing or a HEAD tells about one object."""

    key: str  # relative to the storage root, POSIX separators
    size: int
    etag: str  # changes whenever the content is replaced; compare it, never parse it
    modified: datetime | None = None

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)


@dataclass
class RequestCounts:
    """How many requests of each kind a `Storage` has sent (thread-safe)."""

    LIST: int = 0
    GET: int = 0
    HEAD: int = 0
    PUT: int = 0
    DELETE: int = 0
    #: when a list, every request is also recorded in it as (kind, full key): which objects and folders
    #: an operation asked for (`lsm-lab bench metadata` tells a LIST of the timeline from one of the data)
    trace: list[tuple[str, str]] | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, n: int = 1, key: str | None = None) -> None:
        with self._lock:
            setattr(self, kind, getattr(self, kind) + n)
            if self.trace is not None:
                self.trace.extend([(kind, key or "")] * n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {"LIST": self.LIST, "GET": self.GET, "HEAD": self.HEAD, "PUT": self.PUT, "DELETE": self.DELETE}

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """Requests sent since `before` (a `snapshot()`)."""
        now = self.snapshot()
        return {k: now[k] - before.get(k, 0) for k in now}

    def reset(self) -> None:
        with self._lock:
            self.LIST = self.GET = self.HEAD = self.PUT = self.DELETE = 0


def clean_key(key: str) -> str:
    """Normalise a key: POSIX separators, no leading `/`, no `.`/`..` segments (StorageError)."""
    parts = [p for p in key.replace("\\", "/").split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise StorageError(f"key {key!r} climbs out of the storage root")
    return "/".join(parts)


class Storage(ABC):
    """One table root on one backend.  Keys are relative POSIX paths (see `clean_key`)."""

    #: the root as a URI or local path, for messages (`s3://bucket/prefix`, `/data/t`)
    uri: str
    counts: RequestCounts

    def url(self, key: str) -> str:
        """The full location of `key`, for messages and for users."""
        key = clean_key(key)
        return f"{self.uri.rstrip('/')}/{key}" if key else self.uri

    def child(self, key: str) -> Storage:
        """A `Storage` rooted at `key` below this root, sharing the counters."""
        raise NotImplementedError

    # -- reads -----------------------------------------------------------------------------
    @abstractmethod
    def list_files(self, prefix: str = "", *, recursive: bool = False) -> list[ObjectInfo]:
        """Objects directly under the folder `prefix` (or all below it when `recursive`), sorted by key.

        One LIST request per call (per page of results on object stores).  A
        missing folder lists as empty.
        """

    @abstractmethod
    def list_folders(self, prefix: str = "") -> list[str]:
        """Keys of the folders directly under `prefix` (object stores: common prefixes), sorted."""

    def list_dir(self, prefix: str = "") -> tuple[list[ObjectInfo], list[str]]:
        """Files and folder keys directly under `prefix` (object stores: one LIST for both)."""
        return self.list_files(prefix), self.list_folders(prefix)

    @abstractmethod
    def read(self, key: str) -> bytes:
        """The whole object (FileNotFoundError when absent)."""

    @abstractmethod
    def read_versioned(self, key: str) -> tuple[bytes, ObjectInfo]:
        """The whole object and the version it had when read (for a later `replace`)."""

    @abstractmethod
    def read_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes `[start, end)` of the object."""

    def read_suffix(self, key: str, n: int) -> tuple[bytes, int]:
        """The last `n` bytes of the object (all of it when shorter) and its total size; one GET on a store."""
        info = self.head(key)
        if info is None:
            raise FileNotFoundError(self.url(key))
        return self.read_range(key, max(0, info.size - n), info.size), info.size

    @abstractmethod
    def head(self, key: str) -> ObjectInfo | None:
        """Size and version of the object, or None when it does not exist."""

    def exists(self, key: str) -> bool:
        return self.head(key) is not None

    # -- writes ----------------------------------------------------------------------------
    @abstractmethod
    def write(self, key: str, data: bytes) -> ObjectInfo:
        """Put `data` at `key`, replacing what was there; readers see old or new, never half."""

    @abstractmethod
    def create(self, key: str, data: bytes) -> ObjectInfo:
        """Put `data` at `key` only if no object is there (AlreadyExistsError otherwise)."""

    @abstractmethod
    def replace(self, key: str, data: bytes, *, expected: ObjectInfo) -> ObjectInfo:
        """Put `data` at `key` only if its version is still `expected.etag` (VersionMismatchError otherwise)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; a missing object is not an error."""

    def delete_many(self, keys: list[str]) -> None:
        """Remove these objects (missing ones are not an error); object stores batch them where they can."""
        for key in keys:
            self.delete(key)

    def delete_prefix(self, prefix: str) -> int:
        """Remove every object below the folder `prefix`; returns how many."""
        infos = self.list_files(prefix, recursive=True)
        for info in infos:
            self.delete(info.key)
        return len(infos)

    # -- Parquet ---------------------------------------------------------------------------
    @abstractmethod
    def arrow_filesystem(self) -> tuple[pyarrow.fs.FileSystem, str]:
        """A pyarrow file system and the root's path in it, for Parquet reads and writes."""

    def arrow_path(self, key: str) -> str:
        """The path of `key` in `arrow_filesystem()`."""
        _, root = self.arrow_filesystem()
        key = clean_key(key)
        return f"{root.rstrip('/')}/{key}" if key else root

    def prefetch(self, prefix: str) -> bool:
        """Object stores in a request scope: list the folder `prefix` once, recursively, so that later
        listings below it need no request (`storage.scope`).  Elsewhere nothing to do: False."""
        return False

    def walk_keys(self, prefix: str = "") -> Iterator[str]:
        """Every key below `prefix` (recursive listing)."""
        for info in self.list_files(prefix, recursive=True):
            yield info.key
