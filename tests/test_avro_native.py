"""The column-wise Avro decoder mirrors fastavro's record-by-record decode exactly.

On every Avro data block of the real Hudi files in data/ and on Hypothesis-generated
records of every supported type: same table (schema, values, nulls), and the native
reader really is the one that decoded (not a silent fallback).
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab.avro_schema import arrow_to_avro_schema
from lsm_lab.format import log_v1 as v1
from lsm_lab.format.log_v1 import avro as avro_mod
from lsm_lab.format.log_v1.avro import decode_avro_records, encode_avro_records
from lsm_lab.format.log_v1.avro_native import decode_native, native_supported
from lsm_lab.format.log_v1.blocks import BlockType

REPO = Path(__file__).resolve().parents[1]


def _real_log_bytes() -> Iterator[tuple[str, bytes]]:
    """Every v1 log file of data/ (loose and inside the table zips, metadata table excluded)."""
    for f in sorted((REPO / "data" / "hudi-log-files").glob("*/*")):
        if f.is_file():
            yield str(f), f.read_bytes()
    for z in sorted((REPO / "data" / "hudi-tables").glob("*.zip")):
        with zipfile.ZipFile(z) as zf:
            for name in zf.namelist():
                if ".log." in name and "/.hoodie/" not in name and "__MACOSX" not in name:
                    yield f"{z.name}:{name}", zf.read(name)


class _Spy:
    """Wraps decode_native, counting the blocks it decoded; `off` forces the fastavro path."""

    def __init__(self, off: bool) -> None:
        self.off = off
        self.decoded = 0

    def __call__(self, *args: Any) -> pa.Table | None:
        if self.off:
            return None
        table = decode_native(*args)
        self.decoded += table is not None
        return table


def test_real_avro_blocks_decode_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    files = list(_real_log_bytes())
    native, plain = _Spy(off=False), _Spy(off=True)
    avro_blocks = 0
    for name, data in files:
        monkeypatch.setattr(avro_mod, "decode_native", native)
        fast = v1.decode_log_bytes(data, source=name)
        monkeypatch.setattr(avro_mod, "decode_native", plain)
        slow = v1.decode_log_bytes(data, source=name)
        assert len(fast) == len(slow)
        for a, b in zip(fast, slow):
            assert a.block_type == b.block_type
            if a.block_type == BlockType.AVRO_DATA:
                avro_blocks += 1
                assert a.records is not None and b.records is not None
                assert a.records.schema == b.records.schema, name
                assert a.records.equals(b.records), name
    assert avro_blocks >= 8  # the loose file and the data logs of the v6, v8 and v9 MOR tables
    assert native.decoded == avro_blocks  # every real block went through the native reader


# --------------------------------------------------------------------------------------
# random records
# --------------------------------------------------------------------------------------

_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "b": (pa.bool_(), st.booleans()),
    "i32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "f32": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "f64": (pa.float64(), st.floats(allow_nan=False)),
    "s": (pa.string(), st.text(max_size=12)),
    "bin": (pa.binary(), st.binary(max_size=12)),
    "fx": (pa.binary(3), st.binary(min_size=3, max_size=3)),
    "dec": (pa.decimal128(15, 2), st.decimals(min_value=-(10**12), max_value=10**12, places=2, allow_nan=False,
                                              allow_infinity=False)),
    "date": (pa.date32(), st.dates(min_value=dt.date(1, 1, 1))),
    "ts": (pa.timestamp("us", tz="UTC"), st.integers(-(2**62), 2**62)),
    "lts": (pa.timestamp("ms"), st.integers(-(2**50), 2**50)),
    "t_ms": (pa.time32("ms"), st.integers(0, 86_399_999)),
    "t_us": (pa.time64("us"), st.integers(0, 86_399_999_999)),
    "lst": (pa.list_(pa.int64()), st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4)),
    "rec": (pa.struct([pa.field("x", pa.int64(), nullable=False), pa.field("y", pa.string())]),
            st.fixed_dictionaries({"x": st.integers(-(2**63), 2**63 - 1), "y": st.none() | st.text(max_size=5)})),
}


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(1, 30))
    fields, columns = [], []
    for name in names:
        arrow_type, values = _TYPES[name]
        nullable = draw(st.booleans())
        strategy = (st.none() | values) if nullable else values
        raw = draw(st.lists(strategy, min_size=n, max_size=n))
        if pa.types.is_timestamp(arrow_type) or pa.types.is_time(arrow_type):
            storage = pa.int64() if arrow_type.bit_width == 64 else pa.int32()
            column = pa.array(raw, storage).cast(arrow_type)
        else:
            column = pa.array(raw, arrow_type)
        fields.append(pa.field(name, arrow_type, nullable=nullable))
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tables())
def test_random_records_decode_the_same(table: pa.Table) -> None:
    schema = arrow_to_avro_schema(table.schema, name="r", namespace="hoodie.r")
    content = encode_avro_records(table, schema)
    plain, _ = decode_avro_records(content, schema, native=False)
    rec = table.schema.get_field_index("rec")
    required_under_null = rec >= 0 and table.schema.field(rec).nullable  # rec.x is required
    assert native_supported(schema) is not required_under_null
    assert decode_avro_records(content, schema)[0].equals(plain)
    native = decode_native(content, table.num_rows, schema, plain.schema)
    if required_under_null:
        return
    assert native is not None
    assert native.schema == plain.schema
    assert native.equals(plain)


def test_unsupported_schemas_stay_on_fastavro() -> None:
    maps = pa.table({"m": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int64()))})
    schema = arrow_to_avro_schema(maps.schema, name="r")
    assert not native_supported(schema)
    table, _ = decode_avro_records(encode_avro_records(maps, schema), schema)
    assert table.column("m").to_pylist() == [[("a", 1)]]
    reference = {"type": "record", "name": "r", "fields": [
        {"name": "a", "type": {"type": "fixed", "name": "F", "size": 2}},
        {"name": "b", "type": "F"},
    ]}
    assert not native_supported(reference)
    assert not native_supported({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "null"]}]})
    enum = {"type": "enum", "name": "E", "symbols": ["X", "Y"]}
    assert native_supported({"type": "record", "name": "r", "fields": [{"name": "e", "type": enum}]})
    nullable_enum = {"type": "record", "name": "r", "fields": [{"name": "e", "type": ["null", enum]}]}
    assert not native_supported(nullable_enum)
    content = struct.pack(">iiib", 3, 2, 1, 0) + struct.pack(">ibb", 2, 2, 2)  # null; then "Y" (branch 1, index 1)
    table, _ = decode_avro_records(content, nullable_enum)
    assert table.column("e").to_pylist() == [None, "Y"]


def test_inconsistent_lengths_fall_back_to_the_precise_error() -> None:
    table = pa.table({"k": pa.array(["a", "bb"])})
    schema = arrow_to_avro_schema(table.schema, name="r")
    content = bytearray(encode_avro_records(table, schema))
    assert decode_native(bytes(content), 2, schema, decode_avro_records(bytes(content), schema)[0].schema) is not None
    (first,) = struct.unpack_from(">i", content, 8)
    struct.pack_into(">i", content, 8, first + 1)  # record 0 claims one byte more than it holds
    assert decode_native(bytes(content), 2, schema, pa.schema([pa.field("k", pa.string())])) is None
    with pytest.raises(Exception, match="record 0"):
        decode_avro_records(bytes(content), schema)


def test_decimal_values_survive() -> None:
    table = pa.table({"d": pa.array([decimal.Decimal("-0.01"), None, decimal.Decimal("9999999999999.99")],
                                    pa.decimal128(15, 2))})
    schema = arrow_to_avro_schema(table.schema, name="r")
    decoded, _ = decode_avro_records(encode_avro_records(table, schema), schema)
    assert decoded.equals(table)


def test_polars_is_imported_by_the_first_v1_block_only() -> None:
    """A Spark worker imports lsm_lab's Spark modules; polars (~25 MiB of its resident memory) comes
    only with the first v1 block decoded, which a v2 table's compaction never reads."""
    import os
    import subprocess
    import sys

    code = ("import sys, pyarrow as pa, lsm_lab.spark.compact, lsm_lab.spark.read, lsm_lab.spark.write\n"
            "before = 'polars' in sys.modules\n"
            "from lsm_lab.format.log_v1.avro import decode_avro_records, encode_avro_records\n"
            "schema = {'type': 'record', 'name': 'r', 'fields': [{'name': 'a', 'type': 'long'}]}\n"
            "decode_avro_records(encode_avro_records(pa.table({'a': [1, 2]}), schema), schema)\n"
            "print(before, 'polars' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=REPO)
    assert out.stdout.split() == ["False", "True"]
