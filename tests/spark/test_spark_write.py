"""Spark writes store what `Table` stores; retries and failed jobs leave nothing visible behind."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from localpath import local as local_path  # (the tests name their local table `local`)

import lsm_lab
from lsm_lab.filegroup import fsview, index
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import parquet_footer
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.merge import records
from lsm_lab.spark import SparkJobError, read_table, write_table
from lsm_lab.spark.jobs import FailTask
from lsm_lab.spark.write import partition_keys, spark_hash_long
from lsm_lab.storage import TablePath

pytestmark = pytest.mark.spark

PER_WRITE = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")  # differ between two writers


def comparable(table: pa.Table) -> list[dict[str, Any]]:
    """Rows without the columns that name the writing instant or file, in key order."""
    keep = [c for c in table.column_names if c not in PER_WRITE]
    return sorted(table.select(keep).to_pylist(), key=lambda r: (r["_hoodie_partition_path"], r["_hoodie_record_key"]))


def trips_batches(rows: int = 300, seed: int = 11) -> list[tuple[str, pa.Table]]:
    """insert, upsert (repeated keys, 20% late events), delete."""
    gen = TripsGenerator(seed, late_fraction=0.2)
    return [("insert", gen.inserts(rows)), ("upsert", gen.updates(rows // 2)), ("delete", gen.deletes(rows // 10))]


def make_trips(tmp_table: Callable[..., lsm_lab.Table], **kw: Any) -> lsm_lab.Table:
    kw = {"record_key": "uuid", "partition_by": "city", "ordering_field": "ts", "num_buckets": 2, "name": "trips",
          **kw}
    return tmp_table(**kw)


def assert_every_file_sorted(path: TablePath) -> None:
    files = fsview.list_data_files(path)
    assert files
    for _, file, name in files:
        meta = pq.read_metadata(file).metadata or {}
        assert meta.get(parquet_footer.KEY_SORTED.encode()) == b"true", file.name
        key = v2.delete_key_column(pq.read_schema(file)) if name.is_delete else records.RECORD_KEY
        assert records.is_strictly_sorted(pq.read_table(file, columns=[key]).column(key)), file.name


def base_key_order(table: lsm_lab.Table) -> dict[str, list[str]]:
    """Per partition, the record keys of its base files in file order (file groups ordered by first key)."""
    out: dict[str, list[list[str]]] = {}
    for fs in table.latest_slices():
        if fs.base_file is not None:
            keys = pq.read_table(fs.base_file.path, columns=[records.RECORD_KEY]).column(0).to_pylist()
            out.setdefault(fs.partition, []).append(keys)
    return {p: [k for keys in sorted(groups) for k in keys] for p, groups in out.items()}


def test_spark_hash_and_bucket_match_python(spark: Any) -> None:
    from pyspark.sql import functions as F

    rows = spark.range(-40, 40).select("id", F.hash("id").alias("h")).collect()
    assert [spark_hash_long(r.id) for r in rows] == [r.h for r in rows]
    n = 7  # repartition(n, key) sends partition_keys(n)[i] to Spark partition i: one file group per task
    keys = partition_keys(n)
    frame = spark.createDataFrame([(i, k) for i, k in enumerate(keys)], "i long, k long").repartition(n, "k")
    placed = frame.select("i", F.spark_partition_id().alias("p")).collect()
    assert sorted((r.i, r.p) for r in placed) == [(i, i) for i in range(n)]
    keys = pa.array(["a", "héllo", "uuid-1", "x" * 40, ""])
    frame = spark.createDataFrame(pa.table({"k": keys}))
    spark_buckets = [r[0] for r in frame.select(F.pmod(F.crc32(F.col("k").cast("binary")), F.lit(5))).collect()]
    assert spark_buckets == index.bucket_ids(keys, 5).tolist()


@pytest.mark.parametrize("layout,table_type", [("lsm_tree", "MERGE_ON_READ"), ("default", "MERGE_ON_READ"),
                                               ("lsm_tree", "COPY_ON_WRITE")])
def test_spark_write_stores_what_table_stores(spark: Any, tmp_table: Callable[..., lsm_lab.Table], layout: str,
                                              table_type: str) -> None:
    local = make_trips(tmp_table, layout=layout, table_type=table_type)
    remote = make_trips(tmp_table, layout=layout, table_type=table_type)
    for op, batch in trips_batches():
        getattr(local, op)(batch)
        done = write_table(batch, remote.path, op=op, spark=spark)
        assert done.is_completed
    assert comparable(remote.read()) == comparable(local.read())
    assert list(remote.timeline()["operation"]) == list(local.timeline()["operation"])
    assert remote.timeline()["records_deleted"].sum() == local.timeline()["records_deleted"].sum()
    if layout == "lsm_tree":
        assert {(g.partition, g.file_id) for g in remote.file_groups()} == \
            {(g.partition, g.file_id) for g in local.file_groups()}
        assert_every_file_sorted(remote.path)
    else:  # the default layout keeps arrival order in its files, as Table does
        assert base_key_order(remote) == base_key_order(local)
    assert not (remote.path / ".hoodie" / ".temp").exists() or \
        not os.listdir(local_path(remote.path) / ".hoodie" / ".temp")


def test_spark_dataframe_input_dedupes_like_table(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """Repeated keys in one batch: greatest ordering wins, ties to the later row, null ordering lowest."""
    batch = pa.table({"id": ["k1", "k1", "k2", "k2", "k3", "k3", "k3", "k4"],
                      "ts": pa.array([1, 1, 5, 3, None, 2, None, None], pa.int64()),
                      "v": ["a", "b", "c", "d", "e", "f", "g", "h"]})
    local = tmp_table(ordering_field="ts", num_buckets=2)
    remote = tmp_table(ordering_field="ts", num_buckets=2)
    local.upsert(batch)
    frame = spark.createDataFrame(batch).repartition(1)  # input order = row order
    write_table(frame, remote.path, op="upsert", spark=spark)
    got = {r["id"]: r["v"] for r in remote.read(columns=["id", "v"]).to_pylist()}
    assert got == {"k1": "b", "k2": "c", "k3": "f", "k4": "h"}
    assert comparable(remote.read()) == comparable(local.read())
    schema = remote.schema
    assert schema is not None and schema.field("ts").type == pa.int64()


def test_retried_task_leaves_no_partial_files(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    if not spark.sparkContext.master.startswith("local[2,"):
        pytest.skip("needs a local master with task retries (local[N,M])")
    local = make_trips(tmp_table)
    remote = make_trips(tmp_table)
    (_op1, first), (_op2, second), _ = trips_batches(200, seed=5)
    local.insert(first)
    local.upsert(second)
    write_table(first, remote.path, op="insert", spark=spark, task_hook=FailTask(0, (0,)))
    done = write_table(second, remote.path, op="upsert", spark=spark, task_hook=FailTask(1, (0,)))
    assert comparable(remote.read()) == comparable(local.read())
    committed = {s["path"].rsplit("/", 1)[-1] for inst in remote.completed_writes()
                 for stats in remote.instant_metadata(inst)["partitionToWriteStats"].values() for s in stats}
    on_disk = {name.name: name for _, _, name in fsview.list_data_files(remote.path)}
    assert set(on_disk) == committed  # the failed attempts' files were reconciled away
    retried = [n for n in on_disk.values() if n.write_token.split("-")[2] != "0"]
    assert {n.instant for n in retried} == {remote.completed_writes()[0].begin_time, done.begin_time}
    assert_every_file_sorted(remote.path)


def test_failed_job_leaves_the_table_as_it_was(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    remote = make_trips(tmp_table)
    (_, first), (_, second), _ = trips_batches(120, seed=8)
    write_table(first, remote.path, op="insert", spark=spark)
    before = remote.read()
    files_before = sorted(n.name for _, _, n in fsview.list_data_files(remote.path))
    with pytest.raises(SparkJobError, match="injected failure"):
        write_table(second, remote.path, op="upsert", spark=spark, task_hook=FailTask(0, ()))
    assert [i for i in remote.instants() if not i.is_completed] == []
    assert sorted(n.name for _, _, n in fsview.list_data_files(remote.path)) == files_before
    assert remote.read().equals(before)
    assert read_table(remote.path, spark=spark).count() == before.num_rows


def test_schema_errors_are_typed(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    remote = make_trips(tmp_table)
    with pytest.raises(lsm_lab.errors.SchemaError):
        write_table(pa.table({"uuid": ["a"], "city": ["x"]}), remote.path, op="upsert", spark=spark)  # no ordering column
    with pytest.raises(lsm_lab.errors.PartitionValueError):  # raised inside a task, re-raised typed
        write_table(pa.table({"uuid": ["a"], "ts": [1], "city": ["../up"]}), remote.path, op="upsert", spark=spark)
    assert remote.instants() == []  # validation failed before the instant was created


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_spark_write_keeps_cdc_logs(spark: Any, tmp_table: Callable[..., lsm_lab.Table], table_type: str) -> None:
    """A CDC table written by Spark has the change stream a local write gives (the logs survive reconcile)."""
    local = make_trips(tmp_table, table_type=table_type, cdc=True, cdc_mode="OP_KEY_ONLY")
    remote = make_trips(tmp_table, table_type=table_type, cdc=True, cdc_mode="OP_KEY_ONLY")
    for op, batch in trips_batches(120, seed=3):
        getattr(local, op)(batch)
        write_table(batch, remote.path, op=op, spark=spark)
    mine, theirs = (t.read_cdc(None) for t in (remote, local))
    assert not mine.column("inferred").to_pylist()[0]  # read from CDC logs
    same = ["op", "record_key", "before", "after"]
    assert mine.num_rows > 0 and comparable_cdc(mine, same) == comparable_cdc(theirs, same)


def comparable_cdc(stream: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    """(op, key, before, after) sorted; images hold the user columns, the same for both writers."""
    return sorted((r["op"], r["record_key"], str(r["before"]), str(r["after"])) for r in stream.select(columns).to_pylist())


def test_spark_writes_run_the_library_s_inline_services(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """One orchestration (services/commit.py): a Spark write plans its files, commits and runs the inline
    compaction and cleaning exactly as `Table` does, so the two timelines and file slices have the same shape."""
    inline = {"hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "2",
              "hoodie.clean.automatic": "true", "hoodie.cleaner.commits.retained": "1"}
    local = make_trips(tmp_table, properties=inline)
    remote = make_trips(tmp_table, properties=inline)
    gen = TripsGenerator(5, late_fraction=0.2)
    batches = [("insert", gen.inserts(200)), ("upsert", gen.updates(80)), ("upsert", gen.updates(80)),
               ("delete", gen.deletes(20)), ("upsert", gen.updates(80))]
    for op, batch in batches:
        getattr(local, op)(batch)
        write_table(batch, remote.path, op=op, spark=spark)

    def shape(table: lsm_lab.Table) -> tuple[list[tuple[str, str]], dict[tuple[str, str], tuple[bool, int]]]:
        steps = [(i.action, i.state.name) for i in table.instants()]
        slices = {(fs.partition, fs.file_id): (fs.base_file is not None, len(fs.log_files))
                  for fs in table.latest_slices()}
        return steps, slices

    steps = shape(local)[0]
    assert ("compaction", "COMPLETED") in steps and ("clean", "COMPLETED") in steps  # the inline services ran
    assert shape(remote) == shape(local)
    assert comparable(remote.read()) == comparable(local.read())
