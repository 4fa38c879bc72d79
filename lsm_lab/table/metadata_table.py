"""Hudi's metadata table, read: `Table.metadata_table()` → `MetadataTable`.

The metadata table (MDT) of a Hudi table is itself a MOR table under `.hoodie/metadata/`, with
its own timeline and `hoodie.properties` (base file format HFILE, key field `key`); each of its
partitions is an index of the data table.  lsm_lab opens it like any table and reads it with its
own slicing and block ordering, only the bytes are new (`format/hfile.py`) and the merge rule is
Hudi's payload (`format/metadata_record.py`):

    <table>/.hoodie/metadata/                 a MOR table (TableState; fsview slices it)
    ├── files/            files-0000-0        base  files-0000-0_…_<t0>.hfile      (HFile cells)
    │                                         logs  .files-0000-0_<t1>.log.1_…   (#HUDI# HFILE blocks)
    │                                               files-0000-0_…_<t1>_1.log.hfile  (version 10: whole HFiles)
    ├── column_stats/     col-stats-000N-0    one cell per (column, partition, file)
    ├── partition_stats/  partition-stats-…   one cell per (partition, column)
    ├── record_index/     record-index-000N-0 one cell per record key → file group
    └── secondary_index_<name>/               one cell per (value, record key)

    per MDT partition, latest slice of each file group:
      base HFile cells ──► log blocks in completion order (v1read.ordered_units: rollback blocks
      applied, only completed MDT instants; a native `.log.hfile` / `.deletes.hfile` of a version 10
      MDT counts as one block: mdt_listing.log_parts), keeping a block only if its instant is *valid* ──►
      key → combine(older, newer) (HoodieMetadataPayload.preCombine), delete blocks → tombstones
      ──► live records (tombstones and isDeleted entries dropped)

**Valid instants** (upstream `HoodieTableMetadataUtil.getValidInstantTimestamps`, used by
`HoodieBackedTableMetadata` for its log reader; hudi-rs does the same for `files`): the MDT is
written *before* the data table's instant completes, so a log block counts only if its instant
is a completed instant of the data table, or a completed MDT deltacommit whose instant is not
pending on the data table (the index-building commits), or an instant rolled back by a completed
data-table rollback/restore later than the earliest valid instant, or a completed MDT
rollback/restore, or a completed MDT deltacommit of the initial `00000000000000000…` family.

**What `files` holds** (upstream `HoodieTableMetadataUtil.convertMetadataToFilesPartitionRecords`
and `HoodieBackedTableMetadata.getAllFilesInPartition`): every data file present in each
partition — base files *and* log files, of every slice the cleaner has not yet deleted (not only
the latest slices), with the size the commit recorded (for logs the latest size written).
A rolled-back write's files are removed by the rollback's own MDT deltacommit.

**Record index instant times.** The record index stores a commit time as epoch milliseconds,
parsed in the writer's time zone; `record_index` maps it back to the data table's instant whose
time, read in some whole-quarter-hour UTC offset, is that millisecond (one offset per table, the
first that matches), else formats it in UTC.

The valid-instant rule and the slice merge live in `table/mdt_listing.py`, which also lists the
data table from the `files` partition for `TableState.data_files()`.

Simplified compared with Apache Hudi: every read merges the whole MDT partition it needs — except
the record index: `record_index(keys)` reads only the shards (file groups) the keys hash to, and in each
only the base HFile's blocks the keys fall in plus the log blocks filtered to the keys (`table/mdt_lookup.py`,
upstream's `getRecordsByKeys`), and `record_keys()` decodes no value — (no key-prefix scans, no
spillable map); the MDT is read as
of now (no time travel of the index); `bloom_filter` decodes the stored filter (format/hudi_bloom.py)
after merging the whole `bloom_filters` partition; expression indexes are not read.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (read)")
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lsm_lab.errors import LsmLabError
from lsm_lab.filegroup import index
from lsm_lab.format import hudi_bloom
from lsm_lab.format import metadata_record as mr
from lsm_lab.storage import TablePath
from lsm_lab.table import mdt_listing, mdt_lookup
from lsm_lab.table.state import TableState
from lsm_lab.timeline.config import read_config

PROPERTY_PARTITIONS = mdt_listing.PROPERTY_PARTITIONS
SECONDARY_PREFIX = "secondary_index_"
#: how the shipped tables' secondary indexes store a null value (a lone NUL character)
NULL_SECONDARY = "\x00"


class MetadataPartitionNotFoundError(LsmLabError, KeyError):
    """The metadata table has no such partition (index); the message names the ones it has."""

    def __str__(self) -> str:  # KeyError would quote the message
        return LsmLabError.__str__(self)


def metadata_path(base_path: TablePath) -> TablePath:
    return base_path / ".hoodie" / "metadata"


def open_metadata_table(data: TableState) -> MetadataTable | None:
    """The table's metadata table, or None when it has none (no partitions declared, or no folder)."""
    declared = [p.strip() for p in data.config.props.get(PROPERTY_PARTITIONS, "").split(",") if p.strip()]
    if not declared and data.config.props.get("hoodie.metadata.enable", "").strip().lower() == "true":
        # lsm_lab writes the MDT and declares it at a first write (services/mdt_write.py), possibly after
        # this TableState read hoodie.properties
        fresh = read_config(data.path).props.get(PROPERTY_PARTITIONS, "")
        declared = [p.strip() for p in fresh.split(",") if p.strip()]
    path = metadata_path(data.path)
    if not declared or not (path / ".hoodie" / "hoodie.properties").exists():
        return None
    return MetadataTable(data, TableState(path, read_config(path), strict=data.strict), declared)


