"""Spark compaction and reads give what the library gives locally."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from localpath import local as local_path  # (the tests name their local table `local`)

import lsm_lab
from lsm_lab.filegroup import fsview
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.spark import compact_table, read_table
from lsm_lab.spark.compact import run_compaction
from lsm_lab.spark.jobs import FailTask

pytestmark = pytest.mark.spark


def history(tmp_table: Callable[..., lsm_lab.Table]) -> tuple[lsm_lab.Table, list[lsm_lab.Instant]]:
    """A small trips table: 1 insert, 2 upserts (some late events), 1 delete — written by the library."""
    gen = TripsGenerator(21, late_fraction=0.2)
    t = tmp_table(name="trips", record_key="uuid", partition_by="city", ordering_field="ts", num_buckets=2)
    done = [t.insert(gen.inserts(300)), t.upsert(gen.updates(120)), t.upsert(gen.updates(120)),
            t.delete(gen.deletes(30))]
    return t, done


def without_file_name(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.drop_columns(["_hoodie_file_name"]).to_pylist()
    return sorted(rows, key=lambda r: (r["_hoodie_partition_path"], r["_hoodie_record_key"]))


@pytest.mark.parametrize("strategy,merge", [("full", "sorted"), ("full", "hash"), ("log", None)])
def test_spark_compaction_equals_local(spark: Any, tmp_table: Callable[..., lsm_lab.Table], tmp_path: Path,
                                       strategy: str, merge: str | None) -> None:
    local, _ = history(tmp_table)
    copy = tmp_path / "copy"
    shutil.copytree(local_path(local.path), copy)
    local.compact(strategy=strategy, merge=merge)
    run = run_compaction(copy, spark=spark, strategy=strategy, merge=merge, task_hook=FailTask(0, (0,)))
    remote = lsm_lab.open_table(copy)
    assert run.instant is not None and run.instant.is_completed
    assert without_file_name(remote.read()) == without_file_name(local.read())
    assert remote.dump_levels().count("L0") == local.dump_levels().count("L0")
    assert len(run.reports) == len(remote.compaction_plans()[-1][1].operations)
    assert all(r.peak_rss_mib > 0 and r.seconds >= 0 for r in run.reports)
    # task 0 failed once after writing: its retry's files are committed, the first attempt's are gone
    meta = remote.instant_metadata(run.instant)
    written = {s["path"].rsplit("/", 1)[-1] for stats in meta["partitionToWriteStats"].values() for s in stats}
    of_instant = {n.name for _, _, n in fsview.list_data_files(copy) if n.instant == run.instant.begin_time}
    assert of_instant == written
    assert any(n.split("_")[1].startswith("0-") and n.split("_")[1].endswith("-1") for n in written)
    if strategy == "full":
        assert compact_table(copy, spark=spark, strategy=strategy) is None  # nothing left to do


def test_spark_read_equals_table_read(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table, done = history(tmp_table)
    frame = read_table(table.path, spark=spark)
    assert frame.columns == table.read().column_names
    assert without_file_name(frame.toArrow()) == without_file_name(table.read())
    first = read_table(table.path, spark=spark, as_of=done[0].completion_time, columns=["uuid", "ts", "fare"])
    assert sorted(first.toArrow().to_pylist(), key=lambda r: r["uuid"]) == \
        sorted(table.read(as_of=done[0], columns=["uuid", "ts", "fare"]).to_pylist(), key=lambda r: r["uuid"])
    ro = read_table(table.path, spark=spark, read_optimized=True, columns=["uuid", "ts", "city"])
    assert sorted(ro.toArrow().to_pylist(), key=lambda r: r["uuid"]) == \
        sorted(table.read_optimized(columns=["uuid", "ts", "city"]).to_pylist(), key=lambda r: r["uuid"])
    with pytest.raises(lsm_lab.errors.InputError):
        read_table(table.path, spark=spark, columns=["nope"])


def test_spark_read_of_an_empty_table(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    empty = tmp_table()
    assert read_table(empty.path, spark=spark).count() == 0
    assert read_table(empty.path, spark=spark, read_optimized=True).count() == 0
