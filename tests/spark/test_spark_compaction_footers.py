"""Compacted base files carry the footer of any sorted file parquet_write writes — locally and on Spark.

A FULL compaction writes its new base file through `format/parquet_write.py`, so a
lookup after a compaction finds what it finds after a bulk insert: the key
range, lsm_lab's bloom of every key, `sorting_columns` on every row group,
Parquet's own split-block bloom on the key column, and row groups capped at
2 MiB.  The same table is compacted by `Table.compact` and by Spark tasks
(`lsm_lab.spark.compact`), with both merge engines, and every compacted file is
checked against the bulk-inserted file of its file group.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from localpath import local as local_path  # (the tests name their local table `local`)

import lsm_lab
from lsm_lab.filegroup.fsview import FileSlice
from lsm_lab.format import parquet_footer, parquet_write
from lsm_lab.format.bloom import BloomFilter
from lsm_lab.spark.compact import run_compaction

pytestmark = pytest.mark.spark

KEY = "_hoodie_record_key"
N = 40_000


def keys(idx: range | list[int]) -> list[str]:
    return [f"key{i:07d}" for i in idx]


def base_path(fs: FileSlice) -> Path:
    """The slice's base file (a local table's)."""
    assert fs.base_file is not None
    return local_path(fs.base_file.path)


def written(tmp_table: Callable[..., lsm_lab.Table]) -> tuple[lsm_lab.Table, dict[str, pq.FileMetaData], set[str]]:
    """Two file groups: a bulk insert, an upsert of every 7th key (and new keys), a delete; the expected keys."""
    table = tmp_table(ordering_field="ts", num_buckets=2)
    table.bulk_insert(pa.table({"id": keys(range(N)), "ts": [0] * N, "v": list(range(N))}))
    bulk = {fs.file_id: pq.read_metadata(base_path(fs)) for fs in table.latest_slices()}
    up = list(range(0, N + 2_000, 7))
    table.upsert(pa.table({"id": keys(up), "ts": [1] * len(up), "v": [-1] * len(up)}))
    gone = list(range(1, 600, 2))
    table.delete(keys(gone))
    return table, bulk, (set(keys(range(N))) | set(keys(up))) - set(keys(gone))


def check_footer(path: Path, bulk_md: pq.FileMetaData) -> pa.Array:
    """Assert the file's footer is that of a sorted parquet_write file like `bulk_md`'s; return its keys."""
    md = pq.read_metadata(path)
    rows = pq.read_table(path)
    keys_ = rows.column(KEY).combine_chunks()
    assert len(keys_) > 1 and bool(pc.all(pc.less(keys_.slice(0, len(keys_) - 1), keys_.slice(1))).as_py())
    kv, bulk_kv = parquet_footer.footer_kv(md), parquet_footer.footer_kv(bulk_md)
    assert set(kv) == set(bulk_kv) >= {parquet_footer.KEY_MIN, parquet_footer.KEY_MAX, parquet_footer.KEY_SORTED,
                                       parquet_footer.KEY_BLOOM}
    assert kv[parquet_footer.KEY_SORTED] == "true"
    assert (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == (keys_[0].as_py(), keys_[-1].as_py())
    bloom = BloomFilter.from_base64(kv[parquet_footer.KEY_BLOOM])
    assert bloom.num_keys == rows.num_rows and bool(np.asarray(bloom.might_contain(keys_)).all())
    absent = pa.array([f"absent{i:07d}" for i in range(20_000)])
    assert np.asarray(bloom.might_contain(absent)).mean() < 0.03  # sized for this file: ~1% false positives
    key_index = md.schema.to_arrow_schema().get_field_index(KEY)
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        assert rg.sorting_columns == bulk_md.row_group(0).sorting_columns == (pq.SortingColumn(key_index),)
        stats = rg.column(key_index).statistics
        assert stats is not None and stats.has_min_max
        assert (rg.column(key_index).bloom_filter_offset or 0) > 0  # Parquet's split-block bloom, per row group
    # row groups of a sorted file: the rows of 2 MiB, the same as a bulk insert of these rows would get
    expected = parquet_write.rows_per_group(rows, parquet_write.DEFAULT_ROW_GROUP_ROWS, parquet_write.SORTED_ROW_GROUP_BYTES)
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert len(sizes) > 1 and all(s == sizes[0] for s in sizes[:-1]) and sum(sizes) == rows.num_rows
    assert abs(sizes[0] - expected) <= expected // 10
    return keys_


@pytest.mark.parametrize("merge", ["sorted", "hash"])
def test_compacted_files_have_the_footer_of_a_sorted_write_locally_and_on_spark(
        spark: Any, tmp_table: Callable[..., lsm_lab.Table], tmp_path: Path, merge: str) -> None:
    local, bulk, model = written(tmp_table)
    bulk_instant = local.latest_slices()[0].base_instant
    copy = tmp_path / "on_spark"
    shutil.copytree(local_path(local.path), copy)
    assert local.compact(strategy="full", merge=merge, progress=False) is not None
    run = run_compaction(copy, spark=spark, strategy="full", merge=merge, progress=False)
    assert run.instant is not None and run.instant.is_completed and len(run.reports) == 2
    layouts = {}
    for where, table in (("local", local), ("spark", lsm_lab.open_table(copy))):
        slices = table.latest_slices()
        assert len(slices) == 2 and all(fs.log_files == () and fs.base_file is not None for fs in slices)
        found: set[str] = set()
        for fs in slices:
            assert fs.base_instant != bulk_instant  # a new base file, named with the compaction instant
            found |= set(check_footer(base_path(fs), bulk[fs.file_id]).to_pylist())
        assert found == model, where
        layouts[where] = sorted((fs.file_id, pq.read_metadata(base_path(fs)).num_rows,
                                 pq.read_metadata(base_path(fs)).num_row_groups) for fs in slices)
    assert layouts["local"] == layouts["spark"]  # the same function runs in the task: the same files

