"""Real Apache Hudi tables (../shared/hudi-tables) read by lsm_lab exactly as hudi-rs reads them.

Every table is unpacked into its own folder named after its zip (two zips both
hold a `v6_nonpartitioned/`). For each one: the snapshot, a time-travel read at
every completed write's instant time (as a Hudi user passes it: Spark's `as.of.instant`,
hudi-rs's `with_as_of_timestamp`), an incremental read between every pair of completed
writes and the read-optimized read must give the same rows as the `hudi` package
(hudi-rs), compared by record key on the columns both readers return. The zips ship in data/hudi-tables, so a missing one fails the test;
only the hudi-rs comparisons skip when the `hudi` package is absent.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_incremental, hudi_rs_read, unpack_tables

TABLES = (
    "qs_mor_avro_v6_trips_8i1u",
    "qs_mor_avro_v6_trips_8i3d",
    "qs_mor_avro_v8_trips_8i3u1d",
    "s_cow_v6_nonpartitioned",
    "s_cow_v6_simplekeygen_nonhivestyle",
    "s_cow_v8_complexkeygen_hivestyle",
    "s_cow_v8_empty",
    "s_cow_v9_txns_nonpart_nometa",
    "s_cow_v9_txns_simple_meta",
    "s_mor_avro_v9_nonpartitioned_rollback",
    "s_mor_avro_v9_txns_complex_meta",
    "s_mor_avro_v9_txns_simple_nometa",
    "s_mor_parquet_v6_nonpartitioned",
    "s_mor_parquet_v6_simplekeygen_hivestyle_no_metafields",
)

needs_hudi = pytest.mark.skipif(not hudi_available(), reason="the hudi package (hudi-rs) is not installed")


@pytest.fixture(scope="session")
def real_tables(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    zips = shared_dir / "hudi-tables"
    if not zips.is_dir():
        pytest.fail(f"no {zips}: the real Hudi tables ship with the repository")
    return unpack_tables(zips, tmp_path_factory.mktemp("real-hudi-tables"))


def _table(real_tables: dict[str, Path], stem: str) -> Path:
    if stem not in real_tables:
        pytest.fail(f"no {stem}.zip in data/hudi-tables: a test names a table the repository does not ship")
    return real_tables[stem]


def test_every_expected_table_is_there(real_tables: dict[str, Path]) -> None:
    assert set(TABLES) == set(real_tables)  # every shipped table is compared


@needs_hudi
@pytest.mark.parametrize("stem", TABLES)
def test_snapshot_equals_hudi_rs(real_tables: dict[str, Path], stem: str) -> None:
    path = _table(real_tables, stem)
    table = lsm_lab.open_table(path)
    mine, theirs = table.read(), hudi_rs_read(path)
    assert mine.num_rows == theirs.num_rows
    assert compare_rows(mine, theirs, table.config.record_key) == []
    if theirs.num_rows:
        # hudi-rs returns the meta columns only when the table populates them; lsm_lab always does
        assert set(theirs.column_names) <= set(mine.column_names)


@needs_hudi
@pytest.mark.parametrize("stem", TABLES)
def test_time_travel_equals_hudi_rs_at_every_instant(real_tables: dict[str, Path], stem: str) -> None:
    """Time travel to the instant time of every completed write equals hudi-rs's `with_as_of_timestamp`."""
    path = _table(real_tables, stem)
    table = lsm_lab.open_table(path)
    for inst in table.completed_writes():
        mine = table.read(as_of=inst.begin_time)
        theirs = hudi_rs_read(path, as_of=inst.begin_time)
        assert mine.num_rows == theirs.num_rows, f"as of {inst.begin_time} ({inst})"
        assert compare_rows(mine, theirs, table.config.record_key) == [], f"as of {inst.begin_time} ({inst})"


@needs_hudi
@pytest.mark.parametrize("stem", TABLES)
def test_read_optimized_equals_hudi_rs(real_tables: dict[str, Path], stem: str) -> None:
    path = _table(real_tables, stem)
    table = lsm_lab.open_table(path)
    assert compare_rows(table.read_optimized(), hudi_rs_read(path, read_optimized=True),
                        table.config.record_key) == []


@needs_hudi
@pytest.mark.parametrize("stem", TABLES)
def test_incremental_reads_equal_hudi_rs(real_tables: dict[str, Path], stem: str) -> None:
    """Records written by the instants completed in (start, end], for every pair of completed writes."""
    path = _table(real_tables, stem)
    table = lsm_lab.open_table(path)
    writes = table.completed_writes()
    for start, end in itertools.combinations(writes, 2):
        assert start.completion_time is not None
        mine = table.read_incremental(start.completion_time, end.completion_time)
        theirs = hudi_rs_incremental(path, start.completion_time, end.completion_time)
        assert mine.num_rows == theirs.num_rows, f"({start}, {end}]"
        assert compare_rows(mine, theirs, table.config.record_key) == [], f"({start}, {end}]"


@needs_hudi
def test_cli_compare(real_tables: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_table(real_tables, "qs_mor_avro_v8_trips_8i3u1d"))
    assert cli_main(["interop", "compare", path]) == 0
    assert cli_main(["interop", "compare", path, "--read-optimized"]) == 0
    assert "equal" in capsys.readouterr().out