class MetadataTable:
    """Hudi's metadata table of one data table, read as of now (see the module docstring)."""

    def __init__(self, data: TableState, mdt: TableState, declared: Sequence[str]) -> None:
        self.data = data
        self.mdt = mdt
        self.declared = list(declared)
        self._cache: dict[str, dict[str, mr.MetadataValue]] = {}
        self._shard_slices: list[Any] | None = None
        self._readers: list[mdt_lookup.ShardReader] | None = None  # record_index shards (`_shard_readers`)
        #: a partitioned record index's shards by data partition (None: not looked at yet), and whether the index is
        #: partitioned (`_partitioned_readers`)
        self._by_partition: dict[str, list[mdt_lookup.ShardReader]] | None = None
        self._partitioned = False
        #: what record-index lookups read (`mdt_lookup.LookupCounts`); the seek/whole-merge threshold
        self.lookup_counts = mdt_lookup.LookupCounts()
        self.whole_merge_share = mdt_lookup.WHOLE_MERGE_SHARE
        self._valid: set[str] | None = None

    def __repr__(self) -> str:
        return f"MetadataTable({str(self.mdt.path)!r}, partitions={self.partitions()})"

    # ------------------------------------------------------------------ partitions
    def partitions(self) -> list[str]:
        """The enabled MDT partitions (`hoodie.table.metadata.partitions` of the data table)."""
        return sorted(self.declared)

    def _require(self, name: str) -> str:
        if name not in self.declared:
            raise MetadataPartitionNotFoundError(
                f"the metadata table has no {name!r} partition; it has: {', '.join(self.partitions())}",
                path=self.mdt.path)
        return name

    # ------------------------------------------------------------------ the merge
    def valid_instants(self) -> set[str]:
        """`HoodieTableMetadataUtil.getValidInstantTimestamps` (module docstring; `mdt_listing.valid_instants`)."""
        if self._valid is None:
            self._valid = mdt_listing.valid_instants(self.data, self.mdt.instants())
        return self._valid

    def records(self, partition: str) -> dict[str, mr.MetadataValue]:
        """The live records of one MDT partition: key → value (merged, tombstones dropped; a partitioned record
        index's key held by several data partitions appears once here — `record_index` returns each)."""
        self._require(partition)
        cached = self._cache.get(partition)
        if cached is not None:
            return cached
        merged: dict[str, mr.MetadataValue] = {}
        with self.mdt.pinned():
            completion = self.mdt.completion_map()
            valid = self.valid_instants()
            for fs in self.mdt.latest_slices(partitions=[partition]):
                merged.update(self._merge_slice(fs, completion, valid))
        live = {k: v for k, v in sorted(merged.items()) if not v.deleted}
        self._cache[partition] = live
        return live

    def _merge_slice(self, fs: Any, completion: Mapping[str, str], valid: set[str]) -> dict[str, mr.MetadataValue]:
        return mdt_listing.merge_slice(fs, completion, valid, strict=self.mdt.strict)

    # ------------------------------------------------------------------ files
    def files(self, partition: str | None = None) -> pa.Table:
        """`partition, file_name, size`: every data file the `files` partition lists (all present files,
        base and log, of every slice not yet cleaned); `partition` "" is the table root."""
        recs = self.records(self._require("files"))
        rows: list[tuple[str, str, int]] = []
        for key, rec in recs.items():
            if rec.type != mr.TYPE_FILE_LIST:
                continue
            part = "" if key == mr.NON_PARTITIONED_KEY else key
            if partition is not None and part != partition:
                continue
            for name, info in sorted((rec.payload.get("filesystemMetadata") or {}).items()):
                if not info.get("isDeleted"):
                    rows.append((part, name, int(info.get("size") or 0)))
        return pa.table({"partition": pa.array([r[0] for r in rows], pa.string()),
                         "file_name": pa.array([r[1] for r in rows], pa.string()),
                         "size": pa.array([r[2] for r in rows], pa.int64())})

    def all_partitions(self) -> list[str]:
        """The data table's partitions the `__all_partitions__` record lists ("" for the root)."""
        rec = self.records(self._require("files")).get(mr.ALL_PARTITIONS_KEY)
        if rec is None:
            return []
        return sorted("" if k == mr.NON_PARTITIONED_KEY else k
                      for k, v in (rec.payload.get("filesystemMetadata") or {}).items() if not v.get("isDeleted"))

    # ------------------------------------------------------------------ statistics
    def column_stats(self, columns: Iterable[str] | None = None) -> pa.Table:
        """`partition, file_name, column, min, max, null_count, value_count, value_type` per file and column.

        `min` / `max` are strings of the values (`metadata_record.stat_text`: numbers as Python writes
        them, dates `YYYY-MM-DD`, timestamps ISO in UTC, decimals as written, bytes hex); `value_type`
        names the wrapper (int, long, double, string, date, decimal, timestampmicros, ...).
        `partition` comes from the `files` listing (the record keeps only a hash of it)."""
        wanted = None if columns is None else set(columns)
        where = self._file_partitions()
        rows = []
        for rec in self.records(self._require("column_stats")).values():
            cs = rec.payload.get("ColumnStatsMetadata") or {}
            if wanted is not None and cs.get("columnName") not in wanted:
                continue
            rows.append(_stats_row(where.get(cs.get("fileName") or ""), cs))
        return _stats_table(rows, with_file=True)

    def partition_stats(self) -> pa.Table:
        """`partition, column, min, max, null_count, value_count, value_type` per data partition and column."""
        rows = []
        for rec in self.records(self._require("partition_stats")).values():
            cs = rec.payload.get("ColumnStatsMetadata") or {}
            part = cs.get("fileName") or ""
            rows.append(_stats_row("" if part == mr.NON_PARTITIONED_KEY else part, cs))
        return _stats_table(rows, with_file=False)

    def _file_partitions(self) -> dict[str, str]:
        if "files" not in self.declared:
            return {}
        t = self.files()
        return dict(zip(t.column("file_name").to_pylist(), t.column("partition").to_pylist(), strict=True))

    def bloom_filter_record(self, partition: str, file_name: str) -> dict[str, Any] | None:
        """The `bloom_filters` record of a base file: {"type", "timestamp", "bloom_filter" (the bytes: UTF-8 of the
        filter's Base64 text)}, or None.  Its key is computed (`HoodieMetadataPayload.getBloomFilterRecordKey`:
        XXHash64 of the partition, MD5 of the file name)."""
        rec = self.records(self._require("bloom_filters")).get(mr.bloom_filter_key(partition, file_name))
        if rec is None:
            return None
        bf = rec.payload.get("BloomFilterMetadata") or {}
        return {"type": bf.get("type"), "timestamp": bf.get("timestamp"), "bloom_filter": bf.get("bloomFilter")}

    def bloom_filter(self, partition: str, file_name: str) -> hudi_bloom.HudiBloomFilter | None:
        """The decoded filter of a base file (`HoodieBackedTableMetadata.getBloomFilter`: the record's bytes read
        with its type code, format/hudi_bloom.py), or None when the partition holds none for it."""
        rec = self.bloom_filter_record(partition, file_name)
        if rec is None:
            return None
        raw = rec["bloom_filter"] or b""
        return hudi_bloom.HudiBloomFilter.from_string(raw, str(rec["type"] or hudi_bloom.SIMPLE),
                                                     path=self.mdt.path / "bloom_filters")

    def bloom_filters(self) -> pa.Table:
        """`partition, file_name, type, timestamp, rows, bits, hashes, size` of every live `bloom_filters` record
        (its file found by computing the key of each file the `files` partition lists; a record no listed file
        matches gets null partition and file name); `size` = the stored text's bytes."""
        recs = self.records(self._require("bloom_filters"))
        where: dict[str, tuple[str | None, str | None]] = {}
        if "files" in self.declared:
            f = self.files()
            for p, n in zip(f.column("partition").to_pylist(), f.column("file_name").to_pylist(), strict=True):
                where[mr.bloom_filter_key(p, n)] = (p, n)
        rows: list[dict[str, Any]] = []
        for key, rec in recs.items():
            bf = rec.payload.get("BloomFilterMetadata") or {}
            raw = bf.get("bloomFilter") or b""
            bloom = hudi_bloom.HudiBloomFilter.from_string(raw, str(bf.get("type") or hudi_bloom.SIMPLE),
                                                           path=self.mdt.path / "bloom_filters")
            p, n = where.get(key, (None, None))
            rows.append({"partition": p, "file_name": n, "type": bf.get("type"), "timestamp": bf.get("timestamp"),
                         "rows": len(bloom.rows), "bits": bloom.vector_size, "hashes": bloom.nb_hash,
                         "size": len(raw)})
        schema = pa.schema([("partition", pa.string()), ("file_name", pa.string()), ("type", pa.string()),
                            ("timestamp", pa.string()), ("rows", pa.int32()), ("bits", pa.int64()),
                            ("hashes", pa.int32()), ("size", pa.int64())])
        return pa.Table.from_pylist(rows, schema=schema)

    # ------------------------------------------------------------------ indexes
    def record_index(self, keys: Iterable[str], *, partition: str | None = None) -> pa.Table:
        """`record_key, partition, file_id, instant_time` of each key the record index holds (others left out).

        Only the shards (MDT file groups) that can hold the keys are read, and in them only the base file's
        blocks the keys fall in (`_record_shards`, `table/mdt_lookup.py`); `lookup_counts` says what was read.
        A *partitioned* record index (upstream 1.1, `isPartitioned`: its file groups are
        `record-index-<escaped data partition>-NNNN-0`, a key sharded among its own partition's groups) holds a key
        once per data partition: one row per partition that holds it (`_partitioned_shards`); `partition` reads
        that data partition's shards only (upstream `lookupEncodedKeysInDataTablePartition`).  With a global index,
        `partition` keeps the rows located in that partition."""
        wanted = list(dict.fromkeys(str(k) for k in keys))
        by_partition = self._partitioned_readers()
        found: list[tuple[str, mr.MetadataValue]]
        if by_partition is not None:
            if partition is not None:
                by_partition = {partition: by_partition[partition]} if partition in by_partition else {}
            found = self._partitioned_shards(wanted, by_partition)
        else:
            recs = self._record_shards(wanted)
            found = [(key, recs[key]) for key in wanted if key in recs]
        resolve = _InstantResolver(self.data)
        rows = []
        for key, rec in found:
            part, file_id, millis = mr.record_location(rec.payload.get("recordIndexMetadata") or {})
            if partition is not None and part != partition:
                continue
            rows.append((key, part, file_id, resolve(millis)))
        return pa.table({"record_key": pa.array([r[0] for r in rows], pa.string()),
                         "partition": pa.array([r[1] for r in rows], pa.string()),
                         "file_id": pa.array([r[2] for r in rows], pa.string()),
                         "instant_time": pa.array([r[3] for r in rows], pa.string())})

    def record_index_partitioned(self) -> bool:
        """Whether the record index is partitioned (its file groups named per data partition, `record_index`)."""
        return self._partitioned_readers() is not None

    def _partitioned_readers(self) -> dict[str, list[mdt_lookup.ShardReader]] | None:
        """A partitioned record index's shard readers by the data partition their file ids name (unescaped,
        `metadata_record.partition_of_file_id`; each partition's groups `…-0000-0`, `…-0001-0` … in sequence);
        None for a global one (or no record index).  An index without any file group is a partitioned one of a
        table without data partitions yet (a global index always has its minimum count of groups): {}."""
        if "record_index" not in self.declared:
            return None
        if self._by_partition is None:
            with self.mdt.pinned():
                if self._shard_slices is None:
                    self._shard_slices = sorted(self.mdt.latest_slices(partitions=["record_index"]),
                                                key=lambda fs: fs.file_id)
                groups: dict[str, list[Any]] = {}
                layout_ok = True
                for fs in self._shard_slices:
                    parsed = mr.partition_of_file_id(fs.file_id)
                    if parsed is None:
                        layout_ok = False
                        break
                    groups.setdefault(parsed[0], []).append((parsed[1], fs))
                if not layout_ok or any([i for i, _ in g] != list(range(len(g))) for g in groups.values()):
                    self._partitioned = False
                    self._by_partition = {}
                    return None
                completion = self.mdt.completion_map()
                valid = self.valid_instants()
            self._partitioned = True
            self._by_partition = {
                dp: [mdt_lookup.ShardReader(fs, completion, valid, self.lookup_counts, strict=self.mdt.strict,
                                            whole_merge_share=self.whole_merge_share) for _, fs in g]
                for dp, g in sorted(groups.items())}
        return self._by_partition if self._partitioned else None

    def _partitioned_shards(self, keys: Sequence[str], by_partition: Mapping[str, list[mdt_lookup.ShardReader]]
                            ) -> list[tuple[str, mr.MetadataValue]]:
        """(key, live record) for every data partition's shard that holds the key: within a partition the shard is
        upstream's `mapRecordKeyToFileGroupIndex` over that partition's file groups alone."""
        if not keys:
            return []
        signed = index.java_string_hashes(pa.array(list(keys), pa.string())).astype(np.int64)
        signed = np.abs(np.where(signed >= 1 << 31, signed - (1 << 32), signed))
        out: list[tuple[str, mr.MetadataValue]] = []
        with self.mdt.pinned():
            for _, readers in sorted(by_partition.items()):
                shard_of = (signed % len(readers)).tolist()
                by_shard: dict[int, list[str]] = {}
                for key, i in zip(keys, shard_of, strict=True):
                    by_shard.setdefault(int(i), []).append(key)
                raw: mdt_lookup.Raw = {}
                for i in sorted(by_shard):
                    raw.update(readers[i].lookup(by_shard[i]))
                found = mdt_lookup.decode(raw, self.lookup_counts)
                out.extend((key, found[key]) for key in keys if key in found)
        return out

    def _record_shards(self, keys: Sequence[str]) -> Mapping[str, mr.MetadataValue]:
        """The live `record_index` records of `keys`: upstream's `HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex`
        (|Java String.hashCode| mod the number of file groups, in file-id order) picks each key's shard, and the
        shard's `mdt_lookup.ShardReader` seeks the keys (or merges the shard whole when they are many); only the
        values found are decoded.  Falls back to the whole partition when the file groups are not upstream's
        `record-index-0000-0` … in sequence (another layout)."""
        part = self._require("record_index")
        whole = self._cache.get(part)
        if whole is not None:
            return {k: whole[k] for k in keys if k in whole}
        readers = self._shard_readers()
        if readers is None:
            recs = self.records(part)
            return {k: recs[k] for k in keys if k in recs}
        n = len(readers)
        signed = index.java_string_hashes(pa.array(list(keys), pa.string())).astype(np.int64)
        signed = np.where(signed >= 1 << 31, signed - (1 << 32), signed)
        shard_of = (np.abs(signed) % n).tolist() if n else []
        by_shard: dict[int, list[str]] = {}
        for key, i in zip(keys, shard_of, strict=True):
            by_shard.setdefault(int(i), []).append(key)
        raw: mdt_lookup.Raw = {}
        with self.mdt.pinned():
            for i in sorted(by_shard):
                raw.update(readers[i].lookup(by_shard[i]))
        return mdt_lookup.decode(raw, self.lookup_counts)

    def _shard_readers(self) -> list[mdt_lookup.ShardReader] | None:
        """One reader per record-index shard, made once per instance (it reads the MDT as of one state);
        None when the file groups are not upstream's `record-index-0000-0` … in sequence."""
        if self._readers is None:
            part = self._require("record_index")
            with self.mdt.pinned():
                if self._shard_slices is None:
                    self._shard_slices = sorted(self.mdt.latest_slices(partitions=[part]), key=lambda fs: fs.file_id)
                slices = self._shard_slices
                n = len(slices)
                if n == 0 or [fs.file_id for fs in slices] != [f"record-index-{i:04d}-0" for i in range(n)]:
                    return None
                completion = self.mdt.completion_map()
                valid = self.valid_instants()
            self._readers = [mdt_lookup.ShardReader(fs, completion, valid, self.lookup_counts, strict=self.mdt.strict,
                                                    whole_merge_share=self.whole_merge_share) for fs in slices]
        return self._readers

    @property
    def _shards(self) -> dict[int, mdt_lookup.Raw]:
        """The shards merged whole so far: index → raw cells (tombstones as None)."""
        return {i: r._whole for i, r in enumerate(self._readers or []) if r._whole is not None}

    def record_keys(self) -> list[str]:
        """Every key the record index holds, sorted: the shards' raw cells merged, no value decoded
        (a record-index record is live unless a delete block's tombstone is its newest entry); a partitioned
        index lists a key once per data partition that holds it."""
        part = self._require("record_index")
        by_partition = self._partitioned_readers()
        if by_partition is not None:
            out: list[str] = []
            with self.mdt.pinned():
                for shard_readers in by_partition.values():
                    for r in shard_readers:
                        out.extend(k for k, cell in r.whole().items() if cell is not None)
            return sorted(out)
        cached = self._cache.get(part)
        if cached is not None:
            return list(cached)
        readers = self._shard_readers()
        if readers is None:
            return list(self.records(part))
        keys: list[str] = []
        with self.mdt.pinned():
            for r in readers:
                keys.extend(k for k, cell in r.whole().items() if cell is not None)
        keys.sort()
        return keys

    def secondary_indexes(self) -> list[str]:
        """Names of the secondary indexes (`secondary_index_<name>` partitions), without the prefix."""
        return sorted(p[len(SECONDARY_PREFIX):] for p in self.declared if p.startswith(SECONDARY_PREFIX))

    def secondary_index(self, name: str, values: Iterable[Any] | None = None) -> pa.Table:
        """`secondary_key, record_key` of the index `name` ("merchant_idx" or "secondary_index_merchant_idx")
        for the given secondary values (compared as text; None: every entry).  A null secondary value is
        stored as the one character "\\u0000" and returned as None (pass None to look it up)."""
        part = name if name.startswith(SECONDARY_PREFIX) else SECONDARY_PREFIX + name
        recs = self.records(self._require(part))
        wanted = None if values is None else {NULL_SECONDARY if v is None else str(v) for v in values}
        rows: list[tuple[str | None, str]] = []
        for key in recs:
            value, record_key = mr.split_secondary_key(key)
            if wanted is None or value in wanted:
                rows.append((None if value == NULL_SECONDARY else value, record_key))
        return pa.table({"secondary_key": pa.array([r[0] for r in rows], pa.string()),
                         "record_key": pa.array([r[1] for r in rows], pa.string())})

    # ------------------------------------------------------------------ summary
    def summary(self) -> pa.Table:
        """One row per MDT partition: its name, file groups and live records."""
        names, groups, counts = [], [], []
        for p in self.partitions():
            names.append(p)
            groups.append(len(self.mdt.latest_slices(partitions=[p])))
            # (a partitioned record index holds a key once per data partition: its entries, not its distinct keys)
            counts.append(len(self.record_keys()) if p == "record_index" and self.record_index_partitioned()
                          else len(self.records(p)))
        return pa.table({"partition": pa.array(names, pa.string()), "file_groups": pa.array(groups, pa.int64()),
                         "records": pa.array(counts, pa.int64())})


