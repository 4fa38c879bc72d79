"""Atomic files: a new file appears whole or not at all, and is never overwritten.

Every file lsm_lab commits to (instant files, data files, v1 logs,
hoodie.properties, the archive's manifests) is first written under a
temporary name in its final folder, then published in one system call:

    write ──► <folder>/.<name>.<random>.tmp ──fsync?──► link(tmp, <name>) ──► unlink(tmp)
                                                        └ fails if <name> exists: the caller's typed error

    replace ──► <folder>/.<name>.<random>.tmp ──fsync?──► rename(tmp, <name>)   (pointers: _version_, properties)

`link` is the compare-and-set of a file system: of two processes publishing the
same name, exactly one succeeds, and a reader sees either no file or the whole
file, never a prefix.  A process killed at any instant leaves at most a
`.…tmp` file, which no listing takes for data (names are parsed strictly,
see format/naming.py).  On a file system without hard links (some FUSE mounts)
`create` falls back to "check, then rename", which is atomic for readers but
no longer exclusive between writers.

Inside a local table the folder of the final name must resolve inside the
table (`paths.checked`; `mkdir=True` uses `paths.make_folders`): a symbolic
link at `.hoodie`, `.hoodie/timeline`, `.hoodie/.key_index` or a partition
folder pointing out of the table raises `UnsafePathError` before anything is
written.  The temp file is opened with O_EXCL (never through a link), and
link/rename onto the final name replace or refuse a link there, never follow it.

`create_file` and `replace_file` are the one atomic create and the one atomic
replace of a small file for every table, local or not: callers never branch.
On an object store (a `StoragePath`) there is no temp file: `create_file` is
one PUT with `If-None-Match: *` (exactly one writer wins, the object appears
whole; the loser gets the caller's typed error as locally) and `replace_file`
one plain PUT (atomic for readers); `fsync` and `mkdir` mean nothing there.
`creating` / `replacing` (a temp path for a writer that needs a file name) are
local only.

Simplified compared with Apache Hudi: Hudi relies on the storage's own
"create if absent" (HDFS) or on a lock provider for object stores; lsm_lab
uses POSIX link/rename on a local file system.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lsm_lab.errors import LsmLabError
from lsm_lab.storage import StoragePath, TablePath, create_bytes, paths
from lsm_lab.storage.local import publish_new, temp_path

ExistsError = Callable[[Any], LsmLabError]  # called with the final path (a `Path` or a `StoragePath`)


def _default_exists(path: TablePath) -> LsmLabError:
    return LsmLabError("refusing to overwrite an existing file", path=path)


def temp_name(path: Path) -> Path:
    """The temporary sibling a file is written under before it is published (`storage.local.temp_path`)."""
    return temp_path(path)


def publish(tmp: Path, path: Path, on_exists: ExistsError = _default_exists) -> None:
    """Give the finished temporary file `tmp` its final name `path`, failing if `path` exists."""
    if not publish_new(tmp, path):
        raise on_exists(path)


@contextmanager
def creating(path: str | os.PathLike[str], *, on_exists: ExistsError = _default_exists,
             mkdir: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success publish it as `path`, which must not exist yet.

    The temporary file is removed in every case; if `path` already exists the
    error built by `on_exists(path)` is raised and the existing file is untouched.
    """
    final = paths.checked(path)  # no link out of the table on the way to `path`
    if mkdir:
        paths.make_folders(final.parent)
    tmp = temp_name(final)
    try:
        yield tmp
        publish(tmp, final, on_exists)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def replacing(path: str | os.PathLike[str], *, mkdir: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success rename it over `path` (readers see old or new, whole)."""
    final = paths.checked(path)  # no link out of the table on the way to `path`
    if mkdir:
        paths.make_folders(final.parent)
    tmp = temp_name(final)
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def _write(tmp: Path, data: bytes, fsync: bool) -> None:
    with open(tmp, "xb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def create_file(path: TablePath | str | os.PathLike[str], data: bytes, *,
                on_exists: ExistsError = _default_exists, fsync: bool = True, mkdir: bool = False) -> None:
    """Create `path` holding `data`, atomically; `on_exists(path)` is raised if it already exists.

    Local: temp file + `link` (`fsync` first unless False; `mkdir` makes the folder, never through a link
    out of the table).  Object store: one `PUT If-None-Match: *`."""
    if isinstance(path, StoragePath):
        create_bytes(path, data, on_exists)
        return
    with creating(path, on_exists=on_exists, mkdir=mkdir) as tmp:
        _write(tmp, data, fsync)


def replace_file(path: TablePath | str | os.PathLike[str], data: bytes, *, fsync: bool = True,
                 mkdir: bool = False) -> None:
    """Write `path` holding `data`, atomically replacing any previous content.

    Local: temp file + `rename` (a link as final name is replaced, never followed).  Object store: one PUT."""
    if isinstance(path, StoragePath):
        path.write_bytes(data)
        return
    with replacing(path, mkdir=mkdir) as tmp:
        _write(tmp, data, fsync)


__all__ = ["create_file", "creating", "publish", "replace_file", "replacing", "temp_name"]
