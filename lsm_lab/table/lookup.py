"""Point lookups and key-predicate pruning: read only what can hold the keys.

A snapshot read merges every file of every file slice.  A lookup of a few
record keys needs far less, and each layer of the layout says what it may skip:

    keys ──► file slice ── bucket: hash(key) mod B ≠ the group's bucket ───────────► skip slice   (lsm_tree)
               │
               └─► each file (base, then logs in commit order)
                     │ key index: range + bloom kept with the timeline say "absent" ─► skip file, footer unread
                     │ footer range  [hoodie_min_record_key, hoodie_max_record_key]  ─► skip file
                     │ footer bloom  lsm_lab.bloom says "certainly absent"            ─► skip file
                     └─► each row group
                           │ statistics min/max of the key column                    ─► skip row group
                           │ read the KEY COLUMN only
                           │   sorted file (lsm_lab.sorted=true): binary search per key
                           │   otherwise: hash scan (is_in) over the chunk
                           └─► rows found: read the other needed columns of that row group, take the rows
                                 (a text column whose statistics show one value, min = max and no nulls,
                                  is filled with it, not decoded: footer.FileInfo.constant_text)
               │
               └─► the found versions of every file → the table's merge (same normalisation and engine
                   as a snapshot read: deletes, ordering, commit order)  ─► rows of the keys
                   (one data file holding each key once, in key order, with the table's column types:
                   its rows are what the merge would return, and are returned as they are)

**The invariant: pruning never changes results.**  Every test compares a lookup
with a full snapshot read filtered to the same keys.  That is why each step
only ever *narrows* on a proof: a footer range or statistics the writer
computed from the data, a bloom filter whose CRC verifies (a missing, damaged
or unreadable filter means "maybe" and the file is read), a sorted flag that is
re-checked on the key chunk before a binary search (an out-of-order chunk is
scanned instead).  Slices the fast path does not understand (v1 `#HUDI#` logs,
files without a usable record-key column, tables without meta fields) are read
in full and filtered: slower, never different.

**Fixed costs of a prepared reader.**  A `KeyLookup` works out once per snapshot
what does not depend on the keys (`SnapshotFacts`: the column plans, each slice's
files in merge order, each slice's bucket); per lookup it hashes the keys once
(a few keys with Python ints, format/bloom.py) and shares the answer among the
slices of one bucket.  A small row group (a sorted file's 1 MiB) is decoded on
the calling thread: pyarrow's thread pool only pays from `READ_THREADS_MIN_BYTES`,
and on a busy machine its wake-ups cost more than the decoding they share out.

**Counting.**  `LookupStats` (stats.py) counts what the reader did: footers
read from disk, files whose data pages were opened, row groups read, and the
compressed size of every column chunk read.  Footers of immutable files are
cached per process (footer.py): a serving process pays for a footer and its
bloom once.  Key predicates (predicate.py) come from `Table.lookup`'s keys or
from the record-key conditions of a `read(filter=...)`.

**Cumulative filters.**  RFC-06 discusses keeping one cumulative bloom filter
and key range per file slice so an index checks one filter per slice.  lsm_lab
keeps per-file filters only: logs are immutable, so a cumulative filter must
either be rebuilt from every key of the slice on each commit (the write
amplification the LSM layout exists to avoid) or be the OR of per-file filters,
whose false-positive rate climbs with every log and never recovers until
compaction; a cumulative range is the union of ranges, which random or bucketed
keys make the whole key space.  `lsm_lab.bench.lookup.cumulative_tradeoff`
measures both (see the lookup benchmark's `--cumulative` mode).

**The key index.**  A `KeyLookup` loads, once per snapshot, the key index
sidecars the writers filed next to the timeline (lsm_lab/format/keyindex.py):
each written file's key range and bloom.  A file they rule out is skipped
without opening its footer (`LookupStats.footers_skipped`); a file they do not
know (older tables, real Hudi tables, a damaged sidecar) takes the footer path.

Simplified compared with Apache Hudi: Hudi uses footers' blooms and ranges in
its *write-path* index (HoodieBloomIndex) and, with the metadata table, the
`bloom_filters` and `column_stats` partitions; it has no sorted-file binary
search.  lsm_lab's key index is a sidecar per instant instead of a metadata
table, and page-level indexes (Parquet column/offset indexes) are not used: the
smallest unit read is a column chunk of one row group.

Taught in: notebooks/08_point_lookups.ipynb, notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.filegroup import index, v1read
from lsm_lab.filegroup import read as reader
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.filegroup.read import ReadContext
from lsm_lab.format import keyindex, naming, parquet_read, ranged
from lsm_lab.format.bloom import BloomFilter, key_hashes
from lsm_lab.merge import choose_engine, merge_to_table_safely, records
from lsm_lab.merge.records import FILE_NAME, PARTITION_PATH, RECORD_KEY
from lsm_lab.storage import StoragePath
from lsm_lab.table.footer import FOOTERS, FileInfo, FooterCache, clear_footer_cache
from lsm_lab.table.predicate import KeyPredicate, key_predicate
from lsm_lab.table.state import TableState
from lsm_lab.table.stats import LookupStats
from lsm_lab.timeline.instanttime import TimeLike

DELETE_KEY = "record_key"  # the key column of v2 delete logs
#: a read of a row group's columns uses pyarrow's thread pool only when they hold this many compressed bytes:
#: a small read (a sorted file's 1 MiB row group, ~0.3 MB without the key columns) decodes faster on the
#: calling thread, and far more predictably on a busy machine (pyarrow's pool waits for a free core), while a
#: large one (the other columns of an unsorted file's 64k-row group, ~3.2 MB) gains from decoding its columns
#: in parallel.  Both layouts follow this rule.  (It was 4 MiB while that read also decoded the key field's
#: twin, 5.8 MB; without it the unsorted read fell under the line and lost its threads.)
READ_THREADS_MIN_BYTES = 2 << 20
_FEW_ROWS = 8  # up to this many rows found in one file of a slice, they may skip the merge (`_sole_versions`)


def _check_provenance(ctx: ReadContext, info: FileInfo, f: DataFile) -> None:
    """The footer's statistics of `_hoodie_file_name` and `_hoodie_partition_path` (`partition_path` in a
    delete log) name the file's own group and partition, and its key range hashes to its bucket (a file
    lsm_lab wrote): a file swapped in from elsewhere is refused before a probe can miss its keys.  The
    same rules as `read.data_source` / `read.delete_source` apply to the rows of a full read."""
    key_col = (RECORD_KEY if RECORD_KEY in info.columns else DELETE_KEY) if f.name.is_delete else RECORD_KEY
    ends = [info.min_key, info.max_key] if info.min_key is not None else list(info.key_stats(key_col)[0][:2]) \
        if info.num_row_groups else []
    reader.check_bucket(ctx, ends, f.partition, f.path)
    for lo, hi, _ in info.key_stats(FILE_NAME)[:1]:
        for value in (lo, hi):
            theirs = naming.parse(value) if value else None
            if theirs is not None and theirs.file_id != f.file_id:
                raise CorruptFileError(f"its footer says its rows belong to the file {value}: the file was swapped "
                                       "or copied from elsewhere (its rows cannot be trusted)", path=f.path)
    for lo, hi, _ in info.key_stats("partition_path" if f.name.is_delete else PARTITION_PATH)[:1]:
        if lo is not None and (lo != f.partition or hi != f.partition):
            raise CorruptFileError(f"its footer says its rows belong to the partition {lo!r}: the file was swapped "
                                   "or copied from elsewhere (its rows cannot be trusted)", path=f.path)


class _Fallback(Exception):
    """Internal: this slice cannot use the fast path; read it in full and filter."""


# --------------------------------------------------------------------------- one file
class _KeyView:
    """A string column's values as UTF-8 `bytes`, by index, straight from Arrow's buffers (for bisect)."""

    __slots__ = ("_data", "_n", "_offsets")

    def __init__(self, arr: pa.Array) -> None:
        width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
        n = len(arr)
        self._offsets = np.frombuffer(arr.buffers()[1], dtype=width)[arr.offset : arr.offset + n + 1]
        buf = arr.buffers()[2]
        self._data = memoryview(buf) if buf is not None else memoryview(b"")
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> bytes:
        return self._data[int(self._offsets[i]) : int(self._offsets[i + 1])].tobytes()


def _binary_search(arr: pa.Array, pred: KeyPredicate, keys: Sequence[str]) -> np.ndarray:
    """Row positions of the wanted keys in a strictly sorted key chunk, by bisection."""
    view = _KeyView(arr)
    n = len(view)
    if pred.keys is not None:
        hits = []
        lo = 0
        for k in keys:  # keys are sorted: each search starts where the previous one ended
            kb = k.encode("utf-8")
            i = bisect.bisect_left(view, kb, lo, n)
            if i < n and view[i] == kb:
                hits.append(i)
            lo = i
        return np.asarray(hits, dtype=np.int64)
    a, b = 0, n
    if pred.lo is not None:
        lb = pred.lo.encode("utf-8")
        a = (bisect.bisect_left if pred.lo_inclusive else bisect.bisect_right)(view, lb, 0, n)
    if pred.hi is not None:
        hb = pred.hi.encode("utf-8")
        b = (bisect.bisect_right if pred.hi_inclusive else bisect.bisect_left)(view, hb, a, n)
    return np.arange(a, max(a, b), dtype=np.int64)


def _cheaper_to_bisect(num_keys: int, rows: int) -> bool:
    # ~log2(rows) Python-level probes per key versus one vectorised pass over the chunk
    return num_keys * max(1, rows.bit_length()) * 40 <= rows


def _as_string_array(col: pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr
    if pa.types.is_string_view(arr.type):
        return arr.cast(pa.string())
    raise _Fallback(f"key column has type {arr.type}")


def probe_file(info: FileInfo, key_col: str, pred: KeyPredicate, hashes: tuple[np.ndarray, np.ndarray] | None,
               columns: Sequence[str], stats: LookupStats, *, use_bloom: bool = True,
               use_binary_search: bool = True, indexed_bloom: BloomFilter | None = None,
               twin: str | None = None) -> pa.Table | None:
    """The rows of one data file whose key satisfies `pred` (the file's `columns` that exist), or None.

    `hashes` are the bloom hashes of `pred.keys` (computed here when None).  A
    sorted file's key chunk is checked to be strictly increasing (one vectorised
    comparison) before it is bisected; many keys against a small chunk use one
    hash scan instead, which is cheaper than many Python-level bisections.
    Raises `_Fallback` when the file's key column cannot be trusted for pruning.
    `indexed_bloom`: the file's filter from the key index (format/keyindex.py), used instead of
    decoding the footer's copy.  `twin`: a column that holds the key column's values in every row (the
    key field of a simple key generator, `read.key_from_field`): it is not decoded but filled from the
    found keys, as a snapshot read fills it (one column chunk less per row group read).
    """
    name = os.path.basename(info.path)
    stats.files += 1
    if key_col not in info.columns:
        raise _Fallback(f"{name} has no {key_col} column")
    # 1. the file's key range and bloom filter
    wanted: list[int] | None = None  # indices into pred.keys still possible in this file
    if pred.keys is not None:
        a, b = pred.keys_between(info.min_key, info.max_key)
        if a >= b:
            stats.files_pruned_range += 1
            stats.note(f"{name}: skipped, key range [{info.min_key}, {info.max_key}]")
            return None
        wanted = list(range(a, b))
        bloom = (indexed_bloom if indexed_bloom is not None else info.bloom()) if use_bloom else None
        if bloom is None:
            stats.files_without_bloom += 1
            if use_bloom:
                stats.note(f"{name}: bloom {info.bloom_status}: cannot skip by bloom")
        else:
            if hashes is None:
                hashes = key_hashes(pred.keys)
            ok = bloom.contains_hashes(hashes[0][a:b], hashes[1][a:b])
            wanted = [i for i, hit in zip(wanted, ok.tolist()) if hit]
            if not wanted:
                stats.files_pruned_bloom += 1
                stats.note(f"{name}: skipped, bloom says none of {b - a} key(s) is here")
                return None
    elif not pred.overlaps(info.min_key, info.max_key):
        stats.files_pruned_range += 1
        stats.note(f"{name}: skipped, key range [{info.min_key}, {info.max_key}]")
        return None
    # 2. row groups by statistics
    stats.row_groups += info.num_row_groups
    plan: list[tuple[int, list[str]]] = []
    candidates = None if wanted is None or pred.keys is None else [pred.keys[i] for i in wanted]  # sorted
    for rg, (lo, hi, nulls) in enumerate(info.key_stats(key_col)):
        if nulls:
            raise _Fallback(f"{name} row group {rg} has null keys")
        if candidates is not None:
            a = 0 if lo is None else bisect.bisect_left(candidates, lo)
            b = len(candidates) if hi is None else bisect.bisect_right(candidates, hi)
            if a < b:
                plan.append((rg, candidates[a:b]))
        elif pred.overlaps(lo, hi):
            plan.append((rg, []))
    if not plan:
        stats.note(f"{name}: skipped, no row group's statistics admit the key(s)")
        return None
    # 3. read the key column of the candidate row groups, find the rows, then read the rest
    stats.files_opened += 1
    if twin is not None and (twin == key_col or twin not in info.columns):
        twin = None
    others = [c for c in columns if c in info.columns and c != key_col and c != twin]
    options: dict[str, Any] = {}
    if not isinstance(info.source, StoragePath):
        options["pre_buffer"] = False  # local reads of one or two chunks: no pre-buffering
    source: Any = info.source if info.source is not None else info.path
    if isinstance(source, StoragePath) and info.size:
        # the row groups to read, coalesced: one ranged GET from the first to the last when that span is at
        # most twice their bytes or holds at most ranged.WHOLE_MAX (8 MiB) between them (the bytes between
        # cost less than a request; two 8 MiB windows held as much), else windows of up to 8 MiB of
        # consecutive row groups, one GET each.  One row group is one GET too: left to pyarrow's pre-buffer,
        # its key chunk and the other columns wanted were two when unwanted chunks (over 8 KiB) lay between
        rg_spans = ranged.row_group_spans(info.metadata)
        hit_spans = [rg_spans[rg] for rg, _ in plan if rg < len(rg_spans)]
        if len(hit_spans) == len(plan):
            first = min(a for a, _ in hit_spans)
            last = max(b for _, b in hit_spans)
            hit = sum(b - a for a, b in hit_spans)
            if last - first <= max(2 * hit, hit + ranged.WHOLE_MAX):
                window, keep = last - first, 1
            else:
                window, keep = ranged.WHOLE_MAX, 2
            source = pa.PythonFile(ranged.WindowedObject(source, info.size, b"", rg_spans, window=window, keep=keep),
                                   mode="r")
    try:
        pf = parquet_read.open_parquet(source, metadata=info.metadata, size=info.size, **options)
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"cannot open Parquet file: {exc}", path=info.path) from None
    pieces: list[pa.Table] = []
    # on an object store every read is a request: the key column and the others of a row group are fetched
    # together (one coalesced ranged GET), locally the others only for the rows found
    together = isinstance(info.source, StoragePath)
    for rg, ks in plan:
        early: pa.Table | None = None
        try:
            key_bytes = info.chunk_bytes(rg).get(key_col, 0)
            if together:
                constants_rg = info.constant_text(rg, others) if others else {}
                fetch_cols = [c for c in others if c not in constants_rg]
                early = pf.read_row_group(rg, columns=[key_col, *fetch_cols], use_threads=False)
                key_tbl = early.select([key_col])
                stats.data_bytes += sum(info.chunk_bytes(rg).get(c, 0) for c in fetch_cols)
            else:
                key_tbl = pf.read_row_group(rg, columns=[key_col], use_threads=key_bytes >= READ_THREADS_MIN_BYTES)
        except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
            raise CorruptFileError(f"cannot read row group {rg}: {exc}", path=info.path) from None
        stats.row_groups_read += 1
        stats.data_bytes += key_bytes
        arr = _as_string_array(key_tbl.column(0))
        if arr.null_count:
            raise _Fallback(f"{name} row group {rg} has null keys")
        sub = KeyPredicate(keys=tuple(ks)) if pred.keys is not None else pred
        sorted_here = (use_binary_search and info.is_sorted and records.is_strictly_sorted(arr)
                       and (pred.keys is None or _cheaper_to_bisect(len(ks), len(arr))))
        if sorted_here:
            stats.binary_searches += 1
            idx = _binary_search(arr, sub, ks)
            how = "binary search"
        else:
            stats.scans += 1
            idx = np.flatnonzero(sub.mask(arr))
            how = "scan"
        stats.note(f"{name}: row group {rg} ({info.rg_rows[rg]} rows) {how}: {len(idx)} row(s)")
        if len(idx) == 0:
            continue
        take = pa.array(idx, pa.int64())  # a copy: a slice would pin the whole row group's buffers
        cols: dict[str, pa.Array | pa.ChunkedArray] = {key_col: arr.take(take)}
        if twin is not None:
            cols[twin] = cols[key_col]
        constants = info.constant_text(rg, others) if others else {}
        decode = [c for c in others if c not in constants] if constants else others
        if decode and early is not None:
            rest = early.select(decode).take(take)
            cols.update(zip(rest.column_names, rest.columns))
        elif decode:
            try:
                rest_bytes = sum(info.chunk_bytes(rg).get(c, 0) for c in decode)
                rest = pf.read_row_group(rg, columns=decode, use_threads=rest_bytes >= READ_THREADS_MIN_BYTES)
            except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
                raise CorruptFileError(f"cannot read row group {rg}: {exc}", path=info.path) from None
            stats.data_bytes += rest_bytes
            rest = rest.take(take)
            cols.update(zip(rest.column_names, rest.columns))  # (a lookup by name per column cost ~3%)
        for column, value in constants.items():  # one value in every row of the group, by its statistics
            cols[column] = pa.repeat(pa.scalar(value, info.text_types[column]), len(idx))
        pieces.append(pa.Table.from_arrays(list(cols.values()), names=list(cols)))
    if not pieces:
        return None
    out = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    stats.rows_matched += out.num_rows
    return out


# --------------------------------------------------------------------------- one slice
def _ordered_logs(ctx: ReadContext, fs: FileSlice) -> list[DataFile]:
    """The slice's log files in the order a snapshot read merges them (v1 logs → _Fallback)."""
    if any(f.name.log_format == 1 for f in fs.log_files):
        raise _Fallback("v1 log files")
    units = v1read.ordered_units(ctx.completion_of, ctx.read_time, fs, strict=ctx.strict, stats=ctx.stats)
    if any(getattr(u, "is_v1", False) for u in units):
        raise _Fallback("v1 log blocks")
    return [u.file for u in units]


