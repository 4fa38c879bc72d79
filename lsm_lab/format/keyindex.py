"""The key index kept with the timeline: every written file's bloom filter and key range, one sidecar per instant.

A cold point lookup used to open the footer of every file of the key's file
slice (base + logs) just to learn that the key is not there: on the 1M-row
benchmark 18 footers, the base files' ~160 KB each, a third of its time.  The
facts it needs per file — the key range and the bloom filter — are known when
the file is written and never change, so the writer files them once, next to
the timeline, and a lookup reads them once per snapshot:

    writer (commit, deltacommit, compaction, clustering, replace)
      1. data files written                         p1/fg-0_0-0-0_T.parquet, p1/.fg-0_0-0-0_T.log.1_0-0-0, ...
      2. sidecar written (atomic, replaces)         .hoodie/.key_index/T.keyindex
             per file: partition │ file_name │ file_size │ min_key │ max_key │ bloom (format/bloom.py bytes)
             then a CRC-32 of the whole
      3. instant completed                          .hoodie/timeline/T_C.deltacommit      ◄── the commit point

    lookup (KeyLookup prepared on a snapshot)
      instants named by the snapshot's files ─► their sidecars (one LIST, cached per process: immutable)
      per file: indexed range / bloom say "absent" ─► skipped, footer never read
                indexed bloom says "maybe"           ─► footer read, row groups probed as before
                no usable entry                      ─► footer path (tables written before the index, real Hudi
                                                        tables, v1 logs, a damaged or missing sidecar)

**Crash safety.**  The sidecar is written before the instant completes, so a
kill leaves either no sidecar, or a sidecar of a pending instant whose rollback
(`services.rollback.delete_instant_files`) removes it with the instant's data
files; a re-run compaction rewrites it.  A sidecar is only ever an optimisation:
an entry is used only when its file name *and size* match the file the snapshot
lists, and a sidecar that fails its CRC-32 or has the wrong shape, or an entry
whose bloom fails its own CRC, is ignored (the footer path answers).
Pruning never changes results.  The cleaner removes the sidecars of instants
none of whose data files is left on disk (`prune_sidecars`).

**Why a sidecar per instant, not one index file.**  Files are immutable and
named by the instant that wrote them, so the index of an instant never changes
either: no read-modify-write, no lock, no compaction of the index itself, and a
rolled-back instant's entries vanish with one delete.  A lookup loads only the
sidecars of instants whose files are in its snapshot (a few per file group).

Simplified compared with Apache Hudi: Hudi keeps the same facts in the metadata
table, itself a merge-on-read Hudi table under `.hoodie/metadata/` with its own
timeline, HFile base files and log compaction: the `bloom_filters` partition
(`MetadataPartitionType.BLOOM_FILTERS`, one `HoodieMetadataBloomFilter` record
per (partition, file name), built by `HoodieTableMetadataUtil` from each commit's
write stats) and the `column_stats` partition (min/max per column and file,
`HoodieMetadataColumnStats`), read by `HoodieBloomIndex` when
`hoodie.bloom.index.use.metadata` is set.  lsm_lab keeps only the record key's
range and bloom, one small immutable binary file per instant (a Parquet file was
measured first: pyarrow's per-file overhead made loading a snapshot's six
sidecars take 7 ms, the binary form well under one), outside Hudi's view
(Hudi readers of a table ignore folders under `.hoodie/` they do not know).

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lsm_lab.errors import CorruptFileError
from lsm_lab.format import naming, parquet_footer, written_facts
from lsm_lab.format.bloom import BloomFilter, decode_verdict
from lsm_lab.storage import StoragePath, TablePath, as_path, atomic, list_stamped, paths
from lsm_lab.timeline.metadata import iter_write_stats

INDEX_FOLDER = ".key_index"  # under .hoodie/
SUFFIX = ".keyindex"
MAGIC = b"LSMK"
VERSION = 1
_HEADER = struct.Struct("<4sBBBBI")  # magic, version, 3 reserved bytes, entry count
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")


@dataclass
class IndexEntry:
    """What the index says about one data file: its size (identity check), key range and bloom filter."""

    partition: str
    file_name: str
    file_size: int
    min_key: str | None
    max_key: str | None
    bloom_bytes: bytes | None
    _bloom: BloomFilter | None = field(default=None, repr=False)
    bloom_status: str = "unchecked"

    def bloom(self) -> BloomFilter | None:
        """The decoded, CRC-checked filter; None when absent or damaged (then the entry is not trusted)."""
        if self.bloom_status == "unchecked":
            self._bloom, self.bloom_status = decode_verdict(self.bloom_bytes)
            self.bloom_bytes = None
        return self._bloom

    @property
    def usable(self) -> bool:
        """A range is always needed; a bloom that was written must verify (a damaged one taints the entry)."""
        if self.min_key is None or self.max_key is None:
            return False
        self.bloom()
        return self.bloom_status in ("ok", "missing")

    def cost(self) -> int:
        return 64 + len(self.file_name) + (len(self._bloom.bits) if self._bloom is not None else 0) + (
            len(self.bloom_bytes) if self.bloom_bytes else 0)


# --------------------------------------------------------------------------- where
def index_folder(base_path: str | os.PathLike[str] | StoragePath) -> TablePath:
    return as_path(base_path) / ".hoodie" / INDEX_FOLDER


def sidecar_path(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> TablePath:
    return index_folder(base_path) / f"{paths.instant_time(instant, field='key index instant')}{SUFFIX}"


def instant_of_sidecar(name: str) -> str | None:
    if not name.endswith(SUFFIX):
        return None
    stem = name[: -len(SUFFIX)]
    return stem if paths.is_instant_time(stem) else None


# --------------------------------------------------------------------------- writing
def entry_for_file(partition: str, path: TablePath, size: int | None = None) -> IndexEntry | None:
    """The index entry of one written Parquet data file, from its footer (None: not a Parquet data file)."""
    parsed = naming.parse(path.name)
    if parsed is None or parsed.ext != "parquet":
        return None
    handed = written_facts.written_key_facts(path)  # written by this process: no need to read the footer back
    if handed is not None and (size is None or size <= 0 or handed[0] == size):
        return IndexEntry(partition, path.name, handed[0], handed[1], handed[2], handed[3])
    if size is None or size <= 0:
        size = path.stat().st_size
    _, kv = parquet_footer.read_footer(path, size)  # (a local file: the size is not needed)
    text = kv.get(parquet_footer.KEY_BLOOM)
    bloom = BloomFilter.from_base64(text).to_bytes() if text is not None else None  # verified before it is filed
    return IndexEntry(partition, path.name, int(size), kv.get(parquet_footer.KEY_MIN), kv.get(parquet_footer.KEY_MAX), bloom)


def _text(out: list[bytes], value: str | None) -> None:
    if value is None:
        out.append(_I32.pack(-1))
    else:
        raw = value.encode("utf-8")
        out.append(_I32.pack(len(raw)))
        out.append(raw)


def encode(instant: str, entries: Sequence[IndexEntry]) -> bytes:
    """A sidecar's bytes (layout in docs/FORMAT.md section 10a), ending with the CRC-32 of all before it."""
    out = [_HEADER.pack(MAGIC, VERSION, 0, 0, 0, len(entries))]
    _text(out, instant)
    for e in entries:
        _text(out, e.partition)
        _text(out, e.file_name)
        out.append(_I64.pack(e.file_size))
        _text(out, e.min_key)
        _text(out, e.max_key)
        if e.bloom_bytes is None:
            out.append(_I32.pack(-1))
        else:
            out.append(_I32.pack(len(e.bloom_bytes)))
            out.append(e.bloom_bytes)
    body = b"".join(out)
    return body + _U32.pack(zlib.crc32(body) & 0xFFFFFFFF)


