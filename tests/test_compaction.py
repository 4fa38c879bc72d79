"""Compaction (lsm_lab.services.compaction): FULL (L0 + L1 → L1), LOG (L0 → L0), hybrid, inline, crashes.

The first rule of every test: a compaction never changes what a snapshot
reads.  Then the layout facts: the new base is named with the compaction
instant and sorted, compacted logs carry COMPACTED_BLOCK_TIMES and hide what
they replace, writes made while a compaction is pending land in the next
slice, and a compacted log sits where the latest log it replaced sat — so a
write that completed in between still wins.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any, NoReturn

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from localpath import local

import lsm_lab
from lsm_lab.filegroup import fsview, index
from lsm_lab.filegroup.planner import Operation
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming, parquet_footer, parquet_write
from lsm_lab.format.bloom import BloomFilter
from lsm_lab.services import compaction, heartbeat, markers
from lsm_lab.timeline.instant import State
from lsm_lab.timeline.metadata import WriteStat

COLS = ["id", "ts", "v"]


def snapshot(table: lsm_lab.Table, **kw: Any) -> list[tuple[Any, ...]]:
    cols = kw.pop("columns", COLS)
    return sorted(tuple(r[c] for c in cols) for r in table.read(columns=cols, **kw).to_pylist())


def keys_in_bucket(bucket: int, num_buckets: int, n: int, prefix: str = "k") -> list[str]:
    """`n` record keys that the bucket index puts in `bucket` (non-partitioned table)."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        key = f"{prefix}{i}"
        if int(index.hudi_bucket_ids([pa.array([key])], num_buckets)[0]) == bucket:  # table version 10
            out.append(key)
        i += 1
    return out


def write_rounds(table: lsm_lab.Table, rounds: int = 4, keys: int = 30) -> None:
    for r in range(rounds):
        table.upsert([{"id": f"k{i}", "ts": r, "v": r * 100 + i} for i in range(r, keys, 1 + r % 3)])
        if r % 2 == 1:
            table.delete([{"id": f"k{i}", "ts": r} for i in range(0, keys, 7)])


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
@pytest.mark.parametrize("merge", [None, "hash", "sorted"])
def test_full_compaction_keeps_the_snapshot(tmp_table: Callable[..., lsm_lab.Table], layout: str,
                                            merge: str | None) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=3, layout=layout)
    write_rounds(table)
    before = snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"])
    done = table.compact(strategy="full", merge=merge)
    assert done is not None and done.action == "compaction" and done.is_completed
    assert snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"]) == before  # meta columns kept
    # <t>_<c>.commit next to <t>.compaction.requested; the timeline shows "compaction"
    names = {p.name for p in table.active_timeline.folder.iterdir()}
    assert f"{done.begin_time}_{done.completion_time}.commit" in names
    assert f"{done.begin_time}.compaction.requested" in names
    meta = table.instant_metadata(done)
    assert meta["operationType"] == "COMPACT" and meta["compacted"] is True
    compacted_rows = 0
    for fs in table.latest_slices():
        assert fs.log_files == () and fs.base_file is not None
        assert fs.base_instant == done.begin_time  # the new base is named with the compaction instant
        kv = parquet_footer.footer(fs.base_file.path)
        rows = pq.read_table(fs.base_file.path)
        # every row names the new file (the column is rebuilt, never read), at its place among the meta columns
        assert rows.column("_hoodie_file_name").to_pylist() == [fs.base_file.path.name] * rows.num_rows
        assert rows.column_names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                         "_hoodie_partition_path", "_hoodie_file_name"]
        assert table.schema is not None and rows.column_names[5:] == table.schema.names
        compacted_rows += rows.num_rows
        if layout == "lsm_tree":
            assert kv[parquet_footer.KEY_SORTED] == "true"
            keys = rows.column("_hoodie_record_key").to_pylist()
            assert keys == sorted(keys, key=lambda k: k.encode()) and len(set(keys)) == len(keys)
            assert kv[parquet_footer.KEY_MIN] == keys[0] and kv[parquet_footer.KEY_MAX] == keys[-1]
    assert compacted_rows == len(before)
    assert table.compact(strategy="full") is None  # nothing left in L0


