"""Every completed write instant of a version 9 or 10 table decodes with upstream Hudi's own Avro schemas.

The reader schemas below are apache/hudi's `hudi-common/src/main/avro/HoodieCommitMetadata.avsc` and
`HoodieReplaceCommitMetadata.avsc` (field names, types, defaults and namespace as upstream declares them),
used as fastavro *reader* schemas: Avro's schema resolution is what upstream's reader does with a file
whose writer schema has more fields (lsm_lab's `baseFile`, `logFiles`, `cdcStats`, key ranges) or fewer
(upstream's `prevFilePathOverwritten`, `totalLogFiles`: their defaults).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any, cast

import fastavro
import pyarrow.parquet as pq
import pytest
from localpath import local

import lsm_lab
from lsm_lab.timeline.instant import REPLACE_COMMIT, parse_file_name
from lsm_lab.timeline.metadata import AVRO_MAGIC

NS = "org.apache.hudi.avro.model"


def _nullable(name: str, kind: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


# HoodieWriteStat as upstream declares it (HoodieCommitMetadata.avsc), in its field order
UPSTREAM_WRITE_STAT = {"name": "HoodieWriteStat", "type": "record", "fields": [
    *(_nullable(n, "string") for n in ("fileId", "path", "prevCommit", "prevFilePathOverwritten")),
    *(_nullable(n, "long") for n in ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
                                      "totalWriteErrors")),
    _nullable("partitionPath", "string"),
    *(_nullable(n, "long") for n in ("totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
                                      "numInserts", "totalLogBlocks", "totalCorruptLogBlock",
                                      "totalRollbackBlocks", "fileSizeInBytes")),
]}
_TAIL = [_nullable("extraMetadata", {"type": "map", "values": "string"}),
         {"name": "version", "type": ["int", "null"], "default": 1},
         _nullable("operationType", "string")]
UPSTREAM_COMMIT = {"namespace": NS, "type": "record", "name": "HoodieCommitMetadata", "fields": [
    _nullable("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": UPSTREAM_WRITE_STAT}}),
    *_TAIL]}
UPSTREAM_REPLACE = {"namespace": NS, "type": "record", "name": "HoodieReplaceCommitMetadata", "fields": [
    _nullable("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": UPSTREAM_WRITE_STAT}}),
    *_TAIL, _nullable("partitionToReplaceFileIds", {"type": "map", "values": {"type": "array", "items": "string"}})]}


@pytest.mark.parametrize("version,layout", [(10, "lsm_tree"), (9, "default"), (9, "lsm_tree")])
def test_every_completed_instant_decodes_with_upstream_schemas(tmp_path: Path, version: int, layout: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", partition_by="p", ordering_field="ts",
                             table_version=version, layout=layout, cdc=True, num_buckets=2)
    rows: list[dict[str, Any]] = [{"id": f"k{i:02d}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(40)]
    t.insert(rows)
    t.upsert([dict(r, ts=2, v=-r["v"]) for r in rows[::3]])
    t.delete([{"id": r["id"], "p": r["p"], "ts": 3} for r in rows[::7]])
    t.compact(strategy="full")
    t.bulk_insert([{"id": f"n{i:02d}", "p": "ab"[i % 2], "ts": 4, "v": i} for i in range(10)])
    clustered = t.cluster()  # (None when the planner finds nothing to cluster)
    ours = {i.begin_time: t.instant_metadata(i) for i in t.completed_writes()}
    timeline = local(t.path) / ".hoodie" / "timeline"
    seen = replaced = 0
    for inst in t.completed_writes():
        data = (timeline / inst.file_name).read_bytes()
        assert data[:4] == AVRO_MAGIC, inst.file_name
        replace = inst.file_name.endswith("." + REPLACE_COMMIT)  # (a completed clustering is a replacecommit file)
        upstream = UPSTREAM_REPLACE if replace else UPSTREAM_COMMIT
        (decoded,) = list(fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(upstream)))
        record = cast("dict[str, Any]", decoded)
        mine = ours[inst.begin_time]
        assert record["operationType"] == mine["operationType"]
        assert {p: sorted(s["path"] for s in lst) for p, lst in (record["partitionToWriteStats"] or {}).items()} \
            == {p: sorted(s["path"] for s in lst) for p, lst in (mine.get("partitionToWriteStats") or {}).items()}
        if replace:
            replaced += 1
            assert record["partitionToReplaceFileIds"] == mine["partitionToReplaceFileIds"]
        writer_schema = json.loads(record["extraMetadata"]["schema"])  # the Avro writer schema, as upstream
        assert writer_schema["name"] == "trips_record" and writer_schema["namespace"] == "hoodie.trips"
        fastavro.parse_schema(writer_schema)
        seen += 1
    assert seen >= 5 and replaced >= (clustered is not None)


# --------------------------------------------------------------------------- every instant file, every state
# Upstream's records for the instant files that are not commit metadata, written here independently of
# lsm_lab/timeline/avro_models.py. Two come from real Hudi 1.x files shipped in data/hudi-tables (their
# embedded writer schemas); the others are transcribed from apache/hudi hudi-common/src/main/avro/*.avsc.
def _opt(name: str, kind: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


def _field(name: str, kind: Any, **kw: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **kw}


_VERSION = {"name": "version", "type": ["int", "null"], "default": 1}
_STRS = {"type": "array", "items": "string"}
_SMAP = {"type": "map", "values": "string"}
# HoodieInstantInfo.avsc
INSTANT_INFO = {"namespace": NS, "type": "record", "name": "HoodieInstantInfo",
                "fields": [_field("commitTime", "string"), _field("action", "string")]}
# HoodieRollbackMetadata: the writer schema of a real Hudi 1.x `<t>_<c>.rollback` (table version 9)
ROLLBACK_METADATA = {"namespace": NS, "type": "record", "name": "HoodieRollbackMetadata", "fields": [
    _field("startRollbackTime", "string"), _field("timeTakenInMillis", "long"), _field("totalFilesDeleted", "int"),
    _field("commitsRollback", _STRS),
    _field("partitionMetadata", {"type": "map", "values": {
        "type": "record", "name": "HoodieRollbackPartitionMetadata", "fields": [
            _field("partitionPath", "string"), _field("successDeleteFiles", _STRS),
            _field("failedDeleteFiles", _STRS), _opt("rollbackLogFiles", {"type": "map", "values": "long"}),
            _opt("logFilesFromFailedCommit", {"type": "map", "values": "long"})]}}),
    _VERSION, _field("instantsRollback", {"type": "array", "items": "HoodieInstantInfo"}, default=[])]}
# HoodieRollbackPlan: the writer schema of a real Hudi 1.x `<t>.rollback.requested` (table version 9)
ROLLBACK_PLAN = {"namespace": NS, "type": "record", "name": "HoodieRollbackPlan", "fields": [
    _opt("instantToRollback", "HoodieInstantInfo"),
    _opt("RollbackRequests", {"type": "array", "items": {
        "type": "record", "name": "HoodieRollbackRequest", "fields": [
            _field("partitionPath", "string"), _opt("fileId", "string"), _opt("latestBaseInstant", "string"),
            _field("filesToBeDeleted", _STRS, default=[]),
            _opt("logBlocksToBeDeleted", {"type": "map", "values": "long"})]}}),
    _VERSION]}
# HoodieCleanerPlan.avsc
CLEANER_PLAN = {"namespace": NS, "type": "record", "name": "HoodieCleanerPlan", "fields": [
    _opt("earliestInstantToRetain", {"type": "record", "name": "HoodieActionInstant", "fields": [
        _field("timestamp", "string"), _field("action", "string"), _field("state", "string")]}),
    _field("lastCompletedCommitTimestamp", "string", default=""),
    _field("policy", "string"),
    _opt("filesToBeDeletedPerPartition", {"type": "map", "values": _STRS}),
    _VERSION,
    _opt("filePathsToBeDeletedPerPartition", {"type": "map", "values": {"type": "array", "items": {
        "type": "record", "name": "HoodieCleanFileInfo", "fields": [
            _opt("filePath", "string"), _opt("isBootstrapBaseFile", "boolean")]}}}),
    _opt("partitionsToBeDeleted", _STRS),
    _opt("extraMetadata", _SMAP)]}
# HoodieCleanPartitionMetadata.avsc and HoodieCleanMetadata.avsc
CLEAN_METADATA = {"namespace": NS, "type": "record", "name": "HoodieCleanMetadata", "fields": [
    _field("startCleanTime", "string"), _field("timeTakenInMillis", "long"), _field("totalFilesDeleted", "int"),
    _field("earliestCommitToRetain", "string"), _field("lastCompletedCommitTimestamp", "string", default=""),
    _field("partitionMetadata", {"type": "map", "values": {
        "type": "record", "name": "HoodieCleanPartitionMetadata", "fields": [
            _field("partitionPath", "string"), _field("policy", "string"), _field("deletePathPatterns", _STRS),
            _field("successDeleteFiles", _STRS), _field("failedDeleteFiles", _STRS),
            _opt("isPartitionDeleted", "boolean")]}}),
    _VERSION,
    _opt("bootstrapPartitionMetadata", {"type": "map", "values": "HoodieCleanPartitionMetadata"}),
    _opt("extraMetadata", _SMAP)]}
# HoodieSavePointMetadata.avsc
SAVEPOINT_METADATA = {"namespace": NS, "type": "record", "name": "HoodieSavepointMetadata", "fields": [
    _field("savepointedBy", "string"), _field("savepointedAt", "long"), _field("comments", "string"),
    _field("partitionMetadata", {"type": "map", "values": {
        "type": "record", "name": "HoodieSavepointPartitionMetadata", "fields": [
            _field("partitionPath", "string"), _field("savepointDataFile", _STRS)]}}),
    _VERSION]}
# HoodieRestorePlan.avsc (upstream declares the last union string-first with a null default)
RESTORE_PLAN = {"namespace": NS, "type": "record", "name": "HoodieRestorePlan", "fields": [
    _field("instantsToRollback", {"type": "array", "items": "HoodieInstantInfo"}, default=[]),
    {"name": "version", "type": ["int", "null"], "default": 2},
    _field("savepointToRestoreTimestamp", ["null", "string"], default=None)]}
# HoodieRestoreMetadata.avsc
RESTORE_METADATA = {"namespace": NS, "type": "record", "name": "HoodieRestoreMetadata", "fields": [
    _field("startRestoreTime", "string"), _field("timeTakenInMillis", "long"), _field("instantsToRollback", _STRS),
    _field("hoodieRestoreMetadata", {"type": "map", "values": {
        "type": "array", "items": ["null", "HoodieRollbackMetadata"]}}),
    _VERSION, _field("restoreInstantInfo", {"type": "array", "items": "HoodieInstantInfo"}, default=[]),
    _opt("extraMetadata", _SMAP)]}


def _real_writer_schema(shared_dir: Path, zip_name: str, suffix: str) -> dict[str, Any]:
    """The writer schema embedded in the first instant file of a shipped real table whose name ends with `suffix`."""
    with zipfile.ZipFile(shared_dir / "hudi-tables" / zip_name) as zf:
        member = next(m for m in sorted(zf.namelist()) if m.endswith(suffix) and "/metadata/" not in m
                      and "__MACOSX" not in m and "/timeline/" in m)
        data = zf.read(member)
    return cast("dict[str, Any]", fastavro.reader(io.BytesIO(data)).writer_schema)


def _names(schema: dict[str, Any]) -> list[str]:
    """The top-level field names of a record schema, in order (the transcription above checked against a real file)."""
    return [str(f["name"]) for f in schema["fields"]]


@pytest.fixture(scope="module")
def upstream_schemas(shared_dir: Path) -> dict[str, Any]:
    """Parsed reader schemas by record name."""
    named: dict[str, Any] = {}
    out: dict[str, Any] = {}
    compaction = _real_writer_schema(shared_dir, "qs_mor_avro_v8_trips_8i3u1d.zip", ".compaction.requested")
    clustering = _real_writer_schema(shared_dir, "s_cow_v9_txns_nonpart_nometa.zip", ".clustering.requested")
    rollback = "s_mor_avro_v9_nonpartitioned_rollback.zip"  # a real Hudi 1.x rollback: both files' own schemas
    rollback_plan = _real_writer_schema(shared_dir, rollback, ".rollback.requested")
    rollback_meta = _real_writer_schema(shared_dir, rollback, ".rollback")
    assert _names(rollback_plan) == _names(ROLLBACK_PLAN) and _names(rollback_meta) == _names(ROLLBACK_METADATA)
    for schema in (rollback_meta, rollback_plan, CLEANER_PLAN, CLEAN_METADATA, SAVEPOINT_METADATA,
                   RESTORE_PLAN, RESTORE_METADATA, compaction, clustering):
        name = str(schema["name"]).rsplit(".", 1)[-1]
        out[name] = fastavro.parse_schema(schema, named_schemas=named)
    out["HoodieCommitMetadata"] = fastavro.parse_schema(UPSTREAM_COMMIT, named_schemas={})
    out["HoodieReplaceCommitMetadata"] = fastavro.parse_schema(UPSTREAM_REPLACE, named_schemas={})
    return out


# (action, state) -> upstream's record in that file (TimelineMetadataUtils, CommitMetadataSerDeV2)
EXPECTED = {
    ("commit", "completed"): "HoodieCommitMetadata", ("deltacommit", "completed"): "HoodieCommitMetadata",
    ("commit", "inflight"): "HoodieCommitMetadata", ("deltacommit", "inflight"): "HoodieCommitMetadata",
    ("replacecommit", "completed"): "HoodieReplaceCommitMetadata",
    ("replacecommit", "inflight"): "HoodieCommitMetadata",
    ("compaction", "requested"): "HoodieCompactionPlan", ("logcompaction", "requested"): "HoodieCompactionPlan",
    ("clustering", "requested"): "HoodieRequestedReplaceMetadata",
    ("replacecommit", "requested"): "HoodieRequestedReplaceMetadata",
    ("clean", "requested"): "HoodieCleanerPlan", ("clean", "inflight"): "HoodieCleanerPlan",
    ("clean", "completed"): "HoodieCleanMetadata",
    ("rollback", "requested"): "HoodieRollbackPlan", ("rollback", "completed"): "HoodieRollbackMetadata",
    ("restore", "requested"): "HoodieRestorePlan", ("restore", "completed"): "HoodieRestoreMetadata",
    ("savepoint", "completed"): "HoodieSavepointMetadata",
}
# what upstream archives in the LSM history's `plan` column (MetadataConversionUtils.createLSMTimelineInstant)
PLAN_OF = {"clean": "HoodieCleanerPlan", "compaction": "HoodieCompactionPlan", "logcompaction": "HoodieCompactionPlan",
           "clustering": "HoodieRequestedReplaceMetadata", "replacecommit": "HoodieRequestedReplaceMetadata"}


def _decode_as(data: bytes, record: str, schemas: dict[str, Any], where: str) -> dict[str, Any]:
    assert data[:4] == AVRO_MAGIC, where
    reader = fastavro.reader(io.BytesIO(data), reader_schema=schemas[record])
    writer = cast("dict[str, Any]", reader.writer_schema)
    assert writer["name"] in (f"{NS}.{record}", record), where
    (value,) = list(reader)
    return cast("dict[str, Any]", value)


def _keys(t: lsm_lab.Table) -> list[tuple[str, int]]:
    return sorted(zip(t.read().column("id").to_pylist(), t.read().column("ts").to_pylist(), strict=True))


def _busy_table(path: Path, version: int, layout: str, properties: dict[str, str] | None = None
                ) -> tuple[lsm_lab.Table, list[tuple[str, int]], set[str]]:
    """Every action and state lsm_lab writes: writes, full and log compaction, clustering, clean, a rolled back
    failed write, archive, savepoint and restore. Returns the table, its rows at the savepoint, and the
    actions whose planner found nothing to do."""
    t = lsm_lab.create_table(path, name="trips", record_key="id", partition_by="p", ordering_field="ts",
                             table_version=version, layout=layout, properties=properties)
    rows: list[dict[str, Any]] = [{"id": f"k{i:02d}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(40)]
    t.insert(rows)
    for n in range(3):
        t.upsert([dict(r, ts=2 + n, v=-r["v"]) for r in rows[n::4]])
    skipped = set() if t.compact(strategy="log") else {"logcompaction"}  # (the planner may find nothing to do)
    t.delete([{"id": r["id"], "p": r["p"], "ts": 9} for r in rows[::7]])
    t.compact(strategy="full")
    t.bulk_insert([{"id": f"n{i:02d}", "p": "ab"[i % 2], "ts": 4, "v": i} for i in range(10)])
    if t.cluster() is None:
        skipped.add("clustering")
    t.upsert([dict(r, ts=10) for r in rows[1::5]])
    t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    dead = t.active_timeline.start(t.active_timeline.request("deltacommit"))  # a writer that died
    assert dead.state.value == "inflight"
    t.rollback()
    t.archive(keep=4)
    t.upsert([dict(r, ts=11) for r in rows[2::5]])
    t.compact(strategy="full")  # (one more compaction on the active timeline: its states are checked there)
    sp = t.savepoint()
    saved = _keys(t)
    t.upsert([dict(r, ts=12) for r in rows[3::5]])
    t.restore(sp)
    return t, saved, skipped


def _check_every_file(t: lsm_lab.Table, upstream_schemas: dict[str, Any], skipped: set[str]) -> None:
    """Every non-empty instant file is Avro and decodes with upstream's record for its action and state;
    so do the history rows' `metadata` and `plan`."""
    timeline = local(t.path) / ".hoodie" / "timeline"
    seen: dict[tuple[str, str], int] = {}
    empty: set[tuple[str, str]] = set()
    for f in sorted(timeline.iterdir()):
        parsed = parse_file_name(f.name)
        if parsed is None:
            continue
        _, action, state, _ = parsed
        key = (action, state.value)
        data = f.read_bytes()
        if not data:
            empty.add(key)
            continue
        assert key in EXPECTED, f"{f.name}: upstream has no content in this state"
        record = _decode_as(data, EXPECTED[key], upstream_schemas, f.name)
        assert record is not None
        seen[key] = seen.get(key, 0) + 1
    for key in [("compaction", "requested"), ("logcompaction", "requested"), ("clustering", "requested"),
                ("clean", "requested"), ("clean", "completed"), ("rollback", "requested"),
                ("rollback", "completed"), ("restore", "requested"), ("restore", "completed"),
                ("savepoint", "completed"), ("deltacommit", "completed")]:
        if key[0] in skipped:
            continue
        assert seen.get(key) or key[0] in {r.action for r in t.archived_timeline.rows()}, (key, sorted(seen))
    # upstream leaves these empty too (real Hudi 1.x tables: compaction.inflight, clustering.inflight, rollback.inflight)
    assert empty >= {("compaction", "inflight"), ("rollback", "inflight")}, sorted(empty)

    history = local(t.archived_timeline.folder)
    rows = [r for name in t.archived_timeline.files() for r in pq.read_table(history / name).to_pylist()]
    assert rows
    for row in rows:
        where = f"history row {row['instantTime']} {row['action']}"
        completed = {"compaction": "commit", "logcompaction": "deltacommit", "clustering": "replacecommit"}
        action = completed.get(row["action"], row["action"])
        _decode_as(row["metadata"], EXPECTED[(action, "completed")], upstream_schemas, where)
        if row["action"] in PLAN_OF and row["plan"] is not None:
            _decode_as(row["plan"], PLAN_OF[row["action"]], upstream_schemas, where + " plan")
        else:
            assert row["plan"] is None, where  # upstream archives no plan for this action


