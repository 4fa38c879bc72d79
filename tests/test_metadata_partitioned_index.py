"""The partitioned record index (upstream 1.1, issue 32): written in upstream's layout, kept by every write, used.

Upstream 1.1's partition-scoped record index (`hoodie.metadata.record.level.index.enable=true`, its index
definition's `isPartitioned` option, tagged with `hoodie.index.type=RECORD_LEVEL_INDEX`) keeps a key once per
data partition, sharded among its partition's own MDT file groups
`record-index-<PartitionPathEncodeUtils.escapeFileName(partition)>-NNNN-0`.  Checked here:

* the file-group names against upstream's own examples (`TestHoodieTableMetadataUtil`: "record-index-test-0012-0";
  `TestPartitionPathEncodeUtils`) and a round trip of any partition text;
* against a dict model of (partition, key) → file group, over random inserts, upserts, deletes, MDT compactions
  and cleans of a table whose keys repeat across partitions (COW and MOR, table versions 8, 9 and 10): the index
  equals the model after every step, and no upsert reads a file group's keys (tagged from the index);
* lookups and filtered reads through it equal their unindexed forms and skip slices;
* a SIGKILL after the MDT deltacommit (a new partition's file groups in it) leaves the index as before, and the
  next writer's rollback keeps it right;
* the hazard of a GLOBAL record index under `RECORD_LEVEL_INDEX` (keys repeating across partitions): the
  upsert must not tag from it (a row of a second partition would be written again) — it reads the keys, and the
  table equals the dict model; no lookup goes through it either (it would lose a second partition's row);
  switching the table to the partitioned index rebuilds it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.filegroup import write as fg_write
from lsm_lab.format import metadata_record as mr
from lsm_lab.format import naming
from lsm_lab.services import mdt_index as mi
from lsm_lab.services import mdt_maintained
from lsm_lab.table import mdt_listing, mdt_use
from lsm_lab.table.lookup import LookupStats
from lsm_lab.timeline.config import TableConfig

KEY, PART = "_hoodie_record_key", "_hoodie_partition_path"
PARTITIONED = {"hoodie.metadata.enable": "true", "hoodie.metadata.record.level.index.enable": "true",
               "hoodie.index.type": "RECORD_LEVEL_INDEX", "hoodie.parquet.small.file.limit": "0"}


# ----------------------------------------------------------------------------------------- names
def test_file_group_names_are_upstreams() -> None:
    # TestHoodieTableMetadataUtil.testGetFileGroupIndexFromFileId
    assert mi.partitioned_file_id("test", 12) == "record-index-test-0012-0"
    # PartitionPathEncodeUtils.escapeFileName: '=' '/' '_' '-' escaped, upper-case hex (TestPartitionPathEncodeUtils:
    # "date=2024.01.01" → "date%3D2024.01.01"; dots are refused here, see below)
    assert mi.escape_file_name("city=sf") == "city%3Dsf"
    assert mi.partitioned_file_id("year=2024/month=01", 0) == "record-index-year%3D2024%2Fmonth%3D01-0000-0"
    assert mi.partitioned_file_id("a_b-c#d", 3) == "record-index-a%5Fb%2Dc%23d-0003-0"
    assert mi.partitioned_file_id("", 0) == "record-index--0000-0"  # a non-partitioned table's ""
    assert mi.partition_of_file_id("record-index-city%3Dsf-0002-0") == ("city=sf", 2)
    for global_id in ("record-index-0003-0", "files-0000-0", "secondary-index-idx-0000-0"):
        assert mi.partition_of_file_id(global_id) is None  # upstream verifyRLIFile: four '-' only when partitioned
    with pytest.raises(UnsupportedFeatureError, match="19750"):
        mi.partitioned_file_id("fare.currency=USD", 0)


@given(st.text(st.characters(blacklist_characters=".", blacklist_categories=["Cs"]), max_size=20),
       st.integers(0, 9999))
def test_file_group_names_round_trip(partition: str, i: int) -> None:
    fid = mi.partitioned_file_id(partition, i)
    assert mi.partition_of_file_id(fid) == (partition, i) and fid.count("-") == 4
    parsed = naming.parse(f"{fid}_0-0-0_00000000000000001.hfile")
    assert parsed is not None and parsed.file_id == fid


def _config(**props: str) -> TableConfig:
    return TableConfig(name="t", table_type="COPY_ON_WRITE", version=9, record_key=("id",), props=props)


def test_file_group_counts_are_upstreams() -> None:
    cfg = _config()
    assert mi.estimate_partition_groups(10, cfg) == 1 and mi.new_partition_groups(cfg) == 1  # defaults 1 .. 10
    assert mi.estimate_partition_groups(10**9, cfg) == 10  # ceil(1e9 × 2) // (1 GiB // 48) = 89 → max 10
    assert mi.estimate_partition_groups(30_000_000, cfg) == 2
    pinned = _config(**{mi.PROP_PRI_MIN_GROUPS: "3", mi.PROP_PRI_MAX_GROUPS: "3"})
    assert mi.estimate_partition_groups(0, pinned) == 3 == mi.new_partition_groups(pinned)
    alias = _config(**{"hoodie.metadata.partitioned.record.index.min.filegroup.count": "2"})
    assert mi.new_partition_groups(alias) == 2


# ----------------------------------------------------------------------------------------- the model
def _locations(t: lsm_lab.Table) -> dict[tuple[str, str], str]:
    got = t.read(columns=[KEY, PART, "_hoodie_file_name"])
    out = {}
    for k, p, name in zip(*(got.column(n).to_pylist() for n in (KEY, PART, "_hoodie_file_name")), strict=True):
        parsed = naming.parse(name)
        assert parsed is not None
        assert (p, k) not in out, f"duplicate row of {(p, k)}"
        out[(p, k)] = parsed.file_id
    return out


def check_index(path: Path) -> dict[tuple[str, str], str]:
    """The partitioned record index equals where each (partition, key) lives; returns that map."""
    t = lsm_lab.open_table(path)
    where = _locations(t)
    m = t.metadata_table()
    assert m is not None and m.record_index_partitioned()
    loc = m.record_index([*sorted({k for _, k in where}), "nope"])
    got = {(p, k): f for k, p, f in zip(*(loc.column(n).to_pylist() for n in ("record_key", "partition", "file_id")),
                                       strict=True)}
    assert got == where
    assert m.record_keys() == sorted(k for _, k in where)
    for fs in m.mdt.latest_slices(partitions=["record_index"]):  # every file group in upstream's layout
        assert mi.partition_of_file_id(fs.file_id) is not None, fs.file_id
    return where


def _make(path: Path, version: int, table_type: str, **extra: str) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                                layout="default", table_type=table_type, table_version=version,
                                properties={**PARTITIONED, **extra})


def _rows(ids: Any, city: str, ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": city, "ts": ts, "fare": fare + i} for i in ids]


_CITIES = ("sf", "nyc", "la_x")  # "la_x": an escaped '_' in the file-group name
_OPS = st.lists(st.tuples(st.sampled_from(["insert", "upsert", "upsert", "delete", "compact", "clean"]),
                          st.sets(st.tuples(st.integers(0, 11), st.sampled_from(_CITIES)), min_size=1, max_size=8)),
                min_size=1, max_size=5)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, mor=st.booleans(), version=st.sampled_from([8, 9, 10]))
def test_partitioned_index_against_a_dict_model(tmp_path_factory: pytest.TempPathFactory,
                                                ops: list[tuple[str, set[tuple[int, str]]]], mor: bool,
                                                version: int) -> None:
    path = tmp_path_factory.mktemp("pri") / "t"
    t = _make(path, version, "MERGE_ON_READ" if mor else "COPY_ON_WRITE",
              **{"hoodie.metadata.compact.max.delta.commits": "2"})
    model: dict[tuple[str, str], float] = {}
    for step, (op, pairs) in enumerate(ops):
        rows: list[dict[str, Any]] = [{"id": f"id{i:03d}", "city": c, "ts": step + 1, "fare": float(step * 100 + i)}
                                      for i, c in sorted(pairs)]
        if op in ("insert", "upsert"):
            batch = rows if op == "upsert" else [r for r in rows if (f"city={r['city']}", r["id"]) not in model]
            if not batch:
                continue
            with mock.patch.object(fg_write, "_existing_hits", side_effect=AssertionError("keys read")) \
                    if model and op == "upsert" else contextlib.nullcontext():
                getattr(t, op)(batch)
            model.update({(f"city={r['city']}", r["id"]): r["fare"] for r in batch})
        elif op == "delete":
            t.delete([{"id": r["id"], "city": r["city"]} for r in rows])
            for r in rows:
                model.pop((f"city={r['city']}", r["id"]), None)
        elif op == "compact" and mor:
            t.compact(strategy="full")
        elif op == "clean":
            t.clean(retained=1)
        t = lsm_lab.open_table(path)
        if t.metadata_table() is None:
            continue
        assert set(check_index(path)) == set(model)
        got = t.read(columns=[PART, "id", "fare"])
        assert dict(zip(zip(got.column(PART).to_pylist(), got.column("id").to_pylist(), strict=True),
                        got.column("fare").to_pylist(), strict=True)) == model


def test_lookup_read_and_compaction_of_the_mdt(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE", **{"hoodie.metadata.compact.max.delta.commits": "2",
                                                     mi.PROP_PRI_MIN_GROUPS: "2", mi.PROP_PRI_MAX_GROUPS: "2"})
    t.insert(_rows(range(12), "sf", 1, 0.0) + _rows(range(6), "nyc", 1, 100.0))  # id000..id005 in both
    t.insert(_rows(range(12, 20), "nyc", 2, 200.0))
    t = lsm_lab.open_table(t.path)
    where = check_index(path)
    m = t.metadata_table()
    assert m is not None
    groups = sorted(fs.file_id for fs in m.mdt.latest_slices(partitions=["record_index"]))
    assert groups == ["record-index-city%3Dnyc-0000-0", "record-index-city%3Dnyc-0001-0",
                      "record-index-city%3Dsf-0000-0", "record-index-city%3Dsf-0001-0"]
    for fs in m.mdt.latest_slices(partitions=["record_index"]):  # each key in its own partition's hashed group
        part, i = mi.partition_of_file_id(fs.file_id) or ("", -1)
        for key in mdt_listing.merge_slice(fs, m.mdt.completion_map(), m.valid_instants()):
            assert (part, key) in where and mi.file_group_index(key, 2) == i
    few = ["id003", "id015"]
    a = t.lookup(few, columns=["id", "city", "fare"]).sort_by([("city", "ascending"), ("id", "ascending")])
    b = t.lookup(few, columns=["id", "city", "fare"], indexes=False).sort_by([("city", "ascending"),
                                                                               ("id", "ascending")])
    assert a.equals(b) and a.num_rows == 3
    stats = LookupStats()
    assert t.lookup(["id015"], stats=stats).column("fare").to_pylist() == [215.0]
    assert stats.slices_pruned_record_index == len(t.latest_slices()) - 1 > 0
    flt = [(KEY, "in", few)]
    assert t.read(filter=flt, columns=["id", "city", "fare"]).sort_by("fare").equals(
        t.read(filter=flt, columns=["id", "city", "fare"], indexes=False).sort_by("fare"))
    for step in range(3):  # MDT compactions (every 2 deltacommits): each file group rewritten on its own
        t.upsert(_rows([1, 4, step], "nyc", 5 + step, 900.0) + _rows([4], "sf", 5 + step, 800.0))
        check_index(path)
    m = lsm_lab.open_table(t.path).metadata_table()
    assert m is not None and any(i.action == "compaction" and i.is_completed for i in m.mdt.instants())  # compacted
    assert sorted(fs.file_id for fs in m.mdt.latest_slices(partitions=["record_index"])) == groups
    defs = mi.index_definitions(t.path)
    assert defs["record_index"]["indexOptions"] == {"isPartitioned": "true"}


# ----------------------------------------------------------------------------------------- the hazard
def test_record_level_index_type_never_tags_from_a_global_index(tmp_path: Path) -> None:
    """A GLOBAL record index (one location per key) on a table of `RECORD_LEVEL_INDEX` whose keys repeat across
    partitions: tagged from it, the upsert of a key in the partition the index does not name would write the row
    again (a duplicate).  The writer reads the keys instead (upstream's SIMPLE fallback)."""
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                             layout="default", table_type="COPY_ON_WRITE", table_version=9,
                             properties={"hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true",
                                         "hoodie.index.type": "RECORD_LEVEL_INDEX",
                                         "hoodie.parquet.small.file.limit": "0"})
    t.insert(_rows(range(4), "sf", 1, 0.0))
    t.insert(_rows(range(4), "nyc", 1, 100.0))  # the same keys: the global index now names nyc for them
    model = {(f"city={r['city']}", r["id"]): r["fare"] for r in _rows(range(4), "sf", 1, 0.0) + _rows(range(4), "nyc", 1, 100.0)}
    t = lsm_lab.open_table(t.path)
    m = t.metadata_table()
    assert m is not None and not m.record_index_partitioned()
    # nor does a read: the global index names one partition of id001, a lookup through it lost the other's row
    assert t.lookup(["id001"]).num_rows == 2 == t.read(filter=[(KEY, "=", "id001")]).num_rows
    for city, fare in (("sf", 500.0), ("nyc", 600.0)):
        batch = _rows([1, 2], city, 5, fare)
        t.upsert(batch)
        model.update({(f"city={r['city']}", r["id"]): r["fare"] for r in batch})
        t = lsm_lab.open_table(t.path)
        got = t.read(columns=[PART, "id", "fare"])
        rows = list(zip(got.column(PART).to_pylist(), got.column("id").to_pylist(), got.column("fare").to_pylist(),
                        strict=True))
        assert len(rows) == len(model), "a key written again in the partition the global index does not name"
        assert {(p, k): f for p, k, f in rows} == model
    # switching the table to the partitioned index: the next write builds it again, in upstream's layout
    with open(path / ".hoodie" / "hoodie.properties", "a") as f:
        f.write("hoodie.metadata.record.level.index.enable=true\n")
    t = lsm_lab.open_table(t.path)
    t.upsert(_rows([3], "sf", 7, 700.0))
    model[("city=sf", "id003")] = 703.0
    assert set(check_index(path)) == set(model)
    with mock.patch.object(fg_write, "_existing_hits", side_effect=AssertionError("keys read")):
        lsm_lab.open_table(t.path).upsert(_rows([0], "nyc", 8, 800.0))  # now tagged from the partitioned index
    model[("city=nyc", "id000")] = 800.0
    assert set(check_index(path)) == set(model)