def write_sidecar(base_path: str | os.PathLike[str] | StoragePath, instant: str,
                  entries: Sequence[IndexEntry]) -> TablePath | None:
    """Write (or replace: a re-run compaction) the sidecar of `instant`; None when there is nothing to index."""
    if not entries:
        return None
    path = sidecar_path(base_path, instant)
    atomic.replace_file(path, encode(instant, entries), mkdir=True)
    _CACHE.forget(str(path))
    return path


def index_commit(base_path: str | os.PathLike[str] | StoragePath, instant: str,
                 metadata: Mapping[str, Any]) -> TablePath | None:
    """The commit hook: index every Parquet data file the commit metadata lists, before the instant completes."""
    base_path = as_path(base_path)
    entries = []
    for stat in iter_write_stats(metadata):
        rel = stat.get("path")
        if not isinstance(rel, str) or not rel:
            continue
        partition, name = paths.data_file(rel, field="partitionToWriteStats.path")
        size = stat.get("fileSizeInBytes")
        entry = entry_for_file(partition, (base_path / partition / name) if partition else base_path / name,
                               int(size) if isinstance(size, int) else None)
        if entry is not None:
            entries.append(entry)
    return write_sidecar(base_path, instant, entries)


def index_files(base_path: str | os.PathLike[str] | StoragePath,
                files: Iterable[tuple[str, TablePath]]) -> list[TablePath]:
    """(Re)build the sidecars of existing files, grouped by the instant in their names (tools, benchmarks)."""
    by_instant: dict[str, list[IndexEntry]] = {}
    for partition, path in files:
        parsed = naming.parse(path.name)
        entry = entry_for_file(partition, path) if parsed is not None else None
        if parsed is not None and entry is not None:
            by_instant.setdefault(parsed.instant, []).append(entry)
    out = []
    for instant, entries in sorted(by_instant.items()):
        written = write_sidecar(base_path, instant, entries)
        if written is not None:
            out.append(written)
    return out


