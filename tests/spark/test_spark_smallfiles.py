"""Small-file handling on Spark: new keys fill the small file groups exactly as a local write fills them.

Before every Spark write the table is copied, and `Table` writes the same
batch into the copy: the two must end alike file group by file group (the keys
of every latest slice, in file order, and its log count) and in the commit's
write stats; the rows are checked against a plain dict model all along.  (Two
tables written apart from the start can pack differently and still both be
right: candidates are ordered by file size, and a file's size depends on the
writer's file names.)  Limits are tight (a file may grow to a few KiB, new file
groups take 6 keys), so small file groups fill up and new ones open every few
batches.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from localpath import local as local_path  # (the tests name their local table `local`)

import lsm_lab
from lsm_lab.errors import ConflictError
from lsm_lab.filegroup import fsview, smallfiles
from lsm_lab.merge import records
from lsm_lab.spark import SparkJobError, jobs, write_table
from lsm_lab.spark import write as spark_write
from lsm_lab.spark.jobs import FailTask

pytestmark = pytest.mark.spark

TIGHT = {smallfiles.KEY_MAX_FILE_SIZE: "7000", smallfiles.KEY_MOR_CANDIDATES: "2", smallfiles.KEY_INSERT_SPLIT: "6"}
Model = dict[tuple[str, str], tuple[int, int]]


def make(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str = "default",
         **props: str) -> lsm_lab.Table:
    extra = {"hoodie.index.type": "SIMPLE"} if layout == "lsm_tree" else {}  # an lsm_tree table with a key lookup
    return tmp_table(partition_by="p", ordering_field="ts", table_type=table_type, layout=layout,
                     properties={**TIGHT, **extra, **props})


def batches(seed: int, n: int = 6, per: int = 30, keys: int = 120) -> list[tuple[str, list[dict[str, Any]]]]:
    """Upserts and inserts of random keys (repeated inside a batch, with ordering values), then a delete."""
    rng = random.Random(seed)
    out: list[tuple[str, list[dict[str, Any]]]] = []
    for b in range(n):
        rows = [{"id": f"k{rng.randrange(keys):03d}", "p": rng.choice("ab"), "ts": rng.randrange(4), "v": b * 1000 + j}
                for j in range(per)]
        out.append((("upsert", "insert", "bulk_insert")[b % 3], rows))
    return out


def apply(model: Model, op: str, rows: list[dict[str, Any]]) -> None:
    """The dict model: greatest ordering value wins, ties to the later row (also across batches)."""
    for r in rows:
        key = (f"p={r['p']}", r["id"])
        if op == "delete":
            model.pop(key, None)
        elif key not in model or r["ts"] >= model[key][0]:
            model[key] = (r["ts"], r["v"])


def rows_of(table: lsm_lab.Table) -> Model:
    got = table.read(columns=[records.PARTITION_PATH, records.RECORD_KEY, "ts", "v"]).to_pylist()
    return {(r[records.PARTITION_PATH], r[records.RECORD_KEY]): (r["ts"], r["v"]) for r in got}


def layout_of(table: lsm_lab.Table) -> list[tuple[str, tuple[str, ...], int]]:
    """Every latest slice as (partition, its base file's keys in file order, number of logs), sorted."""
    out = []
    for fs in table.latest_slices():
        keys = pq.read_table(fs.base_file.path, columns=[records.RECORD_KEY]).column(0).to_pylist() \
            if fs.base_file is not None else []
        out.append((fs.partition, tuple(keys), len(fs.log_files)))
    return sorted(out)


def twin(table: lsm_lab.Table, folder: Path) -> lsm_lab.Table:
    """A copy of the table (no writer is running), for `Table` to write what Spark writes."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(local_path(table.path), folder)
    return lsm_lab.open_table(folder)


def last_stats(table: lsm_lab.Table) -> list[tuple[str, int, int, int, bool]]:
    """(partition, numInserts, numUpdateWrites, numDeletes, wrote a base file) of the last commit, sorted."""
    meta = table.instant_metadata(table.completed_writes()[-1])
    return sorted((s["partitionPath"], s["numInserts"], s["numUpdateWrites"], s["numDeletes"],
                   ".log." not in s["path"] and ".deletes." not in s["path"])
                  for ss in meta["partitionToWriteStats"].values() for s in ss)


@pytest.mark.parametrize("table_type,layout", [("COPY_ON_WRITE", "default"), ("MERGE_ON_READ", "default"),
                                               ("MERGE_ON_READ", "lsm_tree")])
def test_spark_packs_like_a_local_write(spark: Any, tmp_table: Callable[..., lsm_lab.Table], tmp_path: Path,
                                        table_type: str, layout: str) -> None:
    remote = make(tmp_table, table_type, layout)
    model: Model = {}
    took_inserts, opened = 0, []
    for op, rows in batches(seed=7):
        before = {(fs.partition, fs.file_id) for fs in remote.latest_slices()}
        local = twin(remote, tmp_path / "twin")
        getattr(local, op)(rows)
        write_table(rows, remote.path, op=op, spark=spark)
        apply(model, op, rows)
        assert rows_of(remote) == model
        assert layout_of(remote) == layout_of(local)  # the same file groups holding the same keys, in file order
        assert last_stats(remote) == last_stats(local)
        meta = remote.instant_metadata(remote.completed_writes()[-1])
        packed = [s for ss in meta["partitionToWriteStats"].values() for s in ss
                  if (s["partitionPath"], s["fileId"]) in before and s["numInserts"] > 0]
        took_inserts += len(packed)
        opened.append(len({(fs.partition, fs.file_id) for fs in remote.latest_slices()} - before))
        if table_type == "MERGE_ON_READ":  # a small slice taking new keys is rewritten: a sorted create, no log
            assert all(".log." not in s["path"] for s in packed), packed
    assert took_inserts >= 4  # existing small file groups took new keys in most writes
    groups = len(remote.latest_slices())
    assert opened[0] >= 4 and sum(opened[1:]) > 0, opened  # 6 keys a new group; later ones when the small ones filled
    # deletes: keys no file group holds are no inserts and go nowhere; the others leave a log (MOR) or a new base
    keys = sorted(model)[::3]
    gone = [{"id": k, "p": p.split("=")[1], "ts": 9} for p, k in keys] + [{"id": "zzz", "p": "a", "ts": 9}]
    local = twin(remote, tmp_path / "twin")
    local.delete(gone[:-1])  # (a local write would send the unknown key into a small file group's delete log)
    write_table(gone, remote.path, op="delete", spark=spark)
    apply(model, "delete", gone)
    assert rows_of(remote) == model == rows_of(local)
    assert layout_of(remote) == layout_of(local) and len(remote.latest_slices()) == groups
    assert last_stats(remote) == last_stats(local)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_with_the_setting_off_spark_opens_new_groups(spark: Any, tmp_table: Callable[..., lsm_lab.Table],
                                                     table_type: str) -> None:
    counts = {}
    for limit in ("104857600", "0"):
        local = make(tmp_table, table_type, **{smallfiles.KEY_SMALL_FILE_LIMIT: limit, smallfiles.KEY_INSERT_SPLIT: "50"})
        remote = make(tmp_table, table_type, **{smallfiles.KEY_SMALL_FILE_LIMIT: limit, smallfiles.KEY_INSERT_SPLIT: "50"})
        model: Model = {}
        for b in range(4):  # new keys only, about 10 a partition each time
            rows = [{"id": f"k{b}_{j:02d}", "p": "ab"[j % 2], "ts": 0, "v": b} for j in range(20)]
            local.insert(rows)
            write_table(rows, remote.path, op="insert", spark=spark)
            apply(model, "insert", rows)
        assert rows_of(remote) == model == rows_of(local)
        counts[limit] = (len(remote.latest_slices()), len(local.latest_slices()))
        if limit == "0":  # as before small-file handling: each insert opened one new group per partition
            assert all(not fs.log_files and len(g.slices) == 1 for g in remote.file_groups() for fs in [g.latest])
        else:
            assert layout_of(remote) == layout_of(local)
    assert counts == {"104857600": (2, 2), "0": (8, 8)}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_retried_packing_task_leaves_no_partial_files(spark: Any, tmp_table: Callable[..., lsm_lab.Table],
                                                      tmp_path: Path, table_type: str) -> None:
    if not spark.sparkContext.master.startswith("local[2,"):
        pytest.skip("needs a local master with task retries (local[N,M])")
    remote = make(tmp_table, table_type)
    (op1, first), (op2, second), *_ = batches(seed=3)
    write_table(first, remote.path, op=op1, spark=spark, task_hook=FailTask(0, (0,)))
    local = twin(remote, tmp_path / "twin")
    getattr(local, op2)(second)
    small = {fs.file_id for fs in remote.latest_slices()}
    done = write_table(second, remote.path, op=op2, spark=spark, task_hook=FailTask(1, (0,)))
    assert layout_of(remote) == layout_of(local) and rows_of(remote) == rows_of(local)
    meta = remote.instant_metadata(done)["partitionToWriteStats"]
    assert any(s["fileId"] in small and s["numInserts"] > 0 for ss in meta.values() for s in ss)  # it packed
    committed = {s["path"].rsplit("/", 1)[-1] for inst in remote.completed_writes()
                 for stats in remote.instant_metadata(inst)["partitionToWriteStats"].values() for s in stats}
    on_disk = {name.name: name for _, _, name in fsview.list_data_files(remote.path)}
    assert set(on_disk) == committed  # the failed attempts' files (a rewritten small base among them) are gone
    assert {n.instant for n in on_disk.values() if n.write_token.split("-")[2] != "0"} >= {done.begin_time}


def test_failed_packing_job_leaves_the_table_as_it_was(spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    remote = make(tmp_table, "MERGE_ON_READ")
    (op1, first), (op2, second), *_ = batches(seed=4)
    write_table(first, remote.path, op=op1, spark=spark)
    before = remote.read()
    files_before = sorted(n.name for _, _, n in fsview.list_data_files(remote.path))
    with pytest.raises(SparkJobError, match="injected failure"):
        write_table(second, remote.path, op=op2, spark=spark, task_hook=FailTask(0, ()))
    assert [i for i in remote.instants() if not i.is_completed] == []
    assert sorted(n.name for _, _, n in fsview.list_data_files(remote.path)) == files_before
    assert remote.read().equals(before)


def test_a_concurrent_write_to_the_same_small_file_group_conflicts(
        spark: Any, tmp_table: Callable[..., lsm_lab.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    """A local insert commits while the Spark write is between its tasks and its commit: both packed the one group."""
    remote = tmp_table(layout="default", table_type="COPY_ON_WRITE")
    remote.insert([{"id": "seed", "v": 0}])
    small, = remote.latest_slices()
    real = jobs.reconcile  # what spark.write calls (its name for it is patched below)

    def racing(base_path: Any, instant: str, stats: Any) -> list[str]:
        assert {s.fileId for s in stats} == {small.file_id}  # the Spark write packed its key into the small group
        lsm_lab.open_table(remote.path).insert([{"id": "local", "v": 1}])
        return real(base_path, instant, stats)

    monkeypatch.setattr(spark_write, "reconcile", racing)
    with pytest.raises(ConflictError, match="conflicts with"):
        write_table([{"id": "spark", "v": 2}], remote.path, op="insert", spark=spark)
    monkeypatch.setattr(spark_write, "reconcile", real)
    assert sorted((r["id"], r["v"]) for r in remote.read(columns=["id", "v"]).to_pylist()) == [("local", 1), ("seed", 0)]
    assert [i.action for i in remote.instants() if not i.is_completed] == []
    done = {i.begin_time for i in remote.completed_writes()}
    assert all(name.instant in done for _, _, name in fsview.list_data_files(remote.path))
    assert write_table([{"id": "spark", "v": 2}], remote.path, op="insert", spark=spark).is_completed  # and it goes on
    assert len(remote.latest_slices()) == 1


def test_spark_packs_a_table_on_s3(spark: Any, s3_server: Any) -> None:
    """On an object store the driver sizes the small files through the storage layer; tasks rewrite them there."""
    opts = s3_server.options()
    path = f"s3://{s3_server.new_bucket()}/t"
    table = lsm_lab.create_table(path, storage_options=opts, name="t", record_key="id", partition_by="p",
                                 ordering_field="ts", layout="default", table_type="MERGE_ON_READ")
    model: Model = {}
    for op, rows in batches(seed=5, n=3):
        write_table(rows, path, op=op, spark=spark, progress=False, storage_options=opts)
        apply(model, op, rows)
    assert rows_of(table) == model
    # every batch brought new keys: with the default limits each partition keeps one file group, rewritten each time
    assert sorted(fs.partition for fs in table.latest_slices()) == ["p=a", "p=b"]
    assert all(len(g.slices) == 3 for g in table.file_groups())