def _where(fs: FileSlice) -> str:
    return f"{fs.partition}/{fs.file_id}" if fs.partition else fs.file_id


@dataclass(frozen=True)
class ColumnPlan:
    """The schemas of a pruned read of some columns: what to read, what the merge gets, what comes out."""

    needed: list[str]  # the columns asked for, plus key, commit time and ordering field
    out_schema: pa.Schema  # `needed`, as typed in the table
    empty: pa.Table  # `out_schema`'s empty table (pyarrow's empty_table costs ~60 µs a call)
    target: pa.Schema  # every merge source is conformed to it
    file_cols: list[str]  # the columns read from a data file
    twin: str | None  # the key field of a simple key generator (equals `_hoodie_record_key` row by row), if read


class SnapshotFacts:
    """What a pruned read works out about one snapshot whatever the keys: computed on first use, then kept.

    Per set of columns its `ColumnPlan`; per file slice the files in merge order
    (base, then logs in commit order; or why the slice needs the full read) and
    the bucket its file id proves (lsm_tree).  None of it depends on the keys, so a
    `KeyLookup` keeps one for all its lookups: before, every lookup redid it for
    every slice (~0.5 ms of a 3.5 ms cold lookup on the 1M-row bench table, twelve
    slices).  A one-off `PrunedReader` (a filtered `read`) makes its own.
    """

    def __init__(self, ctx: ReadContext) -> None:
        self.ctx = ctx
        self._plans: dict[tuple[str, ...] | None, ColumnPlan] = {}
        self._files: dict[tuple[str, str], list[DataFile] | str] = {}
        self._buckets: dict[tuple[str, str], int | None] = {}

    def columns(self, columns: Sequence[str] | None) -> ColumnPlan:
        """The `ColumnPlan` of `columns` (None: every column of the table)."""
        key = None if columns is None else tuple(columns)
        plan = self._plans.get(key)
        if plan is None:
            ctx = self.ctx
            needed = reader.needed_columns(ctx, columns)
            full = ctx.full_schema
            out_schema = pa.schema([full.field(n) for n in needed])
            target = reader.target_schema(ctx, needed)
            file_cols = reader.file_columns(needed, ctx)
            field = ctx.config.record_key[0] if ctx.config.record_key else None
            twin = field if field is not None and field in file_cols and reader.key_from_field(ctx) else None
            plan = ColumnPlan(needed, out_schema, out_schema.empty_table(), target, file_cols, twin)
            self._plans[key] = plan
        return plan

    def files(self, fs: FileSlice) -> list[DataFile]:
        """The slice's files in the order a snapshot read merges them; `_Fallback` when it cannot be pruned."""
        key = (fs.partition, fs.file_id)
        got = self._files.get(key)
        if got is None:
            try:
                got = ([fs.base_file] if fs.base_file is not None else []) + _ordered_logs(self.ctx, fs)
            except _Fallback as why:
                got = str(why)
            self._files[key] = got
        if isinstance(got, str):
            raise _Fallback(got)
        return got

    def bucket(self, fs: FileSlice) -> int | None:
        """The bucket of an lsm_tree slice whose file id is the one lsm_lab gives that bucket, else None."""
        key = (fs.partition, fs.file_id)
        if key not in self._buckets:
            config = self.ctx.config
            b = index.bucket_of_file_id(fs.file_id)
            if b is not None and fs.file_id != index.file_id_of_bucket(config.upstream_format, config.name,
                                                                       fs.partition, b):
                b = None
            self._buckets[key] = b
        return self._buckets[key]


