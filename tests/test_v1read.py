"""v1 (#HUDI#) logs as merge sources: blocks resolved per file slice, filtered, ordered, normalised.

The scenarios build small compatibility tables with lsm_lab, then reshape their
v1 log files the way Apache Hudi leaves them (several deltacommits appended to
one file, rollback command blocks in a later file, blocks of failed writes,
torn tails, CDC logs) and check lsm_lab's rows — against hudi-rs where hudi-rs
reads the shape too.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
from lsm_lab.filegroup import compat, fsview, v1read
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import log_v2 as v2
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_read
from lsm_lab.timeline.metadata import encode_json

needs_hudi = pytest.mark.skipif(not hudi_available(), reason="the hudi package (hudi-rs) is not installed")


def _values(table: lsm_lab.Table, **kw: Any) -> dict[str, Any]:
    rows = table.read(**kw)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))


def _logs(table: lsm_lab.Table) -> list[Path]:
    return sorted((p for _, p, n in fsview.list_data_files(table.path) if n.is_log), key=lambda p: p.name)


def _v6_table(tmp_path: Path, **kw: Any) -> lsm_lab.Table:
    t = lsm_lab.create_table(tmp_path / "t", name="v6t", record_key="id", table_version=6, layout="default",
                             num_buckets=1, **kw)
    t.insert([{"id": f"k{i}", "v": i, "ts": 10} for i in range(4)])
    return t


def _relist(t: lsm_lab.Table, old: Path, new: Path) -> None:
    """Make the commit metadata name `new` where it named `old` (as the writer of `new` would have)."""
    for inst in t.instants():
        f = t.active_timeline.folder / inst.file_name
        text = f.read_text()
        if old.name in text:
            f.write_text(text.replace(old.name, new.name))


@needs_hudi
def test_blocks_of_several_commits_in_one_file(tmp_path: Path) -> None:
    """Table version 6: Hudi appends every deltacommit of a slice to one log file; blocks are filtered by instant."""
    t = _v6_table(tmp_path)
    i1 = t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    i2 = t.upsert([{"id": "k2", "v": 200, "ts": 10}])
    first, second = _logs(t)
    assert ".log.1_" in first.name and ".log.2_" in second.name
    snapshot, at_i1 = _values(t), _values(t, as_of=i1.completion_time)
    first.write_bytes(first.read_bytes() + second.read_bytes())  # as Hudi appends on HDFS
    second.unlink()
    _relist(t, second, first)  # the metadata of i2 names the file its block went to
    assert [b.instant_time for b in v1.read_log_file(first)] == [i1.begin_time, i2.begin_time]
    assert _values(t) == snapshot == {"k0": 0, "k1": 100, "k2": 200, "k3": 3}
    assert _values(t, as_of=i1.completion_time) == at_i1 == {"k0": 0, "k1": 100, "k2": 2, "k3": 3}
    for as_of in (None, i1.completion_time):
        assert compare_rows(t.read(as_of=as_of), hudi_rs_read(local(t.path), as_of=as_of), ["id"]) == []


@needs_hudi
def test_blocks_of_failed_writes_are_invisible(tmp_path: Path) -> None:
    t = _v6_table(tmp_path)
    t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    log = _logs(t)[0]
    data = v1.read_log_file(log)[0].records
    assert data is not None
    failed = "20990101000000000"  # no such instant on the timeline: a write that never completed
    ghost = data.set_column(data.schema.get_field_index("v"), "v", pa.array([-1], data.schema.field("v").type))
    block = v1.encode_avro_data_block(ghost, instant_time=failed, schema_json=v1.read_log_file(log)[0].header["SCHEMA"])
    log.write_bytes(log.read_bytes() + block)
    assert _values(t)["k1"] == 100
    assert compare_rows(t.read(), hudi_rs_read(local(t.path)), ["id"]) == []


@needs_hudi
def test_rollback_block_in_a_later_file_cancels_earlier_blocks(tmp_path: Path) -> None:
    t = _v6_table(tmp_path)
    i1 = t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    t.upsert([{"id": "k2", "v": 200, "ts": 10}])
    first = _logs(t)[0]
    fid = fsview.list_data_files(t.path)[0][2].file_id
    base_instant = first.name.split("_")[1].split(".")[0]
    rollback = v1.encode_command_block(instant_time="20990101000000001", target_instant_time=i1.begin_time)
    later = first.parent / f".{fid}_{base_instant}.log.3_0-0-0"
    v1.write_log_file(later, [rollback])
    assert _values(t) == {"k0": 0, "k1": 1, "k2": 200, "k3": 3}  # k1's update is rolled back
    assert compare_rows(t.read(), hudi_rs_read(local(t.path)), ["id"]) == []


def test_torn_tail_and_garbage_never_yield_rows(tmp_path: Path) -> None:
    t = _v6_table(tmp_path)
    t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    log = _logs(t)[0]
    good = log.read_bytes()
    log.write_bytes(good + good[: len(good) // 2])  # a writer died half way through the next block
    assert _values(t) == {"k0": 0, "k1": 100, "k2": 2, "k3": 3}
    log.write_bytes(good + b"#HUDI#\x00\x00garbage")
    assert _values(t) == {"k0": 0, "k1": 100, "k2": 2, "k3": 3}


def test_hfile_blocks_are_refused(tmp_path: Path) -> None:
    t = _v6_table(tmp_path)
    i1 = t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    log = _logs(t)[0]
    log.unlink()
    with zipfile.ZipFile(Path(__file__).resolve().parents[1] / "data" / "hudi-tables" / "s_cow_v9_txns_simple_meta.zip") as zf:
        hfile = zf.read(next(n for n in zf.namelist() if n.endswith(".hfile")))  # a real HFile (the metadata table's)
    v1.write_log_file(log, [v1.encode_block(v1.BlockType.HFILE, {v1.HeaderKey.INSTANT_TIME: i1.begin_time}, hfile)])
    with pytest.raises(UnsupportedFeatureError, match="HFile"):  # readable, but not rows of a data table
        t.read()
    log.unlink()
    v1.write_log_file(log, [v1.encode_block(v1.BlockType.HFILE, {v1.HeaderKey.INSTANT_TIME: i1.begin_time},
                                            b"HFILE")])
    with pytest.raises(CorruptFileError, match="HFile"):  # five bytes are no HFile
        t.read()


def test_cdc_logs_are_not_data(tmp_path: Path) -> None:
    t = _v6_table(tmp_path)
    t.upsert([{"id": "k1", "v": 100, "ts": 10}])
    log = _logs(t)[0]
    cdc = log.with_name(log.name + ".cdc")
    cdc.write_bytes(log.read_bytes())  # the same block, but in a change-data-capture log
    log.unlink()
    _relist(t, log, cdc)
    parsed = fsview.list_data_files(t.path)
    assert any(n.content == "cdc" for _, _, n in parsed)
    assert _values(t) == {"k0": 0, "k1": 1, "k2": 2, "k3": 3}


# --------------------------------------------------------------------------- merge order across formats
def _commit_by_hand(t: lsm_lab.Table, begin: str, completion: str) -> None:
    """Put a completed deltacommit on a version 8+ timeline with chosen begin and completion times."""
    folder = t.active_timeline.folder
    (folder / f"{begin}.deltacommit.requested").write_bytes(b"")
    (folder / f"{begin}.deltacommit.inflight").write_bytes(b"")
    # the commit lists the files it wrote (a file no completed instant lists is not part of the table)
    stats: dict[str, list[dict[str, str]]] = {}
    for partition, path, name in fsview.list_data_files(t.path):
        if name.instant == begin:
            rel = f"{partition}/{path.name}" if partition else path.name
            stats.setdefault(partition, []).append({"path": rel, "fileId": name.file_id})
    (folder / f"{begin}_{completion}.deltacommit").write_bytes(encode_json({"operationType": "UPSERT",
                                                                            "partitionToWriteStats": stats}))


def _update(t: lsm_lab.Table, key: str, value: int, instant: str) -> pa.Table:
    schema = t.schema
    assert schema is not None
    meta = {"_hoodie_commit_time": instant, "_hoodie_commit_seqno": f"{instant}_0_0", "_hoodie_record_key": key,
            "_hoodie_partition_path": "", "_hoodie_file_name": "x"}
    row = {**meta, "id": key, "v": value, "ts": 10}
    return pa.Table.from_pylist([row], schema=pa.schema([pa.field(c, pa.string()) for c in meta] + list(schema)))


@pytest.mark.parametrize("second_format", [1, 2])
def test_logs_merge_in_completion_order_whatever_their_format(tmp_path: Path, second_format: int) -> None:
    """Begin A < begin B, but B completes first: A's change is the later one (format page, section 6)."""
    t = lsm_lab.create_table(tmp_path / "t", name="v8t", record_key="id", table_version=8, layout="default",
                             num_buckets=1)
    t.insert([{"id": "k0", "v": 0, "ts": 10}])
    (_, base, name), = fsview.list_data_files(t.path)
    begin_a, begin_b = "20990101000000100", "20990101000000200"
    done_b, done_a = "20990101000000300", "20990101000000400"
    compat.write_v1_data_log(base.parent / naming_v1(name.file_id, begin_a), t.config, _update(t, "k0", 1, begin_a),
                             instant=begin_a)
    if second_format == 1:
        compat.write_v1_data_log(base.parent / naming_v1(name.file_id, begin_b), t.config,
                                 _update(t, "k0", 2, begin_b), instant=begin_b)
    else:
        v2.write_data_log(base.parent / f"{name.file_id}_0-0-0_{begin_b}_1.parquet", _update(t, "k0", 2, begin_b),
                          instant_time=begin_b, is_sorted=True)
    _commit_by_hand(t, begin_a, done_a)
    _commit_by_hand(t, begin_b, done_b)
    assert _values(t) == {"k0": 1}  # A completed last
    assert _values(t, as_of=lsm_lab.CompletionTime(done_b)) == {"k0": 2}  # as B completed: A still pending
    assert _values(t, as_of=begin_a) == {"k0": 1}  # instant time: the completed writes begun by then, A only
    assert _values(t, as_of=done_b) == {"k0": 1}  # both began by then; A completed last
    ctx = t.read_context(None)
    units = v1read.ordered_units(ctx.completion_of, None, t.latest_slices()[0])
    assert [u.instant for u in units] == [begin_b, begin_a]
    assert [u.is_v1 for u in units] == [second_format == 1, True]


