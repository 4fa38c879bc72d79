"""Spark clustering gives what the library gives locally (one task per input group, retries included)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from localpath import local as local_path  # (the tests name their local table `local`)

import lsm_lab
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.spark.clustering import cluster_table
from lsm_lab.spark.jobs import FailTask

pytestmark = pytest.mark.spark


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    rows = table.drop_columns(["_hoodie_file_name"]).to_pylist()
    return sorted(rows, key=lambda r: (r["_hoodie_partition_path"], r["_hoodie_record_key"]))


@pytest.mark.parametrize("layout", ["default", "lsm_tree"])
def test_spark_clustering_equals_local(spark: Any, tmp_table: Callable[..., lsm_lab.Table], tmp_path: Path,
                                       layout: str) -> None:
    gen = TripsGenerator(5)
    local = tmp_table(name="trips", record_key="uuid", partition_by="city", ordering_field="ts", layout=layout,
                      num_buckets=2, **{"hoodie.parquet.small.file.limit": "0"})
    for _ in range(3):
        local.insert(gen.inserts(150))
    local.upsert(gen.updates(80))
    local.delete(gen.deletes(20))
    copy = tmp_path / "copy"
    shutil.copytree(local_path(local.path), copy)
    before = _rows(local.read())
    mine = local.cluster()
    theirs = cluster_table(copy, spark=spark, task_hook=FailTask(0, (0,)))  # the first attempt of task 0 fails
    remote = lsm_lab.open_table(copy)
    assert mine is not None and theirs is not None and theirs.is_completed
    assert _rows(remote.read()) == _rows(local.read()) == before
    assert len(remote.latest_slices()) == len(local.latest_slices())
    assert remote.instant_metadata(theirs)["extraMetadata"]["lsm_lab.engine"] == "spark"
    replaced = remote.instant_metadata(theirs)["partitionToReplaceFileIds"]
    assert bool(replaced) == (layout == "default")


def test_spark_clustering_command(spark: Any, tmp_table: Callable[..., lsm_lab.Table],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main

    gen = TripsGenerator(7)
    t = tmp_table(name="trips", record_key="uuid", partition_by="city", ordering_field="ts", layout="default",
                  **{"hoodie.parquet.small.file.limit": "0"})
    for _ in range(3):
        t.insert(gen.inserts(100))
    before = _rows(t.read())
    groups = len(t.latest_slices())
    assert main(["spark", "clustering", str(t.path)]) == 0
    assert "replacecommit" in capsys.readouterr().out
    after = lsm_lab.open_table(t.path)
    assert _rows(after.read()) == before
    assert len(after.latest_slices()) < groups
    assert after.instant_metadata(after.instants()[-1])["extraMetadata"]["lsm_lab.engine"] == "spark"
    assert main(["spark", "clustering", str(t.path)]) == 0
    assert "nothing to cluster" in capsys.readouterr().out
