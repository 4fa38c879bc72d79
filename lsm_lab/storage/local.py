"""The local file system as a `Storage` backend.

    write    temp file ── fsync ── rename over the key        (readers: old or new)
    create   temp file ── fsync ── link(temp, key) ── unlink  (link fails if the key exists)
    replace  open key ── flock ── same inode? same etag? ── temp ── rename

A local etag is `inode-mtime_ns-size`: every write goes through a new temp file,
so a replaced file always has a new inode and the etag changes even when the
bytes and the clock tick do not.  `replace` takes an `flock` on the file it is
about to replace and checks, under the lock, that the path still names that
inode — so two processes racing to replace the same version cannot both win.

Writes and deletes never follow a symbolic link out of the root: the folder of
a key must resolve inside the resolved root (`localguard.checked`, UnsafePathError
otherwise); a link as the key's own name is replaced or removed, never followed.

Temp files are named `.<name>.<random>.tmp` beside the target (the same file
system, so link and rename are atomic); `tmp_files()` lists leftovers of a
killed process for the next writer to delete.

Simplified compared with Apache Hudi: Hudi's local file system goes through
Hadoop's `LocalFileSystem` (with `.crc` side files); lsm_lab uses plain `os`.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import errno
import fcntl
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.fs

from lsm_lab.storage import localguard
from lsm_lab.storage.base import (
    AlreadyExistsError,
    ObjectInfo,
    RequestCounts,
    Storage,
    StorageError,
    VersionMismatchError,
    clean_key,
)

TMP_SUFFIX = ".tmp"


def temp_path(target: Path) -> Path:
    """The temporary sibling `.<name>.<random>.tmp` a file is written under before it gets its name.

    The one spelling of temp files: `atomic.py` uses it too, and `tmp_files()` finds leftovers by it.
    """
    return target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}{TMP_SUFFIX}")


def publish_new(tmp: Path, target: Path) -> bool:
    """Give the finished file `tmp` the name `target` unless `target` exists; False if it does.

    The one "create if absent" of the local file system (`LocalStorage.create` and
    `atomic.publish` both use it): `link` fails when the name is taken, so of two
    writers exactly one wins.  Without hard links (some FUSE mounts) it falls
    back to "check, then rename": atomic for readers, no longer exclusive.
    """
    try:
        os.link(tmp, target)
    except FileExistsError:
        return False
    except OSError:
        if os.path.lexists(target):
            return False
        os.replace(tmp, target)
    return True


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(key, st.st_size, _etag(st), datetime.fromtimestamp(st.st_mtime, UTC))


class LocalStorage(Storage):
    """A folder on this machine."""

    def __init__(self, root: str | os.PathLike[str], *, counts: RequestCounts | None = None) -> None:
        self.root = Path(root).absolute()
        self.uri = str(self.root)
        self.counts = counts if counts is not None else RequestCounts()

    def __repr__(self) -> str:
        return f"LocalStorage({self.uri!r})"

    def path(self, key: str) -> Path:
        """The local path of `key`."""
        key = clean_key(key)
        return self.root / key if key else self.root

    def child(self, key: str) -> LocalStorage:
        return LocalStorage(self.path(key), counts=self.counts)

    # -- reads -----------------------------------------------------------------------------
    def list_files(self, prefix: str = "", *, recursive: bool = False) -> list[ObjectInfo]:
        self.counts.add("LIST")
        base = clean_key(prefix)
        out: list[ObjectInfo] = []
        stack = [base]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(self.path(folder)))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for e in entries:
                key = f"{folder}/{e.name}" if folder else e.name
                if e.is_dir(follow_symlinks=False):
                    if recursive:
                        stack.append(key)
                elif e.is_file():
                    out.append(_info(key, e.stat()))
        out.sort(key=lambda i: i.key)
        return out

    def list_folders(self, prefix: str = "") -> list[str]:
        self.counts.add("LIST")
        base = clean_key(prefix)
        try:
            entries = list(os.scandir(self.path(base)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(f"{base}/{e.name}" if base else e.name for e in entries if e.is_dir(follow_symlinks=False))

    def read(self, key: str) -> bytes:
        self.counts.add("GET")
        return self.path(key).read_bytes()

    def read_versioned(self, key: str) -> tuple[bytes, ObjectInfo]:
        self.counts.add("GET")
        with open(self.path(key), "rb") as fh:  # fstat of the open file: the version of exactly these bytes
            return fh.read(), _info(clean_key(key), os.fstat(fh.fileno()))

    def read_range(self, key: str, start: int, end: int) -> bytes:
        self.counts.add("GET")
        with open(self.path(key), "rb") as fh:
            fh.seek(start)
            return fh.read(max(0, end - start))

    def head(self, key: str) -> ObjectInfo | None:
        self.counts.add("HEAD")
        try:
            st = self.path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _info(clean_key(key), st)

    # -- writes ----------------------------------------------------------------------------
    def _guarded(self, key: str) -> Path:
        """The local path of `key`, when its folder resolves inside the root (no link out of it on the way)."""
        return localguard.checked(self.path(key), root=self.root)

    def _temp(self, target: Path, data: bytes) -> Path:
        localguard.make_local_folders(target.parent, root=self.root)
        tmp = temp_path(target)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def write(self, key: str, data: bytes) -> ObjectInfo:
        self.counts.add("PUT")
        target = self._guarded(key)
        tmp = self._temp(target, data)
        info = _info(clean_key(key), tmp.stat())  # rename keeps inode and mtime: this is the version we wrote
        try:
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return info

    def create(self, key: str, data: bytes) -> ObjectInfo:
        self.counts.add("PUT")
        target = self._guarded(key)
        tmp = self._temp(target, data)
        info = _info(clean_key(key), tmp.stat())
        try:
            if not publish_new(tmp, target):
                raise AlreadyExistsError("already exists; another writer created it first", path=target)
        finally:
            tmp.unlink(missing_ok=True)
        return info

    def replace(self, key: str, data: bytes, *, expected: ObjectInfo) -> ObjectInfo:
        self.counts.add("PUT")
        target = self._guarded(key)
        while True:
            try:
                fd = os.open(target, os.O_RDONLY)
            except FileNotFoundError:
                raise VersionMismatchError("was deleted since it was read", path=target) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    current = os.stat(target)
                except FileNotFoundError:
                    raise VersionMismatchError("was deleted since it was read", path=target) from None
                if current.st_ino != os.fstat(fd).st_ino:
                    continue  # replaced while we waited for the lock: look again
                if _etag(current) != expected.etag:
                    raise VersionMismatchError("was replaced since it was read", path=target)
                tmp = self._temp(target, data)
                info = _info(clean_key(key), tmp.stat())
                try:
                    os.replace(tmp, target)
                finally:
                    tmp.unlink(missing_ok=True)
                return info
            finally:
                os.close(fd)  # closing drops the flock

    def delete(self, key: str) -> None:
        self.counts.add("DELETE")
        try:
            self._guarded(key).unlink()
        except (FileNotFoundError, NotADirectoryError):
            pass
        except IsADirectoryError:
            raise StorageError("is a folder, not a file", path=self.path(key)) from None
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise StorageError(f"cannot delete: {exc.strerror}", path=self.path(key)) from None

    def delete_prefix(self, prefix: str) -> int:
        n = super().delete_prefix(prefix)
        # remove the now empty folders, deepest first (object stores have no folders to remove)
        top = self.path(prefix)
        if top.is_dir():
            for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
                try:
                    folder.rmdir()
                except OSError:
                    pass
            try:
                top.rmdir()
            except OSError:
                pass
        return n

    def tmp_files(self, prefix: str = "") -> list[ObjectInfo]:
        """Temp files left by a process killed between writing and renaming/linking."""
        return [i for i in self.list_files(prefix, recursive=True) if i.name.startswith(".") and i.name.endswith(TMP_SUFFIX)]

    # -- Parquet ---------------------------------------------------------------------------
    def arrow_filesystem(self) -> tuple[pyarrow.fs.FileSystem, str]:
        return pyarrow.fs.LocalFileSystem(), str(self.root)
