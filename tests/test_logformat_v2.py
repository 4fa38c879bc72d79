"""Log format v2: native Parquet data and delete logs, readable with no lsm_lab code; ordering values."""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import CorruptFileError, SchemaError
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import parquet_footer, parquet_read

duckdb = pytest.importorskip("duckdb")

T = "20261122001500123"
META = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
        "_hoodie_file_name"]


def data_rows() -> pa.Table:
    keys = ["a", "b", "c\u00e9", "d\U0001f600"]
    n = len(keys)
    return pa.table({
        "_hoodie_commit_time": [T] * n,
        "_hoodie_commit_seqno": [f"{T}_0_{i}" for i in range(n)],
        "_hoodie_record_key": keys,
        "_hoodie_partition_path": ["city=x"] * n,
        "_hoodie_file_name": ["f_0-0-0_" + T + "_1.parquet"] * n,
        "id": keys,
        "ts": pa.array([5, 6, None, 8], pa.int64()),
        "fare": [1.5, 2.5, 3.5, None],
    })


def delete_rows() -> pa.Table:
    return pa.table({
        "partition_path": ["city=x", "city=x", None],  # columns in another order: the writer reorders
        "record_key": ["a", "b", "c"],
        "ordering_val": v2.encode_ordering(pa.array([7, None, -1], pa.int64())),
    })


def duck_rows(path: Path) -> pa.Table:
    with duckdb.connect() as con:
        return con.sql(f"SELECT * FROM read_parquet('{path}')").to_arrow_table()


def duck_kv(path: Path) -> dict[str, str]:
    with duckdb.connect() as con:
        rows = con.execute(f"SELECT key, value FROM parquet_kv_metadata('{path}')").fetchall()
    return {bytes(k).decode(): bytes(v).decode() for k, v in rows}


# --------------------------------------------------------------------------- data logs
def test_data_log_readable_without_lsm_lab(tmp_path: Path) -> None:
    path = tmp_path / f"fid_0-0-0_{T}_1.parquet"
    rows = data_rows()
    size = v2.write_data_log(path, rows, instant_time=T, is_sorted=True, schema_json='{"type":"record"}')
    assert size == path.stat().st_size > 0
    # pyarrow
    back = pq.read_table(path)
    assert back.column_names[:5] == META and back.column_names[5:] == ["id", "ts", "fare"]
    assert back.to_pylist() == rows.to_pylist()
    # DuckDB
    assert duck_rows(path).to_pylist() == rows.to_pylist()
    # footers, read by each tool
    for kv in (duck_kv(path), {k.decode(): v.decode() for k, v in pq.read_metadata(path).metadata.items()}):
        header = json.loads(kv["hudi.log.format.metadata"])
        assert header == {"VERSION": "2", "INSTANT_TIME": T, "SCHEMA": '{"type":"record"}'}
        assert kv["hudi.log.block_type"] == "parquet_data"
        assert kv["hoodie_min_record_key"] == "a" and kv["hoodie_max_record_key"] == "d\U0001f600"
        assert kv["lsm_lab.sorted"] == "true"
    assert v2.read_log_header(path) == {"VERSION": "2", "INSTANT_TIME": T, "SCHEMA": '{"type":"record"}',
                                        "BLOCK_TYPE": "parquet_data"}


def test_unsorted_log_is_not_marked_sorted(tmp_path: Path) -> None:
    path = tmp_path / f"fid_0-0-0_{T}_1.parquet"
    v2.write_data_log(path, data_rows(), instant_time=T, is_sorted=False)
    assert "lsm_lab.sorted" not in parquet_footer.footer(path)
    assert "SCHEMA" not in v2.read_log_header(path)


def test_row_groups(tmp_path: Path) -> None:
    path = tmp_path / f"fid_0-0-0_{T}_1.parquet"
    v2.write_data_log(path, data_rows(), instant_time=T, is_sorted=True, row_group_size=3)
    assert pq.ParquetFile(path).num_row_groups == 2
    assert pq.read_table(path).num_rows == 4


def test_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / f"fid_0-0-0_{T}_1.parquet"
    v2.write_data_log(path, data_rows(), instant_time=T, is_sorted=True)
    before = path.read_bytes()
    with pytest.raises(Exception, match="refusing to overwrite"):
        v2.write_data_log(path, data_rows().slice(0, 1), instant_time=T, is_sorted=True)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp file left


