"""The metadata table's index partitions, written: which cells a data instant adds to each of them.

`services/mdt_write.py` is the protocol (initialise, one MDT deltacommit per data instant, compact,
roll back); this module knows, for each MDT partition, its file groups and the cells that describe
the data table — the same keys and values upstream writes, so that `table/metadata_table.py`, hudi-rs
and Hudi itself read them:

    MDT partition        file groups (upstream default)        key of a cell (upstream class)
    files                files-0000-0                  (1)     partition path, "." for the root, __all_partitions__
    column_stats         col-stats-000N-0              (2)     b64 xxh64(column) + b64 xxh64(partition) + b64 md5(file)
                                                               (ColumnIndexID, PartitionIndexID, FileIndexID)
    partition_stats      partition-stats-0000-0        (1)     b64 xxh64(column) + b64 xxh64(partition)
    bloom_filters        bloom-filters-000N-0          (4)     b64 xxh64(partition) + b64 md5(file)
    record_index         record-index-000N-0          (10+)    the record key
      partitioned        record-index-<esc(p)>-000N-0  (1+ per data partition p; the record key)
    secondary_index_<n>  secondary-index-<n>-000N-0   (10+)    escape(value) + "$" + escape(record key)

    a cell goes to file group  mapRecordKeyToFileGroupIndex(key, N) = |(Java String.hashCode(key)) % N|
    (partitioned record index, `hoodie.metadata.record.level.index.enable`: N = its data partition's groups,
     esc = `PartitionPathEncodeUtils.escapeFileName`; docs/FORMAT.md, "The partitioned record index")
    (secondary index, index version 2 = table version 9: the hash of escape(value) + "$" only, so that
     every entry of one value sits in one file group — HoodieTableMetadataUtil
     .getSecondaryKeyToFileGroupMappingFunction; version 8 tables hash the whole key)

`HashID` (apache/hudi `org.apache.hudi.common.util.hash`): 64-bit ids are XXHash64 with seed
0xdabadaba (as a Java int, so sign-extended), big-endian; 128-bit ids are MD5; keys are their
standard Base64 texts (`ColumnIndexID`, `PartitionIndexID`, `FileIndexID`; keys built by
`HoodieMetadataPayload.getColumnStatsIndexKey`, `getPartitionStatsIndexKey`, `getBloomFilterIndexKey`).
The partition identifier of a non-partitioned table is "." (`getColumnStatsIndexPartitionIdentifier`).

**Values.**  Column statistics of a base file come from its Parquet footer, never from its rows
(`HoodieTableMetadataUtil.convertMetadataToColumnStatsRecords`, `readColumnRangeMetadataFrom`):
min of the row-group minimums, max of the maximums, summed null counts, value count = rows, total
(un)compressed sizes.  Version 9 tables (index version 2) store min/max in plain wrappers (Int, Long,
String, Bytes…) plus `valueType` (`ValueType` ordinal and, for decimals, "precision,scale"); version 8
tables (index version 1) store typed wrappers (Date, Decimal, TimestampMicros) and no `valueType`.
Columns: `hoodie.metadata.index.column.stats.column.list`, else — as upstream's `getColumnsToIndex` —
`_hoodie_commit_time`, `_hoodie_partition_path`, `_hoodie_record_key` and the table's top-level
columns of a supported type, at most `hoodie.metadata.index.column.stats.max.columns.to.index` (32).
A cleaned file's entries become tombstones (`isDeleted`).  Partition statistics: per commit, the new
base files' statistics of each touched partition, `isTightBound=false` — the reader merges them with
the older record (min of mins, max of maxes, sums), so they stay a bound of every live file; the
initial ones (built from every committed file) are tight.
Bloom filters (`HoodieTableMetadataUtil.convertMetadataToBloomFilterRecords`,
`HoodieMetadataPayload.createBloomFilterMetadataRecord`): per new Parquet base file, {type code, the
instant that wrote it, the UTF-8 bytes of its footer filter's Base64 text, isDeleted false}; a cleaned
base file's record is `isDeleted` with an empty type and filter.  The filter is the footer's
(format/hudi_bloom.py); a file written before the index has none, and gets the one a Hudi writer would
have written from its keys (upstream skips it).
Record index (`HoodieMetadataPayload.createRecordIndexUpdate` / `createRecordIndexDelete`): a key →
partition, file id as two longs + index (`fileIdEncoding` 0, or the text with encoding 1 when the id
is no `<uuid>-<n>`), the instant in epoch ms; all cells of one (partition, file id, instant) share one
value, encoded once.  A deleted key is a delete-block entry.  Which keys: a COW base file's keys not in
the file it replaces (same file group, `prevCommit`) are new, the replaced file's keys not in it are
deleted; a clustering's new files move all their keys; an insert_overwrite's (or delete_partition's)
replaced file groups' keys it does not write again are deleted; a MOR log's data-block keys point to its file
group, its delete-block keys are deleted; compaction and clean move no key.  Keys are read back from
the written files with Arrow (`_hoodie_record_key`), diffed with `pyarrow.compute.is_in`.
Secondary index (`SecondaryIndexKeyUtils`, `HoodieMetadataPayload.createSecondaryIndexRecord`): the
(value, key) pairs a write adds become cells, the pairs it replaces become `isDeleted` cells (COW: the
diff of the old and new base file; MOR: a log's rows against the values the index holds now).
Definitions live where upstream keeps them, `.hoodie/.index_defs/index.json` (`HoodieIndexMetadata`,
property `hoodie.table.index.defs.path`).

Simplified compared with Apache Hudi: column statistics of log files are not written (only Parquet
base files'; upstream also indexes MOR log files); partition statistics are not re-tightened by MDT
compaction; the record index is sized once (`estimateFileGroupCount` at initialisation, never re-sized; a partitioned one's
data partition when first seen); a partitioned record index refuses a data partition with a '.' (upstream's
file-group name for it is not settled: docs/FORMAT.md);
the record index's key of a MOR log upsert is re-written with the log's instant (upstream keeps the
insert's); expression indexes are not written.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import math
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.format import hudi_bloom, naming
from lsm_lab.format import metadata_record as mr
from lsm_lab.format.parquet_footer import read_footer
from lsm_lab.format.parquet_read import open_parquet
from lsm_lab.storage import TablePath, atomic
from lsm_lab.timeline.config import TableConfig

FILES = "files"
COLUMN_STATS = "column_stats"
PARTITION_STATS = "partition_stats"
BLOOM_FILTERS = "bloom_filters"
RECORD_INDEX = "record_index"
SECONDARY_PREFIX = "secondary_index_"
#: upstream `MetadataPartitionType` order: the order partitions are initialised in
ORDER = (FILES, COLUMN_STATS, BLOOM_FILTERS, RECORD_INDEX, PARTITION_STATS)

PROP_COLSTATS = "hoodie.metadata.index.column.stats.enable"
PROP_PARTSTATS = "hoodie.metadata.index.partition.stats.enable"
PROP_BLOOM = "hoodie.metadata.index.bloom.filter.enable"
PROP_RECORD_INDEX = "hoodie.metadata.record.index.enable"
PROP_INDEX_TYPE = "hoodie.index.type"
PROP_COLUMN_LIST = "hoodie.metadata.index.column.stats.column.list"
PROP_MAX_COLUMNS = "hoodie.metadata.index.column.stats.max.columns.to.index"
PROP_COLSTATS_GROUPS = "hoodie.metadata.index.column.stats.file.group.count"
PROP_PARTSTATS_GROUPS = "hoodie.metadata.index.partition.stats.file.group.count"
PROP_BLOOM_GROUPS = "hoodie.metadata.index.bloom.filter.file.group.count"
PROP_RI_MIN_GROUPS = "hoodie.metadata.record.index.min.filegroup.count"
PROP_RI_MAX_GROUPS = "hoodie.metadata.record.index.max.filegroup.count"
#: upstream 1.1 `HoodieMetadataConfig.RECORD_LEVEL_INDEX_ENABLE_PROP`: the *partitioned* record index (a key unique per
#: data partition); `GLOBAL_RECORD_LEVEL_INDEX_ENABLE_PROP` is the global one (alias `hoodie.metadata.record.index.enable`)
PROP_PARTITIONED_RI = "hoodie.metadata.record.level.index.enable"
PROP_GLOBAL_RI = "hoodie.metadata.global.record.level.index.enable"
#: `RECORD_LEVEL_INDEX_MIN/MAX_FILE_GROUP_COUNT_PROP` (alternatives `hoodie.metadata.partitioned.record.index.*`):
#: file groups of the partitioned record index *per data partition*
PROP_PRI_MIN_GROUPS = "hoodie.metadata.record.level.index.min.filegroup.count"
PROP_PRI_MAX_GROUPS = "hoodie.metadata.record.level.index.max.filegroup.count"
_PRI_ALTERNATIVES = {PROP_PRI_MIN_GROUPS: "hoodie.metadata.partitioned.record.index.min.filegroup.count",
                     PROP_PRI_MAX_GROUPS: "hoodie.metadata.partitioned.record.index.max.filegroup.count"}
#: upstream `HoodieMetadataConfig` defaults (Hudi 1.x: column and partition statistics on, the rest off)
DEFAULTS = {PROP_COLSTATS: "true", PROP_PARTSTATS: "true", PROP_BLOOM: "false", PROP_RECORD_INDEX: "false",
            PROP_MAX_COLUMNS: "32", PROP_COLSTATS_GROUPS: "2", PROP_PARTSTATS_GROUPS: "1", PROP_BLOOM_GROUPS: "4",
            PROP_RI_MIN_GROUPS: "10", PROP_RI_MAX_GROUPS: "10000", PROP_PRI_MIN_GROUPS: "1", PROP_PRI_MAX_GROUPS: "10"}
META_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
_META_FIELDS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
                "_hoodie_file_name")


# ------------------------------------------------------------------------------------- the record schema
def record_schema() -> dict[str, Any]:
    """The writer schema of the values: Hudi's five meta fields, then `HoodieMetadataRecord`'s fields
    (as `HoodieHFileDataBlock` writes them: `HoodieAvroUtils.addMetadataFields` of the avsc)."""
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in _META_FIELDS]
    return {**mr.HOODIE_METADATA_RECORD, "fields": meta + list(mr.HOODIE_METADATA_RECORD["fields"])}


_SCHEMA = record_schema()
_PARSED = fastavro.parse_schema(_SCHEMA)
SCHEMA_TEXT = json.dumps(_SCHEMA, separators=(",", ":"))
_NS = "org.apache.hudi.avro.model"


def encode_value(kind: int, **payload: Any) -> bytes:
    """One `HoodieMetadataRecord` value (`key` left empty: the cell's key holds it, as upstream's HFiles)."""
    rec: dict[str, Any] = dict.fromkeys(_META_FIELDS)
    rec.update({"key": "", "type": kind, "filesystemMetadata": None, "BloomFilterMetadata": None,
                "ColumnStatsMetadata": None, "recordIndexMetadata": None, "SecondaryIndexMetadata": None})
    rec.update(payload)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED, rec)
    return buf.getvalue()


# ------------------------------------------------------------------------------------- hashing
_M64 = (1 << 64) - 1
# the keys' hashes (`HashID`) live with the record format: format/metadata_record.py
HASH_SEED, xxh64, hash64_id, hash128_id = mr.HASH_SEED, mr.xxh64, mr.hash64_id, mr.hash128_id
partition_identifier, bloom_filter_key = mr.partition_identifier, mr.bloom_filter_key


def column_stats_key(column: str, partition: str, file_name: str) -> str:
    return hash64_id(column) + hash64_id(partition_identifier(partition)) + hash128_id(file_name)


def partition_stats_key(partition: str, column: str) -> str:
    return hash64_id(column) + hash64_id(partition_identifier(partition))


def secondary_key(value: str | None, record_key: str) -> str:
    """`SecondaryIndexKeyUtils.constructSecondaryIndexKey`: a null value is the one character NUL."""
    return mr.escape_secondary("\x00" if value is None else value) + "$" + mr.escape_secondary(record_key)


def java_hash(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def file_group_index(key: str, n: int) -> int:
    """`HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex(key, n)`: `Math.abs(Math.abs(h) % n)` — Java's
    `%` keeps the dividend's sign and `Math.abs(MIN_VALUE)` stays negative, which the outer abs undoes: the
    same as Python's `abs(h) % n`."""
    return abs(java_hash(key)) % n