@pytest.mark.parametrize("version,layout", [(10, "lsm_tree"), (10, "default"), (9, "default"), (9, "lsm_tree")])
def test_every_instant_file_and_history_row_decodes_with_upstream_schemas(
        tmp_path: Path, version: int, layout: str, upstream_schemas: dict[str, Any]) -> None:
    t, saved, skipped = _busy_table(tmp_path / "t", version, layout)
    _check_every_file(t, upstream_schemas, skipped)
    # lsm_lab reads all of it back (the services' dicts), archived instants included
    assert _keys(lsm_lab.open_table(t.path)) == saved  # the restore read its Avro plan
    for inst in t.completed_writes():
        assert isinstance(t.instant_metadata(inst), dict)


def _without_nulls(value: Any) -> Any:
    """(Avro spells an absent field null, and upstream's empty states are empty files: compare what is set.)"""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def test_an_old_json_table_upgrades_to_avro_and_reads_the_same(tmp_path: Path,
                                                                 upstream_schemas: dict[str, Any]) -> None:
    """A table written with JSON instants (`lsm_lab.timeline.instant.format=json`, as lsm_lab wrote before):
    `lsm-lab upgrade --instants-only` turns every instant file and history row into upstream's Avro, and the
    table reads the same: rows, time travel, and every instant's content."""
    from instantfiles import read_instant

    from lsm_lab.cli import main
    from lsm_lab.timeline import config as cfg

    t, _, skipped = _busy_table(tmp_path / "t", 10, "lsm_tree", properties={cfg.KEY_INSTANT_FORMAT: "json"})
    timeline = local(t.path) / ".hoodie" / "timeline"
    files = sorted(f for f in timeline.iterdir() if parse_file_name(f.name) and f.read_bytes())
    assert any(f.read_bytes()[:1] == b"{" for f in files)
    history = t.archived_timeline
    archived = [r.begin_time for r in history.rows()]
    assert archived
    before = {f.name: read_instant(f) for f in files}
    before_meta = history.read_metadata_many(archived)
    times = [i.completion_time for i in t.completed_writes()]
    before_rows = [_keys_as_of(t, c) for c in times]

    assert main(["upgrade", str(t.path), "--instants-only"]) == 0
    again = lsm_lab.open_table(t.path)
    assert again.config.instant_format == "avro"
    _check_every_file(again, upstream_schemas, skipped)
    for f in files:  # same meaning; states upstream leaves empty are empty now (lsm_lab never read them)
        parsed = parse_file_name(f.name)
        assert parsed is not None
        after = read_instant(f)
        if after:  # everything that was set still is (Avro adds the schema's defaults, and commits the writer schema)
            assert _covers(_without_nulls(after), _without_nulls(before[f.name])), f.name
        else:
            assert (parsed[1], parsed[2].value) in {("deltacommit", "requested"), ("commit", "requested"),
                                                    ("savepoint", "requested")}, f.name
    after_meta = again.archived_timeline.read_metadata_many(archived)
    for begin in archived:
        assert _covers(_without_nulls(after_meta[begin]), _without_nulls(before_meta[begin])), begin
    assert [_keys_as_of(again, c) for c in times] == before_rows
    assert main(["upgrade", str(t.path), "--instants-only"]) == 0  # idempotent
    assert again.archived_timeline.current_version() == lsm_lab.open_table(t.path).archived_timeline.current_version()