# --------------------------------------------------------------------------- delete logs
def test_delete_log_readable_without_lsm_lab(tmp_path: Path) -> None:
    path = tmp_path / f"fid_0-0-0_{T}_1.delete.parquet"
    v2.write_delete_log(path, delete_rows(), instant_time=T, is_sorted=True)
    schema = pq.read_schema(path)
    assert schema.names == ["record_key", "ordering_val", "partition_path"]
    assert schema.field("record_key").type == pa.string() and not schema.field("record_key").nullable
    assert schema.field("ordering_val").type == pa.binary() and schema.field("ordering_val").nullable
    assert schema.field("partition_path").type == pa.string()
    expected = [
        {"record_key": "a", "ordering_val": struct.pack(">q", 7), "partition_path": "city=x"},
        {"record_key": "b", "ordering_val": None, "partition_path": "city=x"},
        {"record_key": "c", "ordering_val": struct.pack(">q", -1), "partition_path": None},
    ]
    assert pq.read_table(path).to_pylist() == expected
    duck = duck_rows(path).to_pylist()
    assert [{k: (bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v) for k, v in r.items()}
            for r in duck] == expected
    kv = duck_kv(path)
    assert kv["hudi.log.block_type"] == "delete"
    assert json.loads(kv["hudi.log.format.metadata"]) == {"VERSION": "2", "INSTANT_TIME": T}
    assert kv["hoodie_min_record_key"] == "a" and kv["hoodie_max_record_key"] == "c"
    assert v2.read_log_header(path)["BLOCK_TYPE"] == "delete"
    decoded = v2.decode_ordering(pq.read_table(path).column("ordering_val"), pa.int64())
    assert decoded.to_pylist() == [7, None, -1]


def test_delete_log_needs_keys(tmp_path: Path) -> None:
    bad = pa.table({"record_key": pa.array([None], pa.string()), "ordering_val": pa.nulls(1, pa.binary()),
                    "partition_path": pa.array([None], pa.string())})
    with pytest.raises((pa.ArrowInvalid, ValueError)):
        v2.write_delete_log(tmp_path / f"f_0-0-0_{T}_1.delete.parquet", bad, instant_time=T, is_sorted=True)


# --------------------------------------------------------------------------- corrupt footers
def _write_with_footer(path: Path, kv: dict[str, str]) -> None:
    table = pa.table({"record_key": ["a"]})
    pq.write_table(table.replace_schema_metadata(kv), path)


@pytest.mark.parametrize(
    ("kv", "message"),
    [
        ({}, "has no 'hudi.log.format.metadata'"),
        ({"hudi.log.format.metadata": "{not json"}, "is not JSON"),
        ({"hudi.log.format.metadata": "[1, 2]"}, "is not a JSON object"),
        ({"hudi.log.format.metadata": '{"VERSION": "2"}'}, "lacks VERSION or INSTANT_TIME"),
        ({"hudi.log.format.metadata": '{"INSTANT_TIME": "1"}'}, "lacks VERSION or INSTANT_TIME"),
    ],
)
def test_corrupt_footer(tmp_path: Path, kv: dict[str, str], message: str) -> None:
    path = tmp_path / f"f_0-0-0_{T}_1.parquet"
    _write_with_footer(path, kv)
    with pytest.raises(CorruptFileError, match=message) as info:
        v2.read_log_header(path)
    assert info.value.path == str(path)


def test_missing_block_type_means_data(tmp_path: Path) -> None:
    path = tmp_path / f"f_0-0-0_{T}_1.parquet"
    _write_with_footer(path, {"hudi.log.format.metadata": json.dumps({"VERSION": 2, "INSTANT_TIME": T})})
    assert v2.read_log_header(path) == {"VERSION": "2", "INSTANT_TIME": T, "BLOCK_TYPE": "parquet_data"}


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_damaged_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / f"f_0-0-0_{T}_1.parquet"
    v2.write_data_log(path, data_rows(), instant_time=T, is_sorted=True)
    raw = path.read_bytes()
    path.write_bytes({"truncate": raw[: len(raw) - 20], "garbage": b"PAR1" + b"\x00" * 64, "empty": b""}[damage])
    with pytest.raises(CorruptFileError) as info:
        v2.read_log_header(path)
    assert str(path) in str(info.value)
    with pytest.raises(CorruptFileError):
        parquet_read.read_parquet(path)


# --------------------------------------------------------------------------- ordering values
def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack(">d", a) == struct.pack(">d", b)  # also tells -0.0 from 0.0
    return a == b