def naming_v1(file_id: str, instant: str) -> str:
    return f".{file_id}_{instant}.log.1_0-0-0"


@pytest.mark.usefixtures("hand_edited")  # the delete log is rewritten by hand
# --------------------------------------------------------------------------- delete ordering values
@needs_hudi
@pytest.mark.parametrize(("ordering", "deleted"), [
    (pa.array([0], pa.int32()), True),        # IntWrapper(0): Hudi's default, the delete always wins
    (pa.array([None], pa.int64()), True),     # null: always wins
    (pa.array([0], pa.int64()), False),       # LongWrapper(0): an ordering value like any other (0 < ts)
    (pa.array([5000], pa.int64()), True),     # greater than the record's ts: wins
    (pa.array([5], pa.int64()), False),       # smaller: loses
])
def test_delete_ordering_values_like_hudi(tmp_path: Path, ordering: pa.Array, deleted: bool) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="v8d", record_key="id", ordering_field="ts", table_version=8,
                             layout="default", num_buckets=1)
    t.insert([{"id": "k0", "v": 0, "ts": 1000}, {"id": "k1", "v": 1, "ts": 1000}])
    t.upsert([{"id": "k1", "v": 11, "ts": 1001}])  # the delete goes to a log file on top of a base file
    inst = t.delete(["k0"])
    (log,) = [p for p in _logs(t) if inst.begin_time in p.name]
    log.unlink()
    keys = pa.table({"record_key": ["k0"], "partition_path": [""], "ordering_val": ordering})
    v1.write_log_file(log, [v1.encode_delete_block(keys, instant_time=inst.begin_time)])
    mine = t.read()
    assert ("k0" not in mine.column("id").to_pylist()) == deleted
    assert compare_rows(mine, hudi_rs_read(local(t.path)), ["id"]) == []


