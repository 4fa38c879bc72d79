"""`lsm_lab.spark.read_cdc` gives the rows `Table.read_cdc` gives: from CDC logs, inferred, and on a real Hudi table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lsm_lab
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.spark import read_cdc

pytestmark = pytest.mark.spark


def history(tmp_table: Callable[..., lsm_lab.Table], **cdc: Any) -> tuple[lsm_lab.Table, list[lsm_lab.Instant]]:
    """insert · upsert (updates) · compaction · upsert (new keys) · delete, on 2 partitions' worth of buckets."""
    gen = TripsGenerator(31)
    t = tmp_table(name="trips", record_key="uuid", partition_by="city", ordering_field="ts", num_buckets=2,
                  table_type="MERGE_ON_READ", layout="lsm_tree", **cdc)
    done = [t.insert(gen.inserts(200)), t.upsert(gen.updates(80))]
    t.compact(strategy="full")
    done += [t.upsert(gen.inserts(40)), t.delete(gen.deletes(20))]
    return t, done


def spark_rows(frame: Any) -> list[dict[str, Any]]:
    """The DataFrame's rows in the order Spark returns them, as Python values."""
    rows: list[dict[str, Any]] = frame.toArrow().to_pylist()
    return rows


def local_rows(stream: pa.Table) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = stream.to_pylist()
    return rows


@pytest.mark.parametrize("mode", ["DATA_BEFORE_AFTER", "OP_KEY_ONLY"])
def test_spark_read_cdc_equals_local_from_logs(spark: Any, tmp_table: Callable[..., lsm_lab.Table],
                                               mode: str) -> None:
    t, done = history(tmp_table, cdc=True, cdc_mode=mode)
    whole = t.read_cdc(None)
    assert whole.num_rows > 0 and set(whole.column("op").to_pylist()) == {"i", "u", "d"}
    assert not any(whole.column("inferred").to_pylist())  # every write of a CDC table left CDC logs
    frame = read_cdc(t.path, spark)
    assert frame.columns == whole.column_names
    assert spark_rows(frame) == local_rows(whole)  # same rows, same order (commit, then key)
    # time bounds as read_incremental: (start, end], and a column subset
    start, end = done[0].completion_time, done[2].completion_time
    part = t.read_cdc(start, end, columns=["fare"])
    assert 0 < part.num_rows < whole.num_rows
    assert spark_rows(read_cdc(t.path, spark, start=start, end=end, columns=["fare"])) == local_rows(part)


def test_spark_read_cdc_equals_local_inferred(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t, done = history(tmp_table)  # no CDC logs: every change is inferred from snapshots
    whole = t.read_cdc(None)
    assert whole.num_rows > 0 and all(whole.column("inferred").to_pylist())
    frame = read_cdc(str(t.path), spark)
    t.insert(TripsGenerator(99).inserts(5))  # completes after the range was fixed on the driver: not in `frame`
    assert spark_rows(frame) == local_rows(whole)
    assert t.read_cdc(None).num_rows == whole.num_rows + 5
    after_first = t.read_cdc(done[0], done[-1])
    assert spark_rows(read_cdc(t.path, spark, start=done[0], end=done[-1])) == local_rows(after_first)
    # nothing completed after the last write: an empty DataFrame with the same columns
    empty = read_cdc(t.path, spark, start=t.latest_completion())
    assert empty.columns == whole.column_names and empty.count() == 0
    fresh = tmp_table(name="fresh", record_key="id")  # no commit at all: no schema yet, no rows
    assert read_cdc(fresh.path, spark).count() == 0


def test_spark_read_cdc_of_a_real_hudi_table(spark: Any, real_table: Callable[[str], Path]) -> None:
    path = real_table("v8_trips_8i3u1d")
    whole = lsm_lab.open_table(path).read_cdc(None)
    assert whole.num_rows > 0
    assert spark_rows(read_cdc(path, spark)) == local_rows(whole)
