"""`StoragePath`: a key of a `Storage`, with the small pathlib vocabulary table code uses.

The layers above name a table's files the way they always did — the table root
joined with relative parts — and pass the result to the few functions that
touch bytes (atomic create, Parquet open/write, listing).  For a local table
the root is a `pathlib.Path`, so local reads and writes keep their `os` calls,
their `link`-based atomic create and their speed.  For a table on an object
store the root is a `StoragePath(storage, "")`, and every join yields another
`StoragePath`: a (storage, key) pair whose methods are requests to the store.

    open_table("s3://bucket/t")
        │  as_path(location, storage_options)
        ▼
    StoragePath(ObjectStorage(s3://bucket/t), "")
        / ".hoodie" / "timeline"  ──► StoragePath(…, ".hoodie/timeline")
              .iterdir()          LIST   (one request: files and folders)
              .read_bytes()       GET
              .write_bytes(b)     PUT    (atomic on every object store)
              create_bytes(p, b)  PUT If-None-Match: *   (the commit primitive)
              .unlink()           DELETE
              .mkdir()            nothing: object stores have no folders

A `StoragePath` has no `__fspath__`: passing one to `open()` or an `os`
function fails loudly instead of silently creating a local file named
`s3:/…`.  Signatures name either kind `TablePath`.  Where the two kinds need
different code for the same operation, the function lives here (or in
`atomic.py`, `paths.py`) and takes either: `open_read`, `file_stamp`,
`list_names`, `list_stamped`, `walk_files`, `walk_sized`, `temp_leftovers`.
Only modules whose behaviour differs (locks, heartbeats, the clock, Parquet
I/O) test `is_local(path)`.

Simplified compared with Apache Hudi: Hudi's `StoragePath` is a URI that every
call hands to `HoodieStorage`; here the handle carries its storage, so a
function given a path needs no second argument.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import fnmatch
import io
import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Union

from lsm_lab.storage.base import AlreadyExistsError, Storage, StorageError, clean_key
from lsm_lab.storage.local import TMP_SUFFIX, LocalStorage
from lsm_lab.storage.location import check_local_options, check_options, is_remote, open_storage


@dataclass(frozen=True)
class StorageStat:
    """What `StoragePath.stat()` returns: the fields table code reads."""

    st_size: int
    st_mtime: float
    st_mtime_ns: int


class StoragePath:
    """A key below the root of a `Storage` (see the module docstring)."""

    __slots__ = ("key", "storage")

    def __init__(self, storage: Storage, key: str = "") -> None:
        self.storage = storage
        self.key = clean_key(key)

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoragePath, (self.storage, self.key))

    # -- pure path operations -----------------------------------------------------------
    def __truediv__(self, other: str | os.PathLike[str]) -> StoragePath:
        part = os.fspath(other)
        if part.startswith("/"):  # pathlib would re-root; a key of a table never does
            raise StorageError(f"{part!r} is an absolute path, not a key below {self}")
        return StoragePath(self.storage, posixpath.join(self.key, part) if self.key else part)

    def joinpath(self, *parts: str) -> StoragePath:
        out = self
        for p in parts:
            out = out / p
        return out

    @property
    def name(self) -> str:
        return posixpath.basename(self.key)

    @property
    def stem(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[:i] if i > 0 else name

    @property
    def suffix(self) -> str:
        name = self.name
        i = name.rfind(".")
        return name[i:] if 0 < i < len(name) - 1 else ""

    @property
    def parent(self) -> StoragePath:
        return StoragePath(self.storage, posixpath.dirname(self.key))

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.key.split("/")) if self.key else ()

    def with_name(self, name: str) -> StoragePath:
        return self.parent / name

    def relative_to(self, other: StoragePath) -> PurePosixPath:
        if other.key and not (self.key == other.key or self.key.startswith(other.key + "/")):
            raise ValueError(f"{self} is not below {other}")
        return PurePosixPath(self.key[len(other.key):].lstrip("/") if other.key else self.key)

    def resolve(self) -> StoragePath:
        return self

    def absolute(self) -> StoragePath:
        return self

    def as_posix(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return self.storage.url(self.key)

    def __repr__(self) -> str:
        return f"StoragePath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoragePath) and str(other) == str(self)

    def __hash__(self) -> int:
        return hash(str(self))

    def __lt__(self, other: StoragePath) -> bool:
        return str(self) < str(other)

    # -- requests -----------------------------------------------------------------------
    def exists(self) -> bool:
        return self.storage.head(self.key) is not None or self.is_dir()

    def is_file(self) -> bool:
        return bool(self.key) and self.storage.head(self.key) is not None

    def is_dir(self) -> bool:
        """A folder exists on an object store when some key lies below it (one LIST)."""
        files, folders = self.storage.list_dir(self.key)
        return bool(files or folders)

    def iterdir(self) -> Iterator[StoragePath]:
        """Files and folders directly below (one LIST; a missing folder is empty)."""
        files, folders = self.storage.list_dir(self.key)
        names = sorted([i.key for i in files] + folders)
        return iter([StoragePath(self.storage, k) for k in names])

    def glob(self, pattern: str) -> Iterator[StoragePath]:
        """Direct children whose name matches `pattern` (no `**`)."""
        return iter([p for p in self.iterdir() if fnmatch.fnmatchcase(p.name, pattern)])

    def stat(self) -> StorageStat:
        info = self.storage.head(self.key)
        if info is None:
            raise FileNotFoundError(str(self))
        ts = info.modified.timestamp() if isinstance(info.modified, datetime) else 0.0
        return StorageStat(info.size, ts, int(ts * 1e9))

    def read_bytes(self) -> bytes:
        return self.storage.read(self.key)

    def read_text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.read_bytes().decode(encoding, errors)

    def write_bytes(self, data: bytes) -> int:
        self.storage.write(self.key, bytes(data))
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def touch(self, exist_ok: bool = True) -> None:
        if exist_ok:
            self.storage.write(self.key, b"")
        else:
            self.storage.create(self.key, b"")

    def unlink(self, missing_ok: bool = False) -> None:
        if not missing_ok and self.storage.head(self.key) is None:
            raise FileNotFoundError(str(self))
        self.storage.delete(self.key)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Object stores have no folders: a folder appears with its first key."""

    def rmtree(self) -> int:
        """Delete every key below this folder; returns how many."""
        return self.storage.delete_prefix(self.key)

    def walk_files(self) -> list[str]:
        """Keys of every file below, relative to this folder (one recursive LIST)."""
        return [self.storage_relative(i.key) for i in self.storage.list_files(self.key, recursive=True)]

    def storage_relative(self, key: str) -> str:
        return key[len(self.key):].lstrip("/") if self.key else key

    # -- Parquet ------------------------------------------------------------------------
    def arrow(self) -> tuple[Any, str]:
        """(pyarrow file system, path in it) for ranged Parquet reads."""
        fs, _ = self.storage.arrow_filesystem()
        return fs, self.storage.arrow_path(self.key)