class PrunedReader:
    """Reads file slices restricted to a key predicate; built once per lookup or filtered read.

    Work that does not depend on the slice (the hashes of the keys, their
    buckets, the schemas) is done once here, so a lookup over many slices pays
    it once.
    """

    def __init__(self, ctx: ReadContext, pred: KeyPredicate, *, columns: Sequence[str] | None = None,
                 engine: str | None = None, stats: LookupStats | None = None, use_bloom: bool = True,
                 use_binary_search: bool = True, use_buckets: bool = True,
                 footers: FooterCache | None = None, index: keyindex.KeyIndex | None = None,
                 facts: SnapshotFacts | None = None) -> None:
        self.ctx = ctx
        self.pred = pred.normalised()
        self.engine = engine
        self.stats = stats if stats is not None else LookupStats()
        self.use_bloom = use_bloom
        self.use_binary_search = use_binary_search
        self.use_buckets = use_buckets
        self.footers = footers or FOOTERS
        self.index = index
        self.facts = facts if facts is not None else SnapshotFacts(ctx)
        plan = self.facts.columns(columns)
        self.needed = plan.needed
        self.out_schema = plan.out_schema
        self._empty = plan.empty
        self.target = plan.target
        self.file_cols = plan.file_cols
        self.twin = plan.twin  # decoded once per row group, as the key column (`probe_file`)
        self.allowed = reader.allowed_columns(ctx)  # a data file holding another column is a CorruptTableError
        self._hashes: tuple[np.ndarray, np.ndarray] | None = None
        self._buckets: np.ndarray | None = None
        self._by_bucket: dict[int, tuple[KeyPredicate, tuple[np.ndarray, np.ndarray] | None] | None] = {}

    # ------------------------------------------------------------------ per-key facts, computed once
    def _key_hashes(self) -> tuple[np.ndarray, np.ndarray]:
        if self._hashes is None:
            assert self.pred.keys is not None
            self._hashes = key_hashes(self.pred.keys)
        return self._hashes

    def _narrow(self, fs: FileSlice) -> tuple[KeyPredicate, tuple[np.ndarray, np.ndarray] | None] | None:
        """The predicate and key hashes for one slice; None when bucket pruning rules the slice out.

        lsm_tree tables place a key in a bucket by a hash of the key (lsm_lab/filegroup/index.py),
        so a bucket file group lsm_lab wrote can only hold the keys of its bucket.
        """
        pred = self.pred
        if pred.keys is None:
            return pred, None
        config = self.ctx.config
        if self.use_buckets and config.is_lsm:
            b = self.facts.bucket(fs)
            if b is not None:
                if b not in self._by_bucket:  # the slices of one bucket (one per partition) share the answer
                    self._by_bucket[b] = self._keys_of_bucket(b)
                return self._by_bucket[b]
        return pred, self._key_hashes()

    def _keys_of_bucket(self, b: int) -> tuple[KeyPredicate, tuple[np.ndarray, np.ndarray] | None] | None:
        pred = self.pred
        assert pred.keys is not None
        if self._buckets is None:
            config = self.ctx.config
            up = config.upstream_format  # table version 10: Hudi's Java-hash buckets
            keys = pa.array(pred.keys, pa.string())
            parts = index.key_values_from_keys(keys, config.record_key) if up else []
            if parts is None:  # a composite key that does not split cleanly: no bucket pruning
                return pred, self._key_hashes()
            self._buckets = index.bucket_ids_of(up, parts, keys, config.num_buckets)
        keep = np.flatnonzero(self._buckets == b)
        if len(keep) == 0:
            return None
        if len(keep) < len(pred.keys):
            h1, h2 = self._key_hashes()
            return KeyPredicate(keys=tuple(pred.keys[i] for i in keep)), (h1[keep], h2[keep])
        return pred, self._key_hashes()

    # ------------------------------------------------------------------ one slice
    def read_slice(self, fs: FileSlice) -> pa.Table:
        """`read.read_slice` restricted to the predicate's keys: the same rows for them, reading less."""
        stats = self.stats
        stats.slices += 1
        if self.pred.is_empty:
            return self._empty
        narrowed = self._narrow(fs)
        if narrowed is None:
            stats.slices_pruned_bucket += 1
            stats.note(f"slice {_where(fs)}: skipped, no key hashes to its bucket")
            return self._empty
        pred, hashes = narrowed
        try:
            return self._fast_slice(fs, pred, hashes)
        except _Fallback as why:
            stats.slices_fallback += 1
            stats.note(f"slice {_where(fs)}: read in full ({why})")
            full = reader.read_slice(self.ctx, fs, columns=self.needed, engine=self.engine)
            if full.num_rows == 0:
                return full
            return full.filter(pa.array(pred.mask(_as_string_array(full.column(RECORD_KEY)))))

    def whole_batches(self, slices: Sequence[FileSlice]) -> Iterator[tuple[list[FileSlice], list[StoragePath]]]:
        """The slices in batches, each with the object-store files to fetch whole before probing it
        (`ranged.whole_objects`): files whose footer is not cached and that the key index (checked for the
        whole key set, as cheap as it is) cannot rule out, of at most `ranged.WHOLE_MAX` bytes, or larger
        when the keys it admits would read most of the file anyway (`ranged.whole_pays`); a batch holds at
        most `ranged.WHOLE_BUDGET` bytes of them.  Locally: one batch, nothing to fetch."""
        batch: list[FileSlice] = []
        fetch: list[StoragePath] = []
        held = 0
        pred = self.pred
        for fs in slices:
            wanted: list[tuple[StoragePath, int]] = []
            narrowed = None if pred.is_empty else self._narrow(fs)
            try:
                files = self.facts.files(fs) if narrowed is not None else []
            except _Fallback:  # (read in full by `read_slice`: nothing to fetch ahead)
                files = []
            if narrowed is not None:
                for f in files:
                    if not isinstance(f.path, StoragePath) or not f.size or f.size > ranged.WHOLE_BUDGET \
                            or f.name.ext != "parquet" or self.footers.has(f.path, f.size):
                        continue
                    entry = self.index.entry(f.path.name, f.size) if self.index is not None else None
                    admitted = self._index_admits(entry, *narrowed) if entry is not None else None
                    if admitted == 0:
                        continue
                    if ranged.whole_pays(f.size, admitted):
                        wanted.append((f.path, f.size))
            size = sum(n for _, n in wanted)
            if batch and held + size > ranged.WHOLE_BUDGET:
                yield batch, fetch
                batch, fetch, held = [], [], 0
            batch.append(fs)
            fetch.extend(p for p, _ in wanted)
            held += size
        if batch:
            yield batch, fetch

    def _index_admits(self, entry: keyindex.IndexEntry, pred: KeyPredicate,
                      hashes: tuple[np.ndarray, np.ndarray] | None) -> int | None:
        """How many of the keys the file's key index entry admits (range, then bloom), counting nothing (a
        prefetch decision only): 0 when it rules the file out, None for a predicate without keys that it
        cannot rule out."""
        if pred.keys is None:
            return None if pred.overlaps(entry.min_key, entry.max_key) else 0
        a, b = pred.keys_between(entry.min_key, entry.max_key)
        if a >= b:
            return 0
        bloom = entry.bloom() if self.use_bloom else None
        if bloom is None:
            return b - a
        h1, h2 = hashes if hashes is not None else key_hashes(pred.keys)
        return int(np.count_nonzero(bloom.contains_hashes(h1[a:b], h2[a:b])))

    def _index_rules_out(self, entry: keyindex.IndexEntry, f: DataFile, pred: KeyPredicate,
                         hashes: tuple[np.ndarray, np.ndarray] | None) -> bool:
        """True when the key index proves the file holds none of the keys (its footer is then never read)."""
        stats = self.stats
        why = None
        if pred.keys is None:
            if not pred.overlaps(entry.min_key, entry.max_key):
                why = "range"
        else:
            a, b = pred.keys_between(entry.min_key, entry.max_key)
            if a >= b:
                why = "range"
            else:
                bloom = entry.bloom() if self.use_bloom else None
                if bloom is not None:
                    h1, h2 = hashes if hashes is not None else key_hashes(pred.keys)
                    if b - a == 1:  # one key (a point lookup): no NumPy round trip per file
                        maybe = bloom.contains_hash(int(h1[a]), int(h2[a]))
                    else:
                        maybe = bool(bloom.contains_hashes(h1[a:b], h2[a:b]).any())
                    if not maybe:
                        why = "bloom"
        if why is None:
            return False  # probe_file counts the file
        stats.files += 1
        if why == "range":
            stats.files_pruned_range += 1
        else:
            stats.files_pruned_bloom += 1
        if stats.trace is not None:  # (a lookup rules out most files: their notes are formatted only when traced)
            stats.note(f"{f.path.name}: skipped by the key index, key range [{entry.min_key}, {entry.max_key}]"
                       if why == "range" else
                       f"{f.path.name}: skipped by the key index, its bloom says none of the key(s) is here")
        return True

    def _sole_versions(self, found: pa.Table) -> pa.Table | None:
        """The rows of the only data file of a slice that holds the keys, when they are the merge's answer
        as they are: a few rows, in key order with no key twice, every needed column present with the
        table's type, keys and partition filled in.  One version of a key and no delete is what the merge
        would keep (whatever its mode or ordering), and the file's columns need no conforming; the merge's
        fixed cost (~0.2 ms: conforming, the engine's set-up) is then skipped.  None: merge as usual."""
        if found.num_rows > _FEW_ROWS:
            return None
        schema = found.schema
        for field in self.out_schema:
            i = schema.get_field_index(field.name)
            if i < 0 or schema.field(i).type != field.type:
                return None
        for name in (RECORD_KEY, PARTITION_PATH):
            if name in self.needed and found.column(name).null_count:
                return None
        keys = found.column(RECORD_KEY).to_pylist()
        if any(a >= b for a, b in itertools.pairwise(keys)):  # a key twice, or out of the merge's key order
            return None
        return found.select(self.needed)

    def _fast_slice(self, fs: FileSlice, pred: KeyPredicate,
                    hashes: tuple[np.ndarray, np.ndarray] | None) -> pa.Table:
        ctx, stats = self.ctx, self.stats
        if not ctx.config.populate_meta_fields:
            raise _Fallback("the table does not populate meta fields")
        files = self.facts.files(fs)
        found_in: list[tuple[pa.Table, DataFile, bool]] = []  # rows found, their file, from a delete log
        all_sorted = True
        for f in files:
            if f.name.ext != "parquet":
                raise UnsupportedFeatureError(f"{f.name.ext} data files are not supported (only Parquet)",
                                              path=f.path)
            entry = self.index.entry(f.path.name, f.size) if self.index is not None else None
            if entry is not None:
                stats.files_indexed += 1
                if self._index_rules_out(entry, f, pred, hashes):
                    stats.footers_skipped += 1
                    continue
            info = self.footers.get(f.path, stats, size=f.size)
            all_sorted = all_sorted and info.is_sorted
            delete = f.name.is_delete
            if ctx.own_files:
                _check_provenance(ctx, info, f)
            if not delete and self.allowed is not None:  # as a read checks it: a column the table lacks
                parquet_read.check_columns(f.path, info.columns, self.allowed)
            key_col = (RECORD_KEY if RECORD_KEY in info.columns else DELETE_KEY) if delete else RECORD_KEY
            found = probe_file(info, key_col, pred, hashes,
                               list(info.columns) if delete else self.file_cols, stats,
                               use_bloom=self.use_bloom, use_binary_search=self.use_binary_search,
                               indexed_bloom=entry.bloom() if entry is not None else None,
                               twin=None if delete else self.twin)
            if found is not None:
                found_in.append((found, f, delete))
        if not found_in:
            return self._empty
        if len(found_in) == 1 and not found_in[0][2]:
            alone = self._sole_versions(found_in[0][0])
            if alone is not None:
                stats.note(f"slice {_where(fs)}: one file holds the key(s), once each: its rows are the answer")
                return alone
        sources = [reader.delete_source(ctx, found, self.target, f.partition, f.path) if delete
                   else reader.data_source(ctx, found, self.target, f.partition, f.path)
                   for found, f, delete in found_in]
        where = f"file group {_where(fs)}"
        chosen = choose_engine(self.engine, lsm=ctx.config.is_lsm, inputs_sorted=all_sorted, where=where)
        merged = merge_to_table_safely(lambda: sources, ctx.spec, chosen, where=where)  # never wrong rows
        return merged.select(self.needed)


