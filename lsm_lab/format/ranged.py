"""Reading a data file on an object store: one GET of the whole object, or ranged GETs of the parts a read needs.

A local file is read by pyarrow through the operating system; an object on S3, GCS or Azure is
bytes behind requests, and each request costs a round trip, so how a file is fetched is chosen
by what the read needs:

    whole read (a scan, a merge)       one GET of the object ─► pa.BufferReader      (object_source)
    a few row groups (a point lookup)  ranged GETs, one per read ─► RangedObject      (object_source(ranged=True))
    only the footer                    one GET of the last 64 KiB ─► tail_bytes       (a second GET
                                       when the footer is larger: its length is in the last 8 bytes)

`RangedObject` is a read-only file whose every `read` is one counted request
(`storage.counts`); pyarrow's `pre_buffer` coalesces the column chunks a read needs into few of
them.  Benchmarks (benchmarks/bench_storage.py) found one whole GET fastest for whole-file reads.

Simplified compared with Apache Hudi: Hudi reads objects through Hadoop's file systems (S3A,
GCS, ABFS) with their own read-ahead and ranged-read policies; here the choice is made per
read by the caller (`ranged=`), and the bytes of a whole read are held in memory.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError
from lsm_lab.storage import StoragePath


class RangedObject(io.RawIOBase):
    """A read-only file over ranged GETs of one object (each `read` is one counted request)."""

    def __init__(self, path: StoragePath, size: int | None = None) -> None:
        self.path = path
        self._size = size
        self._pos = 0

    def size(self) -> int:
        if self._size is None:
            info = self.path.storage.head(self.path.key)
            if info is None:
                raise FileNotFoundError(str(self.path))
            self._size = info.size
        return self._size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self.size() if whence == 2 else 0}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self.size() if n is None or n < 0 else min(self.size(), self._pos + n)
        if end <= self._pos:
            return b""
        data = self.path.storage.read_range(self.path.key, self._pos, end)
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def object_source(source: Any, ranged: bool, size: int | None = None) -> Any:
    """A Parquet source pyarrow can read: an object-store key becomes one whole GET, or ranged GETs
    (`ranged`; `size` spares a HEAD); anything else is returned as it is."""
    if not isinstance(source, StoragePath):
        return source
    if ranged:
        return pa.PythonFile(RangedObject(source, size), mode="r")
    try:
        return pa.BufferReader(source.read_bytes())
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise CorruptFileError(f"cannot read: {exc}", path=str(source)) from None


def tail_bytes(path: StoragePath, size: int | None = None, guess: int = 64 * 1024) -> bytes:
    """The last bytes of an object, its whole Parquet footer included: one ranged GET (two when the
    footer is larger than `guess`)."""
    storage = path.storage
    if size is None:
        tail, size = storage.read_suffix(path.key, guess)  # one GET, no HEAD
    else:
        tail = storage.read_range(path.key, max(0, size - guess), size)
    if len(tail) >= 8 and tail[-4:] == b"PAR1":
        need = int.from_bytes(tail[-8:-4], "little") + 8
        if need > len(tail) and need <= size:
            tail = storage.read_range(path.key, size - need, size)
    return tail


def read_tail(path: StoragePath, size: int | None = None, guess: int = 64 * 1024) -> pq.FileMetaData:
    """The Parquet footer of an object with one ranged GET (two when the footer is larger than `guess`)."""
    return pq.read_metadata(pa.BufferReader(tail_bytes(path, size, guess)))


__all__ = ["RangedObject", "object_source", "read_tail", "tail_bytes"]