def file_group_indexes(keys: pa.Array | pa.ChunkedArray, n: int) -> np.ndarray:
    """`file_group_index` of every key, vectorised (NumPy over the Arrow bytes when all keys are ASCII)."""
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    arr = arr.cast(pa.large_string())
    if len(arr) == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.null_count:
        raise InputError("record keys hold nulls")
    if not pc.all(pc.string_is_ascii(arr)).as_py():
        return np.array([file_group_index(k, n) for k in arr.to_pylist()], dtype=np.int64)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr) + 1, offset=arr.offset * 8)
    data = np.frombuffer(arr.buffers()[2], dtype=np.uint8) if arr.buffers()[2] is not None else np.zeros(0, np.uint8)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    h = np.zeros(len(arr), dtype=np.int64)
    for pos in range(int(lengths.max())):
        live = lengths > pos
        idx = np.nonzero(live)[0]
        h[idx] = (h[idx] * 31 + data[starts[idx] + pos]) & 0xFFFFFFFF
    signed = np.where(h >= 1 << 31, h - (1 << 32), h)
    return (np.abs(signed) % n).astype(np.int64)


# ------------------------------------------------------------------------------------- partitions
@dataclass(frozen=True)
class PartitionSpec:
    """One MDT partition: its folder name, the file-id prefix of its file groups and their count."""

    name: str
    prefix: str
    groups: int

    def file_id(self, i: int) -> str:
        """`HoodieTableMetadataUtil.getFileIDForFileGroup`: `<prefix><NNNN>-0`."""
        return f"{self.prefix}{i:04d}-0"

    def group_of(self, key: str, *, index_version: int) -> int:
        if self.name.startswith(SECONDARY_PREFIX) and index_version >= 2:
            return file_group_index(key[: _separator(key) + 1], self.groups)
        return file_group_index(key, self.groups)

    def groups_of(self, keys: Sequence[str], *, index_version: int) -> np.ndarray:
        if self.name.startswith(SECONDARY_PREFIX) and index_version >= 2:
            keys = [k[: _separator(k) + 1] for k in keys]
        return file_group_indexes(pa.array(list(keys), pa.large_string()), self.groups)


