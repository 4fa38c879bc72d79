"""Hudi's metadata table, read (issue 32, first part): every index agrees with the data it indexes.

For each of the four shipped tables with a metadata table:
  files()         = every committed data file on disk (all slices not yet cleaned, replaced file
                    groups included, as upstream's `files` partition holds), sizes = disk sizes;
                    hudi-rs's latest slices (it lists from the MDT) are a subset of it
  record_index    = where each key lives (lsm_lab's snapshot: partition, file id of `_hoodie_file_name`)
  column_stats    = each base file's own Parquet statistics (null count, value count, min/max)
  secondary_index = the rows with that value (lsm_lab's snapshot)
plus the API's edges (no MDT → None, an unknown partition → a typed error naming the existing
ones), the CLI and the Avro transcription checked against the files' own schemas.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.filegroup import fsview
from lsm_lab.format import hfile, naming
from lsm_lab.format import metadata_record as mr
from lsm_lab.table.metadata_table import MetadataPartitionNotFoundError, MetadataTable

TABLES = {
    "v8_trips_8i3u1d": "uuid",
    "v9_txns_simple_meta": "txn_id",
    "v9_txns_complex_meta": "txn_id,account_id",
    "v9_nonpartitioned_rollback": "txn_id",
}


def _open(real_table: Callable[[str], Path], name: str) -> tuple[lsm_lab.Table, MetadataTable]:
    t = lsm_lab.open_table(real_table(name))
    m = t.metadata_table()
    assert m is not None
    return t, m


@pytest.mark.parametrize("name", sorted(TABLES))
def test_files_lists_every_committed_data_file(real_table: Callable[[str], Path], name: str) -> None:
    t, m = _open(real_table, name)
    listed = {(r["partition"], r["file_name"]): r["size"] for r in m.files().to_pylist()}
    uncommitted = {(f.partition, f.path.name) for f in t.uncommitted_files()}
    on_disk = {(p, path.name): path.stat().st_size for p, path, _ in fsview.list_data_files(t.path)
               if (p, path.name) not in uncommitted}
    assert listed == on_disk
    latest = {(f.partition, f.path.name) for s in t.latest_slices() for f in s.files}
    assert latest <= set(listed)
    assert m.all_partitions() == sorted({p for p, _ in listed})
    for part in m.all_partitions():
        assert set(m.files(part).column("partition").to_pylist()) == {part}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_hudi_rs_latest_slices_are_in_the_listing(real_table: Callable[[str], Path], name: str) -> None:
    hudi = pytest.importorskip("hudi")
    _, m = _open(real_table, name)
    listed = {(r["partition"], r["file_name"]) for r in m.files().to_pylist()}
    table = hudi.HudiTableBuilder.from_base_uri(str(real_table(name))).build()
    names = set()
    for s in table.get_file_slices():
        names.add((s.partition_path, s.base_file_name))
        names |= {(s.partition_path, log) for log in (getattr(s, "log_file_names", None) or [])}
    assert names and names <= listed


@pytest.mark.parametrize("name", sorted(TABLES))
def test_record_index_is_where_each_key_lives(real_table: Callable[[str], Path], name: str) -> None:
    t, m = _open(real_table, name)
    rows = t.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name",
                           "_hoodie_commit_time"]).to_pylist()
    assert rows
    keys = sorted({r["_hoodie_record_key"] for r in rows})
    assert sorted(m.record_keys()) == keys
    index = {r["record_key"]: r for r in m.record_index([*keys, "no-such-key"]).to_pylist()}
    assert sorted(index) == keys
    completed = {i.begin_time for i in t.instants() if i.is_completed}
    where: dict[str, list[tuple[str, str, str]]] = {}
    for r in rows:  # a row read from a log block names its file group, not a file
        parsed = naming.parse(r["_hoodie_file_name"])
        file_id = parsed.file_id if parsed is not None else r["_hoodie_file_name"]
        where.setdefault(r["_hoodie_record_key"], []).append(
            (r["_hoodie_commit_time"], r["_hoodie_partition_path"], file_id))
    for key, places in where.items():
        loc = index[key]
        # one location per key: a key inserted twice without de-duplication (the rollback table's TXN-002,
        # in two file groups) is indexed where its latest write put it
        assert (loc["partition"], loc["file_id"]) == max(places)[1:], key
        assert loc["instant_time"] in completed


@pytest.mark.parametrize("name", sorted(TABLES))
def test_column_stats_are_the_files_own_statistics(real_table: Callable[[str], Path], name: str) -> None:
    t, m = _open(real_table, name)
    stats = m.column_stats().to_pylist()
    assert stats
    folder = {(r["partition"], r["file_name"]) for r in m.files().to_pylist()}
    checked = 0
    for s in stats:
        assert (s["partition"], s["file_name"]) in folder
        if not s["file_name"].endswith(".parquet"):
            continue
        path = t.path / s["partition"] / s["file_name"] if s["partition"] else t.path / s["file_name"]
        md = pq.ParquetFile(path).metadata
        col = md.schema.to_arrow_schema().get_field_index(s["column"])
        assert col >= 0, s
        nulls = sum(md.row_group(i).column(col).statistics.null_count for i in range(md.num_row_groups))
        assert s["null_count"] == nulls, s
        assert s["value_count"] == md.num_rows, s
        st = md.row_group(0).column(col).statistics
        if md.num_rows and st.has_min_max and type(st.min) in (str, int, float, bool):
            lo, hi = st.min, st.max
            if isinstance(lo, bool):
                assert (s["min"], s["max"]) == (str(lo).lower(), str(hi).lower()), s
            elif isinstance(lo, float):  # Parquet writes a zero minimum as -0.0, Hudi's statistics 0.0
                assert (float(s["min"]), float(s["max"])) == (lo, hi), s
            else:
                assert (s["min"], s["max"]) == (str(lo), str(hi)), s
        checked += 1
    assert checked >= 10
    some = stats[0]["column"]
    assert set(m.column_stats([some]).column("column").to_pylist()) == {some}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_secondary_index_is_the_rows_with_that_value(real_table: Callable[[str], Path], name: str) -> None:
    t, m = _open(real_table, name)
    defs = json.loads((t.path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    names = [n for n in defs if n.startswith("secondary_index_")]
    assert m.secondary_indexes() == sorted(n.removeprefix("secondary_index_") for n in names)
    for index in names:
        column = defs[index]["sourceFields"][0]
        rows = t.read(columns=["_hoodie_record_key", column])
        values = rows.column(column).cast("int32").to_pylist() if str(rows.schema.field(column).type) == "date32[day]" \
            else rows.column(column).to_pylist()
        expected = sorted(((None if v is None else str(v), k)
                           for v, k in zip(values, rows.column("_hoodie_record_key").to_pylist(), strict=True)),
                          key=str)
        got = m.secondary_index(index).to_pylist()
        assert sorted(((g["secondary_key"], g["record_key"]) for g in got), key=str) == expected
        one = next(v for v, _ in expected if v is not None)
        picked = m.secondary_index(index.removeprefix("secondary_index_"), [one]).to_pylist()
        assert sorted(p["record_key"] for p in picked) == sorted(k for v, k in expected if v == one)


@pytest.mark.parametrize("name", ["v9_txns_simple_meta", "v8_trips_8i3u1d"])
def test_partition_stats_cover_the_partitions(real_table: Callable[[str], Path], name: str) -> None:
    t, m = _open(real_table, name)
    ps = m.partition_stats().to_pylist()
    assert {r["partition"] for r in ps} == set(m.all_partitions())
    snapshot = t.read()
    for r in ps:
        if r["column"] == "_hoodie_partition_path":
            assert r["min"] == r["max"] == r["partition"]
    assert snapshot.num_rows > 0


def test_no_metadata_table_and_unknown_partitions(real_table: Callable[[str], Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    plain = lsm_lab.open_table(real_table("v9_txns_simple_nometa"))
    assert plain.metadata_table() is None
    _, m = _open(real_table, "v9_nonpartitioned_rollback")
    assert m.partitions() == ["column_stats", "files", "record_index"]
    with pytest.raises(MetadataPartitionNotFoundError, match="no 'partition_stats' partition; it has: column_stats"):
        m.partition_stats()
    with pytest.raises(lsm_lab.errors.LsmLabError, match="bloom_filters"):
        m.bloom_filter("", "x.parquet")
    with pytest.raises(lsm_lab.errors.LsmLabError, match="secondary_index_nope"):
        m.secondary_index("nope", ["a"])
    assert cli_main(["show", "metadata", str(real_table("v9_txns_simple_nometa"))]) == 0
    assert "no metadata table" in capsys.readouterr().out


def test_cli_show_metadata(real_table: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    path = str(real_table("v9_txns_simple_meta"))
    assert cli_main(["show", "metadata", path]) == 0
    out = capsys.readouterr().out
    assert "record_index" in out and "region=apac" in out
    assert cli_main(["show", "metadata", path, "--partition", "record_index", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 12 and {"record_key", "partition", "file_id", "instant_time"} <= set(rows[0])
    assert cli_main(["show", "metadata", path, "--partition", "bloom_filters"]) == 2
    assert "it has: column_stats" in capsys.readouterr().err


def test_transcribed_schema_matches_the_files(real_table: Callable[[str], Path]) -> None:
    """HOODIE_METADATA_RECORD (from the avsc) has the fields, in order and by name, that Hudi wrote."""
    ours = mr.HOODIE_METADATA_RECORD
    seen = 0
    for name in TABLES:
        for f in (real_table(name) / ".hoodie" / "metadata").rglob("*.hfile"):
            schema = json.loads(hfile.read_hfile(f).avro_schema or "{}")
            fields = [x for x in schema["fields"] if not x["name"].startswith("_hoodie_")]
            assert [x["name"] for x in fields] == [x["name"] for x in ours["fields"]]
            for theirs, mine in zip(fields, ours["fields"], strict=True):
                if isinstance(theirs["type"], list) and isinstance(theirs["type"][1], dict) \
                        and theirs["type"][1].get("type") == "record":
                    names = [x["name"] for x in theirs["type"][1]["fields"]]  # Hudi 1.0 lacks the newer ones
                    assert names == [x["name"] for x in mine["type"][1]["fields"]][: len(names)], mine["name"]
            seen += 1
    assert seen >= 40
    hpath = next((real_table("v9_txns_simple_meta") / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    hf = hfile.read_hfile(hpath)
    key, value = next(hf.items())
    theirs_decoded = mr.decode_value(key.decode(), value, hf.avro_schema)
    ours_decoded = mr.decode_value(key.decode(), value[5:], None)  # the transcription, the 5 null meta columns skipped
    assert ours_decoded.type == theirs_decoded.type == mr.TYPE_PARTITION_LIST


def test_combine_follows_upstream_precombine() -> None:
    older = {"a": {"size": 10, "isDeleted": False}, "b": {"size": 5, "isDeleted": False}}
    newer = {"a": {"size": 7, "isDeleted": False}, "b": {"size": 0, "isDeleted": True},
             "c": {"size": 0, "isDeleted": True}, "d": {"size": 3, "isDeleted": False}}
    got = mr.combine_file_lists(older, newer)
    assert got == {"a": {"size": 10, "isDeleted": False}, "c": {"size": 0, "isDeleted": True},
                   "d": {"size": 3, "isDeleted": False}}
    base = mr.MetadataValue("k", mr.TYPE_RECORD_INDEX, {"x": 1})
    assert mr.combine(base, mr.tombstone("k")).deleted
    assert mr.combine(mr.tombstone("k"), base) == base
    assert mr.split_secondary_key(mr.escape_secondary("a$b\\c") + "$" + mr.escape_secondary("k$1")) == ("a$b\\c", "k$1")
