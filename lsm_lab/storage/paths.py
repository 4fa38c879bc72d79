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

Symbolic links planted in a local table.  A link at `.hoodie/.heartbeat/<instant>`,
`.hoodie/.temp`, `.hoodie/.key_index`, `.hoodie` or a partition folder must not
turn a write of lsm_lab into a write somewhere else on the machine.  Every local
write, create, truncate, rename-into and delete of a table file goes through the
guard below (atomic.py, the Parquet writer, heartbeats, markers, locks, key-index
sidecars, the timeline, clean and rollback):

    path ──► table_root(path)     the folder before the first '.hoodie' component,
                                  else the outermost ancestor holding a '.hoodie'
         ──► checked(path)        the folder of `path` (its deepest existing part)
                                  resolves inside the resolved table root
         ──► make_folders(f)      the same check, then mkdir: never creates through a link out
         ──► open_nofollow(p, …)  O_NOFOLLOW on the final name: a link there is refused, not followed
         ──► unlink(p)            checked, then unlink (a link as final name: the link goes, not its target)
                          │
                          └─ otherwise UnsafePathError(path=<the link>, "… points to <target>, outside …")

A link that resolves *inside* the table is harmless and allowed (writes land in
the table); the table root itself may be a link.  Rename and link onto a final
name never follow a link there (the link itself is replaced or the name is
taken), so only folders and files opened by name need the checks.

Reads: a data or metadata file is read through a link wherever it points
(reading changes nothing), but lsm_lab never *chooses* a folder through a link
out of the table: `inside` refuses a `.hoodie` or timeline folder that leads out
(at open, UnsafePathError naming the link), listings do not enter linked
folders, and a committed file missing because its partition folder is such a
link is reported as UnsafePathError (filegroup/fsview.py), not as a lost file.
The checks are made just before each operation; they do not defend against a
process racing to swap a folder for a link in between.
Object stores (`StoragePath`) have no links: nothing to check there, so `check_folder`,
`make_folders`, `touch`, `unlink` and `remove_tree` take either kind and callers never branch.

Simplified compared with Apache Hudi: Hudi resolves metadata paths against the
table's `StoragePath` and trusts them; lsm_lab refuses anything that does not
stay inside the table instead.

Taught in: no chapter (the path guard of every metadata-to-path site; docs/FORMAT.md, Validation on read)
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, cast

from lsm_lab.errors import CorruptTableError, UnsafePathError
from lsm_lab.storage import StoragePath, localguard

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
    return cast("str", value)


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
    return cast("str", value)


def data_file(value: Any, *, file: str | os.PathLike[str] | None = None, field: str = "path") -> tuple[str, str]:
    """(partition, file name) of a data file path relative to the table ('p1/p2/name' or 'name')."""
    relative(value, file=file, field=field)
    folder, _, leaf = value.rpartition("/")
    partition(folder, file=file, field=field)
    return folder, leaf


_within = localguard.within


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
        lexical = os.path.normpath(os.path.join(base_real, os.fspath(value)))
        if _within(lexical, root_real):  # the value stays in the table: a symbolic link on the way leaves it
            top = Path(root_real)
            probe = Path(lexical)
            while not os.path.lexists(probe) and probe != top:
                probe = probe.parent
            raise _unsafe(top, probe, target, root_real, Path(lexical))
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


# --------------------------------------------------------------------------- writes on a local table
# (the guard itself lives in localguard.py, below the storage package that uses it too)
META_FOLDER = localguard.META_FOLDER
table_root = localguard.table_root
checked = localguard.checked
_unsafe = localguard.unsafe


def check_folder(path: str | os.PathLike[str] | StoragePath) -> None:
    """Raise UnsafePathError when the folder of a local `path` is a link out of its table (`checked`).

    Nothing to check on an object store (a `StoragePath`): it has no links."""
    if not isinstance(path, StoragePath):
        checked(path)


def make_folders(folder: str | os.PathLike[str] | StoragePath, *,
                 root: str | os.PathLike[str] | None = None) -> Any:
    """`mkdir -p folder`, refusing (UnsafePathError) when an existing part of it is a link out of its table.

    An object-store folder (`StoragePath`) is returned as is: it has no folders and no links.
    """
    if isinstance(folder, StoragePath):
        return folder
    full = checked(Path(os.path.abspath(folder)) / "_", root=root).parent  # checks the folder's existing part
    full.mkdir(parents=True, exist_ok=True)
    return full


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = 0o644, *,
                  root: str | os.PathLike[str] | None = None) -> int:
    """`os.open(path, flags | O_NOFOLLOW)` after `checked(path)`; a symbolic link as final name: UnsafePathError."""
    full = checked(path, root=root)
    try:
        return os.open(full, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError:
        if os.path.islink(full):
            raise UnsafePathError(f"is a symbolic link to {os.readlink(full)!r}; lsm_lab does not open a table "
                                  "file it writes through a link", path=full) from None
        raise


def touch(path: str | os.PathLike[str] | StoragePath, *, root: str | os.PathLike[str] | None = None) -> Any:
    """Create the empty file `path` if it does not exist (never through a link, never updating a link's target)."""
    if isinstance(path, StoragePath):
        path.touch(exist_ok=True)
        return path
    os.close(open_nofollow(path, os.O_WRONLY | os.O_CREAT, root=root))
    return Path(path)


def unlink(path: str | os.PathLike[str] | StoragePath, *, missing_ok: bool = True,
           root: str | os.PathLike[str] | None = None) -> bool:
    """Delete the file `path` after `checked(path)`; True if it was there (a link as final name: the link goes).

    On an object store (`StoragePath`) a plain DELETE (True: no HEAD is spent to know whether it was there).
    """
    if isinstance(path, StoragePath):
        path.unlink(missing_ok=missing_ok)
        return True
    full = checked(path, root=root)
    try:
        os.unlink(full)
    except FileNotFoundError:
        if not missing_ok:
            raise
        return False
    return True


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


def remove_tree(base: str | os.PathLike[str] | StoragePath, folder: str | os.PathLike[str] | StoragePath, *,
                parent: str) -> None:
    """Delete the folder `base/.hoodie/<parent>/<x>` lsm_lab created, with everything below it.

    Locally only a real folder `folder_to_remove` accepts (never a link, nor anything through one); on an
    object store every key below the folder (one LIST, one DELETE each: a store has no links)."""
    if isinstance(folder, StoragePath):
        folder.rmtree()
        return
    if isinstance(base, StoragePath):
        raise _fail(str(folder), "is a local path, not a key of this object-store table", base, "folder")
    local = folder_to_remove(base, folder, parent=parent)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)


__all__ = ["check_folder", "checked", "data_file", "folder_to_remove", "inside", "instant_time", "is_instant_time",
           "make_folders", "name", "open_nofollow", "partition", "relative", "remove_tree", "table_root", "touch", "unlink"]
