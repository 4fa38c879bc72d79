"""The metadata table's index partitions lsm_lab writes: column_stats, partition_stats, record_index, secondary.

Keys and placement are checked against the shipped Hudi tables (each real cell's key recomputed from its
column, partition and file names; each cell found in the file group `mapRecordKeyToFileGroupIndex` names;
record-index and column-stats values re-encoded from the files give the real values).  Then, on version 8,
9 and 10 tables (COW and MOR; version 10: native HFile logs) with every partition on, after each step of inserts, upserts, deletes,
compaction, clustering, clean, a failed write and a rollback, `t.metadata_table()` agrees with the data:
column stats = each base file's own footer, partition stats bound every live file, record index = where
each key lives, secondary index = the rows with that value.  A Hypothesis test runs random operation
sequences against a dict model of the record index (versions 9 and 10), and hudi-rs reads the same rows from such a table.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_metadata_write import _failed_write, native_hfile_logs

import lsm_lab
from lsm_lab.errors import InputError
from lsm_lab.format import metadata_record as mr
from lsm_lab.format import naming
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available
from lsm_lab.services import mdt_index as mi
from lsm_lab.table.metadata_table import MetadataTable
from lsm_lab.timeline.config import read_config

REAL = ["v8_trips_8i3u1d", "v9_txns_simple_meta", "v9_txns_complex_meta", "v9_nonpartitioned_rollback"]


def _open(real_table: Callable[[str], Path], name: str) -> tuple[lsm_lab.Table, MetadataTable]:
    t = lsm_lab.open_table(real_table(name))
    m = t.metadata_table()
    assert m is not None
    return t, m


# ----------------------------------------------------------------------------------------- against Hudi's own
def test_hash_ids_and_java_hash() -> None:
    assert mi.xxh64(b"", 0) == 0xEF46DB3751D8E999 and mi.xxh64(b"a", 0) == 0xD24EC4F1A98C6E5B  # reference vectors
    assert mi.java_hash("") == 0 and mi.java_hash("hello") == 99162322 and mi.java_hash("polygenelubricants") == -2**31
    assert mi.file_group_index("polygenelubricants", 10) == 8  # Math.abs(MIN_VALUE) stays negative; % then abs
    assert mi.file_group_index("test_key", 10) == 8  # upstream TestHoodieTableMetadataUtil's expected value


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.text(max_size=30), max_size=50), n=st.integers(1, 40))
def test_vectorised_file_group_index_is_the_scalar_one(keys: list[str], n: int) -> None:
    import pyarrow as pa
    assert mi.file_group_indexes(pa.array(keys, pa.string()), n).tolist() == [mi.file_group_index(k, n) for k in keys]


@pytest.mark.parametrize("name", REAL)
def test_keys_are_upstreams(real_table: Callable[[str], Path], name: str) -> None:
    """Every column_stats / partition_stats key of a real table, recomputed from the names it indexes."""
    _, m = _open(real_table, name)
    where = {r["file_name"]: r["partition"] for r in m.files().to_pylist()}
    checked = 0
    for key, rec in m.records("column_stats").items():
        cs = rec.payload["ColumnStatsMetadata"]
        assert key == mi.column_stats_key(cs["columnName"], where[cs["fileName"]], cs["fileName"])
        checked += 1
    if "partition_stats" in m.partitions():
        for key, rec in m.records("partition_stats").items():
            cs = rec.payload["ColumnStatsMetadata"]
            part = "" if cs["fileName"] == mr.NON_PARTITIONED_KEY else cs["fileName"]
            assert key == mi.partition_stats_key(part, cs["columnName"])
            checked += 1
    assert checked >= 30


@pytest.mark.parametrize("name", REAL)
def test_cells_sit_in_upstreams_file_groups(real_table: Callable[[str], Path], name: str) -> None:
    """Each live cell is in the file group `mapRecordKeyToFileGroupIndex` gives (secondary index V2: the
    hash of the escaped value and `$`), and record-index values re-encoded give the real ones."""
    t, m = _open(real_table, name)
    version = mi.index_version(t.config)
    with m.mdt.pinned():
        completion, valid = m.mdt.completion_map(), m.valid_instants()
        for part in m.partitions():
            groups = {s.file_id for s in m.mdt.latest_slices(partitions=[part])}
            n = len({naming.parse(f).file_id for f in _names(m.mdt.path / part)})  # type: ignore[union-attr]
            spec = mi.spec_for(part, t.config, groups=n)
            for fs in m.mdt.latest_slices(partitions=[part]):
                for key, rec in m._merge_slice(fs, completion, valid).items():
                    if rec.deleted:
                        continue
                    assert spec.file_id(spec.group_of(key, index_version=version)) == fs.file_id, (part, key)
                    if rec.type == mr.TYPE_RECORD_INDEX:
                        info = rec.payload["recordIndexMetadata"]
                        part_name, file_id, millis = mr.record_location(info)
                        again = mr.decode_value(key, mi.record_index_value(part_name or "", file_id or "", millis or 0),
                                                mi.SCHEMA_TEXT).payload["recordIndexMetadata"]
                        assert {k: again[k] for k in ("partitionName", "fileIdHighBits", "fileIdLowBits", "fileIndex",
                                                      "instantTime")} == \
                            {k: info[k] for k in ("partitionName", "fileIdHighBits", "fileIdLowBits", "fileIndex",
                                                  "instantTime")}
            assert groups


def _names(folder: Any) -> list[str]:
    return [p.name for p in Path(str(folder)).iterdir() if naming.parse(p.name) is not None]


@pytest.mark.parametrize("name", ["v9_txns_simple_meta", "v9_txns_complex_meta"])
def test_column_stats_values_are_upstreams(real_table: Callable[[str], Path], name: str) -> None:
    """lsm_lab's footer statistics of a real base file, encoded and decoded, read as Hudi's own record."""
    t, m = _open(real_table, name)
    real = m.column_stats().to_pylist()
    by_file: dict[tuple[str, str], dict[str, Any]] = {}
    for r in real:
        by_file.setdefault((r["partition"], r["file_name"]), {})[r["column"]] = r
    compared = 0
    for (part, fname), cols in by_file.items():
        if not fname.endswith(".parquet"):
            continue
        path = t.path / part / fname if part else t.path / fname
        ours = mi.file_column_stats(path, fname, list(cols), mi.index_version(t.config))
        for s in ours:
            cells = mi.column_stats_cells(part, [s])
            (key, value), = cells.items()
            decoded = mr.decode_value(key, value, mi.SCHEMA_TEXT).payload["ColumnStatsMetadata"]
            got = {"min": mr.stat_text(decoded["minValue"])[0], "max": mr.stat_text(decoded["maxValue"])[0],
                   "null_count": decoded["nullCount"], "value_count": decoded["valueCount"],
                   "value_type": mr.stat_text(decoded["minValue"])[1]}
            want = {k: cols[s["columnName"]][k] for k in got}
            if want["value_type"] == "double" and want["min"] is not None:  # Parquet keeps -0.0, Hudi 0.0
                got["min"], want["min"] = float(got["min"] or 0), float(want["min"])
            assert got == want, (fname, s["columnName"])
            assert decoded["valueType"] == m.records("column_stats")[key].payload["ColumnStatsMetadata"]["valueType"]
            compared += 1
    assert compared >= 50


# ----------------------------------------------------------------------------------------- lsm_lab's tables
def _rows(ids: Any, ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": ts, "fare": fare + i,
             "merchant": None if i % 7 == 0 else f"m${i % 4}"} for i in ids]


def _make(path: Path, version: int, table_type: str, compact_every: int = 4) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                                table_type=table_type, layout="default", table_version=version,
                                properties={"hoodie.metadata.enable": "true",
                                            "hoodie.metadata.record.index.enable": "true",
                                            "hoodie.metadata.compact.max.delta.commits": str(compact_every)})


def check_indexes(path: Path) -> None:
    """Every partition lsm_lab writes agrees with the data (module docstring)."""
    t = lsm_lab.open_table(path)
    m = t.metadata_table()
    assert m is not None
    snap = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name", "merchant"]).to_pylist()
    # record index: where each key lives
    keys = sorted(r["_hoodie_record_key"] for r in snap)
    assert sorted(m.record_keys()) == keys
    index = {r["record_key"]: r for r in m.record_index(keys).to_pylist()}
    for r in snap:
        parsed = naming.parse(r["_hoodie_file_name"])
        file_id = parsed.file_id if parsed is not None else r["_hoodie_file_name"]
        assert (index[r["_hoodie_record_key"]]["partition"], index[r["_hoodie_record_key"]]["file_id"]) == \
            (r["_hoodie_partition_path"], file_id), r
    # secondary index: the rows with that value
    got = sorted((g["secondary_key"] or "", g["record_key"]) for g in m.secondary_index("merchant_idx").to_pylist())
    assert got == sorted((r["merchant"] or "", r["_hoodie_record_key"]) for r in snap)
    # column stats: each listed base file's own footer, for exactly the listed base files
    listed = {(r["partition"], r["file_name"]) for r in m.files().to_pylist()
              if (n := naming.parse(r["file_name"])) is not None and n.is_base}  # version 10 logs end in .parquet too
    stats = m.column_stats().to_pylist()
    assert {(s["partition"], s["file_name"]) for s in stats} == listed
    bounds: dict[tuple[str, str], list[Any]] = {}
    for s in stats:
        path_ = path / s["partition"] / s["file_name"] if s["partition"] else path / s["file_name"]
        md = pq.ParquetFile(path_).metadata
        col = md.schema.to_arrow_schema().get_field_index(s["column"])
        st_ = [md.row_group(i).column(col).statistics for i in range(md.num_row_groups)]
        assert s["value_count"] == md.num_rows and s["null_count"] == sum(x.null_count for x in st_), s
        mins = [x.min for x in st_ if x.has_min_max]
        if mins:
            lo, hi = min(mins), max(x.max for x in st_ if x.has_min_max)
            typed = type(lo)
            assert (typed(s["min"]), typed(s["max"])) == (lo, hi), s
            bounds.setdefault((s["partition"], s["column"]), []).append((lo, hi))
    # partition stats: a bound of every live file of the partition
    for p in m.partition_stats().to_pylist():
        for lo, hi in bounds.get((p["partition"], p["column"]), []):
            typed = type(lo)
            assert typed(p["min"]) <= lo and typed(p["max"]) >= hi, p


@pytest.mark.parametrize(("version", "table_type"), [(8, "MERGE_ON_READ"), (9, "COPY_ON_WRITE"), (9, "MERGE_ON_READ"),
                                                     (8, "COPY_ON_WRITE"), (10, "MERGE_ON_READ"), (10, "COPY_ON_WRITE")])
def test_every_index_follows_every_step(tmp_path: Path, version: int, table_type: str) -> None:
    path = tmp_path / "t"
    t = _make(path, version, table_type)
    t.insert(_rows(range(30), 1, 10.0))
    assert t.create_index("merchant_idx", "merchant") == "secondary_index_merchant_idx"
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("upsert", lambda: t.upsert(_rows(range(0, 40, 4), 5, 100.0))),
        ("delete", lambda: t.delete([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3]} for i in (1, 7)])),
        ("compact", lambda: t.compact(strategy="full") if t.config.is_mor else None),
        ("cluster", lambda: t.cluster()),
        ("upsert again", lambda: t.upsert(_rows(range(3, 45, 6), 9, 7.0))),
        ("clean", lambda: t.clean(retained=1)),
        ("failed write", lambda: _failed_write(t, _rows(range(0, 30, 3), 30, 99.0))),
        ("upsert after", lambda: t.upsert(_rows(range(0, 12, 2), 12, -1.0))),
        ("rollback latest", lambda: t.rollback()),
        ("insert more", lambda: t.insert(_rows(range(50, 60), 13, 0.0))),
    ]
    for step, run in steps:
        run()
        t = lsm_lab.open_table(path)
        if t.metadata_table() is None:  # a rollback of a compacted MDT instant: rebuilt by the next write
            continue
        try:
            check_indexes(path)
        except AssertionError as exc:
            raise AssertionError(f"after {step}: {exc}") from exc
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    assert m.partitions() == ["column_stats", "files", "partition_stats", "record_index",
                              "secondary_index_merchant_idx"]
    assert any(i.action == "compaction" for i in m.mdt.instants())
    # index definitions as the shipped tables hold them (version 8: no `version` field, no record_index entry)
    defs = mi.index_definitions(path)
    assert defs["secondary_index_merchant_idx"]["sourceFields"] == ["merchant"]
    assert defs["column_stats"]["sourceFields"] == [*mi.META_INDEXED, "id", "city", "ts", "fare", "merchant"]
    assert ("version" in defs["column_stats"]) == ("record_index" in defs) == (version >= 9)
    assert {r["partition"]: r["file_groups"] for r in m.summary().to_pylist()} == {
        "column_stats": 2, "files": 1, "partition_stats": 1, "record_index": 10, "secondary_index_merchant_idx": 10}
    if version == 10:  # upstream's native HFile logs in every partition (hudi-rs 0.5 refuses version 10)
        native_hfile_logs(path)
    elif hudi_available():
        import hudi
        import pyarrow as pa
        table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "true").build()
        theirs = pa.Table.from_batches(table.read(hudi.HudiReadOptions()))
        assert compare_rows(lsm_lab.open_table(path).read(), theirs, ["id"], columns=["id", "city", "ts", "fare"]) == []


def test_index_type_record_index_and_flags(tmp_path: Path) -> None:
    """`hoodie.index.type=RECORD_INDEX` turns the record index on; the stats flags turn theirs off."""
    t = lsm_lab.create_table(tmp_path / "t", name="x", record_key="id", ordering_field="ts", layout="default",
                             table_version=9, properties={"hoodie.metadata.enable": "true",
                                                          "hoodie.index.type": "RECORD_INDEX",
                                                          "hoodie.metadata.index.column.stats.enable": "false",
                                                          "hoodie.metadata.index.partition.stats.enable": "false"})
    t.insert([{"id": f"k{i}", "ts": 1} for i in range(5)])
    m = lsm_lab.open_table(tmp_path / "t").metadata_table()
    assert m is not None and m.partitions() == ["files", "record_index"]
    assert sorted(m.record_keys()) == [f"k{i}" for i in range(5)]
    assert set(m.record_index(["k1"]).column("partition").to_pylist()) == {""}


def test_create_index_bad_input(tmp_path: Path) -> None:
    plain = lsm_lab.create_table(tmp_path / "p", name="x", record_key="id", layout="default", table_version=9)
    plain.insert([{"id": "a", "v": 1}])
    with pytest.raises(InputError, match="metadata.enable"):
        plain.create_index("v_idx", "v")
    t = _make(tmp_path / "t", 9, "COPY_ON_WRITE")
    t.insert(_rows(range(3), 1, 0.0))
    with pytest.raises(InputError, match="no column"):
        t.create_index("x_idx", "nope")
    t.create_index("m", "merchant")
    with pytest.raises(InputError, match="already"):
        t.create_index("m", "merchant")
    with pytest.raises(InputError, match="bad index name"):
        t.create_index("a-b", "merchant")
    assert read_config(tmp_path / "t").props[mi.PROP_INDEX_DEFS] == ".hoodie/.index_defs/index.json"


# ----------------------------------------------------------------------------------------- a model
_OPS = st.lists(st.tuples(st.sampled_from(["insert", "upsert", "delete", "compact", "clean"]),
                          st.sets(st.integers(0, 24), min_size=1, max_size=8)), min_size=1, max_size=5)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, mor=st.booleans(), version=st.sampled_from([9, 10]))
def test_record_index_against_a_dict_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, set[int]]],
                                           mor: bool, version: int) -> None:
    path = tmp_path_factory.mktemp("ri") / "t"
    t = lsm_lab.create_table(path, name="x", record_key="id", ordering_field="ts", partition_by="p", layout="default",
                             table_type="MERGE_ON_READ" if mor else "COPY_ON_WRITE", table_version=version,
                             properties={"hoodie.metadata.enable": "true", "hoodie.metadata.record.index.enable": "true",
                                         "hoodie.metadata.compact.max.delta.commits": "2"})
    model: dict[str, str] = {}
    for step, (op, ids) in enumerate(ops):
        rows: list[dict[str, Any]] = [{"id": f"k{i:02d}", "p": f"p{i % 3}", "ts": step} for i in sorted(ids)]
        if op in ("insert", "upsert"):
            batch = rows if op == "upsert" else [r for r in rows if r["id"] not in model]
            if not batch:
                continue
            getattr(t, op)(batch)
            model.update({r["id"]: r["p"] for r in rows})
        elif op == "delete":
            t.delete([{"id": r["id"], "p": r["p"]} for r in rows])
            for r in rows:
                model.pop(r["id"], None)
        elif op == "compact" and mor:
            t.compact(strategy="full")
        elif op == "clean":
            t.clean(retained=1)
        t = lsm_lab.open_table(path)
        m = t.metadata_table()
        if m is None:
            continue
        got = {r["record_key"]: r["partition"].split("=")[-1]  # "p=p0" on a hive-style table
               for r in m.record_index([*sorted(model), "k99"]).to_pylist()}
        assert got == model and sorted(m.record_keys()) == sorted(model)


def test_cli_create_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main as cli_main
    t = _make(tmp_path / "t", 8, "MERGE_ON_READ")
    t.insert(_rows(range(10), 1, 0.0))
    assert cli_main(["create-index", str(tmp_path / "t"), "merchant_idx", "merchant"]) == 0
    assert "secondary_index_merchant_idx" in capsys.readouterr().out
    assert cli_main(["show", "metadata", str(tmp_path / "t"), "--partition", "secondary_index_merchant_idx",
                     "--json"]) == 0
    assert "id003" in capsys.readouterr().out
    check_indexes(tmp_path / "t")


_CRASH = """
import os, signal, sys
import lsm_lab
from lsm_lab.services import mdt_write
real = mdt_write.update
def die(*a, **kw):
    real(*a, **kw)
    os.kill(os.getpid(), signal.SIGKILL)   # after the MDT deltacommit (every partition), before the data commit
mdt_write.update = die
t = lsm_lab.open_table(sys.argv[1])
t.upsert([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": 50, "fare": -9.0, "merchant": "z"}
          for i in list(range(0, 30, 2)) + list(range(100, 110))])
"""


@pytest.mark.parametrize(("version", "table_type"), [(9, "COPY_ON_WRITE"), (9, "MERGE_ON_READ"), (10, "MERGE_ON_READ")])
def test_sigkill_after_the_mdt_deltacommit_leaves_every_index_right(tmp_path: Path, version: int, table_type: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[1]
    path = tmp_path / "t"
    t = _make(path, version, table_type, compact_every=100)
    t.insert(_rows(range(30), 1, 10.0))
    t.create_index("merchant_idx", "merchant")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path)], env=env, capture_output=True, timeout=180)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    t = lsm_lab.open_table(path)
    assert [i for i in t.instants() if not i.is_completed]  # the data commit never happened
    check_indexes(path)  # the pending instant's MDT blocks are not valid: every index as before
    t.upsert(_rows(range(3), 60, 0.0))  # the next writer rolls the dead one back, in both tables
    check_indexes(path)
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and any(i.action == "rollback" for i in m.mdt.instants())
