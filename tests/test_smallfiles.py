"""Small-file handling (filegroup/smallfiles.py): new keys fill small file groups before new ones open."""

from __future__ import annotations

import unittest
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from test_table_model import TableMachine

import lsm_lab
from lsm_lab.errors import InputError
from lsm_lab.filegroup import smallfiles


def _write(t: lsm_lab.Table, batches: int = 6, per: int = 20) -> dict[tuple[str, str], int]:
    model: dict[tuple[str, str], int] = {}
    for i in range(batches):
        rows: list[dict[str, Any]] = [{"id": f"k{i}_{j:02d}", "p": "a" if j % 2 else "b", "v": i} for j in range(per)]
        rows.append({"id": "k0_01", "p": "a", "v": 100 + i})  # an update in the same batch
        t.upsert(rows)
        for r in rows:
            model[(r["p"], r["id"])] = r["v"]
    return model


def _got(t: lsm_lab.Table) -> dict[tuple[str, str], int]:
    return {(r["p"], r["id"]): r["v"] for r in t.read(columns=["id", "p", "v"]).to_pylist()}


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_inserts_fill_small_file_groups_instead_of_opening_new_ones(tmp_path: Path, table_type: str) -> None:
    counts = {}
    for limit in ("104857600", "0"):
        options: dict[str, Any] = {smallfiles.KEY_SMALL_FILE_LIMIT: limit}
        t = lsm_lab.create_table(tmp_path / f"t{limit}", name="t", record_key="id", partition_by="p",
                                 layout="default", table_type=table_type, **options)
        model = _write(t)
        assert _got(t) == model
        counts[limit] = len(t.latest_slices())
        last = t.instant_metadata(t.completed_writes()[-1])
        stats = [s for ss in last["partitionToWriteStats"].values() for s in ss]
        if limit != "0":
            # the write stats name the two small file groups that took the 20 new keys (10 per partition)
            assert sorted(s["numInserts"] for s in stats) == [10, 10]
            assert all(s["path"].endswith(".parquet") and ".log." not in s["path"] for s in stats)
            assert all(fs.base_file is not None and not fs.log_files for fs in t.latest_slices())
            assert all(len(g.slices) == 6 for g in t.file_groups())
    assert counts == {"104857600": 2, "0": 12}


def test_max_file_size_and_split_size_bound_the_packing(tmp_path: Path) -> None:
    options: dict[str, Any] = {smallfiles.KEY_INSERT_SPLIT: "15"}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default",
                             table_type="COPY_ON_WRITE", **options)
    t.insert([{"id": f"a{j:03d}", "v": j} for j in range(10)])
    fs, = t.latest_slices()
    assert fs.base_file is not None
    per_record = fs.base_file.size / 10
    # the first file may grow by 5 records' worth of bytes; the rest opens file groups of at most 15 records
    props = t.config.props
    assert isinstance(props, dict)  # the table's own settings, edited in memory (typed as a read-only Mapping)
    props[smallfiles.KEY_MAX_FILE_SIZE] = str(int(fs.base_file.size + 5.5 * per_record))
    t.insert([{"id": f"b{j:03d}", "v": j} for j in range(40)])
    frame = t.file_slices()
    records = dict(zip(frame["file_id"], (int(n) for n in frame["num_records"]), strict=True))
    assert records.pop(fs.file_id) == 15          # 10 + the 5 it had room for
    assert sorted(records.values()) == [5, 15, 15]  # 35 left: split 15 / 15 / 5
    assert len(t.read()) == 50


def test_bucket_index_inserts_go_to_their_bucket(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=2)
    model = _write(t)
    assert _got(t) == model
    assert len(t.latest_slices()) == 2  # one file group per bucket, whatever the small-file settings
    assert any(fs.log_files for fs in t.latest_slices())  # inserts into a bucket stay logs (no rewrite)


def test_mor_slices_with_logs_are_no_candidates(tmp_path: Path) -> None:
    options: dict[str, Any] = {smallfiles.KEY_SMALL_FILE_LIMIT: "0"}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default", **options)
    t.insert([{"id": "a", "v": 1}, {"id": "b", "v": 1}])
    t.upsert([{"id": "a", "v": 2}])  # a log on the only file group
    props = t.config.props
    assert isinstance(props, dict)  # the table's own settings, edited in memory (typed as a read-only Mapping)
    props[smallfiles.KEY_SMALL_FILE_LIMIT] = "104857600"
    t.insert([{"id": "c", "v": 3}])
    assert len(t.latest_slices()) == 2  # the slice with a log takes no inserts: a new file group opened
    assert _got_simple(t) == {"a": 2, "b": 1, "c": 3}


def _got_simple(t: lsm_lab.Table) -> dict[str, Any]:
    return {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(InputError, match="hoodie.parquet.max.file.size"):
        smallfiles.SmallFileConfig.from_props({smallfiles.KEY_MAX_FILE_SIZE: "big"})
    with pytest.raises(InputError, match="insert.split.size"):
        smallfiles.SmallFileConfig.from_props({smallfiles.KEY_INSERT_SPLIT: "0"})
    assert not smallfiles.SmallFileConfig.from_props({smallfiles.KEY_SMALL_FILE_LIMIT: "-1"}).enabled


# --------------------------------------------------------------------------- the dict model with tight limits
class SmallFileMachine(TableMachine):
    """test_table_model.py's machine, with files so small that inserts spread over several candidates."""

    extra_props = {smallfiles.KEY_MAX_FILE_SIZE: "9000",  # noqa: RUF012
                   smallfiles.KEY_MOR_CANDIDATES: "2", smallfiles.KEY_INSERT_SPLIT: "2"}


def _case(table_type: str) -> type[unittest.TestCase]:
    machine: type[SmallFileMachine] = type(f"SmallFiles_{table_type}", (SmallFileMachine,),
                                           {"table_type": table_type, "layout": "default"})
    case = machine.TestCase
    case.settings = settings(max_examples=10, stateful_step_count=8, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    return case


TestModelMor = _case("MERGE_ON_READ")
TestModelCow = _case("COPY_ON_WRITE")


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_delete_of_absent_keys_touches_no_small_file_group(tmp_path: Path, table_type: str) -> None:
    """Deletes are never packed: an absent key deletes nothing and writes no file (no useless delete log)."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default", table_type=table_type)
    t.insert([{"id": "a", "v": 1}, {"id": "b", "v": 2}])
    before = {(fs.file_id, fs.base_file.name if fs.base_file else None, len(fs.log_files))
              for fs in t.latest_slices()}
    t.delete(["zz"])
    assert int(t.timeline()["records_deleted"].iloc[-1]) == 0
    after = {(fs.file_id, fs.base_file.name if fs.base_file else None, len(fs.log_files))
             for fs in t.latest_slices()}
    assert after == before
    assert sorted(r["id"] for r in t.read(columns=["id"]).to_pylist()) == ["a", "b"]
    t.delete(["a", "zz"])     # a present key next to an absent one: only its own group is touched
    assert sorted(r["id"] for r in t.read(columns=["id"]).to_pylist()) == ["b"]