def test_a_global_type_never_tags_from_a_partitioned_index(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE")
    t.insert(_rows(range(3), "sf", 1, 0.0) + _rows(range(3), "nyc", 1, 10.0))
    t = lsm_lab.open_table(t.path)
    maintained = mdt_maintained.maintained_partitions(t.config)
    assert mdt_use.record_index_locator(t, maintained) is not None
    with open(path / ".hoodie" / "hoodie.properties", "a") as f:
        f.write("hoodie.index.type=GLOBAL_RECORD_LEVEL_INDEX\n")
    t = lsm_lab.open_table(t.path)
    assert mdt_use.record_index_locator(t, mdt_maintained.maintained_partitions(t.config)) is None


# ----------------------------------------------------------------------------------------- a crash
_CRASH = """
import os, signal, sys
import lsm_lab
from lsm_lab.services import mdt_write
real = mdt_write.update
def die(*a, **kw):
    real(*a, **kw)
    os.kill(os.getpid(), signal.SIGKILL)   # after the MDT deltacommit, before the data commit
mdt_write.update = die
t = lsm_lab.open_table(sys.argv[1])
t.upsert([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": 50, "fare": -9.0}
          for i in list(range(0, 12, 2)) + list(range(100, 106))])
"""


@pytest.mark.parametrize(("version", "table_type"), [(9, "COPY_ON_WRITE"), (10, "MERGE_ON_READ")])
def test_sigkill_after_the_mdt_deltacommit_leaves_the_partitioned_index_right(tmp_path: Path, version: int,
                                                                              table_type: str) -> None:
    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "t"
    t = _make(path, version, table_type)
    t.insert(_rows(range(12), "sf", 1, 0.0) + _rows(range(6), "nyc", 1, 100.0))
    before = check_index(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path)], env=env, capture_output=True, timeout=180)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    t = lsm_lab.open_table(path)
    assert [i for i in t.instants() if not i.is_completed]  # the data commit never happened
    m = t.metadata_table()
    assert m is not None and any("chennai" in fs.file_id for fs in m.mdt.latest_slices(partitions=["record_index"]))
    assert check_index(path) == before  # its MDT blocks (and a new partition's groups) are not valid yet
    t.upsert(_rows(range(3), "chennai", 60, 0.0))  # the next writer rolls the dead one back, in both tables
    after = check_index(path)
    assert set(after) == set(before) | {("city=chennai", f"id{i:03d}") for i in range(3)}
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and any(i.action == "rollback" for i in m.mdt.instants())


