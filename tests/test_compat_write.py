"""Compatibility writes: tables of version 6 and 8 that hudi-rs reads to exactly lsm_lab's rows.

Each scenario writes several upsert and delete rounds (inserts, updates with
greater and smaller ordering values, deletes by key, deletes carrying ordering
values) to a new table and checks after *every* round that hudi-rs (an
independent reader) returns lsm_lab's rows, then checks time travel to every
instant, and that lsm_lab's rows equal a plain dict model of the merge rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.filegroup import compat, fsview
from lsm_lab.format import log_v1 as v1
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_read
from lsm_lab.timeline.config import read_config

needs_hudi = pytest.mark.skipif(not hudi_available(), reason="the hudi package (hudi-rs) is not installed")

CITIES = ("chennai", "sao_paulo", "san_francisco")


def _rows(keys: range | list[int], ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"k{i:03d}", "city": CITIES[i % 3], "ts": ts + i, "fare": fare + i, "note": f"n{i}"} for i in keys]


def _keys(keys: list[int], ts: int | None = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"id": f"k{i:03d}", "city": CITIES[i % 3]} for i in keys]
    if ts is not None:
        for r in out:
            r["ts"] = ts
    return out


def _records(block: v1.LogBlock) -> pa.Table:
    """The rows of a decoded data or delete block."""
    assert block.records is not None
    return block.records


class Model:
    """The merge rules as a dict (event-time ordering; deletes without ts always win)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def upsert(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            old = self.rows.get(r["id"])
            if old is None or r["ts"] >= old["ts"]:
                self.rows[r["id"]] = r

    def delete(self, keys: list[dict[str, Any]]) -> None:
        for k in keys:
            old = self.rows.get(k["id"])
            if old is not None and ("ts" not in k or k["ts"] >= old["ts"]):
                del self.rows[k["id"]]


ROUNDS: list[tuple[str, list[dict[str, Any]]]] = [
    ("upsert", _rows(range(30), 100, 10.0)),
    ("upsert", _rows(range(0, 30, 4), 500, 99.0)),           # newer: wins
    ("delete", _keys([1, 5, 9])),                              # delete by key: always wins
    ("upsert", _rows(range(2, 30, 5), 50, -1.0) + _rows(range(30, 36), 100, 0.5)),  # older ts: loses; new keys
    ("delete", _keys([0, 2, 3], ts=300)),                      # with ts: 0 (ts 500) survives, 2 and 3 go
    ("upsert", _rows([1, 5], 1000, 7.0)),                      # re-insert deleted keys
    ("delete", _keys([31, 32])),
]


@pytest.fixture(params=[(6, "MERGE_ON_READ", "default"), (6, "COPY_ON_WRITE", "default"),
                        (8, "MERGE_ON_READ", "default"), (8, "COPY_ON_WRITE", "default"),
                        (8, "MERGE_ON_READ", "lsm_tree"), (6, "MERGE_ON_READ", "lsm_tree")],
                ids=lambda p: f"v{p[0]}-{p[1][:3].lower()}-{p[2]}")
def compat_table(request: pytest.FixtureRequest, tmp_path: Path) -> lsm_lab.Table:
    version, table_type, layout = request.param
    return lsm_lab.create_table(tmp_path / "t", name="trips_compat", record_key="id", partition_by="city",
                                ordering_field="ts", table_type=table_type, layout=layout, table_version=version)


@needs_hudi
def test_hudi_rs_reads_every_round_like_lsm_lab(compat_table: lsm_lab.Table) -> None:
    model = Model()
    for op, data in ROUNDS:
        getattr(compat_table, op)(data)
        getattr(model, op)(data)
        mine = compat_table.read()
        theirs = hudi_rs_read(local(compat_table.path))
        assert compare_rows(mine, theirs, ["id"]) == [], f"after {op}"
        assert sorted(mine.column("id").to_pylist()) == sorted(model.rows)
        by_id = {r["id"]: r for r in mine.to_pylist()}
        assert all(by_id[k]["fare"] == v["fare"] and by_id[k]["ts"] == v["ts"] for k, v in model.rows.items())
    for inst in compat_table.completed_writes():
        assert compare_rows(compat_table.read(as_of=inst.completion_time),
                            hudi_rs_read(local(compat_table.path), as_of=inst.completion_time), ["id"]) == []
    if compat_table.config.is_mor:
        assert compare_rows(compat_table.read_optimized(), hudi_rs_read(local(compat_table.path), read_optimized=True),
                            ["id"]) == []


def test_only_v1_logs_and_the_versions_layout(compat_table: lsm_lab.Table) -> None:
    for op, data in ROUNDS:
        getattr(compat_table, op)(data)
    config = compat_table.config
    names = [name for _, _, name in fsview.list_data_files(compat_table.path)]
    logs = [n for n in names if n.is_log]
    assert all(n.log_format == 1 for n in logs)  # never a v2 file while table_version < 9
    assert bool(logs) == config.is_mor
    meta = local(compat_table.path) / ".hoodie"
    if config.version == 6:
        assert not (meta / "timeline").exists()
        assert any(p.name.endswith(".deltacommit") or p.name.endswith(".commit") for p in meta.iterdir())
        # one base instant per slice: log versions 1, 2, 3 ... under it
        versions = sorted(n.version for n in logs if n.instant == logs[0].instant and n.file_id == logs[0].file_id)
        assert versions == list(range(1, len(versions) + 1))
        assert "hoodie.record.merge.mode" not in config.props
        assert config.props["hoodie.compaction.payload.class"] == compat.DEFAULT_PAYLOAD
        assert config.merge_mode == "EVENT_TIME_ORDERING"  # lsm_lab infers it back from the payload class
    else:
        done = [p for p in (meta / "timeline").iterdir() if "_" in p.name and not p.name.startswith(".")]
        assert done and all(p.read_bytes().startswith(b"Obj\x01") for p in done)  # Avro completed instants
        record = next(iter(fastavro.reader(done[0].open("rb"))))
        assert isinstance(record, dict)
        schema = json.loads(record["extraMetadata"]["schema"])
        assert schema["name"] == "trips_compat_record" and schema["namespace"] == "hoodie.trips_compat"
        assert [f["name"] for f in schema["fields"]] == ["id", "city", "ts", "fare", "note"]
    assert read_config(compat_table.path).version == config.version


def test_v1_blocks_are_what_hudi_writes(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips_compat", record_key="id", partition_by="city",
                             ordering_field="ts", table_version=8, layout="default")
    t.upsert(_rows(range(6), 100, 1.0))
    t.upsert(_rows(range(3), 200, 2.0))
    t.delete(_keys([4]))
    t.delete(_keys([5], ts=900))
    logs = sorted((p for _, p, n in fsview.list_data_files(t.path) if n.is_log), key=lambda p: p.name)
    blocks = [b for p in logs for b in v1.read_log_file(p)]
    data = [b for b in blocks if b.block_type == v1.BlockType.AVRO_DATA]
    deletes = [b for b in blocks if b.is_delete]
    assert data and len(deletes) == 2
    header_schema = json.loads(data[0].header["SCHEMA"])
    assert [f["name"] for f in header_schema["fields"]][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                                "_hoodie_record_key", "_hoodie_partition_path",
                                                                "_hoodie_file_name"]
    assert header_schema["fields"][5]["type"] == ["null", "string"]  # null first, as Hudi writes
    by_key = {_records(d).column("record_key")[0].as_py(): _records(d) for d in deletes}
    assert by_key["k004"].column("ordering_val").type.id == v1.deletes._WRAPPER_ARROW["IntWrapper"].id
    assert by_key["k004"].column("ordering_val").to_pylist() == [0]  # Hudi's default: always wins
    assert by_key["k005"].column("ordering_val").to_pylist() == [900]
    for b in data + deletes:
        inst = b.instant_time
        assert inst in {i.begin_time for i in t.completed_writes()}


def test_compat_properties(tmp_path: Path) -> None:
    t6 = lsm_lab.create_table(tmp_path / "six", name="a", record_key="id", table_version=6)
    t8 = lsm_lab.create_table(tmp_path / "eight", name="b", record_key=["id", "x"], partition_by="p",
                              ordering_field="ts", table_version=8)
    p6, p8 = t6.config.props, t8.config.props
    assert p6["hoodie.table.version"] == "6" and p6["hoodie.timeline.layout.version"] == "1"
    assert p6["hoodie.compaction.payload.class"] == compat.OVERWRITE_PAYLOAD
    assert p6["hoodie.table.keygenerator.class"].endswith("NonpartitionedKeyGenerator")
    assert "hoodie.table.keygenerator.type" not in p6 and "hoodie.table.initial.version" not in p6
    assert t6.config.merge_mode == "COMMIT_TIME_ORDERING" and t6.config.log_format_version == 1
    assert p8["hoodie.table.version"] == "8" and p8["hoodie.timeline.path"] == "timeline"
    assert p8["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert p8["hoodie.table.precombine.field"] == "ts" and "hoodie.table.ordering.fields" not in p8
    assert p8["hoodie.table.keygenerator.class"].endswith("ComplexKeyGenerator")
    assert t8.config.instant_format == "avro" and t8.config.log_format_version == 1
    with pytest.raises(UnsupportedFeatureError, match="version 10"):
        lsm_lab.create_table(tmp_path / "seven", name="c", record_key="id", table_version=7)


@needs_hudi
def test_commit_time_ordering_table(tmp_path: Path) -> None:
    """Without an ordering field the later write wins, for hudi-rs as for lsm_lab."""
    for version in (6, 8):
        t = lsm_lab.create_table(tmp_path / f"t{version}", name="plain", record_key="id", table_version=version,
                                 layout="default")
        t.upsert([{"id": "a", "v": 1}, {"id": "b", "v": 2}])
        t.upsert([{"id": "a", "v": 3}])
        t.delete(["b"])
        t.upsert([{"id": "b", "v": 4}, {"id": "c", "v": 5}])
        mine = t.read()
        assert sorted(zip(mine.column("id").to_pylist(), mine.column("v").to_pylist())) == [("a", 3), ("b", 4),
                                                                                             ("c", 5)]
        assert compare_rows(mine, hudi_rs_read(local(t.path)), ["id"]) == []


@needs_hudi
def test_many_types_round_trip_through_v1_blocks(tmp_path: Path) -> None:
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    rows = pa.table({
        "id": pa.array(["a", "b", "c"]),
        "i32": pa.array([1, None, 3], pa.int32()),
        "f32": pa.array([1.5, 2.5, None], pa.float32()),
        "flag": pa.array([True, False, None]),
        "day": pa.array([dt.date(2024, 1, 1), None, dt.date(2025, 6, 30)]),
        "at": pa.array([dt.datetime(2024, 1, 1, 12, tzinfo=dt.UTC), None, None], pa.timestamp("us", "UTC")),
        "amount": pa.array([Decimal("1.25"), Decimal("-3.50"), None], pa.decimal128(10, 2)),
        "tags": pa.array([["x"], [], None], pa.list_(pa.string())),
        "blob": pa.array([b"\x00\x01", None, b""], pa.binary()),
    })
    t = lsm_lab.create_table(tmp_path / "t", name="types", record_key="id", table_version=8, layout="default")
    t.upsert(rows)
    t.upsert(rows.slice(1))  # the update goes to a v1 Avro block
    mine = t.read()
    assert compare_rows(mine, hudi_rs_read(local(t.path)), ["id"]) == []
    assert mine.sort_by("id").select(rows.column_names).to_pylist() == rows.to_pylist()


def test_benchmark_runs_small(tmp_path: Path) -> None:
    """benchmarks/bench_v1_v2.py's work at a tiny size: figures are produced and both tables agree."""
    from lsm_lab.bench.interop import format_report, run

    report = run(rows=3000, rounds=1, repeat=1, work_dir=tmp_path, sizes=(500,))
    (row,) = report["log_bytes"]
    assert row["v1_data_bytes"] > 0 and row["v2_data_bytes"] > 0 and row["data_ratio"] > 0
    m = report["mor_read"]
    assert m["snapshot_rows"] > 0 and m["v2_table_same_keys"]
    # each table holds the log format it is named for (a version 9 default-layout table keeps v1 blocks)
    assert m["table_v1_log_bytes"] > 0 and m["table_v2_log_bytes"] > 0
    assert m["lsm_lab_v1_read_cpu_s"] > 0 and m["lsm_lab_v2_read_cpu_s"] > 0
    if hudi_available():
        assert m["hudi_rs_same_keys"] and m["hudi_rs_v1_read_cpu_s"] > 0
        assert m["lsm_lab_over_hudi_rs_cpu"] > 0  # the ratio of unrounded seconds
        assert "read CPU seconds, v1 logs" in format_report(report)
    assert "bytes on disk" in format_report(report)



# --------------------------------------------------------------------------- compaction of compatibility tables
@needs_hudi
@pytest.mark.parametrize("version", [6, 8])
def test_full_compaction_keeps_hudi_rs_reading(tmp_path: Path, version: int) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips_compat", record_key="id", partition_by="city",
                             ordering_field="ts", table_version=version, layout="default")
    model = Model()
    for op, data in ROUNDS[:4]:
        getattr(t, op)(data)
        getattr(model, op)(data)
    assert t.compact(strategy="full") is not None
    for op, data in ROUNDS[4:]:
        getattr(t, op)(data)
        getattr(model, op)(data)
    assert sorted(t.read().column("id").to_pylist()) == sorted(model.rows)
    assert all(n.log_format == 1 for _, _, n in fsview.list_data_files(t.path) if n.is_log)
    assert compare_rows(t.read(), hudi_rs_read(local(t.path)), ["id"]) == []


def test_v6_log_written_while_a_compaction_is_pending_is_named_for_it(tmp_path: Path) -> None:
    """Table version 6 names a log for its slice's base; a pending compaction opens the next slice (Hudi 0.x)."""
    t = lsm_lab.create_table(tmp_path / "t", name="v6p", record_key="id", ordering_field="ts", table_version=6,
                             layout="default")
    t.upsert([{"id": f"k{i}", "ts": 1, "v": 0} for i in range(5)])
    t.upsert([{"id": "k1", "ts": 2, "v": 1}])
    plan = t.compact(strategy="full", plan_only=True)
    assert plan is not None
    t.upsert([{"id": "k2", "ts": 3, "v": 2}])
    newest = max((n for _, _, n in fsview.list_data_files(t.path) if n.is_log), key=lambda n: n.name)
    assert newest.instant == plan.begin_time and newest.version == 1
    rows = t.read()
    assert dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))["k2"] == 2


def test_v6_write_during_pending_compaction_survives_the_compaction(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="v6p", record_key="id", ordering_field="ts", table_version=6,
                             layout="default")
    t.upsert([{"id": f"k{i}", "ts": 1, "v": 0} for i in range(5)])
    t.upsert([{"id": "k1", "ts": 2, "v": 1}])  # a log, so that the plan compacts this file group
    t.compact(strategy="full", plan_only=True)
    t.upsert([{"id": "k2", "ts": 3, "v": 2}])
    t.compact(strategy="full")
    rows = t.read()
    assert dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))["k2"] == 2


def test_log_compaction_keeps_compat_tables_v1(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="lc", record_key="id", ordering_field="ts", table_version=8,
                             layout="default")
    t.upsert([{"id": f"k{i}", "ts": 1, "v": 0} for i in range(200)])
    for r in range(5):
        t.upsert([{"id": f"k{i}", "ts": 2 + r, "v": r} for i in range(r, 200, 17)])
    t.compact(strategy="log")
    assert all(n.log_format == 1 for _, _, n in fsview.list_data_files(t.path) if n.is_log)
