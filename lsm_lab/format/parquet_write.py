"""Writing the Parquet data files of a table: the one writer.

Every data file lsm_lab writes (base files from writes and compactions, v2
data and delete logs, the output of ``lsm-lab merge``) goes through
`ParquetFileWriter`; `write_parquet` is the same writer fed one table:

    batches (sorted or not)                                 ParquetFileWriter
      │ write(batch) ─► buffer ─► row groups of `rows` ─►  pq.ParquetWriter → <dir>/.<name>.<random>.tmp
      │                 key min/max, bloom bits              (page checksums, statistics, split-block
      │                 updated per batch                     bloom on the key, sorting_columns)
      ▼ close()  footer: hoodie_min/max_record_key, lsm_lab.bloom, caller's keys
                 atomic.publish(tmp, final)                   (never overwrites, never half-visible)
                 written_facts.remember_written(...)          (the commit's key index takes them from there)

On an object store the bytes are kept in memory and sent in one PUT at close (create-if-absent):
no temporary object, never a partial file.

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

**The footer** (keys in format/parquet_footer.py): `lsm_lab.sorted` and the caller's keys (e.g. a v2
log's header) are known up front and also stored in the Arrow schema (readers of the table see them);
the key range and the bloom filter are known only once the last row is written, so they go to the
Parquet footer only (`add_key_value_metadata`).  The key column also gets Parquet's own split-block
bloom filter per row group (read by engines such as DuckDB and Spark) and, in sorted files, a
`sorting_columns` entry.  Every page is written with its CRC-32 (`write_page_checksum`), which the
reader verifies (format/parquet_read.py).

**Encodings and codecs per column** (`dictionary_columns`, `compression_of_columns`): a dictionary only
where the first values repeat, snappy only where it shrinks the first values by a fifth or more; both are
per column chunk in Parquet, so files written under other choices read the same.

**Hudi's own footer filter** (`hudi_bloom=HudiBloomOptions`, format/hudi_bloom.py): the base files of a
table that asks for it also carry upstream's `org.apache.hudi.bloomfilter` (with
`hoodie_bloom_filter_type_code` for a dynamic filter) over the same key column, built batch by batch.

Simplified compared with Apache Hudi: the filter lookups use is lsm_lab's own format under its own key
(Hudi's `org.apache.hudi.bloomfilter`, written only when asked, is a fixed-size Hadoop filter — 323 KB a
file at upstream's defaults); row groups are sized by rows and in-memory bytes, not by
Parquet's on-disk block size.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb, notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import LsmLabError
from lsm_lab.format import hudi_bloom as hb
from lsm_lab.format.bloom import BloomBuilder, key_states
from lsm_lab.format.parquet_footer import KEY_BLOOM, KEY_MAX, KEY_MIN, KEY_SORTED, OWN_KEYS, RECORD_KEY
from lsm_lab.format.written_facts import remember_written
from lsm_lab.storage import StoragePath, atomic, create_bytes, paths

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
    `hudi_bloom` (None: not written) adds upstream's footer filter of the key column (format/hudi_bloom.py).
    """

    def __init__(self, path: str | os.PathLike[str] | StoragePath, schema: pa.Schema, *,
                 metadata: Mapping[str, str] | None = None, key_column: str | None = RECORD_KEY,
                 is_sorted: bool = False, row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
                 row_group_bytes: int | None = None, bloom_fpp: float | None = BLOOM_FPP,
                 expected_rows: int | None = None, overwrite: bool = False, threaded: bool = False,
                 hudi_bloom: hb.HudiBloomOptions | None = None) -> None:
        if row_group_size < 1:
            raise LsmLabError(f"row_group_size must be >= 1, got {row_group_size}", path=path)
        self.path: Path | StoragePath = path if isinstance(path, StoragePath) else Path(path)
        paths.make_folders(self.path.parent)  # in a table: never a new folder through a link out of it
        # an object store gets the bytes in one PUT at close (atomic there): no temp object, never a partial file
        self._sink: pa.BufferOutputStream | None = pa.BufferOutputStream() if isinstance(path, StoragePath) else None
        self.tmp: Path | None = None if self._sink is not None else atomic.temp_name(Path(path))  # type: ignore[arg-type]  # (not a StoragePath here)
        self._size = 0
        own = {k.encode() for k in (*OWN_KEYS, hb.FOOTER_KEY, hb.TYPE_CODE_KEY)}
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
        #: upstream's footer filter (format/hudi_bloom.py), when the table asks for it
        self._hudi = hudi_bloom.new_filter() if hudi_bloom is not None and self.key_column is not None and _is_text(
                schema.field(self.key_column).type) else None
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
        if self._hudi is not None:
            if keys.null_count:  # a filter must hold every key: with a null key, no filter at all
                self._hudi = None
            else:
                self._hudi.add(keys)
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
        if self._hudi is not None:
            out.update(hb.footer_values(self._hudi))
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
                self._hand_over(footer)
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
        self._hand_over(footer)
        return self._size

    def _hand_over(self, footer: Mapping[str, str]) -> None:
        """Leave the file's key facts for the commit's key index (format/written_facts.py)."""
        remember_written(self.path, self._size, footer.get(KEY_MIN), footer.get(KEY_MAX), self._bloom_bytes)

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
    hudi_bloom: hb.HudiBloomOptions | None = None,
) -> int:
    """Write `table` to a new file at `path` (see `ParquetFileWriter`); returns the file size in bytes."""
    writer = ParquetFileWriter(path, table.schema, metadata=metadata, key_column=key_column, is_sorted=is_sorted,
                               row_group_size=row_group_size, row_group_bytes=row_group_bytes, bloom_fpp=bloom_fpp,
                               expected_rows=table.num_rows, hudi_bloom=hudi_bloom)
    with writer:
        writer.write(table)
    return writer._size


__all__ = [
    "BLOOM_FPP",
    "COMPRESSION",
    "DEFAULT_ROW_GROUP_ROWS",
    "ENCODE_QUEUE",
    "SORTED_ROW_GROUP_BYTES",
    "WRITE_OPTIONS",
    "ParquetFileWriter",
    "compression_of_columns",
    "dictionary_columns",
    "key_range",
    "rows_per_group",
    "write_parquet",
]