def test_block_table_normalises_always_win_deletes() -> None:
    keys = pa.table({"record_key": ["a", "b", "c"], "partition_path": ["", "", ""],
                     "ordering_val": pa.array([0, 7, None], pa.int32())})
    (block,) = v1.decode_log_bytes(v1.encode_delete_block(keys, instant_time="20250101000000000"))
    unit = v1read.LogUnit(("", "", 0, 0), None, block)  # type: ignore[arg-type]
    kind, rows = v1read.block_table(unit)
    assert kind == "delete" and rows.column("ordering_val").to_pylist() == [None, 7, None]
    assert v1read.is_sorted(kind, rows)


def test_a_v1_block_whose_key_is_not_its_key_field_keeps_both(tmp_path: Path) -> None:
    """The snapshot merges the key field once when it equals `_hoodie_record_key` (read._merge_in_memory);
    a v1 block holds its own keys, so a block whose key field says otherwise keeps its field value."""
    t = lsm_lab.create_table(tmp_path / "t", name="v8t", record_key="id", table_version=8, layout="default",
                             num_buckets=1)
    t.insert([{"id": "k0", "v": 0, "ts": 10}, {"id": "k1", "v": 0, "ts": 10}])
    (_, base, name), = fsview.list_data_files(t.path)
    begin, done = "20990101000000100", "20990101000000200"
    row = _update(t, "k0", 5, begin).to_pylist()[0]
    odd = pa.Table.from_pylist([{**row, "id": "other"}], schema=_update(t, "k0", 5, begin).schema)
    compat.write_v1_data_log(base.parent / naming_v1(name.file_id, begin), t.config, odd, instant=begin)
    _commit_by_hand(t, begin, done)
    got = {r["_hoodie_record_key"]: (r["id"], r["v"]) for r in t.read(columns=["_hoodie_record_key", "id", "v"]).to_pylist()}
    assert got == {"k0": ("other", 5), "k1": ("k1", 0)}
    assert sorted(t.read(columns=["id"]).column("id").to_pylist()) == ["k1", "other"]