# --------------------------------------------------------------------------- removing
def remove_sidecar(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> bool:
    """Delete the sidecar of `instant` (its rollback); True if there was one."""
    path = sidecar_path(base_path, instant)
    _CACHE.forget(str(path))
    try:  # never through a linked .hoodie/.key_index (the link itself may go); a store: HEAD, then DELETE
        return paths.unlink(path, missing_ok=False)
    except FileNotFoundError:
        return False


def sidecar_instants(base_path: str | os.PathLike[str] | StoragePath) -> list[str]:
    return sorted(i for i in (instant_of_sidecar(n) for n in _listing(index_folder(base_path))) if i is not None)


def prune_sidecars(base_path: str | os.PathLike[str] | StoragePath,
                   data_file_names: Iterable[str]) -> list[str]:
    """Remove the sidecars of instants none of whose data files is on disk; returns their instants.

    `data_file_names` must be listed *after* the sidecars: a writer files its
    data before its sidecar, so a sidecar seen first has its files in the later
    listing unless they were cleaned or rolled back.
    """
    sidecars = sidecar_instants(base_path)
    live = {p.instant for p in (naming.parse(n) for n in data_file_names) if p is not None}
    gone = [i for i in sidecars if i not in live]
    if gone and isinstance(base_path, StoragePath):  # listed just now: no HEAD each, one bulk DELETE (S3)
        files = [sidecar_path(base_path, i) for i in gone]
        for f in files:
            _CACHE.forget(str(f))
        keys = [f.key for f in files if isinstance(f, StoragePath)]
        base_path.storage.delete_many(keys)
        return gone
    for instant in gone:
        remove_sidecar(base_path, instant)
    return gone


def sidecars_left_without_files(base_path: StoragePath, sidecars: Iterable[str],
                                data_file_names: Iterable[str], deleting: Iterable[str]) -> list[str]:
    """Object stores: the keys of the sidecars (of `sidecars`, their instants) that a deletion of the data
    files named in `deleting` leaves without any data file, to be deleted in the same bulk DELETE.

    `sidecars` must have been listed before `data_file_names` (as for `prune_sidecars`).  A sidecar deleted
    while its files stay (a DELETE that fails half way) costs lookups a footer read each, never a wrong
    answer: a file without an index entry is looked up through its footer."""
    going = set(deleting)
    live = {p.instant for p in (naming.parse(n) for n in data_file_names if n not in going) if p is not None}
    keys = []
    for instant in sidecars:
        if instant not in live:
            path = sidecar_path(base_path, instant)
            _CACHE.forget(str(path))
            if isinstance(path, StoragePath):
                keys.append(path.key)
    return keys


# --------------------------------------------------------------------------- reading
class _Reader:
    """Bounds-checked reads from a sidecar's bytes (any overrun: `CorruptFileError`)."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.pos, self.path = memoryview(data), 0, path

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptFileError("key index sidecar ends inside an entry", path=self.path)
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int(self, st: struct.Struct) -> int:
        value: int = st.unpack(self.take(st.size))[0]
        return value

    def raw(self) -> bytes | None:
        n = self.int(_I32)
        return None if n == -1 else self.take(n).tobytes()

    def text(self) -> str | None:
        raw = self.raw()
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptFileError("key index sidecar holds a name or key that is not UTF-8", path=self.path) from None


def decode(data: bytes, *, path: str, instant: str | None = None) -> dict[str, IndexEntry]:
    """A sidecar's entries by file name; `CorruptFileError` for anything that is not an intact version-1 sidecar."""
    if len(data) < _HEADER.size + _U32.size:
        raise CorruptFileError(f"key index sidecar is {len(data)} bytes, shorter than its header", path=path)
    magic, version, _, _, _, count = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptFileError(f"key index sidecar has magic {magic!r}, expected {MAGIC!r}", path=path)
    if version != VERSION:
        raise CorruptFileError(f"key index sidecar version {version} is not supported ({VERSION})", path=path)
    if zlib.crc32(memoryview(data)[:-_U32.size]) & 0xFFFFFFFF != _U32.unpack_from(data, len(data) - _U32.size)[0]:
        raise CorruptFileError("key index sidecar does not match its CRC-32", path=path)
    r = _Reader(data[: -_U32.size], path)
    r.take(_HEADER.size)
    named = r.text()
    if instant is not None and named != instant:
        raise CorruptFileError(f"key index sidecar names instant {named!r}, not {instant}", path=path)
    out: dict[str, IndexEntry] = {}
    for _ in range(count):  # one entry per data file, not per record
        partition, file_name = r.text(), r.text()
        size = r.int(_I64)
        lo, hi, bloom = r.text(), r.text(), r.raw()
        if partition is None or file_name is None:
            raise CorruptFileError("key index sidecar has an entry without a file name", path=path)
        out[file_name] = IndexEntry(partition, file_name, size, lo, hi, bloom)
    if r.pos != len(r.data):
        raise CorruptFileError("key index sidecar has bytes after its last entry", path=path)
    return out


class _SidecarCache:
    """Decoded sidecars by (path, size, stamp): immutable once their instant completed; bounded by bytes."""

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, str], tuple[dict[str, IndexEntry], int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str]) -> dict[str, IndexEntry] | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: tuple[str, int, str], entries: dict[str, IndexEntry]) -> None:
        with self._lock:
            if key in self._items:
                return
            cost = sum(e.cost() for e in entries.values())
            self._items[key] = (entries, cost)
            self._total += cost
            while len(self._items) > 1 and self._total > self.max_bytes:
                _, (_, old) = self._items.popitem(last=False)
                self._total -= old

    def forget(self, path: str) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == path]:
                self._total -= self._items.pop(key)[1]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0


