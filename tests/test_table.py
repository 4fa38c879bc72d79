"""The Table API end to end: create/open, every write, merge rules, reads, inspection, errors.

Small hand-written cases with exact expected rows; the random sequences are in
test_table_model.py and the sortedness of files in test_sorted_files.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab import (
    CorruptFileError,
    InputError,
    PartitionValueError,
    SchemaError,
    TableConfigError,
    TableNotFoundError,
    TimelineError,
    UnsupportedFeatureError,
)
from lsm_lab.filegroup import fsview

TYPES = ["MERGE_ON_READ", "COPY_ON_WRITE"]
LAYOUTS = ["lsm_tree", "default"]
BOTH = [(t, lay) for t in TYPES for lay in LAYOUTS]


def rows_of(table: lsm_lab.Table, *cols: str, **read_kw: Any) -> list[tuple[Any, ...]]:
    """Sorted tuples of the given columns of a snapshot (or `read(**read_kw)`)."""
    got = table.read(columns=list(cols), **read_kw).to_pylist()
    return sorted(tuple(r[c] for c in cols) for r in got)


def data_files(table: lsm_lab.Table) -> list[str]:
    return sorted(f"{p}/{path.name}" if p else path.name for p, path, _ in fsview.list_data_files(table.path))


# --------------------------------------------------------------------------- create / open
def test_create_and_open(tmp_path: Path) -> None:
    table = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="uuid", partition_by="city",
                                 ordering_field="ts", num_buckets=3)
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    for line in ["hoodie.table.storage.layout=lsm_tree", "hoodie.table.type=MERGE_ON_READ",
                 "hoodie.record.merge.mode=EVENT_TIME_ORDERING", "hoodie.table.ordering.fields=ts",
                 "hoodie.datasource.write.hive_style_partitioning=true", "hoodie.bucket.index.num.buckets=3",
                 "hoodie.table.version=10", "hoodie.table.recordkey.fields=uuid", "hoodie.table.partition.fields=city"]:
        assert line in props.splitlines()
    assert (tmp_path / "t" / ".hoodie" / "timeline").is_dir()
    opened = lsm_lab.open_table(tmp_path / "t")
    assert opened.config == table.config
    assert "trips" in repr(opened) and "lsm_tree" in repr(opened)
    assert opened.instants() == [] and opened.schema is None
    assert opened.read().num_rows == 0
    assert "trips" in opened._repr_html_()


def test_create_variants(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    cow = tmp_table(table_type="cow", layout="default", record_key=["a", "b"], partition_by="x,y", hive_style=False)
    c = cow.config
    assert (c.table_type, c.layout, c.record_key, c.partition_by, c.hive_style, c.merge_mode) == (
        "COPY_ON_WRITE", "default", ("a", "b"), ("x", "y"), False, "COMMIT_TIME_ORDERING")
    assert tmp_table(table_type="MOR").config.is_mor
    extra = tmp_table(**{"hoodie.cleaner.commits.retained": "5"})
    assert extra.config.props["hoodie.cleaner.commits.retained"] == "5"


def test_create_into_existing_folder(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "notes.txt").write_text("hello")
    lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    with pytest.raises(TableConfigError, match="already exists"):
        lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")


@pytest.mark.parametrize(
    ("kw", "error", "message"),
    [
        ({"table_type": "MERGE_ON_WRITE"}, InputError, "table_type must be one of"),
        ({"layout": "btree"}, InputError, "layout must be one of"),
        ({"name": "my table"}, InputError, "invalid table name"),
        ({"name": ""}, InputError, "invalid table name"),
        ({"record_key": []}, InputError, "record_key is required"),
        ({"record_key": "_hoodie_record_key"}, InputError, "invalid record key field"),
        ({"partition_by": ["_hoodie_partition_path"]}, InputError, "invalid partition field"),
        ({"num_buckets": 0}, InputError, "num_buckets must be at least 1"),
        ({"table_version": 7}, UnsupportedFeatureError, "not 7"),
    ],
)
def test_create_errors(tmp_path: Path, kw: dict[str, Any], error: type[Exception], message: str) -> None:
    args = {"name": "t", "record_key": "id", **kw}
    with pytest.raises(error, match=message):
        lsm_lab.create_table(tmp_path / "t", **args)
    assert not (tmp_path / "t" / ".hoodie").exists()


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="no such folder"):
        lsm_lab.open_table(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    with pytest.raises(TableNotFoundError, match="not a table"):
        lsm_lab.open_table(tmp_path / "plain")
    (tmp_path / "plain" / ".hoodie").mkdir()
    with pytest.raises(TableConfigError, match="no hoodie.properties"):
        lsm_lab.open_table(tmp_path / "plain")
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    props = table.path / ".hoodie" / "hoodie.properties"
    text = props.read_text()
    props.write_text(text.replace("hoodie.table.version=10", "hoodie.table.version=11"))
    with pytest.raises(TableConfigError, match="unknown table version 11") as info:
        lsm_lab.open_table(table.path)
    assert "hoodie.properties" in str(info.value)
    props.write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("hoodie.table.type")))
    with pytest.raises(TableConfigError, match="hoodie.table.type"):
        lsm_lab.open_table(table.path)
    props.write_text(text.replace("hoodie.table.type=MERGE_ON_READ", "hoodie.table.type=SOMETHING"))
    with pytest.raises(TableConfigError, match="unknown hoodie.table.type"):
        lsm_lab.open_table(table.path)


# --------------------------------------------------------------------------- writes
FIRST = [{"id": "a", "ts": 1, "v": 1.0}, {"id": "b", "ts": 1, "v": 2.0}, {"id": "c", "ts": 1, "v": 3.0}]


def _as(form: str, rows: list[dict[str, Any]]) -> Any:
    if form == "arrow":
        return pa.Table.from_pylist(rows)
    if form == "pandas":
        return pd.DataFrame(rows)
    return rows


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
@pytest.mark.parametrize("form", ["arrow", "pandas", "dicts"])
def test_every_write_op(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str, form: str) -> None:
    table = tmp_table(ordering_field="ts", table_type=table_type, layout=layout)
    i1 = table.insert(_as(form, FIRST))
    assert i1.is_completed and i1.action == ("deltacommit" if table_type == "MERGE_ON_READ" else "commit")
    assert rows_of(table, "id", "ts", "v") == [("a", 1, 1.0), ("b", 1, 2.0), ("c", 1, 3.0)]
    table.upsert(_as(form, [{"id": "a", "ts": 2, "v": 10.0}, {"id": "d", "ts": 1, "v": 4.0}]))
    table.bulk_insert(_as(form, [{"id": "e", "ts": 1, "v": 5.0}, {"id": "b", "ts": 3, "v": 20.0}]))
    table.insert(_as(form, [{"id": "c", "ts": 0, "v": -1.0}]))  # an older event: ignored
    table.delete(_as(form, [{"id": "d"}, {"id": "zz"}]))
    table.delete(["e"])
    assert rows_of(table, "id", "ts", "v") == [("a", 2, 10.0), ("b", 3, 20.0), ("c", 1, 3.0)]
    assert len(table.completed_writes()) == 6
    # the meta columns
    snap = {r["id"]: r for r in table.read().to_pylist()}
    commits = [i.begin_time for i in table.completed_writes()]
    assert snap["a"]["_hoodie_commit_time"] == commits[1] and snap["c"]["_hoodie_commit_time"] == commits[0]
    assert snap["a"]["_hoodie_record_key"] == "a" and snap["a"]["_hoodie_partition_path"] == ""
    assert snap["a"]["_hoodie_commit_seqno"].startswith(commits[1] + "_")
    assert snap["a"]["_hoodie_file_name"].endswith(".parquet")


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
def test_commit_time_ordering(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str) -> None:
    table = tmp_table(table_type=table_type, layout=layout)
    assert table.config.merge_mode == "COMMIT_TIME_ORDERING"
    table.insert([{"id": "a", "ts": 5}, {"id": "b", "ts": 5}])
    table.upsert([{"id": "a", "ts": 1}, {"id": "b", "ts": 9}, {"id": "b", "ts": 2}])  # later row wins
    assert rows_of(table, "id", "ts") == [("a", 1), ("b", 2)]
    table.delete([{"id": "a", "ts": 0}])  # the ordering column means nothing here: the delete wins
    table.upsert([{"id": "a", "ts": 0}])
    table.delete(["b"])
    assert rows_of(table, "id", "ts") == [("a", 0)]


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
def test_event_time_ordering(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str) -> None:
    table = tmp_table(ordering_field="ts", table_type=table_type, layout=layout)
    table.insert([{"id": k, "ts": 5, "v": 0} for k in "abcdefg"])
    table.upsert([
        {"id": "a", "ts": 4, "v": 1},   # lower: ignored
        {"id": "b", "ts": 5, "v": 2},   # equal: the later write wins
        {"id": "c", "ts": 6, "v": 3},   # greater: wins
        {"id": "d", "ts": None, "v": 4},  # null ordering ranks lowest: ignored
        {"id": "e", "ts": 9, "v": 5}, {"id": "e", "ts": 7, "v": 6},  # in a batch, the greater wins ...
        {"id": "f", "ts": 8, "v": 7}, {"id": "f", "ts": 8, "v": 8},  # ... ties go to the later row
    ])
    assert rows_of(table, "id", "ts", "v") == [
        ("a", 5, 0), ("b", 5, 2), ("c", 6, 3), ("d", 5, 0), ("e", 9, 5), ("f", 8, 8), ("g", 5, 0)]
    table.delete([
        {"id": "a", "ts": 4},     # lower than the stored record's: not removed
        {"id": "b", "ts": 5},     # equal: removed
        {"id": "c", "ts": None},  # no ordering value: removed
        {"id": "e", "ts": 1}, {"id": "e", "ts": None},  # a delete-by-key in the batch removes
        {"id": "f", "ts": 100},   # greater: removed
    ])
    assert rows_of(table, "id", "ts", "v") == [("a", 5, 0), ("d", 5, 0), ("g", 5, 0)]
    table.delete([{"id": "d"}])  # rows without the ordering column: delete by key
    table.delete(["a"])
    assert rows_of(table, "id", "ts", "v") == [("g", 5, 0)]


ORDERING_TYPES: dict[str, tuple[Any, list[Any]]] = {
    "int32": (pa.int32(), [-1, 0, 3]),
    "float64": (pa.float64(), [-1.5, 0.0, 2.5]),
    "string": (pa.string(), ["b", "c", "é"]),
    "timestamp": (pa.timestamp("us", tz="UTC"), [dt.datetime(2026, 1, d, tzinfo=dt.UTC) for d in (1, 2, 3)]),
    "date": (pa.date32(), [dt.date(1969, 12, 31), dt.date(2026, 1, 2), dt.date(2026, 1, 3)]),
    "decimal": (pa.decimal128(10, 2), [Decimal("-1.50"), Decimal("2.50"), Decimal("10.00")]),
}


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("kind", sorted(ORDERING_TYPES))
def test_ordering_field_types(tmp_table: Callable[..., lsm_lab.Table], table_type: str, kind: str) -> None:
    """Delete logs store ordering values as bytes: every type must come back and compare right."""
    typ, (low, mid, high) = ORDERING_TYPES[kind]
    table = tmp_table(ordering_field="o", table_type=table_type)

    def batch(*rows: tuple[str, Any]) -> pa.Table:
        return pa.table({"id": [r[0] for r in rows], "o": pa.array([r[1] for r in rows], typ)})

    table.insert(batch(("a", mid), ("b", mid), ("c", mid), ("d", mid)))
    table.upsert(batch(("a", low)))   # older: ignored
    table.delete(batch(("b", low)))   # older than the record: not removed
    table.delete(batch(("c", high)))  # newer: removed
    table.delete(batch(("d", mid)))   # equal: removed
    assert rows_of(table, "id", "o") == [("a", mid), ("b", mid)]
    assert table.schema is not None and table.schema.field("o").type == typ


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
def test_late_upsert_after_an_ordered_delete(tmp_table: Callable[..., lsm_lab.Table], table_type: str,
                                             layout: str) -> None:
    """Pins today's behaviour (see the report): MOR logs keep an ordered delete as a tombstone, a COW
    base file cannot, so an upsert older than the delete is dropped by MOR and kept by COW."""
    table = tmp_table(ordering_field="ts", table_type=table_type, layout=layout)
    table.insert([{"id": "a", "ts": 1}, {"id": "b", "ts": 1}])
    table.delete([{"id": "a", "ts": 10}])
    table.upsert([{"id": "a", "ts": 5}])
    expected = [("b", 1)] if table_type == "MERGE_ON_READ" else [("a", 5), ("b", 1)]
    assert rows_of(table, "id", "ts") == expected
    table.upsert([{"id": "a", "ts": 10}])  # at or above the delete: always back
    assert rows_of(table, "id", "ts") == [("a", 10), ("b", 1)]


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
def test_composite_keys_and_partitions(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str) -> None:
    table = tmp_table(record_key=["id", "n"], partition_by=["city", "day"], ordering_field="ts",
                      table_type=table_type, layout=layout)
    table.insert([
        {"id": "a", "n": 1, "city": "sf", "day": 1, "ts": 1},
        {"id": "a", "n": 2, "city": "sf", "day": 1, "ts": 1},
        {"id": "a", "n": 1, "city": "chennai", "day": 2, "ts": 1},  # same key, other partition: another record
        {"id": "b", "n": None, "city": None, "day": 1, "ts": 1},
    ])
    table.upsert([{"id": "a", "n": 1, "city": "sf", "day": 1, "ts": 2}])
    got = table.read().to_pylist()
    assert sorted((r["_hoodie_record_key"], r["_hoodie_partition_path"], r["ts"]) for r in got) == [
        ("id:a,n:1", "city=chennai/day=2", 1),
        ("id:a,n:1", "city=sf/day=1", 2),
        ("id:a,n:2", "city=sf/day=1", 1),
        ("id:b,n:__null__", "city=__HIVE_DEFAULT_PARTITION__/day=1", 1),
    ]
    assert table.partitions() == ["city=__HIVE_DEFAULT_PARTITION__/day=1", "city=chennai/day=2", "city=sf/day=1"]
    assert (table.path / "city=sf" / "day=1" / ".hoodie_partition_metadata").is_file()
    table.delete([{"id": "a", "n": 1, "city": "chennai", "day": 2}])
    assert len(table.read()) == 3


@pytest.mark.parametrize("hive", [True, False])
def test_hive_style(tmp_table: Callable[..., lsm_lab.Table], hive: bool) -> None:
    table = tmp_table(partition_by="city", hive_style=hive)
    table.insert([{"id": "a", "city": "sf"}, {"id": "b", "city": "chennai"}])
    folders = sorted(p.name for p in table.path.iterdir() if not p.name.startswith("."))
    assert folders == (["city=chennai", "city=sf"] if hive else ["chennai", "sf"])
    assert rows_of(table, "_hoodie_partition_path", "id") == (
        [("city=chennai", "b"), ("city=sf", "a")] if hive else [("chennai", "b"), ("sf", "a")])
    assert rows_of(table, "id", filter=[("city", "=", "sf")]) == [("a",)]


def test_non_partitioned_files_live_in_the_root(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table()
    table.insert([{"id": "a"}])
    assert all("/" not in f for f in data_files(table)) and data_files(table)


@pytest.mark.parametrize(("table_type", "layout"), BOTH)
def test_empty_batches(tmp_table: Callable[..., lsm_lab.Table], table_type: str, layout: str) -> None:
    table = tmp_table(ordering_field="ts", table_type=table_type, layout=layout)
    first = table.insert([])  # before any schema
    assert first.is_completed and table.schema is None
    table.insert(FIRST)
    files = data_files(table)
    empty = pa.table({"id": pa.array([], pa.string()), "ts": pa.array([], pa.int64()), "v": pa.array([], pa.float64())})
    data: Any
    for data in ([], empty, pd.DataFrame({"id": pd.Series([], dtype=str), "ts": pd.Series([], dtype="int64"),
                                          "v": pd.Series([], dtype="float64")})):
        assert table.upsert(data).is_completed
        assert table.delete(data).is_completed
    assert table.bulk_insert(empty).is_completed
    assert data_files(table) == files
    assert rows_of(table, "id") == [("a",), ("b",), ("c",)]
    assert len(table.completed_writes()) == 9
    assert table.timeline()["records_written"].sum() == 3


def test_schema_evolution(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(ordering_field="ts")
    i1 = table.insert([{"id": "a", "ts": 1}])
    table.upsert([{"id": "b", "ts": 1, "note": "new"}])  # an added nullable column
    assert table.schema is not None and table.schema.names == ["id", "ts", "note"]
    assert rows_of(table, "id", "note") == [("a", None), ("b", "new")]
    assert rows_of(table, "id", as_of=i1) == [("a",)]  # time travel reads with the schema of its instant
    with pytest.raises(InputError, match="unknown column 'note'"):
        rows_of(table, "id", "note", as_of=i1)
    with pytest.raises(SchemaError, match="column 'ts' changes type from int64 to string: it is a record key"):
        table.upsert([{"id": "c", "ts": "x", "note": "n"}])  # the ordering column keeps its type
    assert [i.state.value for i in table.instants()] == ["completed", "completed"]
    table.upsert([{"id": "c", "ts": 2}])  # a nullable column left out: null (tests/test_schema_evolution.py)
    assert rows_of(table, "id", "note") == [("a", None), ("b", "new"), ("c", None)]


def test_all_null_column_gets_a_type_later(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table()
    table.insert([{"id": "a", "note": None}])
    table.upsert([{"id": "b", "note": 7}])
    assert table.schema is not None and table.schema.field("note").type == pa.int64()
    assert rows_of(table, "id", "note") == [("a", None), ("b", 7)]


@pytest.mark.parametrize(
    ("kw", "data", "op", "error", "message"),
    [
        ({}, [{"id": None, "v": 1}], "insert", SchemaError, "record key column 'id' has 1 null value"),
        ({}, [{"uuid": "a"}], "upsert", SchemaError, "no record key column 'id'"),
        ({"ordering_field": "ts"}, [{"id": "a"}], "upsert", SchemaError, "no ordering column 'ts'"),
        ({"partition_by": "city"}, [{"id": "a"}], "insert", SchemaError, "no partition column 'city'"),
        ({"partition_by": "city"}, [{"id": "a"}], "delete", SchemaError, "no partition column 'city'"),
        ({"record_key": ["id", "n"]}, [{"id": None, "n": None}], "insert", SchemaError, "all null"),
        ({"partition_by": "city"}, [{"id": "a", "city": "../x"}], "insert", PartitionValueError, "'../x'"),
        ({"partition_by": "city"}, [{"id": "a", "city": ".git"}], "insert", PartitionValueError, "'.git'"),
        ({"partition_by": "city"}, [{"id": "a", "city": "a\\b"}], "insert", PartitionValueError, "partition"),
        ({"partition_by": "city"}, ["a"], "delete", InputError, "non-partitioned"),
        ({"record_key": ["id", "n"]}, ["a"], "delete", InputError, "single-field key"),
        ({}, "a,b", "insert", InputError, "expected a pyarrow Table"),
        ({"ordering_field": "ts"}, [{"id": "a", "ts": [1]}], "insert", SchemaError, "ordering field 'ts'"),
    ],
)
def test_write_errors(tmp_table: Callable[..., lsm_lab.Table], kw: dict[str, Any], data: object, op: str,
                      error: type[Exception], message: str) -> None:
    table = tmp_table(**kw)
    with pytest.raises(error, match=message):
        getattr(table, op)(data)
    assert table.instants() == [] and data_files(table) == []  # nothing was left behind


def test_failed_write_leaves_no_trace(tmp_table: Callable[..., lsm_lab.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.filegroup import write as writer

    table = tmp_table(partition_by="city", layout="lsm_tree", num_buckets=1)
    table.insert([{"id": "a", "city": "x"}])
    before = data_files(table)
    real = writer.write_file_group
    calls = []

    def flaky(**kw: Any) -> Any:
        calls.append(1)
        out = real(**kw)
        if len(calls) == 2:
            raise OSError("disk full")
        return out

    monkeypatch.setattr(writer, "write_file_group", flaky)
    with pytest.raises(OSError, match="disk full"):
        table.upsert([{"id": "b", "city": "x"}, {"id": "c", "city": "y"}])
    monkeypatch.undo()
    assert data_files(table) == before
    assert rows_of(table, "id") == [("a",)]
    table.upsert([{"id": "d", "city": "y"}])  # the table is still writable
    assert rows_of(table, "id") == [("a",), ("d",)]
    assert all(i.is_completed for i in table.instants())


def test_written_by_hudi_is_read_only(real_table: Callable[[str], Path]) -> None:
    table = lsm_lab.open_table(real_table("v8_complexkeygen_hivestyle"))
    with pytest.raises(UnsupportedFeatureError, match="lsm_lab writes only to tables it created"):
        table.upsert([{"id": 1, "name": "x"}])


# --------------------------------------------------------------------------- reads
Trips = tuple[lsm_lab.Table, tuple[lsm_lab.Instant, lsm_lab.Instant, lsm_lab.Instant]]


@pytest.fixture()
def trips(tmp_table: Callable[..., lsm_lab.Table]) -> Trips:
    """A small MOR lsm_tree table: 3 commits, with the instants."""
    table = tmp_table(record_key="id", partition_by="city", ordering_field="ts", num_buckets=2)
    i1 = table.insert([{"id": f"k{i}", "city": c, "ts": 1, "fare": float(i)}
                       for i, c in enumerate(["sf", "sf", "chennai", "chennai", "sao_paulo"])])
    i2 = table.upsert([{"id": "k0", "city": "sf", "ts": 2, "fare": 100.0},
                       {"id": "k5", "city": "chennai", "ts": 2, "fare": 5.0}])
    i3 = table.delete([{"id": "k1", "city": "sf"}])
    return table, (i1, i2, i3)


def test_columns(trips: Trips) -> None:
    table, _ = trips
    got = table.read(columns=["fare", "id"])
    assert got.column_names == ["fare", "id"] and got.num_rows == 5
    full = table.read()
    assert full.column_names == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                 "_hoodie_partition_path", "_hoodie_file_name", "id", "city", "ts", "fare"]
    with pytest.raises(InputError, match="unknown column 'nope'"):
        table.read(columns=["id", "nope"])


def test_filters(trips: Trips) -> None:
    table, _ = trips
    assert rows_of(table, "id", filter=[("fare", ">", 3.0)]) == [("k0",), ("k4",), ("k5",)]
    assert rows_of(table, "id", filter=[("city", "=", "chennai"), ("ts", "=", 1)]) == [("k2",), ("k3",)]
    assert rows_of(table, "id", filter=[("city", "in", ["sf", "sao_paulo"])]) == [("k0",), ("k4",)]
    expr = (pc.field("fare") < 4.0) & (pc.field("city") != "sf")
    assert rows_of(table, "id", filter=expr) == [("k2",), ("k3",)]
    with pytest.raises(InputError, match="invalid filter"):
        table.read(filter=[("fare", "~", 1)])
    with pytest.raises(InputError, match="invalid filter"):
        table.read(filter=[("city", "~", "sf")])  # a partition column: pruning reads the filter first
    with pytest.raises(InputError, match="unknown filter column 'nope'"):
        table.read(columns=["id"], filter=[("nope", "=", 1)])
    with pytest.raises(InputError, match="cannot apply the filter"):
        table.read(filter=[("ts", "=", "not a number")])
    with pytest.raises(InputError, match="cannot apply the filter"):
        table.read(columns=["id"], filter=pc.field("nope") == 1)


def test_merge_engines_agree(trips: Trips) -> None:
    table, (i1, _, _) = trips
    want = rows_of(table, "id", "ts", "fare")
    for engine in lsm_lab.ENGINES:
        assert rows_of(table, "id", "ts", "fare", merge=engine) == want
        assert rows_of(table, "id", merge=engine, as_of=i1) == rows_of(table, "id", as_of=i1)
    with pytest.raises(InputError, match="unknown merge engine 'bogus'"):
        table.read(merge="bogus")


def test_partition_pruning_skips_other_partitions(trips: Trips) -> None:
    table, _ = trips
    for _, path, _ in fsview.list_data_files(table.path):  # make every file outside city=sf unreadable
        if path.parent.name != "city=sf":
            path.write_bytes(b"not parquet")
    assert rows_of(table, "id", "fare", filter=[("city", "=", "sf")]) == [("k0", 100.0)]
    with pytest.raises(CorruptFileError):
        table.read()


def test_time_travel(trips: Trips) -> None:
    table, (i1, i2, i3) = trips
    assert len(rows_of(table, "id", as_of=i1.completion_time)) == 5
    assert rows_of(table, "id", "fare", as_of=i1, filter=[("id", "=", "k0")]) == [("k0", 0.0)]
    assert rows_of(table, "id", "fare", as_of=i2, filter=[("id", "=", "k0")]) == [("k0", 100.0)]
    assert len(rows_of(table, "id", as_of=i2)) == 6 and len(rows_of(table, "id", as_of=i3)) == 5
    # an instant time reads every completed write begun at or before it (Spark's as.of.instant): i2 is visible
    # as of its own begin time; as a *completion* time, i2 had not completed then (i1 had)
    assert rows_of(table, "id", "fare", as_of=i2.begin_time) == rows_of(table, "id", "fare", as_of=i2)
    assert rows_of(table, "id", "fare", as_of=lsm_lab.CompletionTime(i2.begin_time)) == \
        rows_of(table, "id", "fare", as_of=i1)
    assert rows_of(table, "id", "fare", as_of=i1.begin_time) == rows_of(table, "id", "fare", as_of=i1)
    assert i1.completion_time is not None
    moment = dt.datetime.strptime(i1.completion_time[:14], "%Y%m%d%H%M%S").replace(
        tzinfo=dt.UTC) + dt.timedelta(milliseconds=int(i1.completion_time[14:]))
    assert len(rows_of(table, "id", as_of=moment)) == 5
    assert table.read(as_of="20000101000000000").num_rows == 0
    assert table.read(as_of="20000101000000").num_rows == 0  # legacy 14-digit time
    with pytest.raises(TimelineError, match="not an instant time"):
        table.read(as_of="yesterday")
    pending = lsm_lab.Instant.make(i3.begin_time, i3.action, lsm_lab.State.INFLIGHT)
    with pytest.raises(InputError, match="has not completed"):
        table.read(as_of=pending)


@pytest.mark.parametrize("table_type", TYPES)
def test_read_optimized(tmp_table: Callable[..., lsm_lab.Table], table_type: str) -> None:
    table = tmp_table(ordering_field="ts", table_type=table_type)
    table.insert([{"id": "a", "ts": 1}, {"id": "b", "ts": 1}])
    table.upsert([{"id": "a", "ts": 2}, {"id": "c", "ts": 2}])
    got = sorted((r["id"], r["ts"]) for r in table.read_optimized().to_pylist())
    if table_type == "MERGE_ON_READ":  # base files only: the update of a and the insert of c sit in logs
        assert ("a", 1) in got and ("a", 2) not in got
        assert set(got) <= {("a", 1), ("b", 1), ("c", 2)}
    else:
        assert got == [("a", 2), ("b", 1), ("c", 2)]
    assert table.read_optimized(columns=["id"]).column_names == ["id"]


def test_read_incremental(trips: Trips) -> None:
    table, (i1, i2, i3) = trips
    assert rows_of_table(table.read_incremental(i1.completion_time, i2.completion_time), "id") == ["k0", "k5"]
    # latest versions as of `end`: at i1 every record was i1's
    assert rows_of_table(table.read_incremental(None, i1.completion_time), "id") == ["k0", "k1", "k2", "k3", "k4"]
    assert rows_of_table(table.read_incremental(None, i3), "id") == ["k0", "k2", "k3", "k4", "k5"]
    assert rows_of_table(table.read_incremental(i2.completion_time), "id") == []
    assert rows_of_table(table.read_incremental(i1), "id") == ["k0", "k5"]
    assert table.read_incremental(i1, columns=["id"]).column_names == ["id"]


def rows_of_table(t: pa.Table, col: str) -> list[Any]:
    return sorted(t.column(col).to_pylist())


# --------------------------------------------------------------------------- inspection
def test_timeline_frame(trips: Trips) -> None:
    table, (i1, i2, i3) = trips
    tl = table.timeline()
    assert list(tl.columns[:12]) == ["begin_time", "completion_time", "action", "state", "operation", "partitions",
                                     "files", "records_written", "records_inserted", "records_updated",
                                     "records_deleted", "bytes_written"]
    assert list(tl["begin_time"]) == [i1.begin_time, i2.begin_time, i3.begin_time]
    assert list(tl["completion_time"]) == [i1.completion_time, i2.completion_time, i3.completion_time]
    assert set(tl["action"]) == {"deltacommit"} and set(tl["state"]) == {"completed"}
    assert list(tl["operation"]) == ["INSERT", "UPSERT", "DELETE"]
    assert list(tl["records_written"]) == [5, 2, 0]
    assert list(tl["records_inserted"]) == [5, 1, 0]
    assert list(tl["records_updated"]) == [0, 1, 0]
    assert list(tl["records_deleted"]) == [0, 0, 1]
    assert list(tl["partitions"]) == [3, 2, 1]
    assert (tl["bytes_written"] > 0).all()
    assert (tl["files"] >= tl["partitions"]).all() and tl["files"].iloc[2] == 1  # a file per file group touched


def test_timeline_shows_pending_instants(trips: Trips) -> None:
    table, _ = trips
    inflight = table.active_timeline.start(table.active_timeline.request("deltacommit"))
    tl = table.timeline()
    assert tl.iloc[-1]["state"] == "inflight" and tl.iloc[-1]["begin_time"] == inflight.begin_time
    assert tl.iloc[-1]["records_written"] == 0


def test_file_slices(trips: Trips) -> None:
    table, _ = trips
    fs = table.file_slices()
    for col in ["partition", "file_id", "base_instant", "base_file", "log_files", "num_logs", "size_bytes",
                "num_records", "min_key", "max_key"]:
        assert col in fs.columns
    assert len(fs) == len(table.file_groups()) and set(fs["partition"]) == {"city=sf", "city=chennai",
                                                                             "city=sao_paulo"}
    sf = fs[fs["partition"] == "city=sf"]
    assert sf["num_logs"].sum() == 2  # k0's update and k1's delete
    assert (fs["num_logs"] == fs["log_files"].map(len)).all()
    assert (fs["size_bytes"] > 0).all() and fs["base_file"].notna().all()
    assert (fs["min_key"] <= fs["max_key"]).all()
    assert fs["num_records"].sum() == 5 + 2 + 1  # rows in base files + data logs + delete logs
    assert len(table.file_slices(as_of="20000101000000000")) == 0


def test_footers(trips: Trips) -> None:
    table, (_i1, i2, i3) = trips
    f = lsm_lab.footers(table.path)
    assert len(f) == len(data_files(table))
    for col in ["partition", "file", "num_rows", "num_row_groups", "size_bytes",
                "log.VERSION", "log.INSTANT_TIME", "log.SCHEMA", "hoodie_min_record_key", "lsm_lab.sorted"]:
        assert col in f.columns
    assert "hudi.log.block_type" not in f.columns  # table version 10: the kind of a log is in its name
    logs = f[f["log.VERSION"].notna()]
    assert {name.split(".")[-2] for name in logs["file"]} == {"log", "deletes"}
    assert set(logs["log.VERSION"]) == {"2"}
    assert set(logs["log.INSTANT_TIME"]) == {i2.begin_time, i3.begin_time}
    assert (f[f["log.VERSION"].isna()]["num_rows"] > 0).all()
    one = lsm_lab.footers(table.path / logs.iloc[0]["partition"] / logs.iloc[0]["file"])  # a single file
    assert len(one) == 1 and one.iloc[0]["log.VERSION"] == "2"
    with pytest.raises(TableNotFoundError, match="no such file or folder"):
        lsm_lab.footers(table.path / "nope")


def test_footers_corrupt_log(trips: Trips) -> None:
    table, _ = trips
    log = next(p for _, p, n in fsview.list_data_files(table.path) if n.is_log)
    t = pq.read_table(log)
    log.unlink()
    pq.write_table(t.replace_schema_metadata({"hudi.log.format.metadata": "{oops"}), log)
    with pytest.raises(CorruptFileError, match="not JSON"):
        lsm_lab.footers(table.path)


def test_dump_levels(trips: Trips, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table, (i1, _, _) = trips
    text = table.dump_levels()
    groups = table.file_groups()
    assert text.count("L1: base ") == len(groups)
    assert "L0 (1): [" in text and "L0 (0): []" in text and " delete sorted" in text
    assert all(g.file_id in text for g in groups)
    assert "rows=" in text and "keys [" in text
    assert "L0 (1)" not in table.dump_levels(as_of=i1)
    assert tmp_table().dump_levels() == "(no file groups)"


def test_corrupt_data_file_is_a_typed_error(trips: Trips) -> None:
    table, _ = trips
    base = next(p for _, p, n in fsview.list_data_files(table.path) if n.is_base)
    base.write_bytes(base.read_bytes()[:-30])
    with pytest.raises(CorruptFileError) as info:
        table.read()
    assert base.name in str(info.value)


# --------------------------------------------------------------------------- real Hudi tables
def _latest_base_rows(path: Path) -> int:
    """Rows of the latest base file of every file group, counted with plain pyarrow."""
    latest: dict[tuple[str, str], tuple[str, Path]] = {}
    for partition, file, name in fsview.list_data_files(path):
        key = (partition, name.file_id)
        if key not in latest or name.instant > latest[key][0]:
            latest[key] = (name.instant, file)
    return sum(pq.read_metadata(f).num_rows for _, f in latest.values())


@pytest.mark.parametrize("name", ["v6_simplekeygen_nonhivestyle", "v8_complexkeygen_hivestyle",
                                  "v6_simplekeygen_hivestyle_no_metafields", "v8_empty"])
def test_read_real_cow_tables(real_table: Callable[[str], Path], name: str) -> None:
    path = real_table(name)
    table = lsm_lab.open_table(path)
    got = table.read()
    assert got.num_rows == _latest_base_rows(path)
    keys = got.column("_hoodie_record_key").to_pylist()
    parts = got.column("_hoodie_partition_path").to_pylist()
    assert None not in keys and len(set(zip(parts, keys))) == len(keys)
    assert set(table.timeline()["state"]) <= {"completed"}


@settings(max_examples=80, deadline=None)
@given(chunks=st.lists(st.lists(st.text(alphabet="ab", max_size=2), max_size=6), min_size=1, max_size=4),
       start=st.integers(0, 3))
def test_key_field_empty_check_matches_arrow(chunks: list[list[str]], start: int) -> None:
    """`read._any_empty` (offsets of every chunk, sliced chunks included) agrees with `pc.equal(col, "")`."""
    from lsm_lab.filegroup import read as reader

    col = pa.chunked_array([pa.array(c, pa.string()).slice(min(start, len(c))) for c in chunks], type=pa.string())
    assert reader._any_empty(col) == bool(pc.any(pc.equal(col, "")).as_py())


def test_an_empty_key_in_a_data_file_is_a_typed_error(tmp_path: Path) -> None:
    """The key taken from the key field as read is checked as `records.record_keys` checks it."""
    from lsm_lab.filegroup import read as reader

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.insert([{"id": "a", "v": 1}])
    ctx = t.read_context()
    with pytest.raises(SchemaError, match="empty"):
        reader.data_source(ctx, pa.table({"id": ["a", ""], "v": [1, 2]}), reader.target_schema(ctx, reader.needed_columns(ctx, ["id", "v"])), "")