def _covers(big: Any, small: Any) -> bool:
    """Every key of `small` (recursively) is in `big` with the same value."""
    if isinstance(small, dict):
        return isinstance(big, dict) and all(k in big and _covers(big[k], v) for k, v in small.items())
    if isinstance(small, list):
        return isinstance(big, list) and len(big) == len(small) and all(map(_covers, big, small))
    return bool(big == small)


def _keys_as_of(t: lsm_lab.Table, completion: str | None) -> list[tuple[str, int]] | str:
    from lsm_lab.errors import RetentionError

    try:
        rows = t.read(as_of=completion)
    except RetentionError:
        return "cleaned"  # (the same answer before and after the upgrade)
    return sorted(zip(rows.column("id").to_pylist(), rows.column("ts").to_pylist(), strict=True))


def test_version_6_writes_hudi_0x_avro_records_and_json_commits(tmp_path: Path,
                                                                upstream_schemas: dict[str, Any]) -> None:
    """Hudi 0.x (table version 6) writes commit metadata as JSON and every plan, clean, rollback, restore and
    savepoint record as Avro (`TimelineMetadataUtils.serialize*`): so does lsm_lab."""
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", partition_by="p", ordering_field="ts",
                             table_version=6)
    rows: list[dict[str, Any]] = [{"id": f"k{i:02d}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(20)]
    t.insert(rows)
    t.upsert([dict(r, ts=2) for r in rows[::3]])
    t.compact(strategy="full")
    t.upsert([dict(r, ts=3) for r in rows[::4]])
    assert t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1) is not None
    sp = t.savepoint()
    saved = _keys(t)
    t.upsert([dict(r, ts=4) for r in rows[::5]])
    t.restore(sp)
    assert _keys(lsm_lab.open_table(t.path)) == saved
    seen = set()
    for f in sorted(local(t.active_timeline.folder).iterdir()):
        parsed = parse_file_name(f.name)
        data = f.read_bytes() if parsed else b""
        if not data:
            continue
        assert parsed is not None
        key = (parsed[1], parsed[2].value)
        if key[0] in ("commit", "deltacommit") or key == ("savepoint", "requested"):
            assert data[:1] == b"{", f.name  # JSON, as Hudi 0.x
            continue
        _decode_as(data, EXPECTED[key], upstream_schemas, f.name)
        seen.add(key)
    assert seen >= {("compaction", "requested"), ("clean", "requested"), ("clean", "completed"),
                    ("savepoint", "completed"), ("restore", "requested"), ("restore", "completed")}, seen


class _Killed(BaseException):
    """The process dies here (a BaseException: no `except Exception` on the way cleans anything up)."""


def test_an_instants_upgrade_killed_at_any_write_reads_the_same_and_finishes(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """`upgrade --instants-only` is crash-safe: killed before any of its file writes (instant files, history file
    and manifest, properties), the table reads the same, and running it again finishes the job."""
    import shutil

    from lsm_lab.services.upgrade import avro_timeline
    from lsm_lab.storage import atomic
    from lsm_lab.timeline import config as cfg

    original, _, _ = _busy_table(tmp_path / "json", 10, "lsm_tree", properties={cfg.KEY_INSTANT_FORMAT: "json"})
    first = original.completed_writes()[0].completion_time
    want = (_keys(original), _keys_as_of(original, first))
    real = {name: getattr(atomic, name) for name in ("replace_file", "create_file")}
    n = 0
    while True:
        t_path = tmp_path / f"try{n}"
        shutil.copytree(local(original.path), t_path)
        left = [n]

        def dying(name: str, left: list[int] = left) -> Any:
            def write(*args: Any, **kw: Any) -> Any:
                if left[0] == 0:
                    raise _Killed
                left[0] -= 1
                return real[name](*args, **kw)
            return write

        with monkeypatch.context() as m:
            for name in real:
                m.setattr(atomic, name, dying(name))
            try:
                avro_timeline(lsm_lab.open_table(t_path))
                finished = True
            except _Killed:
                finished = False
        t = lsm_lab.open_table(t_path)
        assert (_keys(t), _keys_as_of(t, first)) == want, f"killed before write {n}"
        if finished:
            break
        avro_timeline(t)  # the next run finishes the job
        again = lsm_lab.open_table(t_path)
        assert again.config.instant_format == "avro"
        assert (_keys(again), _keys_as_of(again, first)) == want
        n += 1
    assert n > 10  # every instant file, the history file and manifest, the properties: each a crash point
