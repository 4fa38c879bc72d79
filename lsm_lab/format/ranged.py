"""Reading a data file on an object store: one GET of the whole object, or ranged GETs of the parts a read needs.

A local file is read by pyarrow through the operating system; an object on S3, GCS or Azure is
bytes behind requests, and each request costs a round trip, so how a file is fetched is chosen
by what the read needs:

    whole read (a scan, a merge)       one GET of the object ─► pa.BufferReader      (object_source)
    a few row groups (a point lookup)  ranged GETs, one per read ─► RangedObject      (object_source(ranged=True))
    a lookup's small files (≤ 8 MiB)   one GET each, in parallel, held for the lookup ─► whole_objects
    (or larger, when its keys would     (`whole_pays`: the bytes a footer GET and a ranged GET would spare
     read most of the object anyway)     are worth less than the request they cost)
    only the footer                    one GET of the tail ─► tail_bytes              (a second GET
                                       when the footer is larger: its length is in the last 8 bytes;
                                       the tail asked for grows with the object, `footer_guess`)

`RangedObject` is a read-only file whose every `read` is one counted request
(`storage.counts`); pyarrow's `pre_buffer` coalesces the column chunks a read needs into few of
them.  Benchmarks (benchmarks/bench_storage.py) found one whole GET fastest for whole-file reads.

Simplified compared with Apache Hudi: Hudi reads objects through Hadoop's file systems (S3A,
GCS, ABFS) with their own read-ahead and ranged-read policies; here the choice is made per
read by the caller (`ranged=`), and the bytes of a whole read are held in memory.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError
from lsm_lab.storage import StoragePath


class _ReadOnlyObject(io.RawIOBase):
    """The file protocol both readers share: a position, `seek`/`tell`, `readinto`; `size()` and `read` are theirs."""

    _pos = 0

    def size(self) -> int:
        raise NotImplementedError

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

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class RangedObject(_ReadOnlyObject):
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

    def read(self, n: int = -1) -> bytes:
        end = self.size() if n is None or n < 0 else min(self.size(), self._pos + n)
        if end <= self._pos:
            return b""
        data = read_range(self.path, self._pos, end)
        self._pos += len(data)
        return data


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


#: a lookup fetches a data file of at most this many bytes whole, with one GET (footer and row groups),
#: rather than a footer GET and ranged GETs; `whole_objects` holds at most WHOLE_BUDGET bytes at once
WHOLE_MAX = 8 << 20
WHOLE_BUDGET = 64 << 20
WHOLE_THREADS = 8  # GETs in flight at once (they wait on the network, not on the CPU)



def whole_pays(size: int, keys: int | None) -> bool:
    """Whether a lookup of `keys` keys (those the key index cannot rule out) in an object of `size` bytes
    whose footer is not cached fetches it whole: one GET instead of a footer GET and a ranged GET.
    `keys` None: not known (no key index entry), so only an object of at most WHOLE_MAX bytes.

        expected ranged bytes   the tail (`footer_guess`) + the span from the first row group hit to the last,
                                for k keys spread evenly over a sorted file size x (k - 1) / (k + 1)
        whole                   when size - expected ranged bytes <= WHOLE_MAX, i.e. the bytes a ranged read
                                would spare are at most what a lookup already gives for one request (the
                                coalescing of row groups in `probe_file` uses the same exchange rate)

    An 11 MB base file holding 8 of 100 looked-up keys: ranged reads 0.35 MB + ~8.6 MB in two GETs, whole
    11 MB in one; holding 1 key: 0.35 MB + one row group in two GETs, so ranged.  An unsorted file (every
    row group a candidate) or keys close together only move the estimate's error to bytes, never to rows.
    At most WHOLE_BUDGET bytes, the most `whole_objects` holds at once."""
    if size <= WHOLE_MAX:
        return True
    if keys is None or keys <= 0 or size > WHOLE_BUDGET:
        return False
    ranged_bytes = footer_guess(size) + size * (keys - 1) // (keys + 1)
    return size - ranged_bytes <= WHOLE_MAX


_held: dict[str, bytes] = {}  # str(StoragePath) → the whole object, while a `whole_objects` block runs
_held_guard = threading.Lock()


def read_range(path: StoragePath, start: int, end: int) -> bytes:
    """Bytes [start, end) of an object: from memory when `whole_objects` holds it, else one ranged GET."""
    held = _held.get(str(path))
    if held is not None:
        return held[start:end]
    return path.storage.read_range(path.key, start, end)


@contextlib.contextmanager
def whole_objects(paths: Sequence[StoragePath]) -> Iterator[None]:
    """Fetch each object with one GET, `WHOLE_THREADS` at a time in parallel; inside the block its footer
    (`tail_bytes`) and ranged reads (`RangedObject`, `WindowedObject`) are answered from memory.

        lookup of 100 keys in 12 small files:   before: 12 footer GETs, then 12-24 ranged GETs, one by one
                                                 now:    12 GETs, 8 in flight at once

    The caller keeps the total under `WHOLE_BUDGET` (objects of at most `WHOLE_MAX` bytes each)."""
    todo = [p for p in dict.fromkeys(paths) if str(p) not in _held]
    if not todo:
        yield
        return
    with ThreadPoolExecutor(max_workers=min(WHOLE_THREADS, len(todo)), thread_name_prefix="lsm_lab-get") as pool:
        datas = list(pool.map(lambda p: p.read_bytes(), todo))
    with _held_guard:
        for p, data in zip(todo, datas):
            _held[str(p)] = data
    try:
        yield
    finally:
        with _held_guard:
            for p in todo:
                _held.pop(str(p), None)


#: a streamed read of an object fetches it in windows of about this many bytes (whole row groups): a file
#: this small is one GET of the whole object, a larger one a footer GET and one GET per window.  Memory
#: holds at most two windows per open file, so a k-way merge of objects holds 2k windows.
STREAM_WINDOW = 8 << 20

#: the tail GET of an object whose size is known asks for `size / FOOTER_SHARE` bytes, at least
#: `FOOTER_GUESS` and at most `FOOTER_MAX` (and at least the largest footer seen so far): a footer grows
#: with row groups x columns, so a fixed 64 KiB guess missed the footer of an 11 MB base file (181 KiB,
#: page index and bloom filters before it) and every such file cost a second tail GET.  Up to 1/32 of a
#: file's bytes read for nothing is cheaper than a round trip and a second request.
FOOTER_GUESS = 64 * 1024
FOOTER_SHARE = 32
FOOTER_MAX = 1 << 20
_largest_footer = [0]  # the largest footer (bytes, with its 8-byte trailer) this process has read


def footer_guess(size: int | None) -> int:
    """How many tail bytes to ask for to get an object's Parquet footer in one GET (see `FOOTER_SHARE`)."""
    guess = max(FOOTER_GUESS, min(_largest_footer[0] + _largest_footer[0] // 4, FOOTER_MAX))
    if size is not None:
        guess = max(guess, min(size // FOOTER_SHARE, FOOTER_MAX))
    return guess


def _footer_length(tail: bytes) -> int:
    """The length of the footer `tail` ends with (0: not a Parquet tail), remembered for `footer_guess`."""
    if len(tail) < 8 or tail[-4:] != b"PAR1":
        return 0
    need = int.from_bytes(tail[-8:-4], "little") + 8
    if need > _largest_footer[0]:
        _largest_footer[0] = need
    return need


def row_group_spans(md: pq.FileMetaData) -> list[tuple[int, int]]:
    """[start, end) byte range of each row group's column chunks (the file offsets, in file order)."""
    spans = []
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        lo, hi = None, 0
        for c in range(rg.num_columns):
            col = rg.column(c)
            start = col.data_page_offset
            if col.has_dictionary_page and col.dictionary_page_offset is not None and col.dictionary_page_offset > 0:
                start = min(start, col.dictionary_page_offset)
            lo = start if lo is None else min(lo, start)
            hi = max(hi, start + col.total_compressed_size)
        if lo is not None:
            spans.append((lo, hi))
    return spans


class WindowedObject(_ReadOnlyObject):
    """A read-only file over one object, fetched in windows of whole row groups (one GET each).

    `tail` (the footer bytes, already fetched) answers reads at the end of the object; a read
    elsewhere that misses the windows held fetches the row groups from the one holding it onward,
    up to `window` bytes (at least that row group), as one ranged GET; the `keep` most recently used
    windows are held (Arrow's reader may be a few row groups apart between columns).
    pyarrow reads a row group's column chunks one after another, so a streamed read of the whole
    object costs the footer GET plus about size / window GETs, and holds at most `keep` windows."""

    def __init__(self, path: StoragePath, size: int, tail: bytes, spans: list[tuple[int, int]],
                 window: int = STREAM_WINDOW, keep: int = 2) -> None:
        self.path = path
        self._size = size
        self._tail = tail
        self._tail_start = size - len(tail)
        self._spans = sorted(spans)
        self._window = window
        self._keep = max(1, keep)  # windows held, the most recently used kept (Arrow may read row groups apart)
        self._windows: dict[int, bytes] = {}  # start → bytes, least recently used first
        self._pos = 0

    def size(self) -> int:
        return self._size

    def _fetch(self, pos: int, end: int) -> None:
        """Make the window hold [pos, end): the row groups from the one holding `pos`, up to the window size."""
        spans = self._spans
        i = next((j for j, (lo, hi) in enumerate(spans) if lo <= pos < hi), None)
        if i is None:  # not inside a row group (a page index, a bloom filter): exactly the bytes asked for
            start, stop = pos, end
        else:
            start, stop = spans[i][0], spans[i][1]
            j = i + 1
            while j < len(spans) and spans[j][1] - start <= self._window:
                stop = spans[j][1]
                j += 1
            stop = max(stop, end)
        stop = min(stop, self._size)
        self._windows[start] = read_range(self.path, start, stop)
        while len(self._windows) > self._keep:
            del self._windows[next(iter(self._windows))]

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._pos + n)
        pos = self._pos
        if end <= pos:
            return b""
        if pos >= self._tail_start:
            data = self._tail[pos - self._tail_start:end - self._tail_start]
        else:
            start = next((a for a, b in self._windows.items() if a <= pos and end <= a + len(b)), None)
            if start is None:
                self._fetch(pos, end)
                start = next(reversed(self._windows))
            window = self._windows.pop(start)
            self._windows[start] = window  # the most recently used last
            data = window[pos - start:end - start]
        self._pos += len(data)
        return data


def stream_source(path: StoragePath, size: int | None = None,
                  window: int = STREAM_WINDOW) -> tuple[Any, bytes]:
    """A Parquet source for reading a whole object batch by batch, and its footer bytes.

    An object of at most `window` bytes is one GET of the whole object (the footer comes with it);
    a larger one a GET of its tail (the footer), then `WindowedObject`'s GETs of whole row groups,
    about one per `window` bytes.  `size` (from a listing) lets a small object be fetched whole at
    once; without it the first GET is of the tail, which also tells the size."""
    if size is not None and size <= window:
        data = path.read_bytes()
        return pa.BufferReader(data), data
    guess = footer_guess(size)
    if size is None:
        tail, size = path.storage.read_suffix(path.key, guess)  # one GET, and the size with it
        if len(tail) >= size:  # the whole object came back
            return pa.BufferReader(tail), tail
        need = _footer_length(tail)
        if len(tail) < need <= size:
            tail = path.storage.read_range(path.key, size - need, size)
    else:
        tail = tail_bytes(path, size, guess)
    md = pq.read_metadata(pa.BufferReader(tail))
    return pa.PythonFile(WindowedObject(path, size, tail, row_group_spans(md), window), mode="r"), tail


def tail_bytes(path: StoragePath, size: int | None = None, guess: int | None = None) -> bytes:
    """The last bytes of an object, its whole Parquet footer included: one ranged GET (two when the
    footer is larger than `guess`, by default `footer_guess(size)`)."""
    storage = path.storage
    held = _held.get(str(path))
    if held is not None:  # fetched whole by `whole_objects`: the footer is in memory
        return held
    if guess is None:
        guess = footer_guess(size)
    if size is None:
        tail, size = storage.read_suffix(path.key, guess)  # one GET, no HEAD
    else:
        tail = storage.read_range(path.key, max(0, size - guess), size)
    need = _footer_length(tail)
    if need > len(tail) and need <= size:
        tail = storage.read_range(path.key, size - need, size)
    return tail


def read_tail(path: StoragePath, size: int | None = None, guess: int | None = None) -> pq.FileMetaData:
    """The Parquet footer of an object with one ranged GET (two when the footer is larger than `guess`)."""
    return pq.read_metadata(pa.BufferReader(tail_bytes(path, size, guess)))


__all__ = [
    "FOOTER_GUESS",
    "FOOTER_MAX",
    "FOOTER_SHARE",
    "STREAM_WINDOW",
    "RangedObject",
    "WindowedObject",
    "footer_guess",
    "object_source",
    "read_tail",
    "row_group_spans",
    "stream_source",
    "tail_bytes",
    "whole_pays",
]
