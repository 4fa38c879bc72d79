"""The path guard: no value read from table metadata may lead outside the table.

Plans, commit metadata, markers, heartbeats, savepoints and `hoodie.properties`
all hold strings that lsm_lab turns into paths: an instant time becomes a
marker folder, a clean plan's `filePath` is unlinked, a compaction plan's
`partitionPath` and `fileId` become the folder and name of a new base file,
`hoodie.timeline.path` becomes the folder every instant is written to.  A
damaged or hostile file could make any of them climb out of the table
(`../../..`, an absolute path, a symlink).  Every such value passes through one
of the functions below *before* anything is read, written or deleted:

    metadata value ──► instant_time()   17 (or 14) digits, nothing else
                   ──► name()           one path component: no '/', '\\', NUL, '.', '..'
                   ──► relative()       components as above, joined by '/'
                   ──► inside(base, …)  the resolved path (symlinks followed) lies in `base`
                          │
                          └─ otherwise CorruptTableError(file=<the metadata file>, field=<the field>)

The string checks never touch the disk (the read path checks thousands of
write stats); `inside` resolves symlinks and is used where something is
deleted or a folder is chosen.  This module imports only `errors` and the
standard library (and `storage` for object-store keys), so every layer can use it.

Simplified compared with Apache Hudi: Hudi resolves metadata paths against the
table's `StoragePath` and trusts them; lsm_lab refuses anything that does not
stay inside the table instead.

Taught in: no chapter (the path guard of every metadata-to-path site; docs/FORMAT.md, Validation on read)
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from lsm_lab.errors import CorruptTableError
from lsm_lab.storage import StoragePath

_INSTANT = re.compile(r"\d{14}(?:\d{3})?")
MAX_NAME_BYTES = 255  # a longer folder or file name fails with OSError on every common file system


def _fail(value: Any, problem: str, file: object, field: str) -> CorruptTableError:
    shown = repr(value) if not isinstance(value, str) or len(value) < 120 else repr(value[:117] + "...")
    return CorruptTableError(f"{shown} {problem}", path=file, field=field)


def is_instant_time(value: Any) -> bool:
    return isinstance(value, str) and _INSTANT.fullmatch(value) is not None


def instant_time(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "instant time") -> str:
    """`value` when it is an instant time (`yyyyMMddHHmmss[SSS]`), else CorruptTableError."""
    if not is_instant_time(value):
        raise _fail(value, "is not an instant time (14 or 17 digits)", file, field)
    return value


def name(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "file name") -> str:
    """`value` when it is one safe path component (a file or folder name), else CorruptTableError."""
    if not isinstance(value, str) or not value:
        raise _fail(value, "is not a file name", file, field)
    if "/" in value or "\\" in value or "\x00" in value or value in (".", ".."):
        raise _fail(value, "is not a single file name inside the table (it holds a separator or is '.'/'..')",
                    file, field)
    if len(value.encode("utf-8", errors="surrogatepass")) > MAX_NAME_BYTES:
        raise _fail(value, f"is longer than {MAX_NAME_BYTES} bytes", file, field)
    return value


def relative(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "path",
             allow_empty: bool = False) -> str:
    """`value` when it is a relative path that stays below its root ('a/b/c', no '..', not absolute)."""
    if not isinstance(value, str):
        raise _fail(value, "is not a path", file, field)
    if value == "":
        if allow_empty:
            return value
        raise _fail(value, "is an empty path", file, field)
    if value.startswith("/") or "\\" in value:
        raise _fail(value, "is not a relative path inside the table", file, field)
    for piece in value.split("/"):
        if piece in ("", ".", ".."):
            raise _fail(value, "leaves its folder (an empty, '.' or '..' component)", file, field)
        name(piece, file=file, field=field)
    return value


def partition(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "partitionPath") -> str:
    """A partition path ('' for the table root): relative, and no hidden folder (no component starting '.')."""
    relative(value, file=file, field=field, allow_empty=True)
    if any(piece.startswith(".") for piece in value.split("/") if piece):
        raise _fail(value, "names a hidden folder, not a partition", file, field)
    return value


def data_file(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "path") -> tuple[str, str]:
    """(partition, file name) of a data file path relative to the table ('p1/p2/name' or 'name')."""
    relative(value, file=file, field=field)
    folder, _, leaf = value.rpartition("/")
    partition(folder, file=file, field=field)
    return folder, leaf


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def inside(base: str | os.PathLike[str] | StoragePath, value: str | os.PathLike[str] | StoragePath, *,
           file: str | os.PathLike[str] | StoragePath | None = None, field: str = "path",
           root: str | os.PathLike[str] | StoragePath | None = None) -> Any:
    """`base / value` with symlinks resolved, when it lies inside `root` (default: `base`); else CorruptTableError.

    `value` may be absolute (it must then lie inside `root` as it is).  On an object store
    (`base` a `StoragePath`) there are no symlinks: the key must lie below the root's key.
    """
    if isinstance(base, StoragePath):
        return _inside_store(base, value, file=file, field=field, root=root)
    if isinstance(value, StoragePath) or isinstance(root, StoragePath):
        raise _fail(str(value), "is an object-store key, not a path of this local table", file, field)
    if not isinstance(value, str | os.PathLike) or "\x00" in os.fspath(value):
        raise _fail(value, "is not a path", file, field)
    base_real = os.path.realpath(base)
    root_real = os.path.realpath(root) if root is not None else base_real
    target = os.path.realpath(os.path.join(base_real, os.fspath(value)))
    if not _within(target, root_real):
        raise _fail(os.fspath(value), f"resolves to {target}, outside the table folder {root_real}", file, field)
    return Path(target)


def _inside_store(base: StoragePath, value: object, *, file: object, field: str, root: object) -> StoragePath:
    """`inside` on an object store: no symlinks, so the key must simply lie below the root's key."""
    top = root if isinstance(root, StoragePath) else base
    target: StoragePath | None = None
    if isinstance(value, StoragePath):
        target = value
    elif isinstance(value, str):
        target = base / relative(value, file=str(file) if file is not None else None, field=field)
    if target is None or target.storage.uri != top.storage.uri \
            or not (target.key == top.key or not top.key or target.key.startswith(top.key + "/")):
        raise _fail(str(value), f"is not below the table {top}", file, field)
    return target


def folder_to_remove(base: str | os.PathLike[str], folder: str | os.PathLike[str], *, parent: str) -> Path | None:
    """The folder `base/.hoodie/<parent>/<x>` lsm_lab created, if it is safe to remove recursively, else None.

    It must be a real folder (not a symlink) directly inside `.hoodie/<parent>`,
    itself a real folder inside the table; anything else is left alone.
    """
    folder = Path(folder)
    container = Path(base) / ".hoodie" / parent
    if folder.parent != container or not folder.name or folder.is_symlink() or not folder.is_dir():
        return None
    if container.is_symlink() or Path(base, ".hoodie").is_symlink():
        return None
    if not _within(os.path.realpath(folder), os.path.realpath(container)):
        return None
    return folder


__all__ = ["data_file", "folder_to_remove", "inside", "instant_time", "is_instant_time", "name", "partition",
           "relative"]