def _separator(key: str) -> int:
    i = 0
    while i < len(key):
        if key[i] == "\\":
            i += 2
            continue
        if key[i] == "$":
            return i
        i += 1
    raise InputError(f"secondary index key {key!r} has no unescaped '$'")


def _flag(config: TableConfig, prop: str) -> bool:
    return config.props.get(prop, DEFAULTS.get(prop, "false")).strip().lower() == "true"


def _int(config: TableConfig, prop: str) -> int:
    try:
        return max(1, int(config.props.get(prop, DEFAULTS[prop])))
    except ValueError:
        return int(DEFAULTS[prop])


def index_version(config: TableConfig) -> int:
    """Upstream's `HoodieIndexVersion` of the tables it writes: V1 for table version 8, V2 from 9."""
    return 2 if config.version >= 9 else 1


def wanted_partitions(config: TableConfig) -> list[str]:
    """The MDT partitions this table's options enable, in initialisation order (`files` first)."""
    out = [FILES]
    if _flag(config, PROP_COLSTATS):
        out.append(COLUMN_STATS)
    if _flag(config, PROP_BLOOM):  # each base file's own footer filter (format/hudi_bloom.py)
        out.append(BLOOM_FILTERS)
    if _flag(config, PROP_RECORD_INDEX) or _flag(config, PROP_GLOBAL_RI) or _flag(config, PROP_PARTITIONED_RI) \
            or config.props.get(PROP_INDEX_TYPE, "").strip().upper() == "RECORD_INDEX":
        out.append(RECORD_INDEX)
    if _flag(config, PROP_PARTSTATS):
        out.append(PARTITION_STATS)
    return out


