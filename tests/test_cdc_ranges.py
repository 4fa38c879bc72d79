"""The cut Spark's read_cdc makes: runs of whole commits whose change streams add up to the range's stream.

No Spark here: `commit_ranges` runs on the driver, and each piece is read with
`Table.read_cdc`, as the tasks do; the Spark job itself is tests/spark/test_spark_cdc.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

import lsm_lab
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.spark.cdc import commit_ranges
from lsm_lab.table.cdc import is_change


def _table(tmp_table: Callable[..., lsm_lab.Table], **cdc: object) -> tuple[lsm_lab.Table, list[lsm_lab.Instant]]:
    gen = TripsGenerator(5)
    t = tmp_table(name="trips", record_key="uuid", partition_by="city", ordering_field="ts", num_buckets=2, **cdc)
    done = [t.insert(gen.inserts(60)), t.upsert(gen.updates(20)), t.upsert(gen.inserts(10))]
    t.compact(strategy="full")
    done += [t.delete(gen.deletes(8)), t.upsert(gen.updates(15))]
    return t, done


@pytest.mark.parametrize("cdc", [{}, {"cdc": True, "cdc_mode": "DATA_BEFORE"}])
@pytest.mark.parametrize("max_tasks", [1, 2, 3, 100])
def test_pieces_add_up_to_the_whole(tmp_table: Callable[..., lsm_lab.Table], cdc: dict[str, Any],
                                    max_tasks: int) -> None:
    t, done = _table(tmp_table, **cdc)
    for start, end in [(None, None), (done[0], None), (done[0].completion_time, done[3].completion_time)]:
        ranges = commit_ranges(t, start, end, max_tasks=max_tasks)
        lo, hi = t.resolve_time(start), t.resolve_time(end)  # None for None
        writes = [i for i in t.completed_writes() if is_change(t, i) and i.completion_time is not None
                  and (lo is None or i.completion_time > lo)
                  and (hi is None or i.completion_time <= hi)]
        assert len(ranges) == min(max_tasks, len(writes))
        assert ranges[0].start == t.resolve_time(start)
        assert all(a.end == b.start for a, b in itertools.pairwise(ranges))  # no gap, no overlap
        whole = t.read_cdc(start, end).replace_schema_metadata(None)
        pieces = pa.concat_tables([t.read_cdc(r.start, r.end).replace_schema_metadata(None) for r in ranges])
        assert whole.num_rows > 0
        assert pieces.to_pylist() == whole.to_pylist()


def test_no_commit_in_the_range(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t, done = _table(tmp_table)
    assert commit_ranges(t, done[-1]) == []
    empty = tmp_table(name="e", record_key="uuid", ordering_field="ts")
    assert commit_ranges(empty, None) == []
