"""Upgrades of lsm_lab tables: native logs for a compatibility table (8 → 9), and the rewrite to version 10.

## Version 8 → 9: native logs, and optionally the lsm_tree layout (`switch_to_native_logs`)

A table created as version 8 writes v1 (`#HUDI#`) logs so that readers that
predate RFC-103 can read it. Switching it to native (v2) logs is a change of
*what new files look like*, nothing more: no existing file is rewritten.

    before (version 8, v1 logs)            after `upgrade(table)` (version 9, v2 logs)
    file group f1                          file group f1
      slice @t0: base_t0.parquet             slice @t0: base_t0.parquet
                 .f1_t1.log.1_0-0-0  (v1)               .f1_t1.log.1_0-0-0   (v1, unchanged)
                 .f1_t2.log.1_0-0-0  (v1)               .f1_t2.log.1_0-0-0   (v1, unchanged)
                                                        f1_0-0-0_t3_1.parquet (v2, new writes)
                                                        f1_0-0-0_t4_1.delete.parquet

The slice now holds both formats. Readers merge its changes in commit order
whatever the format (`lsm_lab.filegroup.v1read.ordered_units`), time travel to a
moment before the switch simply sees no v2 file yet, and a compaction of the
slice reads both and writes one base file in the new layout.

Why the table version moves to 9. A version-8 reader does not know v2 log
names: `f1_0-0-0_t3_1.parquet` looks to it like a base file of another slice.
Keeping `hoodie.table.version` below 9 is therefore the promise that every file
group stays readable by older readers (lsm_lab then writes v1 logs only); the
first v2 log needs version 9, so that an older reader refuses the table instead
of misreading it.

The lsm_tree layout (`layout="lsm_tree"`) promises sorted files from now on.
Older files are not rewritten (no forced compaction): they carry no
`lsm_lab.sorted` footer, so a slice holding one is merged by hash (or, when a
v1 block happens to be sorted, by the sorted engine), and a file whose footer
wrongly claims order makes the sorted engine fail over to hash: an unsorted
older file costs speed, never correctness. The existing key-lookup index is
kept (`hoodie.index.type`): the existing file groups are not buckets, and a
bucket index would send updates of their keys to new groups.

## Version 8 or 9 → 10: a rewrite into upstream Hudi's RFC-103 dialect, in place (`upgrade_to_v10`)


Version 10 is upstream Hudi's RFC-103 dialect, whose bucket index places keys
by Java's `List.hashCode` (lsm_lab's older tables used CRC-32), so the files
themselves must change.  The upgrade rewrites the latest snapshot into new base
files as one `replacecommit` that replaces every file group, then switches
`hoodie.properties`:

    lock: begin <t>.replacecommit.inflight (a write transaction, services.occ)
    lock: hoodie.properties += lsm_lab.upgrade.pending=<t>    writers now refuse the table
          read each latest slice, re-bucket (Hudi's hash), write sorted base files
          <bucket:08d>-0000-0000-0000-000000000000-0_<token>_<t>.parquet
    lock: <t>_<c>.replacecommit  (partitionToReplaceFileIds = every old file group)   commit point
    lock: hoodie.properties: version 10, pending removed

A kill before the commit point leaves an inflight instant that the next writer
(or the next upgrade, which starts over) rolls back; readers never see it.  A
kill after it leaves the rewritten snapshot visible and the properties still at
the old version with the pending key: reads are right (readers take both
dialects), writers refuse the table until the upgrade runs again and only
writes the properties.  Time travel to before the upgrade reads the replaced
file groups, which stay until the cleaner removes them.

## JSON instants → Avro (`avro_timeline`)

Tables created before lsm_lab wrote upstream's Avro timeline hold JSON instant files
(`lsm_lab.timeline.instant.format=json`, or only completed write instants in Avro). `avro_timeline`
re-encodes every instant file of the active timeline, whatever its action and state, as the Avro record
upstream has there (`timeline/avro_models.py`; requested/inflight files upstream leaves empty become
empty), one atomic replace per file with the same meaning; then the history's rows (their `metadata` and
`plan` bytes), all into one new file committed by a new history manifest (`ArchivedTimeline.rewrite`);
then it sets the property. A kill in between leaves some files of each encoding, which every reader of
lsm_lab reads alike, and the next run finishes the job. `upgrade_to_v10` ends with it.

`Table.upgrade()` (and `lsm-lab upgrade PATH`) call `upgrade_to_v10` and reopen the table;
`lsm_lab.interop.upgrade.upgrade(table, layout=...)` calls `switch_to_native_logs`.

Simplified compared with Apache Hudi: Hudi's upgrade handlers also rewrite the
timeline, properties and metadata table of every version step (and its 9 -> 10
step rewrites no data: it keeps the old bucket files); lsm_lab upgrades only
lsm_lab-created tables of version 8 or 9 (version 6 would need its flat
timeline moved and completion times invented), rewrites each partition's latest
snapshot in memory, and has no downgrade.

Taught in: notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError, UnsupportedFeatureError
from lsm_lab.filegroup import index, read, write
from lsm_lab.format import naming, parquet_write
from lsm_lab.merge import records
from lsm_lab.services import occ
from lsm_lab.services.lock import table_lock
from lsm_lab.storage import atomic, list_names, open_read
from lsm_lab.table.state import TableState
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.archive import PLAN_STATES, ArchivedTimeline
from lsm_lab.timeline.instant import COMPACTION, LOG_COMPACTION, REPLACE_COMMIT, WRITE_ACTIONS, parse_file_name
from lsm_lab.timeline.instanttime import completion_time
from lsm_lab.timeline.metadata import (
    AVRO_MAGIC,
    WriteStat,
    commit_metadata,
    decode_instant_content,
    encode_avro_instant,
    with_hudi_schema,
)

KEY_UPGRADED_FROM = "lsm_lab.upgraded.from.version"
KEY_UPGRADED_AT = "lsm_lab.upgraded.at"
KEY_UPGRADE_PENDING = cfg.KEY_UPGRADE_PENDING
UPGRADE_OPERATION = "upgrade_to_v10"


def switch_to_native_logs(t: TableState, *, layout: str | None = None) -> None:
    """Switch new writes to v2 logs (table version 9) and, with `layout`, to that storage layout (8 → 9 above).

    Works on lsm_lab-created tables of version 8 (and on version 9 tables for a layout switch alone);
    rewrites no data file. Idempotent."""
    conf = t.config
    if layout is not None and layout not in cfg.LAYOUTS:
        raise InputError(f"layout must be one of {', '.join(cfg.LAYOUTS)}, not {layout!r}")
    if conf.props.get("lsm_lab.created") != "true":
        raise UnsupportedFeatureError("lsm_lab upgrades only tables it created (this one was written by "
                                      "Apache Hudi; use Hudi's own upgrade)", path=t.path)
    if conf.version < 8:
        raise UnsupportedFeatureError(f"table version {conf.version} cannot switch to native logs directly: its flat "
                                      "timeline has no completion times; upgrade it to version 8 with Apache Hudi "
                                      "first", path=t.path)
    updates: dict[str, str] = {}
    if conf.version < 9 or conf.log_format_version != 2:
        updates.update({
            "hoodie.table.version": "9",
            cfg.KEY_LOG_FORMAT: "2",
            KEY_UPGRADED_FROM: str(conf.version),
            KEY_UPGRADED_AT: t.latest_completion() or "",
        })
        if conf.ordering_field and not conf.props.get("hoodie.table.ordering.fields"):
            updates["hoodie.table.ordering.fields"] = conf.ordering_field
        if "hoodie.table.initial.version" not in conf.props:
            updates["hoodie.table.initial.version"] = str(conf.version)
    if layout is not None and layout != conf.layout:
        updates["hoodie.table.storage.layout"] = layout
        # keep the index the existing file groups were placed with (see the module docstring)
        updates["hoodie.index.type"] = conf.props.get("hoodie.index.type") or ("BUCKET" if conf.is_lsm else "SIMPLE")
    if not updates:
        return
    with table_lock(t.path):
        current = cfg.read_config(t.path)  # re-read under the lock
        props = dict(current.props)
        props.update(updates)
        cfg.write_config(t.path, props, create=False)


def _reopened(t: TableState) -> TableState:
    return TableState(t.path, cfg.read_config(t.path))


def upgrade_to_v10(t: TableState) -> None:
    """Rewrite an lsm_lab table of version 8 or 9 to Apache Hudi's table version 10, in place, crash-safe.

    One `replacecommit` instant (see the module docstring); reopen the table
    afterwards.  Idempotent: a version 10 table is left as it is, and a table whose
    previous upgrade stopped after its commit point only gets its properties.
    """
    conf = t.config
    pending = conf.props.get(KEY_UPGRADE_PENDING)
    if conf.version >= cfg.UPSTREAM_LSM_VERSION and not pending:
        avro_timeline(t)
        return
    if conf.props.get("lsm_lab.created") != "true":
        raise UnsupportedFeatureError("lsm_lab upgrades only tables it created (this one was written by "
                                      "Apache Hudi; use Hudi's own upgrade)", path=t.path)
    if conf.version < 8:
        raise UnsupportedFeatureError(f"table version {conf.version} cannot be upgraded to 10: its flat timeline has "
                                      "no completion times; upgrade it to version 8 with Apache Hudi first",
                                      path=t.path)
    if pending and any(i.begin_time == pending for i in t.completed_writes()):
        _finish_v10(t)  # the rewrite committed; only the properties are missing
        return
    plans = [i for i in t.active_timeline.pending() if i.action in (COMPACTION, LOG_COMPACTION)]
    if plans:
        raise UnsupportedFeatureError(f"the table has {len(plans)} pending compaction plan(s) "
                                      f"({', '.join(i.begin_time for i in plans)}) on file groups the upgrade "
                                      "replaces; run them (lsm-lab compact) before upgrading", path=t.path)
    target = conf.with_props(**{"hoodie.table.version": str(cfg.UPSTREAM_LSM_VERSION)})
    with occ.WriteTransaction(t.path, t.active_timeline, REPLACE_COMMIT,
                              {"operationType": UPGRADE_OPERATION.upper()}) as txn:
        txn.begin(t.latest_completion)
        with table_lock(t.path):  # from here on writers refuse the table (TableState.check_writable)
            props = dict(cfg.read_config(t.path).props)
            props[KEY_UPGRADE_PENDING] = txn.begin_time
            cfg.write_config(t.path, props, create=False)
        stats, replaced = _rewrite_snapshot(t, target, txn)
        schema = t.schema
        extra = {write.SCHEMA_KEY: write.schema_to_text(schema)} if schema is not None and len(schema) else {}
        extra["lsm_lab.upgrade.to.version"] = str(cfg.UPSTREAM_LSM_VERSION)
        meta = commit_metadata(stats, operation=UPGRADE_OPERATION, extra=extra)
        meta["partitionToReplaceFileIds"] = replaced
        txn.commit(meta)
    _finish_v10(_reopened(t))
    avro_timeline(_reopened(t))


def avro_timeline(t: TableState) -> int:
    """Re-encode the JSON instant files of an lsm_lab table of version 8 or later, and its history rows, as
    upstream's Avro (see the module docstring); returns how many files and rows were rewritten. Content an
    Avro record cannot hold stays JSON."""
    conf = t.config
    if conf.version < 8 or conf.props.get("lsm_lab.created") != "true":
        return 0
    timeline = t.active_timeline
    done = 0
    with table_lock(t.path):  # writers wait: no instant changes state while its neighbours are rewritten
        for name in sorted(list_names(timeline.folder)):
            parsed = parse_file_name(name)
            if parsed is None:
                continue
            path = timeline.folder / name
            with open_read(path) as f:
                data = f.read()
            avro = _as_avro(parsed[1], parsed[2].value, data, path=str(path), table_name=conf.name)
            if avro is not None:
                atomic.replace_file(path, avro)  # one atomic replace per file, same meaning
                done += 1
        history = ArchivedTimeline(t.path, conf)
        if history.supported:
            done += history.rewrite(functools.partial(_history_row_as_avro, table_name=conf.name))
        if conf.instant_format != "avro":
            props = dict(cfg.read_config(t.path).props)
            props[cfg.KEY_INSTANT_FORMAT] = "avro"
            cfg.write_config(t.path, props, create=False)
    return done


def _as_avro(action: str, state: str, data: bytes, *, path: str, table_name: str) -> bytes | None:
    """Upstream's Avro bytes for a JSON instant file (None: already Avro or empty, or it must stay JSON)."""
    if not data or data[:4] == AVRO_MAGIC:
        return None
    content = decode_instant_content(data, path=path)
    if state == "completed" and action in WRITE_ACTIONS:
        content = with_hudi_schema(content, table_name)
    return encode_avro_instant(action, state, content)