def estimate_groups(records: int, config: TableConfig) -> int:
    """`HoodieTableMetadataUtil.estimateFileGroupCount` for the record index: 48 bytes a record, growth
    factor 2, 1 GiB a file group, within [min, max] file groups."""
    lo, hi = _int(config, PROP_RI_MIN_GROUPS), _int(config, PROP_RI_MAX_GROUPS)
    return max(lo, min(hi, math.ceil(records * 48 * 2.0 / (1 << 30))))


def estimate_partition_groups(records: int, config: TableConfig) -> int:
    """File groups of one data partition's share of a *partitioned* record index: upstream's
    `HoodieTableMetadataUtil.estimateFileGroupCount` as `BaseRecordIndexer.estimateFileGroupCount` calls it for
    `PartitionedRecordIndexer` — min == max: that count; else ceil(records × growth 2.0) // (1 GiB // 48 bytes),
    kept within [min, max] (`RECORD_LEVEL_INDEX_MIN/MAX_FILE_GROUP_COUNT_PROP`, defaults 1 and 10)."""
    lo, hi = _pri_int(config, PROP_PRI_MIN_GROUPS), _pri_int(config, PROP_PRI_MAX_GROUPS)
    if lo == hi:
        return lo
    estimated = math.ceil(records * 2.0) // ((1 << 30) // 48)
    return hi if estimated >= hi else lo if estimated <= lo else max(1, estimated)


def new_partition_groups(config: TableConfig) -> int:
    """File groups a data partition the partitioned record index has not seen gets: the minimum
    (`HoodieBackedTableMetadataWriter.initializeNewFileGroupsForPartitionedRLIHelper`: "Always use the min")."""
    return _pri_int(config, PROP_PRI_MIN_GROUPS)


def _pri_int(config: TableConfig, prop: str) -> int:
    text = config.props.get(prop, config.props.get(_PRI_ALTERNATIVES[prop], DEFAULTS[prop]))
    try:
        return max(1, int(text))
    except ValueError:
        return int(DEFAULTS[prop])