# --------------------------------------------------------------------------- many slices
def as_keys(keys: str | Iterable[str] | pa.Array | pa.ChunkedArray) -> list[str]:
    if isinstance(keys, str):
        return [keys]
    if isinstance(keys, Mapping):  # its keys? its values? a dict is not a list of record keys
        raise InputError(f"lookup keys must be a string or a list of record-key strings, not a "
                         f"{type(keys).__name__} ({keys!r:.80}); pass list(d) to look up a dict's keys")
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
            raise InputError(f"lookup keys must be strings, got an Arrow array of {keys.type}")
        values = keys.to_pylist()
    else:
        try:
            values = list(keys)
        except TypeError:
            raise InputError(f"lookup keys must be a string or an iterable of strings, "
                             f"got {type(keys).__name__}") from None
    bad = [v for v in values if not isinstance(v, str)]
    if bad:
        raise InputError(f"lookup keys must be record-key strings (composite keys as 'f1:v1,f2:v2'); "
                         f"got {bad[0]!r} ({type(bad[0]).__name__})")
    return cast("list[str]", values)


def lookup_slices(ctx: ReadContext, slices: Iterable[FileSlice], pred: KeyPredicate, *,
                  columns: Sequence[str] | None = None, engine: str | None = None,
                  stats: LookupStats | None = None, facts: SnapshotFacts | None = None,
                  **options: Any) -> pa.Table:
    """Merged rows of every slice for the keys of `pred`, in (record key, partition) order.

    `facts`: what a prepared reader already knows about the snapshot (`KeyLookup` passes its own)."""
    facts = facts if facts is not None else SnapshotFacts(ctx)
    out_cols = list(columns) if columns is not None else facts.columns(None).out_schema.names
    needed = facts.columns(out_cols).needed
    if PARTITION_PATH not in needed:
        needed = [*needed, PARTITION_PATH]  # for the output order
    plan = facts.columns(needed)
    pruned = PrunedReader(ctx, pred, columns=needed, engine=engine, stats=stats, facts=facts, **options)
    slices = list(slices)
    pieces: list[pa.Table] = []
    for batch, fetch in pruned.whole_batches(slices):  # object stores: small files in one GET each, in parallel
        with ranged.whole_objects(fetch):
            pieces.extend(p for p in (pruned.read_slice(fs) for fs in batch) if p.num_rows)
    if not pieces:
        return plan.empty.select(out_cols)
    schema = plan.out_schema
    table = pa.concat_tables([p if p.schema.equals(schema) else p.cast(schema) for p in pieces])
    if table.num_rows > 1:  # one row (a point lookup's usual answer) is in order already
        order = pc.sort_indices(table, sort_keys=[(RECORD_KEY, "ascending"), (PARTITION_PATH, "ascending")])
        table = table.take(order)
    return table.select(out_cols)


