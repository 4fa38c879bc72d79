"""Clustering (services/clustering.py): plans, replacecommits, readers, conflicts, clean, archive, rollback."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule
from instantfiles import read_instant, write_instant_json
from localpath import local
from test_table_model import TableMachine

import lsm_lab
from lsm_lab.cli.app import main
from lsm_lab.errors import ConflictError, UnsupportedFeatureError
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.format import parquet_footer
from lsm_lab.services import clustering, occ
from lsm_lab.timeline.instant import CLUSTERING, State

COLS = ["id", "p", "ts", "v"]
ANY_SIZE = {"hoodie.clustering.plan.strategy.small.file.limit": str(1 << 40)}
NO_SMALL_FILES: dict[str, Any] = {"hoodie.parquet.small.file.limit": "0"}  # every insert opens new file groups (filegroup/smallfiles.py)


def _table(tmp_path: Path, layout: str = "default", table_type: str = "MERGE_ON_READ", batches: int = 4,
           **kw: Any) -> lsm_lab.Table:
    t = lsm_lab.create_table(tmp_path / f"{layout}_{table_type}", name="t", record_key="id", partition_by="p",
                             ordering_field="ts", layout=layout, table_type=table_type, num_buckets=2,
                             **{**NO_SMALL_FILES, **kw})
    for i in range(batches):
        t.upsert([{"id": f"k{(i * 3 + j) % 10}", "p": "a" if j % 2 else "b", "ts": i, "v": i * 10 + j}
                  for j in range(5)])
    t.delete([{"id": "k3", "p": "b"}, {"id": "k4", "p": "a"}])
    return t


def _state(t: lsm_lab.Table, **kw: Any) -> list[dict[str, Any]]:
    out = t.read(columns=[*COLS, "_hoodie_commit_time"], **kw)
    return sorted(out.to_pylist(), key=lambda r: (r["p"], r["id"]))


def _base(fs: FileSlice) -> DataFile:
    """The base file of a slice that has one (every slice after a clustering)."""
    assert fs.base_file is not None
    return fs.base_file


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_default_layout_groups_become_few_sorted_disjoint_file_groups(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type=table_type)
    before = _state(t)
    groups_before = {(g.partition, g.file_id) for g in t.file_groups()}
    last_write = t.completed_writes()[-1]
    assert len(groups_before) > 4
    done = t.cluster()
    assert done is not None and done.action == CLUSTERING and done.file_name.endswith(".replacecommit")
    assert _state(t) == before  # same rows, same commit times
    meta = t.instant_metadata(done)
    replaced = {(p, f) for p, ids in meta["partitionToReplaceFileIds"].items() for f in ids}
    assert replaced == groups_before
    assert meta["operationType"] == "CLUSTER"
    now = t.latest_slices()
    assert len(now) == 2 and all(fs.base_file is not None and not fs.log_files for fs in now)
    for fs in now:
        assert fs.base_file is not None
        assert fs.base_instant == done.begin_time
        assert parquet_footer.is_sorted_footer(parquet_footer.footer(fs.base_file.path))
        keys = pq.read_table(fs.base_file.path).column("_hoodie_record_key")
        assert keys.to_pylist() == sorted(keys.to_pylist(), key=lambda k: k.encode())
    # time travel before the clustering reads the replaced file groups; incremental reads see no clustering
    assert _state(t, as_of=last_write) == before
    assert t.read_incremental(last_write.completion_time).num_rows == 0
    # the requested file holds upstream's plan
    req = t.active_timeline.read_content(done, State.REQUESTED)
    plan = req["clusteringPlan"]
    assert req["operationType"] == "CLUSTER"
    assert plan["strategy"]["strategyClassName"] == clustering.EXECUTION_STRATEGY
    assert {s["fileId"] for g in plan["inputGroups"] for s in g["slices"]} == {f for _, f in groups_before}
    assert all(g["numOutputFileGroups"] == 1 for g in plan["inputGroups"])
    # writes after the clustering go on as usual
    t.upsert([{"id": "k1", "p": "a", "ts": 99, "v": -1}])
    assert {r["id"]: r["v"] for r in _state(t) if r["p"] == "a"}["k1"] == -1


def test_several_output_file_groups_have_disjoint_key_ranges(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default", **NO_SMALL_FILES)
    for i in range(6):
        t.insert([{"id": f"k{(j * 7 + i) % 300:03d}", "v": j} for j in range(i * 50, i * 50 + 50)])
    before = t.read().sort_by("id").select(["id", "v"])
    size = sum(fs.size_bytes for fs in t.latest_slices())
    done = t.cluster(options={**ANY_SIZE, clustering.KEY_TARGET_FILE: str(size // 3 + 1)})
    assert done is not None
    assert t.read().sort_by("id").select(["id", "v"]).equals(before)
    now = sorted(t.latest_slices(), key=lambda s: pq.read_table(_base(s).path).column("id")[0].as_py())
    assert len(now) == 3
    ranges = [(pc.min(pq.read_table(_base(s).path).column("id")).as_py(),
               pc.max(pq.read_table(_base(s).path).column("id")).as_py()) for s in now]
    assert all(ranges[i][1] < ranges[i + 1][0] for i in range(len(ranges) - 1))


@pytest.mark.parametrize("version", [10, 9])
def test_bucket_index_clusters_each_bucket_in_place(tmp_path: Path, version: int) -> None:
    t = _table(tmp_path, layout="lsm_tree", table_version=version)
    before = _state(t)
    ids_before = {(g.partition, g.file_id) for g in t.file_groups()}
    assert any(fs.log_files for fs in t.latest_slices())
    done = t.cluster()
    assert done is not None
    assert _state(t) == before
    assert {(g.partition, g.file_id) for g in t.file_groups()} == ids_before  # keys stay in their bucket
    assert t.instant_metadata(done)["partitionToReplaceFileIds"] == {}
    assert all(not fs.log_files and fs.base_instant == done.begin_time for fs in t.latest_slices())
    assert t.cluster() is None  # nothing left to cluster
    t.upsert([{"id": "k2", "p": "b", "ts": 50, "v": 7}])  # a later log lands on the clustered slice
    assert [r["v"] for r in _state(t) if r["id"] == "k2" and r["p"] == "b"] == [7]


def test_plan_only_then_run_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _table(tmp_path)
    before = _state(t)
    assert main(["cluster", str(t.path), "--plan-only"]) == 0
    out = capsys.readouterr().out
    assert "clustering" in out and "requested" in out
    (inst, plan), = t.clustering_plans()
    assert inst.state is State.REQUESTED and plan.groups
    assert _state(t) == before
    # a writer that comes by keeps the plan (it is no failed write)
    t.upsert([{"id": "zz", "p": "c", "ts": 1, "v": 1}])
    assert t.clustering_plans()
    assert main(["cluster", str(t.path)]) == 0
    assert "replacecommit" in capsys.readouterr().out
    assert not t.clustering_plans()
    assert _state(t) == sorted([*before, {"id": "zz", "p": "c", "ts": 1, "v": 1, "_hoodie_commit_time": t.completed_writes()[-2].begin_time}],
                               key=lambda r: (r["p"], r["id"]))
    with pytest.raises(SystemExit):
        main(["cluster", "--help"])
    assert "--plan-only" in capsys.readouterr().out


def test_write_to_an_input_group_after_the_plan_is_a_conflict(tmp_path: Path) -> None:
    t = _table(tmp_path)
    planned = t.cluster(plan_only=True)
    assert planned is not None
    t.upsert([{"id": "k1", "p": "a", "ts": 77, "v": 77}])  # an update: lands in one of the planned groups
    expected = _state(t)
    with pytest.raises(ConflictError, match="clustering"):
        clustering.execute(t, planned)
    assert _state(t) == expected
    assert not t.clustering_plans() and all(i.begin_time != planned.begin_time for i in t.instants()
                                            if i.action == CLUSTERING)
    assert not list(local(t.path).rglob(f"*_{planned.begin_time}.parquet"))


def test_writer_started_before_a_clustering_conflicts(tmp_path: Path) -> None:
    t = _table(tmp_path)
    g = t.file_groups()[0]
    txn = occ.WriteTransaction(t.path, t.active_timeline, "deltacommit").begin(t.latest_completion)
    assert t.cluster() is not None
    meta = {"partitionToWriteStats": {g.partition: [{"fileId": g.file_id, "partitionPath": g.partition}]}}
    with pytest.raises(ConflictError):
        txn.commit(meta)


def test_refuses_sort_columns_and_space_filling_curves(tmp_path: Path) -> None:
    t = _table(tmp_path)
    with pytest.raises(UnsupportedFeatureError, match="sort columns"):
        t.cluster(options={clustering.KEY_SORT_COLUMNS: "v"})
    for layout in ("z-order", "hilbert"):
        with pytest.raises(UnsupportedFeatureError, match="Z-order and Hilbert"):
            t.cluster(options={clustering.KEY_LAYOUT_STRATEGY: layout})
    assert t.cluster(options={clustering.KEY_SORT_COLUMNS: "id"}) is not None  # the record key itself is fine


def test_a_plan_of_another_execution_strategy_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path)
    inst = t.cluster(plan_only=True)
    assert inst is not None
    path = t.active_timeline.folder / inst.file_name
    raw = read_instant(path)
    raw["clusteringPlan"]["strategy"]["strategyClassName"] = "org.example.ZOrderStrategy"
    write_instant_json(path, raw)
    with pytest.raises(UnsupportedFeatureError, match="record-key order"):
        clustering.execute(t, inst)


def test_clean_archive_and_rollback_honour_replaced_groups(tmp_path: Path) -> None:
    keep: dict[str, Any] = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
    t = _table(tmp_path, **keep)
    done = t.cluster()
    assert done is not None
    before = _state(t)
    old = {p for p in local(t.path).rglob("*.parquet") if done.begin_time not in p.name}
    for i in range(3):
        t.upsert([{"id": f"n{i}", "p": "c", "ts": i, "v": i}])
        before.append({"id": f"n{i}", "p": "c", "ts": i, "v": i, "_hoodie_commit_time": t.completed_writes()[-1].begin_time})
    t.clean(retained=1)
    assert not any(p.exists() for p in old if "p=c" not in str(p))  # the replaced file groups are gone
    t.archive(keep=2)
    assert any(i.begin_time == done.begin_time for i in t.archived_instants())
    assert _state(t) == sorted(before, key=lambda r: (r["p"], r["id"]))
    # rolling back the latest write drops a clustering plan that reads its files
    t.insert([{"id": f"x{j}", "p": "d", "ts": 0, "v": j} for j in range(2)])
    t.insert([{"id": f"y{j}", "p": "d", "ts": 0, "v": j} for j in range(2)])
    planned = t.cluster(plan_only=True)
    assert planned is not None
    t.rollback(t.completed_writes()[-1])
    assert not t.clustering_plans()


def test_dead_inflight_clustering_is_reset_and_rerun(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = _state(t)
    planned = t.cluster(plan_only=True)
    assert planned is not None
    inflight = t.active_timeline.start(planned)  # a runner that died after writing part of the output
    plan = clustering.read_plan(t.active_timeline, inflight)
    cctx = clustering.ClusteringContext(t.path, planned.begin_time, t.read_context(), None, plan.same_file_ids)
    clustering.run_group(cctx, plan.groups[0], 0)
    assert _state(t) == before  # its files are invisible
    done = t.cluster()
    assert done is not None and done.begin_time == planned.begin_time
    assert _state(t) == before
    assert len(t.latest_slices()) == 2


def test_version_6_is_refused(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "v6", name="t", record_key="id", layout="default", table_version=6)
    t.insert([{"id": "a", "v": 1}])
    with pytest.raises(UnsupportedFeatureError, match="version 8"):
        t.cluster()


def test_version_8_compatibility_table_clusters(tmp_path: Path) -> None:
    t = _table(tmp_path, table_version=8)
    before = _state(t)
    assert t.cluster() is not None
    assert _state(t) == before
    assert lsm_lab.open_table(t.path).file_groups()  # reopen: the replacecommit decodes


# --------------------------------------------------------------------------- the dict model, with clustering
class ClusteringMachine(TableMachine):
    """The model machine of test_table_model.py plus a rule that clusters (every file group is small)."""

    extra_props = NO_SMALL_FILES  # many file groups to cluster

    @rule(plan_only=st.booleans())
    def cluster(self, plan_only: bool) -> None:
        if self.table is None:
            return
        self.table.cluster(plan_only=plan_only, options=ANY_SIZE)


def _case(table_type: str, layout: str) -> type:
    machine = cast("type[ClusteringMachine]", type(f"Clustering_{table_type}_{layout}", (ClusteringMachine,),
                                                    {"table_type": table_type, "layout": layout}))
    case = machine.TestCase
    case.settings = settings(max_examples=8, stateful_step_count=8, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    return case


TestModelMorDefault = _case("MERGE_ON_READ", "default")
TestModelCowDefault = _case("COPY_ON_WRITE", "default")
TestModelMorLsmTree = _case("MERGE_ON_READ", "lsm_tree")


def test_arrow_types_survive(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default", **NO_SMALL_FILES)
    t.insert(pa.table({"id": ["a", "b"], "x": pa.array([1.5, None]), "d": pa.array([1, 2], pa.int32())}))
    t.insert(pa.table({"id": ["c"], "x": pa.array([2.5]), "d": pa.array([3], pa.int32())}))
    before = t.read().sort_by("id")
    assert t.cluster() is not None
    after = t.read().sort_by("id")
    assert after.schema.field("d").type == pa.int32()
    assert after.drop_columns(["_hoodie_file_name"]).equals(before.drop_columns(["_hoodie_file_name"]))


@pytest.mark.parametrize("layout", ["default", "lsm_tree"])
def test_hudi_rs_reads_a_clustered_version_8_table_the_same(tmp_path: Path, layout: str) -> None:
    from lsm_lab.interop.hudi_tables import compare_rows, hudi_rs_read  # hudi-rs: a dev dependency

    t = lsm_lab.create_table(tmp_path / layout, name="t", record_key="id", partition_by="p", ordering_field="ts",
                             layout=layout, table_version=8, num_buckets=2, **NO_SMALL_FILES)
    for i in range(4):
        t.upsert([{"id": f"k{(i * 3 + j) % 10}{'a' if j % 2 else 'b'}", "p": "a" if j % 2 else "b", "ts": i,
                   "v": i * 10 + j} for j in range(5)])
    t.delete([{"id": "k3b", "p": "b", "ts": 9}])
    before = t.completed_writes()[-1]
    assert t.cluster() is not None
    assert compare_rows(t.read(), hudi_rs_read(local(t.path)), ["id"]) == []
    assert compare_rows(t.read(as_of=before), hudi_rs_read(local(t.path), as_of=before.completion_time), ["id"]) == []
    assert compare_rows(t.read_optimized(), hudi_rs_read(local(t.path), read_optimized=True), ["id"]) == []


@pytest.mark.parametrize("field,value", [("dataFilePath", "../../etc/passwd"), ("partitionPath", "/abs"),
                                         ("fileId", "a/../../b"), ("deltaFilePaths", ["p=a/../x.parquet"])])
def test_a_hostile_plan_is_refused_before_anything_is_read(tmp_path: Path, field: str, value: Any) -> None:
    from lsm_lab.errors import CorruptTableError

    t = _table(tmp_path)
    inst = t.cluster(plan_only=True)
    assert inst is not None
    path = t.active_timeline.folder / inst.file_name
    raw = read_instant(path)
    raw["clusteringPlan"]["inputGroups"][0]["slices"][0][field] = value
    write_instant_json(path, raw)
    with pytest.raises(CorruptTableError):
        clustering.execute(t, inst)


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    from lsm_lab.errors import InputError

    t = _table(tmp_path)
    with pytest.raises(InputError, match="unknown clustering option"):
        t.cluster(options={"hoodie.clustering.plan.strategy.smal.file.limit": "1"})
    with pytest.raises(InputError, match="plan_only"):
        t.cluster(plan_only="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="merge"):
        t.cluster(merge="quick")
    with pytest.raises(InputError, match="target.file.max.bytes"):
        t.cluster(options={clustering.KEY_TARGET_FILE: "0"})


def test_restore_drops_a_pending_clustering_plan_with_the_writes_it_reads(tmp_path: Path) -> None:
    """A restore rolls back every pending instant, so a plan over files it removes never runs on missing files."""
    t = _table(tmp_path, batches=2)
    savepointed = t.completed_writes()[-1]
    t.savepoint(savepointed)
    before = _state(t)
    for i in range(2, 5):  # more small file groups, written after the savepoint
        t.upsert([{"id": f"n{i}-{j}", "p": "a", "ts": i, "v": j} for j in range(3)])
    plan = t.cluster(plan_only=True, options=ANY_SIZE)
    assert plan is not None and plan.state is State.REQUESTED
    t.restore(savepointed)
    assert [i for i in t.active_timeline.pending() if i.action == CLUSTERING] == []
    assert _state(t) == before
    done = t.cluster(options=ANY_SIZE)  # a new plan over what the restore kept
    assert done is None or done.action == CLUSTERING
    assert _state(t) == before