def test_what_the_tables_hold(real_tables: dict[str, Path]) -> None:
    """The features the issue lists are really exercised (versions, types, log blocks, keys, layouts)."""
    facts = {}
    for stem in TABLES:
        t = lsm_lab.open_table(_table(real_tables, stem))
        facts[stem] = t.config
    assert {c.version for c in facts.values()} == {6, 8, 9}
    assert {c.table_type for c in facts.values()} == {"COPY_ON_WRITE", "MERGE_ON_READ"}
    assert facts["s_cow_v8_complexkeygen_hivestyle"].keygen_type == "COMPLEX"
    assert not facts["s_cow_v6_simplekeygen_nonhivestyle"].hive_style
    assert not facts["s_mor_parquet_v6_simplekeygen_hivestyle_no_metafields"].populate_meta_fields
    assert facts["qs_mor_avro_v6_trips_8i3d"].timeline_layout == 1  # flat .hoodie/ timeline


def test_real_deletes_always_win(real_tables: dict[str, Path]) -> None:
    """v8_trips_8i3u1d (event-time ordering) deletes with IntWrapper(0): the key is gone despite its ts > 0."""
    path = _table(real_tables, "qs_mor_avro_v8_trips_8i3u1d")
    table = lsm_lab.open_table(path)
    assert table.config.merge_mode == "EVENT_TIME_ORDERING"
    deltas = [i for i in table.completed_writes() if i.action == "deltacommit"]
    before, after = (table.read(as_of=deltas[k].begin_time) for k in (1, 2))
    gone = set(before.column("uuid").to_pylist()) - set(after.column("uuid").to_pylist())
    assert gone == {"e3cf430c-889d-4015-bc98-59bdce1e530c"}


@pytest.mark.parametrize("stem", TABLES)
def test_inspection_commands_work(real_tables: dict[str, Path], stem: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_table(real_tables, stem))
    for what in ("fsview", "levels", "footers", "timeline", "formats"):
        assert cli_main(["show", what, path]) == 0, what
    out = capsys.readouterr().out
    assert "Traceback" not in out
    table = lsm_lab.open_table(path)
    dump = table.dump_levels()
    if table.file_groups():
        assert "L1:" in dump and "L0 (" in dump
    else:
        assert dump == "(no file groups)"


def test_levels_show_v1_logs(real_tables: dict[str, Path]) -> None:
    dump = lsm_lab.open_table(_table(real_tables, "qs_mor_avro_v6_trips_8i3d")).dump_levels()
    assert ".log.1_0-26-85" in dump and "v1 log" in dump


def test_footers_of_a_real_table(real_tables: dict[str, Path]) -> None:
    path = _table(real_tables, "s_cow_v8_complexkeygen_hivestyle")
    df = lsm_lab.footers(path)
    assert len(df) == 4 and "hoodie_min_record_key" in df.columns


def _lance_copy(real_tables: dict[str, Path], tmp_path: Path) -> Path:
    src = _table(real_tables, "s_cow_v9_txns_nonpart_nometa")
    dst = tmp_path / "lance_table"
    shutil.copytree(src, dst)
    for f in dst.glob("*.parquet"):  # a Lance table has .lance base files (hoodie.table.base.file.format=LANCE)
        f.rename(f.with_suffix(".lance"))
    props = dst / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.base.file.format=LANCE\n")
    return dst


def test_lance_base_files_are_refused_clearly(real_tables: dict[str, Path], tmp_path: Path) -> None:
    path = _lance_copy(real_tables, tmp_path)
    table = lsm_lab.open_table(path)
    with pytest.raises(UnsupportedFeatureError, match="lance"):
        table.read()
    assert cli_main(["read", str(path)]) == 2  # one line `error: ...`, no traceback
    assert cli_main(["show", "fsview", str(path)]) == 0  # listing still works


def test_hfile_base_files_are_refused_clearly(real_tables: dict[str, Path], tmp_path: Path) -> None:
    src = _table(real_tables, "s_cow_v6_nonpartitioned")
    dst = tmp_path / "hfile_table"
    shutil.copytree(src, dst)
    for f in dst.glob("*.parquet"):
        f.rename(f.with_suffix(".hfile"))
    with pytest.raises(UnsupportedFeatureError, match="hfile"):
        lsm_lab.open_table(dst).read()


def test_no_meta_fields_keys_are_rebuilt(real_tables: dict[str, Path]) -> None:
    path = _table(real_tables, "s_mor_parquet_v6_simplekeygen_hivestyle_no_metafields")
    base = next(path.rglob("*.parquet"))
    assert pq.read_table(base).column("_hoodie_record_key").null_count > 0  # the files hold NULL meta columns
    rows = lsm_lab.open_table(path).read()
    assert rows.column("_hoodie_record_key").null_count == 0
    keys = rows.column("_hoodie_record_key").to_pylist()
    assert sorted(keys) == sorted(str(i) for i in rows.column("id").to_pylist())
    assert set(rows.column("_hoodie_partition_path").to_pylist()) == {"byteField=10", "byteField=20", "byteField=30"}


def test_rows_of_a_repeated_key_are_compared_copy_by_copy() -> None:
    """Hudi's INSERT keeps a key twice (the shipped rollback table holds TXN-002 twice): both readers must return
    each copy; copies are matched by commit sequence number."""
    a = pa.table({"_hoodie_record_key": ["k", "k", "j"], "_hoodie_commit_seqno": ["2_0", "1_0", "1_1"],
                  "v": [2, 1, 0]})
    assert compare_rows(a, a.take([2, 0, 1]), ["id"]) == []
    missing = compare_rows(a, a.take([0, 2]), ["id"])
    assert missing[:2] == ["key 'k': 2 row(s) in lsm_lab's read, 1 in the other's",
                           "key ('k', 1): only in lsm_lab's rows"]
    changed = a.set_column(2, "v", pa.array([2, 5, 0]))
    assert compare_rows(a, changed, ["id"]) == ["key ('k', 0) column 'v': lsm_lab 1 != other 5"]