def _history_row_as_avro(row: dict[str, Any], *, table_name: str) -> dict[str, Any] | None:
    """A history row with Avro `metadata` and, for the actions upstream archives a plan of, an Avro `plan`
    (`services/archiver.py`; the requested files of other actions, which lsm_lab archived before and never
    reads, are dropped as upstream has none)."""
    action = str(row["action"])
    where = f"history row {row['instantTime']}"
    metadata = _as_avro(action, "completed", row["metadata"] or b"", path=where, table_name=table_name)
    plan: bytes | None = row["plan"]
    if action not in PLAN_STATES:
        plan = None
    elif plan:
        plan = _as_avro(action, "requested", plan, path=where, table_name=table_name) or plan
    if metadata is None and plan == row["plan"]:
        return None
    return {**row, "metadata": row["metadata"] if metadata is None else metadata, "plan": plan or None}


def _finish_v10(t: TableState) -> None:
    """The properties of the upgraded table (the step after the commit point)."""
    with table_lock(t.path):
        current = cfg.read_config(t.path)
        props = dict(current.props)
        props.pop(KEY_UPGRADE_PENDING, None)
        if current.version < cfg.UPSTREAM_LSM_VERSION:
            props[KEY_UPGRADED_FROM] = str(current.version)
        props.update({
            "hoodie.table.version": str(cfg.UPSTREAM_LSM_VERSION),
            cfg.KEY_LOG_FORMAT: "2",
            KEY_UPGRADED_AT: t.latest_completion() or "",
        })
        props.setdefault(cfg.KEY_META_FIELDS_MODE, current.meta_fields_mode)  # version 10 states it (MetaFieldsMode)
        if current.ordering_field and not props.get("hoodie.table.ordering.fields"):
            props["hoodie.table.ordering.fields"] = current.ordering_field
        if current.bucket_index:
            props.update({"hoodie.index.bucket.engine": "SIMPLE",
                          "hoodie.bucket.index.hash.field": ",".join(current.record_key)})
        props.setdefault("hoodie.table.base.file.format", "PARQUET")
        cfg.write_config(t.path, props, create=False)