def test_the_value_of_a_cell_names_its_partition(tmp_path: Path) -> None:
    t = _make(tmp_path / "t", 9, "COPY_ON_WRITE")
    t.insert(_rows(range(3), "sf", 1, 0.0) + _rows(range(3), "nyc", 1, 10.0))
    m = lsm_lab.open_table(t.path).metadata_table()
    assert m is not None
    for fs in m.mdt.latest_slices(partitions=["record_index"]):
        part = (mi.partition_of_file_id(fs.file_id) or ("?", 0))[0]
        cells = mdt_listing.merge_slice(fs, m.mdt.completion_map(), m.valid_instants())
        assert cells and all(mr.record_location(v.payload["recordIndexMetadata"])[0] == part for v in cells.values())
    assert pc.count_distinct(lsm_lab.open_table(t.path).read(columns=[KEY]).column(0)).as_py() == 3


def test_cli_show_metadata_counts_every_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main as cli_main
    t = _make(tmp_path / "t", 9, "COPY_ON_WRITE")
    t.insert(_rows(range(3), "sf", 1, 0.0) + _rows(range(3), "nyc", 1, 10.0))
    m = lsm_lab.open_table(t.path).metadata_table()
    assert m is not None
    summary = {r["partition"]: r for r in m.summary().to_pylist()}
    assert summary["record_index"]["records"] == 6 and summary["record_index"]["file_groups"] == 2
    assert cli_main(["show", "metadata", str(tmp_path / "t"), "--json"]) == 0
    assert "record_index" in capsys.readouterr().out
    assert cli_main(["show", "metadata", str(tmp_path / "t"), "--partition", "record_index", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.count('"id001"') == 2 and "city=sf" in out and "city=nyc" in out  # one row per partition


def test_a_partition_with_a_dot_is_refused_and_the_table_stays_readable(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="v", record_key="id", ordering_field="ts", partition_by="ver",
                             layout="default", table_type="COPY_ON_WRITE", table_version=9, properties=PARTITIONED)
    t.insert([{"id": "a", "ver": "v1", "ts": 1}])
    with pytest.raises(UnsupportedFeatureError, match="record_index.*'ver=1.2'.*19750"):
        lsm_lab.open_table(t.path).insert([{"id": "b", "ver": "1.2", "ts": 2}])
    t = lsm_lab.open_table(t.path)
    assert t.read(columns=["id"]).column(0).to_pylist() == ["a"]
    t.insert([{"id": "c", "ver": "v2", "ts": 3}])  # the failed write rolled back: the next one goes on
    assert sorted(lsm_lab.open_table(t.path).read(columns=["id"]).column(0).to_pylist()) == ["a", "c"]
    check_index(tmp_path / "t")


@pytest.mark.parametrize("partitioned", [True, False])
def test_clustering_and_insert_overwrite(tmp_path: Path, partitioned: bool) -> None:
    """A clustering moves keys (new files, same partition); an insert_overwrite's replaced file groups' keys leave
    the index unless it writes them again (before, the global index kept them too)."""
    path = tmp_path / "t"
    props = {} if partitioned else {mi.PROP_PARTITIONED_RI: "false", "hoodie.metadata.record.index.enable": "true",
                                    "hoodie.index.type": "SIMPLE"}
    _make(path, 9, "MERGE_ON_READ", **props)
    for k in range(3):
        lsm_lab.open_table(path).insert(_rows(range(k * 5, k * 5 + 5), "sf", 1, 0.0) +
                                        _rows(range(k * 5 + 100, k * 5 + 105), "nyc", 1, 0.0))
    lsm_lab.open_table(path).upsert(_rows(range(0, 15, 2), "sf", 2, 5.0))
    lsm_lab.open_table(path).cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": str(10**9)})
    assert len(_locations(lsm_lab.open_table(path))) == 30

    def keys_match() -> None:
        t = lsm_lab.open_table(path)
        where = _locations(t)
        if partitioned:
            check_index(path)
        m = t.metadata_table()
        assert m is not None and m.record_keys() == sorted(k for _, k in where)

    keys_match()
    lsm_lab.open_table(path).insert_overwrite(_rows(range(3), "sf", 3, 1.0) + _rows([7], "sf", 3, 1.0))
    keys_match()
    assert len(_locations(lsm_lab.open_table(path))) == 19
    lsm_lab.open_table(path).clean(retained=1)
    keys_match()