# ------------------------------------------------------------------------------------- partitioned record index
# its file-group names live with the record format (format/metadata_record.py), readers need them too
PARTITIONED_PREFIX, escape_file_name, unescape_path_name = mr.PARTITIONED_PREFIX, mr.escape_file_name, mr.unescape_path_name
partitioned_file_id, partition_of_file_id = mr.partitioned_file_id, mr.partition_of_file_id


def spec_for(name: str, config: TableConfig, *, groups: int | None = None) -> PartitionSpec:
    """The spec of a partition; `groups` (an existing partition's count, or an estimate) wins."""
    if name == FILES:
        return PartitionSpec(FILES, "files-", 1)
    if name == COLUMN_STATS:
        return PartitionSpec(name, "col-stats-", groups or _int(config, PROP_COLSTATS_GROUPS))
    if name == PARTITION_STATS:
        return PartitionSpec(name, "partition-stats-", groups or _int(config, PROP_PARTSTATS_GROUPS))
    if name == BLOOM_FILTERS:
        return PartitionSpec(name, "bloom-filters-", groups or _int(config, PROP_BLOOM_GROUPS))
    if name == RECORD_INDEX:
        return PartitionSpec(name, "record-index-", groups or _int(config, PROP_RI_MIN_GROUPS))
    if name.startswith(SECONDARY_PREFIX):
        return PartitionSpec(name, name.replace("_", "-") + "-", groups or _int(config, PROP_RI_MIN_GROUPS))
    raise InputError(f"unknown metadata table partition {name!r}")


# ------------------------------------------------------------------------------------- column statistics
#: Arrow type → (V1 wrapper, V2 wrapper, V2 `ValueType` ordinal)
def _kind(t: pa.DataType) -> tuple[str, str, int] | None:
    if pa.types.is_boolean(t):
        return "BooleanWrapper", "BooleanWrapper", 2
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) \
            or pa.types.is_uint16(t):
        return "IntWrapper", "IntWrapper", 3
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "LongWrapper", "LongWrapper", 4
    if pa.types.is_float32(t):
        return "FloatWrapper", "FloatWrapper", 5
    if pa.types.is_float64(t):
        return "DoubleWrapper", "DoubleWrapper", 6
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "StringWrapper", "StringWrapper", 7
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "BytesWrapper", "BytesWrapper", 8
    if pa.types.is_decimal(t):
        return "DecimalWrapper", "BytesWrapper", 10
    if pa.types.is_date32(t):
        return "DateWrapper", "IntWrapper", 12
    if pa.types.is_timestamp(t):
        return "TimestampMicrosWrapper", "LongWrapper", 16
    return None


def columns_to_index(config: TableConfig, schema: pa.Schema) -> list[str]:
    """`HoodieTableMetadataUtil.getColumnsToIndex` (see the module docstring)."""
    listed = [c.strip() for c in config.props.get(PROP_COLUMN_LIST, "").split(",") if c.strip()]
    if listed:
        return [c for c in listed if c in schema.names and _kind(schema.field(c).type) is not None]
    out = [c for c in META_INDEXED if c in schema.names]
    out += [f.name for f in schema if f.name not in _META_FIELDS and _kind(f.type) is not None]
    return out[: _int(config, PROP_MAX_COLUMNS) + len([c for c in META_INDEXED if c in schema.names])]