_CACHE = _SidecarCache()


def clear_index_cache() -> None:
    """Forget every decoded sidecar (benchmarks: a lookup that loads the index cold)."""
    _CACHE.clear()


def _listing(folder: TablePath) -> dict[str, tuple[int, str]]:
    """Name → (size, change stamp) of the files in `folder`: one LIST (object store) or one scandir."""
    return list_stamped(folder)


@dataclass
class KeyIndex:
    """The index entries of one snapshot's files, by file name, with what loading them found."""

    entries: dict[str, IndexEntry] = field(default_factory=dict)
    sidecars_loaded: int = 0
    sidecars_damaged: int = 0
    bytes_read: int = 0  # sidecar bytes read from storage (cache misses)
    problems: list[str] = field(default_factory=list)

    def entry(self, name: str, size: int) -> IndexEntry | None:
        """The usable entry of the file `name` of `size` bytes, or None (then read its footer)."""
        e = self.entries.get(name)
        if e is None or e.file_size != size or not e.usable:
            return None
        return e

    def __len__(self) -> int:
        return len(self.entries)


def load_index(base_path: str | os.PathLike[str] | StoragePath, instants: Iterable[str]) -> KeyIndex:
    """The entries of the sidecars of `instants` (those that have one); damaged sidecars are skipped, noted."""
    folder = index_folder(base_path)
    wanted = set(instants)
    listing = _listing(folder) if wanted else {}
    out = KeyIndex()
    for name, (size, stamp) in sorted(listing.items()):
        instant = instant_of_sidecar(name)
        if instant is None or instant not in wanted:
            continue
        path = folder / name
        key = (str(path), size, stamp)
        entries = _CACHE.get(key)
        if entries is None:
            try:
                data = path.read_bytes()
                out.bytes_read += len(data)
                entries = decode(data, path=str(path), instant=instant)
            except CorruptFileError as exc:
                out.sidecars_damaged += 1
                out.problems.append(f"{name}: {exc.message}")
                continue
            except FileNotFoundError:  # removed since the listing (a rollback or the cleaner)
                continue
            _CACHE.put(key, entries)
        out.sidecars_loaded += 1
        out.entries.update(entries)
    return out


__all__ = [
    "INDEX_FOLDER",
    "IndexEntry",
    "KeyIndex",
    "clear_index_cache",
    "decode",
    "encode",
    "entry_for_file",
    "index_commit",
    "index_files",
    "index_folder",
    "load_index",
    "prune_sidecars",
    "remove_sidecar",
    "sidecar_instants",
    "sidecar_path",
    "sidecars_left_without_files",
    "write_sidecar",
]