#: a location of a table's file: a local `Path` or a key on an object store
TablePath = Union[Path, StoragePath]  # noqa: UP007 - a runtime alias used in isinstance-free annotations


def is_local(path: object) -> bool:
    """True for a local path (str or PathLike), False for a `StoragePath`."""
    return not isinstance(path, StoragePath)


def path_of(value: TablePath | str | os.PathLike[str]) -> TablePath:
    """A `StoragePath` as it is, anything else as a local `Path` (no URI parsing: see `as_path`)."""
    return value if isinstance(value, StoragePath) else Path(value)


def as_path(location: str | os.PathLike[str] | Storage | StoragePath,
            storage_options: Mapping[str, Any] | None = None) -> TablePath:
    """The root of a table as a `Path` (local) or a `StoragePath` (object store).

    Accepts a plain path, `file://`, `s3://`, `gs://`, `az://` URIs (with
    `storage_options`, see `storage.location`), a `Storage`, or a path
    already converted."""
    check_options(storage_options)
    if isinstance(location, StoragePath):
        return location
    if isinstance(location, LocalStorage):
        return location.root
    if isinstance(location, Storage):
        return StoragePath(location, "")
    if isinstance(location, str) and (is_remote(location) or location.startswith("file:")
                                      or re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", location)):
        storage = open_storage(location, storage_options)
        return storage.root if isinstance(storage, LocalStorage) else StoragePath(storage, "")
    if isinstance(location, (str, os.PathLike)):
        check_local_options(location, storage_options)
        return Path(location)
    raise StorageError(f"a table location must be a path or a URI, not {type(location).__name__}")


def storage_of(path: TablePath | str | os.PathLike[str]) -> Storage:
    """The `Storage` a path lives on (a `LocalStorage` rooted at a local path)."""
    if isinstance(path, StoragePath):
        return path.storage if not path.key else path.storage.child(path.key)
    return LocalStorage(path)


def create_bytes(path: StoragePath, data: bytes, on_exists: Any) -> None:
    """Create-if-absent on an object store; `on_exists(path)` is raised when another writer won."""
    try:
        path.storage.create(path.key, bytes(data))
    except AlreadyExistsError:
        raise on_exists(path) from None


@contextmanager
def open_read(path: TablePath | str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to read `path` from: the open local file (read as it is consumed), or the whole
    object in memory after one GET on an object store (FileNotFoundError when absent)."""
    if isinstance(path, StoragePath):
        with io.BytesIO(path.read_bytes()) as buf:
            yield buf
        return
    with open(path, "rb") as fh:
        yield fh


def file_stamp(path: TablePath | str | os.PathLike[str], size: int | None = None) -> tuple[int, int]:
    """(size, modification time in ns) that identify the bytes of `path`, for caches (FileNotFoundError).

    On an object store a size from a listing is enough (a data file's key is never reused for other
    bytes): no HEAD is sent and the time is 0.  A local file is always stat'ed (one system call)."""
    if isinstance(path, StoragePath):
        if size is not None:
            return size, 0
        st = path.stat()
        return st.st_size, st.st_mtime_ns
    los = os.stat(path)
    return los.st_size, los.st_mtime_ns


def list_stamped(folder: TablePath) -> dict[str, tuple[int, str]]:
    """Name → (size, change stamp) of the files directly in `folder` (empty when it is missing).

    One LIST on an object store (the stamp is the etag), one `scandir` locally (the stamp is mtime_ns)."""
    if isinstance(folder, StoragePath):
        prefix = folder.key.rstrip("/") + "/" if folder.key else ""
        return {info.key[len(prefix):]: (info.size, info.etag)
                for info in folder.storage.list_files(folder.key) if "/" not in info.key[len(prefix):]}
    try:
        with os.scandir(folder) as it:
            return {e.name: (st.st_size, str(st.st_mtime_ns)) for e in it if e.is_file()
                    for st in (e.stat(),)}
    except (FileNotFoundError, NotADirectoryError):
        return {}


def temp_leftovers(folder: TablePath, name: str) -> list[Path]:
    """Temp files `.<name>.<random>.tmp` a killed local writer left beside `name` in `folder`.

    Always empty on an object store: a PUT is whole or absent, there are no temp files (and no LIST is sent)."""
    if isinstance(folder, StoragePath):
        return []
    return sorted(folder.glob(f".{name}.*{TMP_SUFFIX}"))


def list_names(folder: TablePath) -> list[str]:
    """Names of the entries directly in `folder` (empty when it is missing); one LIST on a store."""
    if isinstance(folder, StoragePath):
        return [p.name for p in folder.iterdir()]
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def prefetch(folder: TablePath) -> bool:
    """On an object store inside a request scope (`storage.scope`): one recursive LIST of `folder` answers
    the later listings below it; locally, and outside a scope, nothing is done (False)."""
    return isinstance(folder, StoragePath) and folder.storage.prefetch(folder.key)


def walk_sized(folder: TablePath) -> list[tuple[str, str, int | None]]:
    """(relative folder, file name, size or None) of every file below `folder`, hidden folders (a name
    starting with `.`, like `.hoodie`) skipped.

    On an object store one recursive LIST, which gives each size (no HEAD per file); locally an
    `os.walk` that never enters a hidden folder (sizes None: a `stat` each would cost a system call)."""
    out: list[tuple[str, str, int | None]] = []
    if isinstance(folder, StoragePath):
        for info in folder.storage.list_files(folder.key, recursive=True):
            d, _, n = folder.storage_relative(info.key).rpartition("/")
            if not any(part.startswith(".") for part in d.split("/") if part):
                out.append((d, n, info.size))
        return out
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        rel = os.path.relpath(root, folder)
        d = "" if rel == "." else rel.replace(os.sep, "/")
        out.extend((d, n, None) for n in files)
    return out


def walk_files(folder: TablePath) -> list[tuple[str, str]]:
    """(relative folder, file name) of every file below `folder`, one recursive LIST on a store."""
    if isinstance(folder, StoragePath):
        out = []
        for rel in folder.walk_files():
            d, _, n = rel.rpartition("/")
            out.append((d, n))
        return out
    result: list[tuple[str, str]] = []
    for root, _, files in os.walk(folder):
        rel = os.path.relpath(root, folder)
        d = "" if rel == "." else rel.replace(os.sep, "/")
        result.extend((d, n) for n in files)
    return result


__all__ = ["StoragePath", "StorageStat", "TablePath", "as_path", "create_bytes", "file_stamp", "is_local",
           "list_names", "list_stamped", "open_read", "path_of", "prefetch", "storage_of", "temp_leftovers", "walk_files",
           "walk_sized"]