def _stats_row(partition: str | None, cs: Mapping[str, Any]) -> dict[str, Any]:
    lo, kind = mr.stat_text(cs.get("minValue"))
    hi, kind_hi = mr.stat_text(cs.get("maxValue"))
    return {"partition": partition, "file_name": cs.get("fileName"), "column": cs.get("columnName"),
            "min": lo, "max": hi, "null_count": cs.get("nullCount"), "value_count": cs.get("valueCount"),
            "value_type": kind or kind_hi}


def _stats_table(rows: list[dict[str, Any]], *, with_file: bool) -> pa.Table:
    cols: dict[str, pa.Array] = {"partition": pa.array([r["partition"] for r in rows], pa.string())}
    if with_file:
        cols["file_name"] = pa.array([r["file_name"] for r in rows], pa.string())
    for name in ("column", "min", "max"):
        cols[name] = pa.array([r[name] for r in rows], pa.string())
    for name in ("null_count", "value_count"):
        cols[name] = pa.array([r[name] for r in rows], pa.int64())
    cols["value_type"] = pa.array([r["value_type"] for r in rows], pa.string())
    return pa.table(cols)


class _InstantResolver:
    """Epoch millis of a record index entry → the data table's instant time (module docstring)."""

    def __init__(self, data: TableState) -> None:
        self.by_utc_millis: dict[int, str] = {}
        for inst in data.instants():
            m = _utc_millis(inst.begin_time)
            if m is not None:
                self.by_utc_millis[m] = inst.begin_time
        zone = data.config.props.get("hoodie.table.timeline.timezone", "").upper()
        self.offsets: list[int] = [0] if zone == "UTC" else []
        self.utc_only = zone == "UTC"

    def __call__(self, millis: int | None) -> str | None:
        if millis is None:
            return None
        for off in self.offsets:
            hit = self.by_utc_millis.get(millis + off)
            if hit is not None:
                return hit
        if not self.utc_only:
            for quarter in range(-56, 57):  # UTC-14:00 .. UTC+14:00
                off = quarter * 15 * 60 * 1000
                hit = self.by_utc_millis.get(millis + off)
                if hit is not None:
                    self.offsets.insert(0, off)
                    return hit
        stamp = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)
        return stamp.strftime("%Y%m%d%H%M%S") + f"{stamp.microsecond // 1000:03d}"


def _utc_millis(instant: str) -> int | None:
    if len(instant) < 14 or not instant[:17].isdigit():
        return None
    try:
        stamp = dt.datetime.strptime(instant[:14], "%Y%m%d%H%M%S")
    except ValueError:
        return None
    ms = int(instant[14:17]) if len(instant) >= 17 else 0
    return int((stamp - dt.datetime(1970, 1, 1)).total_seconds()) * 1000 + ms


__all__ = ["MetadataPartitionNotFoundError", "MetadataTable", "metadata_path", "open_metadata_table"]