def load_index(ctx: ReadContext, slices: Iterable[FileSlice]) -> keyindex.KeyIndex:
    """The key index entries of the files of `slices` (their instants' sidecars; decoded sidecars are cached
    per process).  A file without a usable entry takes the footer path, so a missing index only costs time."""
    return keyindex.load_index(ctx.base_path, {f.instant for fs in slices for f in fs.files})


class KeyLookup:
    """A prepared point-lookup reader over one snapshot of a table (its slices listed once).

    `Table.lookup` builds one per call; a long-lived reader (a service, the
    benchmark) keeps one and pays the timeline and folder listing only once.
    It answers as of the moment it was opened: commits made later are not seen
    (open a new one), and a cleaner removing its files makes lookups fail with
    `CorruptFileError` rather than answer from a partial slice.
    """

    def __init__(self, ctx: ReadContext, slices: Sequence[FileSlice], *, use_index: bool = True) -> None:
        self.ctx = ctx
        self.slices = list(slices)
        self.facts = SnapshotFacts(ctx)  # per-snapshot facts every lookup reuses
        self.index: keyindex.KeyIndex | None = None
        if use_index:
            self.load_index()

    def load_index(self, stats: LookupStats | None = None) -> keyindex.KeyIndex:
        """(Re)load the key index sidecars of the instants whose files this snapshot holds (cached per process);
        `stats` counts the sidecar bytes read from storage."""
        self.index = load_index(self.ctx, self.slices)
        if stats is not None:
            stats.index_bytes += self.index.bytes_read
        return self.index

    def lookup(self, keys: str | Iterable[str] | pa.Array, *, columns: Sequence[str] | None = None,
               stats: LookupStats | None = None, engine: str | None = None, use_index: bool = True,
               **options: Any) -> pa.Table:
        """Rows with the given keys; `use_index=False` ignores the key index (every candidate footer is read)."""
        pred = KeyPredicate.of_keys(as_keys(keys))
        index = self.index if use_index else None
        if stats is not None and index is not None:
            stats.index_sidecars += index.sidecars_loaded
            stats.index_sidecars_damaged += index.sidecars_damaged
        return lookup_slices(self.ctx, self.slices, pred, columns=columns, engine=engine, stats=stats, index=index,
                             facts=self.facts, **options)


def open_lookup(table: TableState, *, as_of: TimeLike | None = None) -> KeyLookup:
    """A `KeyLookup` over the snapshot of `table` at `as_of` (default: latest)."""
    read_time = table.resolve_time(as_of)
    table.check_retained(read_time)  # a pending commit or the cleaner's retention: refused, as Table.read
    ctx = table.read_context(read_time)
    return KeyLookup(ctx, table.latest_slices(read_time))


def lookup(table: TableState, keys: str | Iterable[str] | pa.Array, *, as_of: TimeLike | None = None,
           columns: Sequence[str] | None = None, stats: LookupStats | None = None) -> pa.Table:
    """Rows of `table` with the given record keys (as of `as_of`); see `Table.lookup`."""
    return open_lookup(table, as_of=as_of).lookup(keys, columns=columns, stats=stats)


__all__ = [
    "FileInfo",
    "FooterCache",
    "KeyLookup",
    "KeyPredicate",
    "LookupStats",
    "PrunedReader",
    "as_keys",
    "clear_footer_cache",
    "key_predicate",
    "load_index",
    "lookup",
    "lookup_slices",
    "open_lookup",
    "probe_file",
]