def test_time_travel_and_incremental_reads_survive_compaction(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    history = []
    for r in range(3):
        inst = table.upsert([{"id": f"k{i}", "ts": r, "v": r} for i in range(r, 12)])
        history.append((inst, snapshot(table)))
    table.compact(strategy="full")
    for inst, expected in history:
        assert snapshot(table, as_of=inst) == expected
    inc = table.read_incremental(history[0][0], history[2][0], columns=["id", "v"]).to_pylist()
    assert sorted(r["id"] for r in inc) == sorted(f"k{i}" for i in range(1, 12))


def test_large_group_streams_in_row_groups(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    n = 70_000
    table.bulk_insert(pa.table({"id": [f"key{i:06d}" for i in range(n)], "ts": [0] * n, "v": list(range(n))}))
    table.upsert(pa.table({"id": [f"key{i:06d}" for i in range(0, n, 3)], "ts": [1] * len(range(0, n, 3)),
                           "v": [-1] * len(range(0, n, 3))}))
    before = table.read(columns=["id", "v"]).sort_by("id")
    (bulk,) = table.latest_slices()
    assert bulk.base_file is not None
    bulk_meta = pq.read_metadata(bulk.base_file.path)
    table.compact(strategy="full", progress=False)
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    meta = pq.read_metadata(fs.base_file.path)
    # streamed in batches, written in the row groups a bulk insert of the same rows gets (several, byte-capped)
    assert meta.num_rows == n and meta.num_row_groups > 1
    # (the streaming writer sizes them from its first batch, a bulk insert from the whole table: within 2%)
    assert meta.num_row_groups == bulk_meta.num_row_groups
    assert abs(meta.row_group(0).num_rows - bulk_meta.row_group(0).num_rows) <= bulk_meta.row_group(0).num_rows // 50
    assert table.read(columns=["id", "v"]).sort_by("id").equals(before)


@pytest.mark.parametrize("merge", ["sorted", "hash"])
def test_compacted_base_files_have_the_footer_of_a_bulk_insert(tmp_table: Callable[..., lsm_lab.Table],
                                                               merge: str) -> None:
    """Compaction writes through the one data-file writer: key range, bloom of every key, sorting
    columns, Parquet's own bloom, page checksums and row groups like a bulk-inserted file."""
    table = tmp_table(ordering_field="ts", num_buckets=1)
    n = 20_000
    table.bulk_insert(pa.table({"id": [f"key{i:06d}" for i in range(n)], "ts": [0] * n, "v": list(range(n))}))
    (bulk,) = table.latest_slices()
    assert bulk.base_file is not None
    table.upsert(pa.table({"id": [f"key{i:06d}" for i in range(0, n + 500, 7)], "ts": [1] * len(range(0, n + 500, 7)),
                           "v": [-1] * len(range(0, n + 500, 7))}))
    table.delete([f"key{i:06d}" for i in range(1, 300, 2)])
    table.compact(strategy="full", merge=merge, progress=False)
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    assert fs.log_files == () and fs.base_instant != bulk.base_instant
    rows = pq.read_table(fs.base_file.path)
    keys = rows.column("_hoodie_record_key")
    model = ({f"key{i:06d}" for i in range(n)} | {f"key{i:06d}" for i in range(0, n + 500, 7)}) - \
        {f"key{i:06d}" for i in range(1, 300, 2)}
    assert sorted(keys.to_pylist()) == sorted(model)
    md = pq.read_metadata(fs.base_file.path)
    bulk_md = pq.read_metadata(bulk.base_file.path)
    kv = parquet_footer.footer_kv(md)
    bulk_kv = parquet_footer.footer_kv(bulk_md)
    # the same footer keys as the bulk-inserted file, with this file's facts
    assert set(kv) == set(bulk_kv) >= {parquet_footer.KEY_MIN, parquet_footer.KEY_MAX, parquet_footer.KEY_SORTED,
                                       parquet_footer.KEY_BLOOM}
    assert kv[parquet_footer.KEY_SORTED] == "true"
    assert (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == (pc.min(keys).as_py(), pc.max(keys).as_py())
    bloom = BloomFilter.from_base64(kv[parquet_footer.KEY_BLOOM])
    assert bloom.num_keys == rows.num_rows and bool(bloom.might_contain(keys).all())
    absent = pa.array([f"absent{i:06d}" for i in range(20_000)])
    assert bloom.might_contain(absent).mean() < 0.03  # sized for the file: about 1% false positives
    key_index = md.schema.to_arrow_schema().get_field_index("_hoodie_record_key")
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        assert rg.sorting_columns == bulk_md.row_group(0).sorting_columns == (pq.SortingColumn(key_index),)
        assert rg.column(key_index).statistics is not None
    # Parquet's split-block bloom on the key column, as in the bulk-inserted file
    assert (md.row_group(0).column(key_index).bloom_filter_offset or 0) > 0
    assert (bulk_md.row_group(0).column(key_index).bloom_filter_offset or 0) > 0
    # row groups sized like a bulk insert of the same rows: at most the byte cap of a sorted file
    expected = parquet_write.rows_per_group(rows, parquet_write.DEFAULT_ROW_GROUP_ROWS, parquet_write.SORTED_ROW_GROUP_BYTES)
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert len(sizes) > 1 and all(s == sizes[0] for s in sizes[:-1]) and sum(sizes) == rows.num_rows
    assert abs(sizes[0] - expected) <= expected // 10


def test_writes_during_a_pending_compaction_land_in_the_next_slice(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    table.upsert([{"id": f"k{i}", "ts": 0, "v": 0} for i in range(5)])
    table.upsert([{"id": "k1", "ts": 1, "v": 1}])
    plan = table.compact(plan_only=True)
    assert plan is not None
    late = table.upsert([{"id": "k2", "ts": 2, "v": 2}, {"id": "k9", "ts": 2, "v": 9}])  # after the plan
    expected = snapshot(table)
    # while pending: the late log is read in the old slice
    assert snapshot(table) == expected
    done = compaction.execute(table, plan)
    assert snapshot(table) == expected  # never lost
    (group,) = table.file_groups()
    assert [s.base_instant for s in group.slices][-1] == done.begin_time
    assert [f.instant for f in group.latest.log_files] == [late.begin_time]


def test_pending_compaction_output_is_invisible(tmp_table: Callable[..., lsm_lab.Table],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    write_rounds(table, rounds=3, keys=12)
    expected = snapshot(table)
    plan = table.compact(plan_only=True)
    assert plan is not None
    seen = []
    real = compaction.run_full

    def spy(ctx: compaction.CompactionContext, op: Operation, task: int, token: str | None = None) -> WriteStat:
        stat = real(ctx, op, task, token=token)
        # a new base exists on disk but belongs to no completed instant
        assert (table.path / stat.path).exists()
        seen.append(snapshot(table))
        assert all(fs.base_instant != plan.begin_time for fs in table.latest_slices())
        return stat

    monkeypatch.setattr(compaction, "run_full", spy)
    compaction.execute(table, plan)
    assert seen and all(s == expected for s in seen)
    assert snapshot(table) == expected


def test_failed_compaction_goes_back_to_requested_and_reruns(tmp_table: Callable[..., lsm_lab.Table],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    write_rounds(table, rounds=3, keys=12)
    expected = snapshot(table)
    plan = table.compact(plan_only=True)
    assert plan is not None
    calls = []
    real = compaction.run_full

    def boom(ctx: compaction.CompactionContext, op: Operation, task: int, token: str | None = None) -> WriteStat:
        calls.append(op.file_id)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(ctx, op, task, token=token)

    monkeypatch.setattr(compaction, "run_full", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        compaction.execute(table, plan)
    assert table.active_timeline.find(plan.begin_time).state is State.REQUESTED
    assert not [p for _, p, n in fsview.list_data_files(table.path) if n.instant == plan.begin_time]
    assert not markers.marker_folder(table.path, plan.begin_time).exists()
    monkeypatch.setattr(compaction, "run_full", real)
    table.compact()
    assert table.active_timeline.find(plan.begin_time).is_completed
    assert snapshot(table) == expected


def test_dead_inflight_compaction_is_reset_and_rerun(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    write_rounds(table, rounds=2, keys=10)
    expected = snapshot(table)
    plan = table.compact(plan_only=True)
    assert plan is not None
    # a runner that died half way: inflight, one partial output file, a marker, no live heartbeat
    table.active_timeline.start(plan)
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    name = naming.base_file_name(fs.file_id, "0-0-0", plan.begin_time)
    markers.create_marker(table.path, plan.begin_time, "", name, "MERGE")
    (table.path / name).write_bytes(b"PAR1 half written")
    assert not heartbeat.is_alive(table.path, plan.begin_time)
    assert snapshot(table) == expected  # the half-written file is invisible
    done = table.compact()
    assert done is not None
    assert done.begin_time == plan.begin_time and snapshot(table) == expected


def test_live_runner_is_left_alone(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    write_rounds(table, rounds=2, keys=10)
    plan = table.compact(plan_only=True)
    assert plan is not None
    with heartbeat.Heartbeat(table.path, plan.begin_time):
        table.active_timeline.start(plan)
        with pytest.raises(lsm_lab.ConflictError, match="live process"):
            compaction.execute(table, plan)
        assert table.compact() is None  # skipped: somebody is running it
        assert table.active_timeline.find(plan.begin_time).state is State.INFLIGHT


# --------------------------------------------------------------------------- log compaction
def _parsed(name: str) -> naming.FileName:
    parsed = naming.parse(name)
    assert parsed is not None, name
    return parsed


def compacted_logs(table: lsm_lab.Table) -> list[fsview.DataFile]:
    return [f for fs in table.latest_slices() for f in fs.log_files
            if "COMPACTED_BLOCK_TIMES" in v2.read_log_header(f.path)]


def test_log_compaction_folds_logs_and_hides_them(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    write_rounds(table, rounds=5, keys=20)
    before = snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"])
    old_logs = {f.path for fs in table.latest_slices() for f in fs.log_files}
    old_time = table.latest_completion()
    done = table.compact(strategy="log")
    assert done is not None
    assert done.action == "logcompaction"
    names = {p.name for p in table.active_timeline.folder.iterdir()}
    assert f"{done.begin_time}_{done.completion_time}.deltacommit" in names
    assert f"{done.begin_time}.logcompaction.requested" in names
    assert snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"]) == before
    for fs in table.latest_slices():
        assert all(f.instant == done.begin_time for f in fs.log_files)  # replaced logs hidden
        assert fs.base_file is not None  # the base is not rewritten
        for f in fs.log_files:
            header = v2.read_log_header(f.path)
            assert header["INSTANT_TIME"] == done.begin_time
            replaced = set(header["COMPACTED_BLOCK_TIMES"].split(","))
            assert replaced <= {_parsed(p.name).instant for p in old_logs}
            assert parquet_footer.footer(f.path)[parquet_footer.KEY_SORTED] == "true"
    assert all(p.exists() for p in old_logs)  # still on disk, for time travel (the cleaner decides)
    assert snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"], as_of=old_time) == before
    # and the folded logs merge like the originals in a later full compaction
    table.compact(strategy="full")
    assert snapshot(table, columns=["id", "ts", "v", "_hoodie_commit_time"]) == before


def test_log_compaction_keeps_delete_by_key_semantics(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """Event time: a delete without ordering value resets a key; older-ordered records after it still win."""
    table = tmp_table(ordering_field="ts", num_buckets=1)
    table.upsert([{"id": "a", "ts": 5, "v": 1}, {"id": "b", "ts": 5, "v": 1}, {"id": "c", "ts": 5, "v": 1}])
    table.delete(["a", "b", "c"])                                 # delete-by-key: null ordering values
    table.upsert([{"id": "a", "ts": 1, "v": 2}])                  # lower ts than the base, but after the reset
    table.delete([{"id": "b", "ts": 3}])                          # ordered delete after the reset
    table.upsert([{"id": "c", "ts": 0, "v": 3}])
    table.delete([{"id": "c", "ts": 2}])
    assert snapshot(table) == [("a", 1, 2)]
    table.upsert([{"id": "b", "ts": 4, "v": 4}, {"id": "c", "ts": 1, "v": 5}])  # b: 4 >= 3 wins; c: 1 < 2 loses
    expected = snapshot(table)
    assert expected == [("a", 1, 2), ("b", 4, 4)]
    table.compact(strategy="log")
    kinds = sorted((f.name.version, f.name.is_delete) for f in compacted_logs(table))
    assert kinds == [(1, True), (2, False), (3, True)]  # resets, records, deletes
    assert snapshot(table) == expected
    table.compact(strategy="full")
    assert snapshot(table) == expected


def test_write_completed_during_log_compaction_wins(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """The interleaving: log compaction planned, a deltacommit completes, then the log compaction completes."""
    table = tmp_table(num_buckets=1)  # commit-time ordering: the later write must win
    table.upsert([{"id": "k", "v": 0}, {"id": "x", "v": 0}])
    table.upsert([{"id": "k", "v": 1}])
    table.upsert([{"id": "k", "v": 2}, {"id": "x", "v": 2}])
    plan = table.compact(strategy="log", plan_only=True)
    assert plan is not None
    assert plan.action == "logcompaction"
    late = table.upsert([{"id": "k", "v": 3}])  # completes before the log compaction does
    done = compaction.execute(table, plan)
    assert done.completion_time is not None and late.completion_time is not None
    assert done.completion_time > late.completion_time
    assert snapshot(table, columns=["id", "v"]) == [("k", 3), ("x", 2)]
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    assert [f.instant for f in fs.log_files] == [plan.begin_time, late.begin_time]  # compacted log first
    # time travel around it
    assert snapshot(table, columns=["id", "v"], as_of=late) == [("k", 3), ("x", 2)]
    # compacting again folds the compacted log and the late one, transitively
    again = table.compact(strategy="log")
    header = v2.read_log_header(compacted_logs(table)[0].path)
    assert set(header["COMPACTED_BLOCK_TIMES"].split(",")) == {plan.begin_time, late.begin_time}
    assert again is not None and again.is_completed and snapshot(table, columns=["id", "v"]) == [("k", 3), ("x", 2)]


def test_hybrid_plan_mixes_full_and_log(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2, **{
        "hoodie.parquet.small.file.limit": "1", "hoodie.compaction.hybrid.log.to.base.ratio": "1000",
        "hoodie.compaction.hybrid.log.file.num.threshold": "3",
        "hoodie.compaction.hybrid.log.total.size.threshold": "20000"})
    small = keys_in_bucket(0, 2, 3, prefix="s")
    big = keys_in_bucket(1, 2, 2000, prefix="b")
    table.upsert([{"id": k, "ts": 0, "v": 0} for k in small + big[:2]])
    for r in range(1, 4):
        table.upsert([{"id": small[r - 1], "ts": r, "v": r}])                 # bucket 0: 3 tiny logs
    table.upsert([{"id": k, "ts": 1, "v": i} for i, k in enumerate(big)])    # bucket 1: 1 big log
    before = snapshot(table)
    plan = table.compact(plan_only=True)
    assert plan is not None
    ops = {op.file_id[:8]: op.operation_type for op in table.compaction_plans()[-1][1].operations}
    assert ops == {"00000000": "LOG", "00000001": "FULL"}
    assert plan.action == "compaction"
    done = table.compact()
    assert done is not None
    assert done.begin_time == plan.begin_time and snapshot(table) == before
    by_bucket = {fs.file_id[:8]: fs for fs in table.latest_slices()}
    assert by_bucket["00000001"].base_instant == done.begin_time and not by_bucket["00000001"].log_files
    assert by_bucket["00000000"].base_instant != done.begin_time
    assert [f.instant for f in by_bucket["00000000"].log_files] == [done.begin_time]


def test_inline_compaction_by_number_of_delta_commits(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1, **{
        "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"})
    table.upsert([{"id": "a", "ts": 0, "v": 0}])
    table.upsert([{"id": "a", "ts": 1, "v": 1}])
    assert not [i for i in table.instants() if i.action == "compaction"]
    table.upsert([{"id": "b", "ts": 1, "v": 1}])
    comps = [i for i in table.instants() if i.action == "compaction"]
    assert len(comps) == 1 and comps[0].is_completed
    assert snapshot(table) == [("a", 1, 1), ("b", 1, 1)]
    assert compaction.inline_due(table)[0] is False


def test_inline_trigger_by_time(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1, **{
        "hoodie.compact.inline": "true", "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED",
        "hoodie.compact.inline.max.delta.seconds": "60"})
    first = table.upsert([{"id": "a", "ts": 0, "v": 0}])
    start = lsm_lab.timeline.clock.parse_time(first.begin_time)
    assert compaction.inline_due(table, now=start + dt.timedelta(seconds=10))[0] is False
    assert compaction.inline_due(table, now=start + dt.timedelta(seconds=61))[0] is True
    both = dict(table.config.props, **{"hoodie.compact.inline.trigger.strategy": "NUM_AND_TIME"})
    table.config = table.config.with_props(**both)
    assert compaction.inline_due(table, now=start + dt.timedelta(seconds=61))[0] is False  # only 1 commit


def test_compaction_errors(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts")
    table.upsert([{"id": "a", "ts": 0, "v": 0}])
    with pytest.raises(lsm_lab.InputError, match="strategy"):
        table.compact(strategy="medium")
    with pytest.raises(lsm_lab.InputError, match="merge engine"):
        table.compact(merge="quick")
    with pytest.raises(lsm_lab.InputError, match="not a compaction"):
        compaction.execute(table, table.instants()[0])


def test_plan_is_readable_without_lsm_lab(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    import io

    import fastavro

    table = tmp_table(ordering_field="ts", num_buckets=1)
    write_rounds(table, rounds=2, keys=6)
    plan = table.compact(plan_only=True)
    assert plan is not None
    data = local(table.active_timeline.folder / f"{plan.begin_time}.compaction.requested").read_bytes()
    (raw,) = list(fastavro.reader(io.BytesIO(data)))  # upstream's HoodieCompactionPlan, any Avro reader reads it
    assert isinstance(raw, dict)
    (op,) = raw["operations"]
    folder = local(table.path)
    assert (folder / op["dataFilePath"]).exists() and all((folder / p).exists() for p in op["deltaFilePaths"])


def _bulk_then_upserts(table: lsm_lab.Table, n: int = 6_000) -> dict[str, int]:
    """A bulk-inserted base and two upsert logs (no delete log); returns the model {id: v}."""
    ids = [f"key{i:06d}" for i in range(n)]
    table.bulk_insert(pa.table({"id": ids, "ts": [0] * n, "v": list(range(n))}))
    model = dict(zip(ids, range(n)))
    for r, step in ((1, 3), (2, 5)):
        up = [f"key{i:06d}" for i in range(0, n + 400, step)]
        table.upsert(pa.table({"id": up, "ts": [r] * len(up), "v": [-r * 10 - i for i in range(len(up))]}))
        model.update({k: -r * 10 - i for i, k in enumerate(up)})
    return model


@pytest.mark.parametrize("partitioned", [False, True])
def test_sorted_full_compaction_merges_on_the_key_field(tmp_table: Callable[..., lsm_lab.Table],
                                                        monkeypatch: pytest.MonkeyPatch, partitioned: bool) -> None:
    """Without delete logs, a simple key's `_hoodie_record_key` is never rebuilt for the merge (the merge
    runs on the key field) and the written file holds the merged field under both names, row by row."""
    kw = {"partition_by": "p"} if partitioned else {}
    table = tmp_table(ordering_field="ts", num_buckets=2, **kw)
    n = 6_000
    if partitioned:
        ids = [f"key{i:06d}" for i in range(n)]
        table.bulk_insert(pa.table({"id": ids, "ts": [0] * n, "v": list(range(n)), "p": ["a", "b"] * (n // 2)}))
        up = ids[::3]
        table.upsert(pa.table({"id": up, "ts": [1] * len(up), "v": [-1] * len(up),
                               "p": ["a" if int(k[3:]) % 2 == 0 else "b" for k in up]}))
        model = {k: (-1 if i % 3 == 0 else i) for i, k in enumerate(ids)}
    else:
        model = _bulk_then_upserts(table, n)
    from lsm_lab.merge import records

    def no_rebuild(*a: object, **k: object) -> NoReturn:
        raise AssertionError("the sorted FULL merge rebuilt _hoodie_record_key from the key field")

    monkeypatch.setattr(records, "record_keys", no_rebuild)  # the module lsm_lab.filegroup.read merges with
    table.compact(strategy="full", merge="sorted", progress=False)
    monkeypatch.undo()
    got = {r["id"]: r["v"] for r in table.read(columns=["id", "v"]).to_pylist()}
    assert got == model
    for fs in table.latest_slices():
        assert fs.log_files == ()
        assert fs.base_file is not None
        rows = pq.read_table(fs.base_file.path)
        assert rows.column("_hoodie_record_key").equals(rows.column("id"))
        assert rows.column_names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                         "_hoodie_partition_path", "_hoodie_file_name"]
        assert rows.column("_hoodie_file_name").to_pylist() == [fs.base_file.path.name] * rows.num_rows
        kv = parquet_footer.footer(fs.base_file.path)
        keys = rows.column("id").to_pylist()
        assert keys == sorted(keys) and (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == (keys[0], keys[-1])
        assert BloomFilter.from_base64(kv[parquet_footer.KEY_BLOOM]).might_contain(rows.column("id")).all()


@pytest.mark.usefixtures("hand_edited")
@pytest.mark.parametrize("with_deletes", [False, True])
def test_full_compaction_rejects_an_empty_record_key(tmp_table: Callable[..., lsm_lab.Table],
                                                     with_deletes: bool) -> None:
    """A base file holding an empty key (written by hand: writes reject it) fails the compaction with a
    SchemaError on both paths: merging on the key field (no delete log) and on the rebuilt record key.
    (The committed-size check, which would refuse the rewritten file first, is switched off.)"""
    table = tmp_table(ordering_field="ts", num_buckets=1)
    _bulk_then_upserts(table, 2_000)
    if with_deletes:
        table.delete(["key000005"])
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    base = pq.read_table(fs.base_file.path)
    keys = base.column("id").to_pylist()
    keys[0] = ""  # the smallest key: the file stays sorted
    for name in ("id", "_hoodie_record_key"):
        base = base.set_column(base.schema.get_field_index(name), name, pa.array(keys, pa.string()))
    fs.base_file.path.unlink()
    parquet_write.write_parquet(fs.base_file.path, base, is_sorted=True)
    with pytest.raises(lsm_lab.errors.SchemaError, match="empty"):
        table.compact(strategy="full", merge="sorted", progress=False)