def _raw(v: Any, t: pa.DataType, v2: bool) -> Any:
    """A footer statistic → the value its wrapper holds."""
    if v is None:
        return None
    if pa.types.is_date32(t):
        return (v - dt.date(1970, 1, 1)).days if isinstance(v, dt.date) else int(v)
    if pa.types.is_timestamp(t):
        if isinstance(v, dt.datetime):
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.UTC)
            delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
            return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
        return int(v) * {"s": 1_000_000, "ms": 1000, "us": 1, "ns": 1}[t.unit] // (1000 if t.unit == "ns" else 1)
    if pa.types.is_decimal(t):
        d = decimal.Decimal(v)
        if not v2:
            return d
        unscaled = int(d.scaleb(t.scale).to_integral_value())
        size = max(1, (unscaled.bit_length() + 8) // 8)
        return unscaled.to_bytes(size, "big", signed=True)
    if isinstance(v, bytes) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return v.decode("utf-8", "replace")
    if pa.types.is_floating(t):
        return float(v)
    if pa.types.is_integer(t):
        return int(v)
    return v


def file_column_stats(path: Any, file_name: str, columns: Sequence[str], version: int) -> list[dict[str, Any]]:
    """`HoodieMetadataColumnStats` of each indexed column of one Parquet base file, from its footer."""
    md = read_footer(path)[0]  # on an object store: one ranged GET of the tail
    schema = md.schema.to_arrow_schema()
    paths = {md.schema.column(j).path: j for j in range(md.num_columns)}
    v2 = version >= 2
    out = []
    for name in columns:
        if name not in schema.names or name not in paths:
            continue
        t = schema.field(name).type
        kind = _kind(t)
        if kind is None:
            continue
        j = paths[name]
        lo: Any = None
        hi: Any = None
        nulls = size = usize = 0
        for g in range(md.num_row_groups):
            col = md.row_group(g).column(j)
            size += col.total_compressed_size
            usize += col.total_uncompressed_size
            st = col.statistics
            if st is None:
                continue
            nulls += st.null_count or 0
            if st.has_min_max:
                a, b = _raw(st.min, t, False), _raw(st.max, t, False)
                lo = a if lo is None or a < lo else lo
                hi = b if hi is None or b > hi else hi
        wrapper = kind[1] if v2 else kind[0]

        def wrap(v: Any, t: pa.DataType = t, wrapper: str = wrapper) -> Any:
            if v is None:
                return None
            if v2 and pa.types.is_decimal(t):
                v = _raw(v, t, True)
            return (f"{_NS}.{wrapper}", {"value": v})

        value_type = None
        if v2:
            extra = f"{t.precision},{t.scale}" if pa.types.is_decimal(t) else None
            value_type = {"typeOrdinal": kind[2], "additionalInfo": extra}
        out.append({"fileName": file_name, "columnName": name, "minValue": wrap(lo), "maxValue": wrap(hi),
                    "valueCount": md.num_rows, "nullCount": nulls, "totalSize": size,
                    "totalUncompressedSize": usize, "isDeleted": False, "isTightBound": False,
                    "valueType": value_type})
    return out


def column_stats_cells(partition: str, stats: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """`HoodieMetadataPayload.createColumnStatsRecords`: one cell per (column, partition, file)."""
    return {column_stats_key(s["columnName"], partition, s["fileName"]):
            encode_value(mr.TYPE_COLUMN_STATS, ColumnStatsMetadata=dict(s)) for s in stats}


def column_stats_tombstones(partition: str, file_name: str, columns: Iterable[str]) -> dict[str, bytes]:
    """The entries of a cleaned file: `isDeleted` (upstream writes them for every indexed column)."""
    return {column_stats_key(c, partition, file_name): encode_value(mr.TYPE_COLUMN_STATS, ColumnStatsMetadata={
        "fileName": file_name, "columnName": c, "minValue": None, "maxValue": None, "valueCount": None,
        "nullCount": None, "totalSize": None, "totalUncompressedSize": None, "isDeleted": True,
        "isTightBound": False, "valueType": None}) for c in columns}


def _wrapped(w: Any) -> Any:
    return w[1]["value"] if isinstance(w, tuple) else None


def partition_stats_cells(per_partition: Mapping[str, Sequence[Mapping[str, Any]]], *,
                          tight: bool) -> dict[str, bytes]:
    """`HoodieTableMetadataUtil.convertMetadataToPartitionStatsRecords`: the files' statistics of each
    partition folded per column (min of mins, max of maxes, sums)."""
    cells = {}
    for partition, stats in per_partition.items():
        folded: dict[str, dict[str, Any]] = {}
        for s in stats:
            f = folded.get(s["columnName"])
            if f is None:
                folded[s["columnName"]] = {**s, "fileName": partition_identifier(partition), "isTightBound": tight}
                continue
            for side, pick in (("minValue", min), ("maxValue", max)):
                a, b = _wrapped(f[side]), _wrapped(s[side])
                if b is not None and (a is None or pick(a, b) == b):
                    f[side] = s[side]
            for count in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
                f[count] = int(f[count] or 0) + int(s[count] or 0)
        for column, f in folded.items():
            cells[partition_stats_key(partition, column)] = encode_value(mr.TYPE_PARTITION_STATS,
                                                                         ColumnStatsMetadata=f)
    return cells


# ------------------------------------------------------------------------------------- bloom filters
def bloom_filter_value(type_code: str, timestamp: str, text: str | None, *, deleted: bool = False) -> bytes:
    """`HoodieMetadataPayload.createBloomFilterMetadataRecord`'s value: the filter's type code, the instant,
    the UTF-8 bytes of its `serializeToString()` text (the footer's very value), `isDeleted`."""
    return encode_value(mr.TYPE_BLOOM_FILTER, BloomFilterMetadata={
        "type": type_code, "timestamp": timestamp, "bloomFilter": (text or "").encode("utf-8"), "isDeleted": deleted})


def file_bloom_filter(path: Any, config: TableConfig) -> hudi_bloom.HudiBloomFilter:
    """A base file's upstream filter: its footer's (`HoodieFileReader.readBloomFilter`), else — a file written
    before the index was enabled — the filter a Hudi writer would have put there, built from the file's
    `_hoodie_record_key` column in row order with the table's bloom options (so is a footer value that does
    not decode)."""
    try:
        found = hudi_bloom.from_footer(read_footer(path)[1], path=path)  # on an object store: one GET of the tail
    except (CorruptFileError, UnsupportedFeatureError):  # a damaged (or Jenkins-hashed) value: rebuilt from the keys
        found = None
    if found is not None:
        return found
    pf = open_parquet(path)
    if "_hoodie_record_key" not in pf.schema_arrow.names:
        raise CorruptFileError("a base file without _hoodie_record_key has no keys for a bloom filter", path=path)
    keys = pf.read(columns=["_hoodie_record_key"]).column(0)
    return hudi_bloom.filter_of_keys(keys, hudi_bloom.HudiBloomOptions.from_props(config.props))


def _is_base_parquet(name: str) -> bool:
    parsed = naming.parse(name)
    return parsed is not None and parsed.kind == "base" and parsed.ext == "parquet" and parsed.content == "data"


def bloom_filter_cells(base_path: TablePath, config: TableConfig, added: Mapping[str, Iterable[str]],
                       deleted: Mapping[str, Iterable[str]] | None = None, *, clean_instant: str = "") -> dict[str, bytes]:
    """`HoodieTableMetadataUtil.convertMetadataToBloomFilterRecords`: a record per new Parquet base file (log
    files change no base file's filter), timestamped with the instant that wrote the file; a cleaned base file's
    record becomes `isDeleted` with an empty type and filter (the clean's `convertMetadataToBloomFilterRecords`)."""
    cells: dict[str, bytes] = {}
    for partition, names in added.items():
        for name in names:
            if not _is_base_parquet(name):
                continue
            path = base_path / partition / name if partition else base_path / name
            bloom = file_bloom_filter(path, config)
            parsed = naming.parse(name)
            cells[bloom_filter_key(partition, name)] = bloom_filter_value(
                bloom.type_code, parsed.instant if parsed is not None else "", bloom.serialize_to_string())
    for partition, names in (deleted or {}).items():
        for name in names:
            if _is_base_parquet(name):
                cells[bloom_filter_key(partition, name)] = bloom_filter_value("", clean_instant, None, deleted=True)
    return cells


# ------------------------------------------------------------------------------------- record index
def instant_millis(instant: str, config: TableConfig) -> int:
    """An instant time as epoch milliseconds, read in the table's timeline zone (UTC or local)."""
    stamp = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    ms = int(instant[14:17]) if len(instant) >= 17 else 0
    if config.props.get("hoodie.table.timeline.timezone", "").strip().upper() == "UTC":
        return int(stamp.replace(tzinfo=dt.UTC).timestamp()) * 1000 + ms
    return int(time.mktime(stamp.timetuple())) * 1000 + ms


def record_index_value(partition: str, file_id: str, millis: int) -> bytes:
    """`HoodieMetadataPayload.createRecordIndexUpdate`'s value for every key of one file group."""
    info: dict[str, Any] = {"partitionName": partition, "fileIdHighBits": None, "fileIdLowBits": None,
                            "fileIndex": None, "fileId": None, "instantTime": millis, "fileIdEncoding": 0,
                            "position": None}
    head, _, tail = file_id.rpartition("-")
    try:
        u = uuid.UUID(head) if head and tail.isdigit() else uuid.UUID(file_id)
        index = int(tail) if head and tail.isdigit() else -1
        hi, lo = u.int >> 64, u.int & _M64
        info.update(fileIdHighBits=hi - (1 << 64) if hi >> 63 else hi,
                    fileIdLowBits=lo - (1 << 64) if lo >> 63 else lo, fileIndex=index, fileId="")
    except ValueError:
        info.update(fileId=file_id, fileIdEncoding=1)
    return encode_value(mr.TYPE_RECORD_INDEX, recordIndexMetadata=info)


# ------------------------------------------------------------------------------------- secondary index
def secondary_value_text(column: pa.ChunkedArray | pa.Array) -> list[str | None]:
    """Secondary values as upstream stores them: the value's text (dates as days since 1970, as the
    shipped tables show), null as None."""
    t = column.type
    if pa.types.is_date32(t):
        column = column.cast(pa.int32())
    elif pa.types.is_timestamp(t):
        column = column.cast(pa.int64())
    elif pa.types.is_boolean(t):
        return [None if v is None else ("true" if v else "false") for v in column.to_pylist()]
    return [None if v is None else str(v) for v in column.to_pylist()]


def secondary_cell_value(deleted: bool = False) -> bytes:
    return encode_value(mr.TYPE_SECONDARY_INDEX, SecondaryIndexMetadata={"isDeleted": deleted})


#: where upstream keeps index definitions (`HoodieTableConfig.RELATIVE_INDEX_DEFINITION_PATH`)
INDEX_DEFS = (".hoodie", ".index_defs", "index.json")
PROP_INDEX_DEFS = "hoodie.table.index.defs.path"


def _defs_path(base_path: TablePath) -> TablePath:
    return base_path / INDEX_DEFS[0] / INDEX_DEFS[1] / INDEX_DEFS[2]


def index_definitions(base_path: TablePath) -> dict[str, Any]:
    """The table's `.hoodie/.index_defs/index.json` (`HoodieIndexMetadata`): name → definition; {} when none."""
    path = _defs_path(base_path)
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
        defs = doc.get("indexDefinitions") or {}
    except (ValueError, AttributeError):
        raise CorruptFileError("the index definitions are not a JSON object with 'indexDefinitions'",
                               path=path) from None
    return dict(defs) if isinstance(defs, dict) else {}


def secondary_definitions(base_path: TablePath) -> dict[str, str]:
    """`secondary_index_<name>` → its one source column, for the secondary indexes defined on the table."""
    out = {}
    for name, d in index_definitions(base_path).items():
        if str(name).startswith(SECONDARY_PREFIX) and isinstance(d, dict) and d.get("sourceFields"):
            out[str(name)] = str(d["sourceFields"][0])
    return out


def define_index(base_path: TablePath, name: str, definition: Mapping[str, Any], *, replace: bool = False) -> bool:
    """Add one `HoodieIndexDefinition` to index.json (and point `hoodie.table.index.defs.path` at it, as
    upstream's `HoodieTableMetaClient.buildIndexDefinition` does); False when it is there already and
    `replace` is off."""
    defs = index_definitions(base_path)
    if name in defs and not replace:
        return False
    defs[name] = dict(definition)
    atomic.replace_file(_defs_path(base_path), json.dumps({"indexDefinitions": defs}, indent=2).encode(), mkdir=True)
    return True


def index_definition(name: str, index_type: str, function: str, fields: Sequence[str], table_version: int, *,
                     options: Mapping[str, str] | None = None, version: str | None = None) -> dict[str, Any]:
    """An index definition as the shipped tables hold it: version 8 tables without `version`, version 9
    with it (`HoodieIndexVersion`: V2 for column stats and secondary indexes, V1 for the record index)."""
    out: dict[str, Any] = {"indexName": name, "indexType": index_type, "indexFunction": function,
                           "sourceFields": list(fields), "indexOptions": dict(options or {})}
    if table_version >= 9:
        out["version"] = version or "V2"
    return out


def define_secondary_index(base_path: TablePath, name: str, column: str, table_version: int) -> str:
    """Add `secondary_index_<name>` on `column` to index.json; returns the partition name."""
    part = name if name.startswith(SECONDARY_PREFIX) else SECONDARY_PREFIX + name
    if not part[len(SECONDARY_PREFIX):] or not all(c.isalnum() or c == "_" for c in part):
        raise InputError(f"bad index name {name!r}: letters, digits and _ only")
    if not define_index(base_path, part, index_definition(part, "secondary_index", "identity", [column],
                                                          table_version)):
        raise InputError(f"the table already has an index {part!r}", path=_defs_path(base_path))
    return part


__all__ = [
    "BLOOM_FILTERS",
    "COLUMN_STATS",
    "FILES",
    "ORDER",
    "PARTITION_STATS",
    "RECORD_INDEX",
    "SCHEMA_TEXT",
    "SECONDARY_PREFIX",
    "PartitionSpec",
    "bloom_filter_cells",
    "bloom_filter_key",
    "bloom_filter_value",
    "column_stats_cells",
    "column_stats_key",
    "column_stats_tombstones",
    "columns_to_index",
    "define_secondary_index",
    "encode_value",
    "estimate_groups",
    "file_bloom_filter",
    "file_column_stats",
    "file_group_index",
    "file_group_indexes",
    "hash64_id",
    "hash128_id",
    "index_definitions",
    "index_version",
    "instant_millis",
    "java_hash",
    "partition_identifier",
    "partition_stats_cells",
    "partition_stats_key",
    "record_index_value",
    "record_schema",
    "secondary_cell_value",
    "secondary_definitions",
    "secondary_key",
    "secondary_value_text",
    "spec_for",
    "wanted_partitions",
    "xxh64",
]