def _round_trip(values: list[Any], typ: pa.DataType) -> None:
    arr = pa.array(values, typ)
    encoded = v2.encode_ordering(arr)
    assert encoded.type == pa.binary() and len(encoded) == len(arr)
    assert encoded.null_count == arr.null_count
    back = v2.decode_ordering(encoded, typ)
    assert back.type == typ
    got, want = back.to_pylist(), arr.to_pylist()
    assert all(_same(g, w) for g, w in zip(got, want)), (got, want)
    # also from a ChunkedArray and from a slice (offset buffers)
    chunked = pa.chunked_array([arr.slice(0, len(arr) // 2), arr.slice(len(arr) // 2)], typ)
    assert v2.encode_ordering(chunked).equals(encoded)
    if len(arr) > 1:
        tail = v2.decode_ordering(encoded.slice(1), typ).to_pylist()
        assert all(_same(g, w) for g, w in zip(tail, want[1:]))


def _opt(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(st.none() | strategy, max_size=12)


INT_TYPES = [(pa.int64(), -(2**63), 2**63 - 1), (pa.int32(), -(2**31), 2**31 - 1), (pa.int8(), -128, 127),
             (pa.uint32(), 0, 2**32 - 1), (pa.uint8(), 0, 255)]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_ordering_ints_round_trip(data: st.DataObject) -> None:
    typ, lo, hi = data.draw(st.sampled_from(INT_TYPES))
    _round_trip(data.draw(_opt(st.integers(lo, hi))), typ)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_opt(st.floats(allow_nan=True, allow_infinity=True)), st.sampled_from([pa.float64(), pa.float32()]))
def test_ordering_floats_round_trip(values: list[Any], typ: pa.DataType) -> None:
    if typ == pa.float32():
        values = [None if v is None else struct.unpack("<f", struct.pack("<f", v))[0]
                  if math.isfinite(v) and abs(v) < 3e38 else v for v in values]
    _round_trip(values, typ)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_opt(st.text(st.characters(blacklist_categories=["Cs"]), max_size=10)),
       st.sampled_from([pa.string(), pa.large_string()]))
def test_ordering_strings_round_trip(values: list[Any], typ: pa.DataType) -> None:
    _round_trip(values, typ)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(_opt(st.binary(max_size=10)))
def test_ordering_binary_round_trip(values: list[Any]) -> None:
    _round_trip(values, pa.binary())


TIME_TYPES = [pa.timestamp("ms"), pa.timestamp("us"), pa.timestamp("ns"), pa.timestamp("us", tz="UTC"),
              pa.timestamp("s", tz="Asia/Kolkata")]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_ordering_timestamps_round_trip(data: st.DataObject) -> None:
    typ = data.draw(st.sampled_from(TIME_TYPES))
    moments = st.datetimes(min_value=dt.datetime(1700, 1, 1), max_value=dt.datetime(2250, 1, 1))
    values = data.draw(_opt(moments))
    if typ.tz is not None:
        values = [None if v is None else v.replace(tzinfo=dt.UTC) for v in values]
    if typ.unit in ("s", "ms"):
        values = [None if v is None else v.replace(microsecond=(v.microsecond // 1000) * 1000 if typ.unit == "ms"
                                                    else 0) for v in values]
    arr = pa.array(values, typ)
    back = v2.decode_ordering(v2.encode_ordering(arr), typ)
    assert back.equals(arr)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(_opt(st.dates()), _opt(st.booleans()))
def test_ordering_dates_and_booleans_round_trip(dates: list[Any], flags: list[Any]) -> None:
    _round_trip(dates, pa.date32())
    _round_trip(flags, pa.bool_())


def test_ordering_all_nulls_and_empty() -> None:
    assert v2.encode_ordering(pa.nulls(3)).to_pylist() == [None, None, None]
    for typ in (pa.int64(), pa.string(), pa.float64(), pa.timestamp("us"), pa.bool_()):
        _round_trip([], typ)
        _round_trip([None, None], typ)


def test_ordering_encoding_is_documented_bytes() -> None:
    assert v2.encode_ordering(pa.array([1, -2], pa.int64())).to_pylist() == [
        b"\x00" * 7 + b"\x01", b"\xff" * 7 + b"\xfe"]
    assert v2.encode_ordering(pa.array([1.5])).to_pylist() == [struct.pack(">d", 1.5)]
    assert v2.encode_ordering(pa.array(["é"])).to_pylist() == ["é".encode()]
    assert v2.encode_ordering(pa.array([True, False])).to_pylist() == [b"\x01", b"\x00"]


def test_decode_rejects_wrong_widths() -> None:
    with pytest.raises(SchemaError, match="8-byte"):
        v2.decode_ordering(pa.array([b"\x01\x02"], pa.binary()), pa.int64())


def test_validate_ordering_type() -> None:
    v2.validate_ordering_type(pa.int64(), "ts")
    for bad in (pa.list_(pa.int64()), pa.struct([("a", pa.int64())]), pa.dictionary(pa.int8(), pa.string())):
        with pytest.raises(SchemaError, match="ordering field 'ts'"):
            v2.validate_ordering_type(bad, "ts")
