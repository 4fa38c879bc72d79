"""Using the metadata table's indexes to read less: column-stats pruning, record-index and secondary-index lookups.

The metadata table (table/metadata_table.py) indexes the data table; a read asks it which file slices can
hold the rows it wants, then reads only those, and still applies the whole filter after the merge:

    read(filter=[("amount", ">", 100), ("merchant_name", "=", "Amazon")])   lookup(["k1", "k2"])
        │                                                                      │
        ├─ secondary_index_<name> on merchant_name: "Amazon" → record keys ──┐  │
        ├─ `_hoodie_record_key` = / in in the filter → record keys ─────────┤  │
        │                                                                   ▼  ▼
        │                               record_index: key → (partition, file group) ──► only those slices
        │
        └─ column_stats: per base file and column [min, max], null and value counts
             a slice WITHOUT logs whose base file cannot hold `amount > 100` ──────────► skipped
             (a slice with logs is always kept: a log may change a value)
        ──► the kept slices are merged and the whole filter applied (scan.plan_scan / lookup)

**When an index may be used** (a wrong "no" would lose rows, so each use is on a proof):

* column stats: a file is skipped only if its own statistics rule a condition out, and only a slice
  whose every file has them, i.e. a base file alone — COW, read-optimized, or MOR without logs
  (hudi-rs `FilePruner`'s rule: a log may carry a newer version of a row with another value).
  Statistics of files are immutable, so this holds for time travel too; a file without statistics
  (written after the index, e.g. by a writer that does not keep it) is read.
* record and secondary indexes hold the *current* state: they are used only for a read of the
  latest snapshot, and only when the index is *current*: every completed write on the data
  timeline (after the metadata table's first deltacommit) has its completed MDT deltacommit
  (`index_is_current`).  A writer that does not keep the metadata table (an lsm_lab write on a
  Hudi table whose MDT it does not maintain) makes it stale, and the read falls back to scanning.
* the record index may be global or partitioned (upstream 1.1's `isPartitioned`: file groups
  `record-index-<escaped data partition>-NNNN-0`, a key once per data partition that holds it); a read
  unions every partition's locations of a key, an upsert of `RECORD_LEVEL_INDEX` tags a key from
  its own partition's file groups; lsm_lab's writer keeps either (services/mdt_write.py).  An upsert
  tags only from an index of its index type's semantics (`record_index_locator`): `RECORD_LEVEL_INDEX`
  over a global index, or a global type over a partitioned one, tags by reading keys instead; and no
  read or lookup of a `RECORD_LEVEL_INDEX` table uses a global index (a key several partitions hold has
  one location in it: the others' rows would be lost).
* the record index holds one location per key (the invariant upstream's writers keep): a table that
  holds a key in two file groups anyway (the shipped `v9_nonpartitioned_rollback` holds TXN-002 twice,
  after a rollback) reads that key from the indexed group only, as upstream's `RecordLevelIndexSupport`
  does; `indexes=False` reads both.
* a secondary index is used for `=` / `in` on the one column its definition names (identity
  function), for string, integer and date columns, whose stored text lsm_lab reproduces (dates
  as days since 1970, as the shipped tables store them).

`ReadStats` (filegroup/readstats.py) counts what was skipped: `files_skipped_column_stats`,
`slices_skipped_index`, and `indexes_used` names the indexes a read used; `Table.lookup`'s
`LookupStats.slices_pruned_record_index` counts the slices the record index ruled out.
`read(..., indexes=False)` (and `scan`, `lookup`) switches all of it off.

Upserts (`hoodie.index.type=RECORD_INDEX` and the record-level index types) tag existing keys from
the record index instead of reading every file's keys (`record_index_locator`), when the writer
keeps the index up to date (services/mdt_maintained.py).

Simplified compared with Apache Hudi: upstream's `HoodieFileIndex` / `ColumnStatsIndexSupport`
translate Spark expressions and look up column stats by HFile key prefix, `RecordLevelIndexSupport`
and `SecondaryIndexSupport` read only the needed MDT shards; lsm_lab understands conjunctive
`(column, op, value)` tuples with `=`, `in`, `<`, `<=`, `>`, `>=`, and reads each MDT partition it
needs in full (table/metadata_table.py).  No partition-stats pruning (partition folders are pruned
by value already), no expression indexes; the `bloom_filters` partition (written for Hudi's readers,
services/mdt_index.py) is not read: lookups already skip files by lsm_lab's own key index and footer blooms
(table/lookup.py).

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (use)")
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import LsmLabError, UnsupportedFeatureError
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.merge.records import RECORD_KEY
from lsm_lab.table import mdt_listing
from lsm_lab.table.metadata_table import SECONDARY_PREFIX, MetadataTable, open_metadata_table
from lsm_lab.table.predicate import FilterLike
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instant import DELTA_COMMIT, WRITE_ACTIONS, State

COLUMN_STATS = "column_stats"
RECORD_INDEX = "record_index"
#: `hoodie.table.index.defs.path`: upstream's index definitions (`HoodieIndexDefinition`s), relative to the table
PROP_INDEX_DEFS = "hoodie.table.index.defs.path"
DEFAULT_INDEX_DEFS = ".hoodie/.index_defs/index.json"
#: ops whose truth on a file can be judged from its min, max and null count
STATS_OPS = frozenset({"=", "==", "<", "<=", ">", ">=", "in"})
_MAX_IN = 1000  # an `in` list longer than this is not judged by statistics (it would cost more than it saves)
#: hoodie.index.type values that tag upserts through the record index (timeline/config.py INDEX_TYPES)
RECORD_INDEX_TYPES = frozenset({"RECORD_INDEX", "RECORD_LEVEL_INDEX", "GLOBAL_RECORD_LEVEL_INDEX"})
GLOBAL_RECORD_INDEX_TYPES = frozenset({"RECORD_INDEX", "GLOBAL_RECORD_LEVEL_INDEX"})


# --------------------------------------------------------------------------- what the table has
def index_definitions(table: TableState) -> dict[str, dict[str, Any]]:
    """Upstream's index definitions (`.hoodie/.index_defs/index.json`): name → definition; {} when absent.

    A damaged file is an `LsmLabError` naming it."""
    rel = table.config.props.get(PROP_INDEX_DEFS, DEFAULT_INDEX_DEFS).strip() or DEFAULT_INDEX_DEFS
    path = table.path
    for piece in rel.split("/"):
        if piece in ("", ".", ".."):
            if piece == "..":
                raise LsmLabError(f"{PROP_INDEX_DEFS}={rel!r} leaves the table folder", path=table.path)
            continue
        path = path / piece
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        defs = doc.get("indexDefinitions") or {}
        if not isinstance(defs, dict):
            raise ValueError("indexDefinitions is not an object")
    except (ValueError, AttributeError) as exc:
        raise LsmLabError(f"index definitions are not valid JSON: {exc}", path=path) from None
    return {str(k): v for k, v in defs.items() if isinstance(v, dict)}


def declares(table: TableState, *names: str) -> bool:
    """Whether the table declares any of these MDT partitions (`hoodie.table.metadata.partitions`), without
    opening the metadata table (a table whose MDT keeps only `files` offers no index to read with)."""
    # `mdt_listing.declared` reads hoodie.properties again when the option is on and nothing is declared yet:
    # the Table that made the table's first write read its config before the writer declared the MDT
    return bool(set(mdt_listing.declared(table.config, table.path)) & set(names))


def index_is_current(m: MetadataTable) -> bool:
    """Whether every completed data write after the MDT's first deltacommit has its completed MDT deltacommit
    (upstream writes the MDT deltacommit of instant t before t completes); an index built later by an
    `indexing` instant covers the writes before it."""
    done = {i.begin_time for i in m.mdt.instants() if i.state == State.COMPLETED and i.action == DELTA_COMMIT}
    first = min((t for t in done if not t.startswith("00000000000000")), default=None)
    if first is None:
        return False
    return all(i.begin_time in done for i in m.data.instants()
               if i.state == State.COMPLETED and i.action in WRITE_ACTIONS and i.begin_time >= first)


#: merged metadata tables kept per process, by path and both timelines (a later read of an unchanged table
#: reuses the merged MDT partitions instead of decoding them again): at most this many
_CACHE_SIZE = 8
_CACHE: dict[tuple[str, tuple[tuple[str, str, str], ...], tuple[tuple[str, str, str], ...]], MetadataTable] = {}


def _shared(m: MetadataTable) -> MetadataTable:
    """`m`, or the instance already opened on the same metadata table in the same state (its merges cached).

    Both timelines are in the key: a new MDT deltacommit, compaction or rollback, or a new data instant
    (valid instants), opens it afresh; MDT files change only with MDT instants."""
    def sig(state: TableState) -> tuple[tuple[str, str, str], ...]:
        return tuple((i.begin_time, i.action, i.state.name) for i in state.instants())

    key = (str(m.mdt.path), sig(m.mdt), sig(m.data))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    if len(_CACHE) >= _CACHE_SIZE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = m
    return m


class Indexes:
    """The metadata table of one read, with what it offers (opened once per read; None-safe helpers)."""

    def __init__(self, table: TableState, *, latest: bool) -> None:
        self.table = table
        opened = open_metadata_table(table)
        self.mdt = _shared(opened) if opened is not None else None
        self.partitions = set(self.mdt.partitions()) if self.mdt is not None else set()
        self._defs: dict[str, dict[str, Any]] | None = None
        self._current: bool | None = None
        self.latest = latest

    def defs(self) -> dict[str, dict[str, Any]]:
        if self._defs is None:
            self._defs = index_definitions(self.table)
        return self._defs

    def current(self) -> bool:
        if self._current is None:
            self._current = self.mdt is not None and index_is_current(self.mdt)
        return self._current

    def has_column_stats(self) -> bool:
        return self.mdt is not None and COLUMN_STATS in self.partitions

    def record_index_usable(self) -> bool:
        """A record index (global, or partitioned: `MetadataTable.record_index` reads either layout), current,
        on a read of the latest snapshot — and not a global one on a table of `RECORD_LEVEL_INDEX`: its keys are
        unique per partition only, and a global index names one partition of a key that several hold (a lookup
        through it would lose the others' rows)."""
        if self.mdt is None or RECORD_INDEX not in self.partitions or not self.latest:
            return False
        index_type = self.table.config.props.get("hoodie.index.type", "").strip().upper()
        if index_type == "RECORD_LEVEL_INDEX" and not self.mdt.record_index_partitioned():
            return False
        return self.current()

    def secondary_for(self, column: str) -> str | None:
        """The name of a secondary index on `column` (identity function), or None."""
        if self.mdt is None:
            return None
        for name, d in sorted(self.defs().items()):
            if name in self.partitions and name.startswith(SECONDARY_PREFIX) \
                    and list(d.get("sourceFields") or []) == [column] \
                    and str(d.get("indexFunction") or "identity") in ("identity", ""):
                return name
        return None


# --------------------------------------------------------------------------- column statistics
def _conditions(table: TableState, schema: pa.Schema, filter: FilterLike | None) -> list[tuple[str, str, Any]]:
    if not (isinstance(filter, list) and all(isinstance(t, tuple) and len(t) == 3 for t in filter)):
        return []
    return [(c, str(op).lower(), v) for c, op, v in filter
            if isinstance(c, str) and str(op).lower() in STATS_OPS and c in schema.names
            and c not in table.config.partition_by]


def _typed_value(text: str, kind: str | None, typ: pa.DataType) -> Any:
    """A min/max text of `MetadataTable.column_stats` as a Python value of the column's Arrow type."""
    kind = kind or ""
    if pa.types.is_decimal(typ):
        if kind in ("bytes", "fixed"):  # the unscaled value, big-endian two's complement (Avro's decimal)
            return decimal.Decimal(int.from_bytes(bytes.fromhex(text), "big", signed=True)).scaleb(-typ.scale)
        return decimal.Decimal(text)
    if pa.types.is_timestamp(typ):
        if text.lstrip("-").isdigit():
            n = int(text)
            per_second = {"s": 1, "ms": 1000, "us": 10**6, "ns": 10**9}[typ.unit]
            have = 1000 if "millis" in kind else 10**6 if "micros" in kind else 10**9 if "nanos" in kind \
                else per_second
            return pa.scalar(n * per_second // have, pa.int64()).cast(typ).as_py()
        stamp = dt.datetime.fromisoformat(text)
        return stamp.replace(tzinfo=dt.UTC) if typ.tz is not None and stamp.tzinfo is None else stamp
    if pa.types.is_date(typ):
        if text.lstrip("-").isdigit():
            return dt.date(1970, 1, 1) + dt.timedelta(days=int(text))
        return dt.date.fromisoformat(text)
    if pa.types.is_boolean(typ):
        return {"true": True, "false": False}[text.lower()]
    if pa.types.is_integer(typ):
        return int(text)
    if pa.types.is_floating(typ):
        return float(text)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return text
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return bytes.fromhex(text)
    raise ValueError(f"no statistics comparison for {typ}")


def typed_bounds(texts: Sequence[str | None], kinds: Sequence[str | None], typ: pa.DataType) -> pa.Array:
    """Min or max texts as an Arrow array of `typ`; a value that does not convert is null (= unknown)."""
    out: list[Any] = []
    for text, kind in zip(texts, kinds, strict=True):
        try:
            out.append(None if text is None else _typed_value(text, kind, typ))
        except (ValueError, KeyError, ArithmeticError, OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out.append(None)
    try:
        return pa.array(out, type=typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.nulls(len(out), typ)


def _scalar(value: Any, typ: pa.DataType) -> pa.Scalar | None:
    """The filter value as a scalar of the column's type, or None when it does not convert exactly."""
    if value is None:
        return None
    try:
        s = value if isinstance(value, pa.Scalar) else pa.scalar(value)
        texts = (pa.types.is_string(s.type) or pa.types.is_large_string(s.type),
                 pa.types.is_string(typ) or pa.types.is_large_string(typ))
        if texts[0] != texts[1]:  # text against a non-text column (or the reverse): the filter itself decides
            return None
        return s.cast(typ) if s.type != typ else s
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, OverflowError):
        return None


def _may_hold(lo: pa.Array, hi: pa.Array, op: str, value: Any, typ: pa.DataType) -> pa.Array | None:
    """Per file: can a value in [lo, hi] satisfy `op value`?  null bounds → True; None: cannot judge at all."""
    if op == "in":
        if not isinstance(value, (list, tuple, set, frozenset)) or len(value) > _MAX_IN:
            return None
        scalars = [_scalar(v, typ) for v in value if v is not None]
        if any(s is None for s in scalars):
            return None
        acc = pa.array([False] * len(lo))
        for s in scalars:
            acc = pc.or_(acc, pc.and_kleene(pc.less_equal(lo, s), pc.greater_equal(hi, s)))
        return acc
    s = _scalar(value, typ)
    if s is None:
        return None
    if op in ("=", "=="):
        return pc.and_kleene(pc.less_equal(lo, s), pc.greater_equal(hi, s))
    if op == "<":
        return pc.less(lo, s)
    if op == "<=":
        return pc.less_equal(lo, s)
    if op == ">":
        return pc.greater(hi, s)
    return pc.greater_equal(hi, s)


def column_stats_prune(idx: Indexes, schema: pa.Schema, slices: Sequence[FileSlice], filter: FilterLike | None,
                       stats: ReadStats | None = None) -> list[FileSlice]:
    """The slices that can hold a row of the filter's conjuncts by the MDT's column statistics.

    Only a slice with a base file and no log is judged (module docstring); every other slice is kept."""
    if not idx.has_column_stats() or idx.mdt is None:
        return list(slices)
    conds = _conditions(idx.table, schema, filter)
    judged = {fs.base_file.path.name for fs in slices if fs.base_file is not None and not fs.log_files}
    if not conds or not judged:
        return list(slices)
    cs = idx.mdt.column_stats({c for c, _, _ in conds})
    cs = cs.filter(pc.is_in(cs.column("file_name"), value_set=pa.array(sorted(judged), pa.string())))
    ruled_out: set[str] = set()
    for col, op, value in conds:
        rows = cs.filter(pc.equal(cs.column("column"), col))
        if rows.num_rows == 0:
            continue
        typ = schema.field(col).type
        kinds = rows.column("value_type").to_pylist()
        lo = typed_bounds(rows.column("min").to_pylist(), kinds, typ)
        hi = typed_bounds(rows.column("max").to_pylist(), kinds, typ)
        try:
            may = _may_hold(lo, hi, op, value, typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            may = None
        if may is None:
            continue
        nulls = rows.column("null_count").fill_null(0)
        values = rows.column("value_count")
        # every value null (value_count known and equal to null_count): no comparison holds
        all_null = pc.fill_null(pc.equal(values, nulls), False)
        # unknown bounds with some non-null value: may hold
        verdict = pc.and_(pc.fill_null(may, True), pc.invert(all_null))
        names = rows.column("file_name").filter(pc.invert(verdict))
        ruled_out.update(names.to_pylist())
    kept = [fs for fs in slices if fs.base_file is None or fs.log_files or fs.base_file.path.name not in ruled_out]
    if stats is not None:
        stats.files_skipped_column_stats += len(slices) - len(kept)
        stats.files_judged_column_stats += len(judged)
        if ruled_out or judged:
            stats.use_index(COLUMN_STATS)
    return kept


# --------------------------------------------------------------------------- record keys → slices
def record_index_slices(idx: Indexes, slices: Sequence[FileSlice], keys: Iterable[str]) -> list[FileSlice] | None:
    """The slices whose file group the record index names for `keys`; None when the index cannot be used."""
    if not idx.record_index_usable() or idx.mdt is None:
        return None
    loc = idx.mdt.record_index(keys)
    groups = set(zip(loc.column("partition").to_pylist(), loc.column("file_id").to_pylist(), strict=True))
    return [fs for fs in slices if (fs.partition, fs.file_id) in groups]


def _secondary_text(value: Any, typ: pa.DataType) -> str | None:
    """How the secondary index stores `value` of a column of `typ` (None: not reproducible: do not use it)."""
    if value is None:
        return None
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return value if isinstance(value, str) else None
    if pa.types.is_integer(typ):
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if pa.types.is_date32(typ):
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            return None
        return str((value - dt.date(1970, 1, 1)).days)
    return None


def secondary_keys(idx: Indexes, schema: pa.Schema, filter: FilterLike | None) -> tuple[str, list[str]] | None:
    """(index name, record keys) of the first `=` / `in` conjunct on a column with a secondary index; None when none
    applies.  Every row the filter can return has one of these keys (the condition must hold for it)."""
    if idx.mdt is None or not idx.latest or not isinstance(filter, list):
        return None
    for col, op, value in _conditions(idx.table, schema, filter):
        if op not in ("=", "==", "in"):
            continue
        name = idx.secondary_for(col)
        if name is None:
            continue
        values = list(value) if op == "in" and isinstance(value, (list, tuple, set, frozenset)) else \
            None if op == "in" else [value]
        if values is None:
            continue
        texts = [_secondary_text(v, schema.field(col).type) for v in values]
        if any(t is None for t in texts) or not idx.current():
            continue
        found = idx.mdt.secondary_index(name, [t for t in texts if t is not None])
        return name, sorted(set(found.column("record_key").to_pylist()))
    return None


def filter_record_keys(filter: FilterLike | None) -> list[str] | None:
    """The record keys a conjunctive filter names with `_hoodie_record_key =` / `in` (intersected), or None."""
    if not (isinstance(filter, list) and all(isinstance(t, tuple) and len(t) == 3 for t in filter)):
        return None
    acc: set[str] | None = None
    for col, op, value in filter:
        op = str(op).lower()
        if col != RECORD_KEY:
            continue
        if op in ("=", "==") and isinstance(value, str):
            got = {value}
        elif op == "in" and isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            got = set(value)
        else:
            continue
        acc = got if acc is None else acc & got
    return None if acc is None else sorted(acc)


def prune_with_indexes(table: TableState, schema: pa.Schema, slices: Sequence[FileSlice], filter: FilterLike | None,
                       *, latest: bool, stats: ReadStats | None = None) -> list[FileSlice]:
    """A read's slices after the metadata table's indexes (module docstring): secondary index and record keys of
    the filter through the record index, then column statistics.  The slices a plain read would use otherwise."""
    items = list(slices)
    if filter is None or not declares(table, COLUMN_STATS, RECORD_INDEX):  # (`files` alone: nothing to use)
        return items
    idx = Indexes(table, latest=latest)
    if idx.mdt is None:
        return items
    keys = filter_record_keys(filter)
    used = RECORD_INDEX
    if keys is None:
        found = secondary_keys(idx, schema, filter) if idx.record_index_usable() else None
        if found is not None:
            used, keys = found
    if keys is not None:
        narrowed = record_index_slices(idx, items, keys)
        if narrowed is not None:
            if stats is not None:
                stats.slices_skipped_index += len(items) - len(narrowed)
                stats.use_index(used)
                if used != RECORD_INDEX:
                    stats.use_index(RECORD_INDEX)
            items = narrowed
    return column_stats_prune(idx, schema, items, filter, stats)


# --------------------------------------------------------------------------- upsert tagging
def record_index_locator(table: TableState, maintained: Iterable[str]
                         ) -> Callable[[pa.Array, str], tuple[pa.Array, pa.Array]] | None:
    """(keys, their partition) → (partition, file id) arrays (null where the index has no entry), for the
    writer's tagging (filegroup/write.py `tag`); None when the record index must not be used:

    * `hoodie.index.type` is not a record-index type (RECORD_INDEX, RECORD_LEVEL_INDEX, GLOBAL_RECORD_LEVEL_INDEX);
    * the writer does not keep `record_index` up to date (`maintained`, services/mdt_maintained.py): the index
      would go stale after this very write, and a later upsert tagged from it would miss the keys written now;
    * the table declares no record index, or it is not current (a write it does not know about);
    * the index's semantics are not the index type's: a *global* index (one location per key) for
      `RECORD_LEVEL_INDEX`, whose keys are unique per partition only — a key the global index places in
      partition A may also live in B, and a batch row of B would be tagged as new and written again, a
      duplicate; and a *partitioned* index (a key once per partition) for a global type.  The write then tags by
      reading the partition's keys: upstream's rule for a record index it cannot use
      (`SparkMetadataTableRecordLevelIndex.getFallbackIndexType()` = SIMPLE, partition-scoped; GLOBAL_SIMPLE for
      the global class, checked `isGlobal() == fallbackIndex.isGlobal()`, "so that tagLocation is still accurate
      and there are no duplicates"), which lsm_lab applies to an index of the other kind too.

    A partitioned record index answers from the batch partition's own file groups
    (`MetadataTable.record_index(keys, partition=...)`, upstream `lookupEncodedKeysInDataTablePartition`).  A global
    index type keeps a key in one partition: a batch row whose key the index places in another partition is refused
    (`UnsupportedFeatureError`): upstream moves it (`hoodie.record.index.update.partition.path`) or updates it in
    place, lsm_lab does neither yet."""
    index_type = table.config.props.get("hoodie.index.type", "").strip().upper()
    if index_type not in RECORD_INDEX_TYPES or RECORD_INDEX not in set(maintained) or not declares(table, RECORD_INDEX):
        return None
    idx = Indexes(table, latest=True)
    if idx.mdt is None or RECORD_INDEX not in idx.partitions or not idx.current():
        return None
    mdt = idx.mdt
    is_global = index_type in GLOBAL_RECORD_INDEX_TYPES
    partitioned = mdt.record_index_partitioned()
    if partitioned == is_global:  # the index's semantics are not the index type's: read the keys instead
        return None

    def locate(keys: pa.Array, partition: str) -> tuple[pa.Array, pa.Array]:
        loc = mdt.record_index(keys.to_pylist(), partition=partition if partitioned else None)
        at = pc.index_in(keys, value_set=loc.column("record_key"))
        where, fids = loc.column("partition").take(at), loc.column("file_id").take(at)
        if is_global:
            moved = pc.fill_null(pc.not_equal(where, partition), False)
            if pc.any(moved).as_py():
                key = keys.filter(moved)[0].as_py()
                raise UnsupportedFeatureError(
                    f"record key {key!r} is in partition {where.filter(moved)[0].as_py()!r} by the global record "
                    f"index (hoodie.index.type={index_type}), the batch puts it in {partition!r}: moving a key "
                    "between partitions is not supported", path=table.path)
        return where, fids

    return locate


__all__ = ["GLOBAL_RECORD_INDEX_TYPES", "RECORD_INDEX_TYPES", "Indexes", "column_stats_prune", "declares",
           "filter_record_keys",
           "index_definitions", "index_is_current", "prune_with_indexes", "record_index_locator",
           "record_index_slices", "secondary_keys", "typed_bounds"]