def _rewrite_snapshot(t: TableState, target: cfg.TableConfig, txn: occ.WriteTransaction
                      ) -> tuple[list[WriteStat], dict[str, list[str]]]:
    """Write the snapshot `txn` started from as version-10 base files; (write stats, replaced file ids)."""
    instant = txn.begin_time
    snapshot = completion_time(txn.snapshot)  # the table as the last write before the upgrade completed
    ctx = read.ReadContext(t.path, t.config, t.schema or pa.schema([]), t.completion_map(snapshot), snapshot)
    groups = t.file_groups(as_of=snapshot) if snapshot is not None else []
    columns = list(ctx.full_schema.names)
    stats: list[WriteStat] = []
    replaced: dict[str, list[str]] = {}
    by_partition: dict[str, list[Any]] = {}
    for g in groups:
        by_partition.setdefault(g.partition, []).append(g)
        replaced.setdefault(g.partition, []).append(g.file_id)
    write.write_partition_metadata(t.path, sorted(by_partition), instant)
    task = 0
    for partition, pgroups in sorted(by_partition.items()):
        tables = [read.read_slice(ctx, g.latest, columns=columns) for g in pgroups]
        if target.bucket_index:  # re-bucket the whole partition with Hudi's hash
            rows = pa.concat_tables(tables) if tables else None
            if rows is None or rows.num_rows == 0:
                continue
            buckets = index.hudi_bucket_ids(records.key_parts(rows, target.record_key), target.num_buckets)
            parts = [(index.hudi_bucket_file_id(int(b)), rows.filter(pa.array(buckets == b)))
                     for b in np.unique(buckets)]
        else:  # key-lookup index: one new file group per old one
            parts = [(index.new_file_id(), tb) for tb in tables if tb.num_rows]
        for file_id, rows in parts:
            stats.append(_write_base(t, target, txn, partition, file_id, rows, instant, task))
            task += 1
    return stats, replaced


def _write_base(t: TableState, target: cfg.TableConfig, txn: occ.WriteTransaction, partition: str, file_id: str,
                rows: pa.Table, instant: str, task: int) -> WriteStat:
    token = naming.write_token(task, 0, 0)
    name = naming.base_file_name(file_id, token, instant)
    if target.is_lsm:
        rows = records.sort_by_key(rows)
    n = rows.num_rows
    rows = rows.set_column(rows.schema.get_field_index(records.FILE_NAME), records.FILE_NAME,
                           pa.array([name] * n, pa.string()))
    txn.mark(partition, name, "CREATE")
    folder = t.path / partition if partition else t.path
    size = parquet_write.write_parquet(folder / name, rows, is_sorted=target.is_lsm)
    keys = rows.column(records.RECORD_KEY)
    lo, hi = (pc.min(keys).as_py(), pc.max(keys).as_py()) if n else (None, None)
    return WriteStat(partition, file_id, f"{partition}/{name}" if partition else name, "null", numWrites=n,
                     numInserts=n, totalWriteBytes=size, fileSizeInBytes=size, baseFile=name,
                     minRecordKey=lo, maxRecordKey=hi)
