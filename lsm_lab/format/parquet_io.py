"""Writing and opening the Parquet data files of a table: the one writer, the one reader.

Every data file lsm_lab writes (base files from writes and compactions, v2
data and delete logs, the output of ``lsm-lab merge``) goes through
`ParquetFileWriter`; `write_parquet` is the same writer fed one table:

    batches (sorted or not)                                 ParquetFileWriter
      │ write(batch) ─► buffer ─► row groups of `rows` ─►  pq.ParquetWriter → <dir>/.<name>.<random>.tmp
      │                 key min/max, bloom bits              (page checksums, statistics, split-block
      │                 updated per batch                     bloom on the key, sorting_columns)
      ▼ close()  footer: hoodie_min/max_record_key, lsm_lab.bloom, caller's keys
                 atomic.publish(tmp, final)                   (never overwrites, never half-visible)

Memory is one row group (a threaded writer: up to `ENCODE_QUEUE` more, queued for
its encoder thread) plus the bloom filter: its bits (about 10 bytes per
key while building) and, when the key count is not known up front (a
compaction), the two 64-bit hashes of each key until `close` sizes the filter
exactly — so a compaction streams a merge of any size through it, never
holding its rows, and still gets the same footer as a bulk insert.  `rows` (rows per row group) is fixed at the first
write: at most `row_group_size`, and for sorted files about `row_group_bytes`
of Arrow data (default 1 MiB, about 3.5k trips rows, 0.45 MB compressed) — their
min/max key statistics are then disjoint, narrow ranges and a point lookup
reads one small row group instead of 64k rows (10.7 MB).  Measured on 1M
sorted trips rows: files grow ~4% (128 → 134 MB) at 2 MiB, scan and bulk-insert
CPU unchanged within the machine's noise at 2 and 1 MiB; 512 KiB scans ~5% slower
and its larger footers undo the smaller reads (docs/PERFORMANCE.md, "Fourth
pass: lookidx"); see lsm_lab/table/lookup.py.

The footer keys shared by base and log files (documented in docs/FORMAT.md):

    hoodie_min_record_key / hoodie_max_record_key   key range (Hudi's base-file names)
    lsm_lab.sorted = "true"                          rows sorted by record key (UTF-8 bytes),
                                                     no key twice (only written when true)
    lsm_lab.bloom                                    base64 bloom filter of the file's keys
                                                     (format in lsm_lab/format/bloom.py)

`lsm_lab.sorted` and the caller's keys (e.g. a v2 log's header) are known
up front and also stored in the Arrow schema (readers of the table see them);
the key range and the bloom filter are known only once the last row is
written, so they go to the Parquet footer only (`add_key_value_metadata`).
`read_footer` is the one decoder of that key-value map.  The key column also
gets Parquet's own split-block bloom filter per row group (read by engines
such as DuckDB and Spark) and, in sorted files, a `sorting_columns` entry.

**Checksums.** Every page is written with its CRC-32 (`write_page_checksum`)
and `open_parquet`, the one way data files are opened for reading, verifies
them (`page_checksum_verification`): a flipped bit in a data page is a
`CorruptFileError` naming the file, never a different value.  Files written
without checksums (older lsm_lab, other engines) are read as before.

**Columns of one value** (`constant_text`): a text column whose statistics show the same single value
and no null in every row group (a partition column, `_hoodie_partition_path`, a base file's
`_hoodie_file_name`) is filled from them by `read_parquet` and by lookups, not decoded: a column chunk costs a
fixed ~0.1 ms to decode however few its values.  Its pages are not read, so their checksums are not checked
either; a flipped bit there changes nothing that is read.

**Damaged footers.** pyarrow raises on a footer whose Thrift does not parse, but the column-chunk
metadata of a row group (statistics, sizes) becomes C++ objects only when first asked for, and a C++
exception there aborts the process.  Every footer this module hands out (`open_parquet` without a
`metadata=`, `read_footer`) has passed `footercheck.check_footer` first: damage it would trip on is a
`CorruptFileError` naming the file, never SIGABRT.

**Encodings and codecs per column** (`dictionary_columns`, `compression_of_columns`): a dictionary only
where the first values repeat, snappy only where it shrinks the first values by a fifth or more; both are
per column chunk in Parquet, so files written under other choices read the same.

Simplified compared with Apache Hudi: the bloom filter is lsm_lab's own format
under its own key (Hudi's `org.apache.hudi.bloomfilter` is a Java-serialised
Hadoop filter); row groups are sized by rows and in-memory bytes, not by
Parquet's on-disk block size.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import io
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError, CorruptTableError, LsmLabError
from lsm_lab.format.bloom import BloomBuilder, key_states
from lsm_lab.format.footercheck import check_footer
from lsm_lab.storage import StoragePath, atomic, create_bytes, paths

KEY_MIN = "hoodie_min_record_key"
KEY_MAX = "hoodie_max_record_key"
KEY_SORTED = "lsm_lab.sorted"
KEY_BLOOM = "lsm_lab.bloom"
_OWN_KEYS = (KEY_MIN, KEY_MAX, KEY_SORTED, KEY_BLOOM)
RECORD_KEY = "_hoodie_record_key"
UNIQUE_SEQ_COLUMN = "_hoodie_commit_seqno"
DEFAULT_ROW_GROUP_ROWS = 65_536
SORTED_ROW_GROUP_BYTES = 1 << 20  # 2 MiB until the fourth pass: 1 MiB halves a lookup's row-group read
MIN_ROW_GROUP_ROWS = 1_024
BLOOM_FPP = 0.01
PARQUET_BLOOM_FPP = 0.01
DICTIONARY_SAMPLE_ROWS = 2_048  # values looked at to decide a column's dictionary (`dictionary_columns`)
COMPRESSION = "snappy"
#: a plain-encoded column is stored uncompressed when `COMPRESSION` saves less than this share of its bytes
MIN_COMPRESSION_SAVING = 0.2
#: row groups a threaded writer queues for its encoder thread: a queue of one stalled the caller whenever a row
#: group waited for the encoder (the k-way merge's wall time: -11% with 4, PERFORMANCE.md "Seventh pass")
ENCODE_QUEUE = 4
WRITE_OPTIONS: dict[str, Any] = {"compression": COMPRESSION, "write_statistics": True, "write_page_checksum": True}
VERIFY_PAGE_CHECKSUMS = True  # benchmarks/bench_checksums.py turns both off to measure their cost


def key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str | None, str | None]:
    if len(keys) == 0:
        return None, None
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def rows_per_group(table: pa.Table | pa.RecordBatch, row_group_size: int, row_group_bytes: int | None) -> int:
    """Rows per row group: at most `row_group_size`, and about `row_group_bytes` of Arrow data when given."""
    rows = max(1, int(row_group_size))
    if row_group_bytes and table.num_rows:
        per_row = max(1.0, table.nbytes / table.num_rows)
        rows = min(rows, max(MIN_ROW_GROUP_ROWS, int(row_group_bytes / per_row)))
    return rows


def dictionary_columns(schema: pa.Schema, sample: pa.Table | None, plain: Collection[str | None] = ()) -> list[str]:
    """The columns worth Parquet's dictionary encoding: all but those whose values barely repeat.

    Arrow dictionary-encodes every column unless told otherwise and falls back to plain only
    when a dictionary page outgrows 1 MiB, which a 2 MiB row group of unique values never
    does: it hashes every value, writes a dictionary as large as the data, then indices on
    top (measured on a bulk-insert file: 30% of its encoding time, 8% of its size).  Like
    parquet-mr, which keeps a dictionary only when it makes the first page smaller, a
    column is written plain when more than half of the first `DICTIONARY_SAMPLE_ROWS` values
    of the file's first row group are distinct (ids, timestamps, coordinates, amounts).  The
    key column, `plain`, and the commit sequence number, unique in every file, are plain
    without a look; nested columns keep their dictionary.  Either way the file reads the same."""
    names = [n for n in schema.names if n not in plain and n != UNIQUE_SEQ_COLUMN]
    if sample is None or sample.num_rows == 0:
        return names
    head = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    out = []
    for name in names:
        col = head.column(name)
        t = col.type
        if pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_boolean(t) or pa.types.is_null(t):
            out.append(name)
        else:
            try:
                distinct = pc.count_distinct(col).as_py()
            except pa.ArrowNotImplementedError:  # a type Arrow cannot count: keep the dictionary
                distinct = 0
            if distinct * 2 <= len(col):
                out.append(name)
    return out


def compression_of_columns(schema: pa.Schema, sample: pa.Table | None, dictionary: Collection[str]) -> str | dict[str, str]:
    """The codec of each column: `COMPRESSION`, or "none" for a plain column it barely shrinks.

    Snappy costs about as much CPU per byte as everything else the writer does to a
    string column, and every read pays for its decompression again; on values that
    do not repeat (random ids such as UUIDs, hashes, coordinates) it saves almost
    nothing: 83k UUID keys, 13% (their length prefixes compress, their text 4%); on
    a 83k-row bulk-insert file, writing its two UUID columns (key and id) uncompressed
    took the encoding from 44.6 to 28.4 ms of CPU and the file from 9.85 to 10.87 MB.  A
    plain column (not in `dictionary`) whose first `DICTIONARY_SAMPLE_ROWS` values, laid
    out as Parquet's plain encoding, shrink by less than `MIN_COMPRESSION_SAVING` is
    written uncompressed.  Dictionary-encoded, boolean and sample-less columns keep
    `COMPRESSION`, and so does every column of a schema with a nested column (a codec per
    column is given by leaf path, which only flat columns share with their name).  The
    codec is per column chunk in Parquet: every reader reads both, and files written
    before read the same.  Returns one codec name when all columns share it."""
    out = dict.fromkeys(schema.names, COMPRESSION)
    if (sample is None or sample.num_rows == 0 or COMPRESSION == "none"
            or any(pa.types.is_nested(f.type) for f in schema)):
        return COMPRESSION
    head = sample.slice(0, DICTIONARY_SAMPLE_ROWS)
    for name in schema.names:
        if name in dictionary or name not in head.column_names:
            continue
        plain = _plain_bytes(head.column(name).combine_chunks())
        if plain is None or sum(b.size for b in plain) < 1024:
            continue
        packed = sum(pa.compress(b, codec=COMPRESSION, asbytes=False).size for b in plain)
        if packed > (1 - MIN_COMPRESSION_SAVING) * sum(b.size for b in plain):
            out[name] = "none"
    return out if "none" in out.values() else COMPRESSION


def _plain_bytes(col: pa.Array) -> list[pa.Buffer] | None:
    """A column's values as Parquet's plain encoding holds them (for strings: the lengths, then the text,
    which compress as they would interleaved, to within a few percent); None: not a flat column."""
    t = col.type
    if col.null_count:
        col = col.drop_null()
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        offsets = np.frombuffer(col.buffers()[1], dtype=np.int64 if wide else np.int32)
        offsets = offsets[col.offset: col.offset + len(col) + 1]
        text = col.buffers()[2]
        lengths = np.diff(offsets).astype(np.int32)
        body = text[int(offsets[0]): int(offsets[-1])] if text is not None else pa.py_buffer(b"")
        return [pa.py_buffer(lengths.tobytes()), body]
    if pa.types.is_primitive(t) and not pa.types.is_boolean(t) and t.bit_width % 8 == 0:
        width = t.bit_width // 8
        return [col.buffers()[1][col.offset * width: (col.offset + len(col)) * width]]
    return None


def _is_text(t: pa.DataType) -> bool:
    return cast("bool", pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


# --------------------------------------------------------------------------- writing
class ParquetFileWriter:
    """Write one data file from batches: explicit row groups, key facts in the footer, atomic publish.

    `key_column` (None: no key facts) gets the key range, the `lsm_lab.bloom`
    filter at `bloom_fpp` (None: neither bloom) sized for `expected_rows` keys
    (None: for the exact count, keeping 8 bytes of hash state per key until
    `close`), and Parquet's split-block bloom.  `is_sorted` marks the file
    sorted (the caller guarantees the order) and adds `sorting_columns`.
    `row_group_bytes` caps a row group's Arrow size (None: 2 MiB for sorted
    files, no cap otherwise; 0: no cap).  `overwrite=True` replaces an existing
    file (only for user-named outputs such as ``lsm-lab merge``); `threaded`
    encodes row groups on a background thread while the caller continues (up to
    `ENCODE_QUEUE` queued; an encoder's error reaches the caller at a later `write` or at `close`).
    """

    def __init__(self, path: str | os.PathLike[str] | StoragePath, schema: pa.Schema, *,
                 metadata: Mapping[str, str] | None = None, key_column: str | None = RECORD_KEY,
                 is_sorted: bool = False, row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
                 row_group_bytes: int | None = None, bloom_fpp: float | None = BLOOM_FPP,
                 expected_rows: int | None = None, overwrite: bool = False, threaded: bool = False) -> None:
        if row_group_size < 1:
            raise LsmLabError(f"row_group_size must be >= 1, got {row_group_size}", path=path)
        self.path: Path | StoragePath = path if isinstance(path, StoragePath) else Path(path)
        paths.make_folders(self.path.parent)  # in a table: never a new folder through a link out of it
        # an object store gets the bytes in one PUT at close (atomic there): no temp object, never a partial file
        self._sink: pa.BufferOutputStream | None = pa.BufferOutputStream() if isinstance(path, StoragePath) else None
        self.tmp: Path | None = None if self._sink is not None else atomic.temp_name(Path(path))  # type: ignore[arg-type]  # (not a StoragePath here)
        self._size = 0
        own = {k.encode() for k in _OWN_KEYS}
        kv = {k: v for k, v in (schema.metadata or {}).items() if k not in own}  # never carry stale facts
        kv.update({k.encode(): v.encode() for k, v in (metadata or {}).items()})
        if is_sorted:
            kv[KEY_SORTED.encode()] = b"true"
        self.schema = schema.with_metadata(kv)
        self.is_sorted = is_sorted
        self.key_column = key_column if key_column is not None and key_column in schema.names else None
        self.row_group_size = row_group_size
        self.row_group_bytes = SORTED_ROW_GROUP_BYTES if row_group_bytes is None and is_sorted else row_group_bytes
        self.bloom_fpp = bloom_fpp
        self.expected_rows = expected_rows
        self.overwrite = overwrite
        self._bloom_ok = (self.key_column is not None and bloom_fpp is not None
                          and _is_text(schema.field(self.key_column).type))
        self._bloom: BloomBuilder | None = None
        self._bloom_bytes: bytes | None = None  # the finished filter, handed back to the key index
        self._hashes: list[Any] = []  # `key_states` per batch (8 bytes a key) until the filter is sized
        self.rows = 0
        self.row_groups = 0
        self.min_key: str | None = None
        self.max_key: str | None = None
        self.rows_per_group: int | None = None
        self._pending: pa.Table | None = None
        self._writer: pq.ParquetWriter | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lsm-parquet-write") if threaded else None
        self._inflight: deque[Future[None]] = deque()  # row groups queued for the encoder thread, oldest first
        self._closed = False

    # ------------------------------------------------------------------ feeding
    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Add rows (the writer's schema, metadata aside); full row groups are written out."""
        if data.num_rows == 0:
            return
        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        if not table.schema.equals(self.schema, check_metadata=False):
            table = table.cast(self.schema)
        self._key_facts(table)
        if self.rows_per_group is None:
            self.rows_per_group = rows_per_group(table, self.row_group_size, self.row_group_bytes)
        self._pending = table if self._pending is None else pa.concat_tables([self._pending, table])
        rows = self.rows_per_group
        while self._pending.num_rows >= rows:
            self._emit(self._pending.slice(0, rows))
            self._pending = self._pending.slice(rows)

    def _key_facts(self, table: pa.Table) -> None:
        if self.key_column is None:
            return
        keys = table.column(self.key_column)
        if self.is_sorted and keys.null_count == 0:  # the caller guarantees the order: first and last
            lo, hi = keys[0].as_py(), keys[-1].as_py()
        else:
            lo, hi = key_range(keys)
        if lo is not None and hi is not None:
            self.min_key = lo if self.min_key is None or lo < self.min_key else self.min_key
            self.max_key = hi if self.max_key is None or hi > self.max_key else self.max_key
        if not self._bloom_ok:
            return
        if keys.null_count:  # a filter must hold every key: with a null key, no filter at all
            self._bloom_ok, self._bloom, self._hashes = False, None, []
            return
        assert self.bloom_fpp is not None
        if self.expected_rows is not None:
            if self._bloom is None:
                self._bloom = BloomBuilder.for_keys(max(self.expected_rows, 1), self.bloom_fpp)
            self._bloom.add(keys)
        else:

            self._hashes.append(key_states(keys))

    def _open(self, first: pa.Table | None = None) -> pq.ParquetWriter:
        if self._writer is None:
            options: dict[str, Any] = dict(WRITE_OPTIONS)
            options["use_dictionary"] = dictionary_columns(self.schema, first, plain={self.key_column})
            options["compression"] = compression_of_columns(self.schema, first, options["use_dictionary"])
            if self.key_column is not None and self.bloom_fpp is not None:
                ndv = self.rows_per_group or 1
                if self.expected_rows is not None:
                    ndv = min(ndv, self.expected_rows)
                options["bloom_filter_options"] = {self.key_column: {"ndv": max(1, ndv), "fpp": PARQUET_BLOOM_FPP}}
            if self.key_column is not None and self.is_sorted:
                options["sorting_columns"] = [pq.SortingColumn(self.schema.get_field_index(self.key_column))]
            self._writer = pq.ParquetWriter(self._sink if self._sink is not None else self.tmp, self.schema,
                                            **options)
        return self._writer

    def _emit(self, table: pa.Table) -> None:
        writer = self._open(table)
        self.rows += table.num_rows
        self.row_groups += 1
        if self._pool is None:
            writer.write_table(table, row_group_size=table.num_rows)
            return
        while len(self._inflight) >= ENCODE_QUEUE:
            self._inflight.popleft().result()
        self._inflight.append(self._pool.submit(writer.write_table, table, row_group_size=table.num_rows))

    # ------------------------------------------------------------------ finishing
    def _footer(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.min_key is not None and self.max_key is not None:
            out[KEY_MIN], out[KEY_MAX] = self.min_key, self.max_key
        if self._bloom_ok and self.rows:
            if self._bloom is None:
                assert self.bloom_fpp is not None
                self._bloom = BloomBuilder.for_keys(self.rows, self.bloom_fpp)
                parts, self._hashes = self._hashes[::-1], []
                while parts:  # batch by batch, each freed once added: no concatenated copy of every hash
                    self._bloom.add_states(parts.pop())
            finished = self._bloom.finish()
            out[KEY_BLOOM] = finished.to_base64()
            self._bloom_bytes = finished.to_bytes()
        return out

    def close(self) -> int:
        """Write the last row group and the footer, publish the file; returns its size in bytes."""
        if self._closed:
            raise LsmLabError("the writer is already closed", path=self.path)
        self._closed = True
        try:
            if self._pending is not None and self._pending.num_rows:
                self._emit(self._pending)
            self._pending = None
            self._drain()
            writer = self._open()
            if self.rows == 0:
                writer.write_table(self.schema.empty_table())
            footer = self._footer()
            if footer:
                writer.add_key_value_metadata(footer)
            writer.close()
            if isinstance(self.path, StoragePath):
                assert self._sink is not None
                data = self._sink.getvalue()
                self._sink = None
                if self.overwrite:
                    self.path.storage.write(self.path.key, data.to_pybytes())
                else:
                    create_bytes(self.path, data.to_pybytes(), lambda p: LsmLabError(
                        "refusing to overwrite an existing data file", path=p))
                self._size = data.size
                _remember_written(self, footer)
                return self._size
            assert self.tmp is not None
            if self.overwrite:
                os.replace(self.tmp, self.path)
            else:
                atomic.publish(self.tmp, self.path, lambda p: LsmLabError(
                    "refusing to overwrite an existing data file", path=p))
        finally:
            self._shutdown()
            if self.tmp is not None:
                self.tmp.unlink(missing_ok=True)
        self._size = self.path.stat().st_size
        _remember_written(self, footer)
        return self._size

    def abort(self) -> None:
        """Stop and remove the temporary file (nothing becomes visible)."""
        if self._closed:
            return
        self._closed = True
        self._pending = None
        try:
            try:
                self._drain(cancel=True)
            except Exception:  # noqa: BLE001 - the caller is already handling an error
                pass
            if self._writer is not None:
                self._writer.close()
        finally:
            self._shutdown()
            self._sink = None
            if self.tmp is not None:
                self.tmp.unlink(missing_ok=True)

    def _drain(self, *, cancel: bool = False) -> None:
        """Wait for every queued row group (`cancel`: drop those not started); raise the first error."""
        inflight, self._inflight = self._inflight, deque()
        if cancel:
            for future in inflight:
                future.cancel()
        error: BaseException | None = None
        for future in inflight:
            if future.cancelled():
                continue
            exc = future.exception()
            error = error or exc
        if error is not None:
            raise error

    def _shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> ParquetFileWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# --------------------------------------------------------------------------- handing back key facts
# The key range and bloom of the files this process wrote, by path, for the key index (format/keyindex.py),
# which files them at commit time: spares reading back the footer just written.  Bounded by bytes (files
# that never reach a commit age out); a file not found here is simply read.
_WRITTEN: OrderedDict[str, tuple[int, str | None, str | None, bytes | None]] = OrderedDict()
_WRITTEN_BYTES = [0]
_WRITTEN_MAX_BYTES = 64 << 20
_written_lock = threading.Lock()


def _remember_written(writer: ParquetFileWriter, footer: Mapping[str, str]) -> None:
    bloom = writer._bloom_bytes
    facts = (writer._size, footer.get(KEY_MIN), footer.get(KEY_MAX), bloom)
    with _written_lock:
        old = _WRITTEN.pop(str(writer.path), None)
        _WRITTEN_BYTES[0] += len(bloom or b"") - (len(old[3] or b"") if old else 0)
        _WRITTEN[str(writer.path)] = facts
        while _WRITTEN and _WRITTEN_BYTES[0] > _WRITTEN_MAX_BYTES:
            _, gone = _WRITTEN.popitem(last=False)
            _WRITTEN_BYTES[0] -= len(gone[3] or b"")


def forget_written() -> None:
    """Drop the key facts of every file this process wrote (a Spark worker: the driver commits, reading
    the footers back, so nobody here ever asks; kept, they grow a reused worker by each file's bloom)."""
    with _written_lock:
        _WRITTEN.clear()
        _WRITTEN_BYTES[0] = 0


def written_key_facts(path: str | os.PathLike[str] | StoragePath) -> tuple[int, str | None, str | None, bytes | None] | None:
    """(size, min key, max key, bloom bytes) of a file this process wrote and nobody asked for yet (then forgotten)."""
    with _written_lock:
        facts = _WRITTEN.pop(str(path), None)
        if facts is not None:
            _WRITTEN_BYTES[0] -= len(facts[3] or b"")
        return facts


def write_parquet(
    path: str | os.PathLike[str] | StoragePath,
    table: pa.Table,
    *,
    metadata: Mapping[str, str] | None = None,
    key_column: str | None = RECORD_KEY,
    is_sorted: bool = False,
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
    row_group_bytes: int | None = None,
    bloom_fpp: float | None = BLOOM_FPP,
) -> int:
    """Write `table` to a new file at `path` (see `ParquetFileWriter`); returns the file size in bytes."""
    writer = ParquetFileWriter(path, table.schema, metadata=metadata, key_column=key_column, is_sorted=is_sorted,
                               row_group_size=row_group_size, row_group_bytes=row_group_bytes, bloom_fpp=bloom_fpp,
                               expected_rows=table.num_rows)
    with writer:
        writer.write(table)
    return writer._size


# --------------------------------------------------------------------------- reading
def _name(source: Any) -> str:
    if isinstance(source, StoragePath):
        return str(source)
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<buffer>"


class _RangedObject(io.RawIOBase):
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


def _source(source: Any, ranged: bool, size: int | None = None) -> Any:
    """A Parquet source pyarrow can read: an object-store key becomes one whole GET, or ranged GETs."""
    if not isinstance(source, StoragePath):
        return source
    if ranged:
        return pa.PythonFile(_RangedObject(source, size), mode="r")
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


def _local_tail(path: str | os.PathLike[str]) -> bytes | None:
    """A local file's Parquet footer and its 8-byte trailer (None: not a Parquet tail)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 12:
            return None
        f.seek(size - 8)
        trailer = f.read(8)
        n = int.from_bytes(trailer[:4], "little")
        if trailer[4:] != b"PAR1" or n + 8 > size:
            return None
        f.seek(size - 8 - n)
        return f.read(n + 8)


def _opened_tail(opened: Any, source: Any, size: int | None) -> bytes | None:
    """The footer bytes of what `CheckedParquetFile` opened (None: a source they cannot be read from)."""
    if isinstance(opened, (str, os.PathLike)):
        return _local_tail(opened)
    if isinstance(source, StoragePath) and not isinstance(opened, pa.BufferReader):
        return tail_bytes(source, size)  # ranged reads: one more GET (lookups hand the checked footer over)
    if isinstance(opened, pa.NativeFile) and opened.seekable():
        total = opened.size()
        if total < 12:
            return None
        trailer = opened.read_at(8, total - 8)
        n = int.from_bytes(trailer[:4], "little")
        return opened.read_at(n + 8, total - 8 - n) if n + 8 <= total else None
    return None


@contextmanager
def _typed(name: str, what: str) -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"{what}: {exc}", path=name) from None


class CheckedParquetFile(pq.ParquetFile):
    """A `pq.ParquetFile` that verifies page checksums and turns read failures into `CorruptFileError`."""

    def __init__(self, source: Any, **options: Any) -> None:
        self.name = _name(source)
        ranged = bool(options.pop("ranged", False))
        size = options.pop("size", None)
        if isinstance(source, StoragePath) and (ranged or "metadata" in options):
            options.setdefault("pre_buffer", True)  # coalesce the column chunks a read needs into few GETs
        opened = _source(source, ranged or "metadata" in options, size)
        with _typed(self.name, "not a readable Parquet file"):
            super().__init__(opened, page_checksum_verification=VERIFY_PAGE_CHECKSUMS, **options)
        if "metadata" not in options:  # a footer handed over comes from `read_footer` or another open: checked
            with _typed(self.name, "not a readable Parquet file"):
                tail = _opened_tail(opened, source, size)
            check_footer(self.metadata, self.name, tail)

    def read(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _typed(self.name, "cannot read Parquet data"):
            return super().read(*args, **kwargs)

    def read_row_group(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _typed(self.name, "cannot read Parquet data"):
            return super().read_row_group(*args, **kwargs)

    def read_row_groups(self, *args: Any, **kwargs: Any) -> pa.Table:
        with _typed(self.name, "cannot read Parquet data"):
            return super().read_row_groups(*args, **kwargs)

    def iter_batches(self, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        with _typed(self.name, "cannot read Parquet data"):
            yield from super().iter_batches(*args, **kwargs)


def open_parquet(source: str | os.PathLike[str] | StoragePath | pa.NativeFile | Any,
                 **options: Any) -> CheckedParquetFile:
    """Open a data file (or an in-memory Parquet buffer) for reading; pages are checked against their CRC.

    `options` are `pq.ParquetFile`'s (`metadata=`, `pre_buffer=`, `buffer_size=`, ...).  A file on an
    object store is fetched with one GET of the whole object (fastest for whole-file reads, see
    benchmarks/bench_storage.py), or with ranged GETs when `ranged=True` or the footer is
    passed as `metadata=` (lookups that read a few row groups); `size=` spares a HEAD.
    """
    return CheckedParquetFile(source, **options)


def read_parquet(path: str | os.PathLike[str] | StoragePath, columns: list[str] | None = None, *,
                 allowed: Collection[str] | None = None, read_dictionary: Collection[str] = (),
                 use_threads: bool = True) -> pa.Table:
    """Read a Parquet data file (selected columns that exist), checksums verified, with a typed error on corruption.

    `allowed`: the columns the table's stored schema knows; a file holding another one
    is a `CorruptTableError` (the stored schema would silently drop it from reads).
    `read_dictionary`: string columns to return dictionary-encoded, as Parquet stores
    them when they hold few values (a file name, a commit time): no string per row is
    built until the caller decodes the rows it keeps. Only columns that the footer
    shows dictionary-encoded throughout (`few_values`) are; names the file lacks are ignored.
    `use_threads=False`: decode in the calling thread (a caller that reads files on several
    threads already; Arrow's column threads then cost CPU and gain nothing).
    A text column that the footer proves holds one value in every row (`constant_text`: a
    partition column, the partition path, a file name) is filled with it, not decoded.
    """
    # an object is fetched once even when it is opened twice (to learn its columns, then to read)
    source: Any = _source(path, False) if read_dictionary and isinstance(path, StoragePath) else path
    pf = open_parquet(source)
    schema = pf.schema_arrow
    names = schema.names
    cols = names if columns is None else [c for c in columns if c in names]
    if allowed is not None:
        check_columns(path, names, allowed)
    md = pf.metadata
    constants = constant_text(md, [c for c in cols if schema.field(c).type in _TEXT_TYPES])
    decode = [c for c in cols if c not in constants] if constants else cols
    wanted = [c for c in read_dictionary if c in names and c in decode and few_values(md, c)]
    if wanted:  # the footer is handed over, not parsed again
        pf = open_parquet(source, metadata=md, read_dictionary=wanted)
    pf.name = _name(path)
    table = pf.read(columns=decode, use_threads=use_threads)
    if not constants:
        return table
    n = md.num_rows
    by_name = dict(zip(decode, table.columns))
    fields, arrays = [], []
    for c in cols:
        field = schema.field(c)
        if c in constants:
            value = pa.scalar(constants[c], field.type)
            if c in read_dictionary:  # as the caller asked: one dictionary entry, every index 0
                array: Any = pa.DictionaryArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n), pa.repeat(value, 1))
                field = field.with_type(array.type)
            else:
                array = pa.repeat(value, n)
        else:
            array = by_name[c]
            field = table.schema.field(c)
        fields.append(field)
        arrays.append(array)
    with _typed(_name(path), "cannot read Parquet data"):  # a footer's row count that its pages do not hold
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=table.schema.metadata))


_TEXT_TYPES = (pa.string(), pa.large_string())


def is_text_leaf(column: Any) -> bool:
    """Whether a Parquet leaf column (`FileMetaData.schema.column(i)`) holds UTF-8 text."""
    return bool(column.physical_type == "BYTE_ARRAY" and str(column.logical_type) == "String")


def constant_text(md: pq.FileMetaData, columns: Collection[str],
                  row_groups: Collection[int] | None = None) -> dict[str, str]:
    """Those of `columns` (top-level names) that hold one text value in every row of `row_groups`
    (default: the whole file), with that value, as the footer's statistics prove it.

    A flat UTF-8 column qualifies when, in every row group, its chunk's statistics have min == max
    (raw bytes), the same value in each, a null count of 0 and one value per row.  A Hudi file's
    `_hoodie_partition_path`, `_hoodie_file_name` (a base file's), a bulk insert's
    `_hoodie_commit_time` and a partition column are such columns; decoding a column chunk has a
    fixed cost (~0.1 ms for a small dictionary-encoded one) however few its values, so readers fill
    these instead.  The statistics are trusted as row-group pruning trusts them; a column without
    them, with truncated ones (min != max) or with a null is left out (decoded).
    """
    groups = range(md.num_row_groups) if row_groups is None else row_groups
    if not columns or not groups or md.num_rows == 0:
        return {}
    schema = md.schema
    leaves = {schema.column(i).path: i for i in range(md.num_columns)}
    # a flat column's one leaf has the column's own name (a nested one's leaves have dotted paths)
    candidates = {c: leaves[c] for c in columns if c in leaves and is_text_leaf(schema.column(leaves[c]))}
    found: dict[str, bytes] = {}
    for r in groups:
        rg = md.row_group(r)
        for name, leaf in list(candidates.items()):
            chunk = rg.column(leaf)
            st = chunk.statistics
            if (st is None or not st.has_min_max or not st.has_null_count or st.null_count != 0
                    or chunk.num_values != rg.num_rows or st.min_raw != st.max_raw
                    or found.setdefault(name, st.min_raw) != st.min_raw):
                del candidates[name]
                found.pop(name, None)
        if not candidates:
            return {}
    out: dict[str, str] = {}
    for name, raw in found.items():
        try:
            out[name] = raw.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            continue
    return out


def few_values(md: pq.FileMetaData, column: str, max_bytes_per_value: int = 8) -> bool:
    """Whether every row group stores `column` with a dictionary page and few bytes per value.

    Few bytes per value means the pages hold dictionary indices, not values a
    writer fell back to (Parquet's writers give up on a dictionary that grows
    too large and write the rest of the chunk plain; decoding those into a
    dictionary would hash every value)."""
    index = next((i for i in range(md.num_columns) if md.schema.column(i).path == column), None)
    if index is None or md.num_row_groups == 0:
        return False
    for r in range(md.num_row_groups):
        chunk = md.row_group(r).column(index)
        if not chunk.has_dictionary_page or chunk.total_uncompressed_size > max_bytes_per_value * max(chunk.num_values, 1):
            return False
    return True


# columns Hudi may write into data files besides the table schema's
OPTIONAL_META_COLUMNS = ("_hoodie_operation",)


def check_columns(path: str | os.PathLike[str] | StoragePath, names: Collection[str], allowed: Collection[str]) -> None:
    """CorruptTableError when a data file holds a column the table's stored schema lacks."""
    extra = [n for n in names if n not in allowed and n not in OPTIONAL_META_COLUMNS]
    if extra:
        raise CorruptTableError(f"the file holds column{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} "
                                "that the table's stored schema lacks (reads would silently drop them)",
                                path=path, field="extraMetadata schema")


# --------------------------------------------------------------------------- footers
def kv_text(meta: Mapping[bytes, bytes] | None) -> dict[str, str]:
    """Key-value metadata as Arrow hands it over (a footer's, a schema's), decoded as UTF-8, Arrow's schema
    key excluded."""
    return {k.decode("utf-8", errors="replace"): v.decode("utf-8", errors="replace")
            for k, v in (meta or {}).items() if k != b"ARROW:schema"}


def footer_kv(md: pq.FileMetaData) -> dict[str, str]:
    """The footer key-value map of a file's metadata, decoded as UTF-8 (Arrow's schema key excluded)."""
    return kv_text(md.metadata)


def read_footer(path: str | os.PathLike[str] | StoragePath,
                size: int | None = None) -> tuple[pq.FileMetaData, dict[str, str]]:
    """A data file's Parquet metadata and its decoded key-value map (`CorruptFileError` if unreadable).

    On an object store: one ranged GET of the file's tail (plus a HEAD unless `size` is given)."""
    with _typed(_name(path), "not a readable Parquet file"):
        if isinstance(path, StoragePath):
            tail: bytes | None = tail_bytes(path, size)
            md = pq.read_metadata(pa.BufferReader(tail))
        else:
            md = pq.read_metadata(path)
            tail = _local_tail(path)
    return check_footer(md, _name(path), tail), footer_kv(md)


def footer(path: str | os.PathLike[str] | StoragePath) -> dict[str, str]:
    """The decoded footer key-value map of a data file (see `read_footer`)."""
    return read_footer(path)[1]


def is_sorted_footer(kv: Mapping[str, str]) -> bool:
    """Whether a decoded footer marks its file sorted by key (`lsm_lab.sorted = "true"`)."""
    return kv.get(KEY_SORTED) == "true"


__all__ = [
    "BLOOM_FPP",
    "COMPRESSION",
    "DEFAULT_ROW_GROUP_ROWS",
    "KEY_BLOOM",
    "KEY_MAX",
    "KEY_MIN",
    "KEY_SORTED",
    "OPTIONAL_META_COLUMNS",
    "CheckedParquetFile",
    "ParquetFileWriter",
    "check_columns",
    "constant_text",
    "dictionary_columns",
    "footer",
    "footer_kv",
    "forget_written",
    "is_sorted_footer",
    "is_text_leaf",
    "key_range",
    "kv_text",
    "open_parquet",
    "read_footer",
    "read_parquet",
    "read_tail",
    "rows_per_group",
    "write_parquet",
    "written_key_facts",
]
