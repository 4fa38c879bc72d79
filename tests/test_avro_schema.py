"""Arrow <-> Avro schema conversion (lsm_lab.avro_schema).

The golden facts come from real Hudi log blocks: every SCHEMA header found in
../shared must survive Avro -> Arrow -> Avro unchanged, byte for byte.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from lsm_lab import avro_schema as A
from lsm_lab.errors import SchemaError, UnsupportedFeatureError
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import naming

# --------------------------------------------------------------------------------------
# fixtures: the real Hudi files shipped in data/ (conftest's shared_dir)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def real_schemas(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every distinct SCHEMA header of the real log files (single files and tables) shipped in data/."""
    shared = shared_dir
    files = [p for p in (shared / "hudi-log-files").glob("*/.*") if p.is_file()]
    root = tmp_path_factory.mktemp("tables")
    for z in sorted((shared / "hudi-tables").glob("*.zip")):
        with zipfile.ZipFile(z) as archive:
            archive.extractall(root / z.stem)
    files += [
        p
        for p in root.rglob(".*")
        if p.is_file() and "__MACOSX" not in p.parts and "metadata" not in p.parts and getattr(naming.parse(p.name), "log_format", 0) == 1
    ]
    schemas: list[str] = []
    for f in files:
        for block in v1.read_log_file(f, decode=False):
            s = block.header.get("SCHEMA")
            if s and s not in schemas:
                schemas.append(s)
    assert schemas, "the shared folder should hold log files with schemas"
    return schemas


# --------------------------------------------------------------------------------------
# real schemas
# --------------------------------------------------------------------------------------


def test_real_schemas_round_trip_exactly(real_schemas: list[str]) -> None:
    for text in real_schemas:
        record = json.loads(text)
        arrow = A.avro_to_arrow_schema(text)
        back = A.arrow_to_avro_schema(arrow, name=record["name"], namespace=record["namespace"])
        assert A.avro_schema_json(back) == text


def test_real_schemas_include_decimals_dates_and_timestamps(real_schemas: list[str]) -> None:
    types = {str(f.type) for s in real_schemas for f in A.avro_to_arrow_schema(s)}
    assert {"decimal128(15, 2)", "date32[day]", "timestamp[us, tz=UTC]", "string", "int64"} <= types


# --------------------------------------------------------------------------------------
# Arrow -> Avro, Hudi style
# --------------------------------------------------------------------------------------


def test_hudi_style_golden() -> None:
    schema = pa.schema(
        [
            pa.field("_hoodie_commit_time", pa.string()),
            pa.field("id", pa.string(), nullable=False),
            pa.field("ts", pa.int64()),
            pa.field("amount", pa.decimal128(10, 2)),
            pa.field("at", pa.timestamp("us", tz="UTC")),
            pa.field("day", pa.date32()),
        ]
    )
    name, namespace = A.hudi_record_names("t")
    got = A.avro_schema_json(A.arrow_to_avro_schema(schema, name=name, namespace=namespace))
    assert got == (
        '{"type":"record","name":"t_record","namespace":"hoodie.t","fields":['
        '{"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null},'
        '{"name":"id","type":"string"},'
        '{"name":"ts","type":["null","long"],"default":null},'
        '{"name":"amount","type":["null",{"type":"fixed","name":"fixed","namespace":"hoodie.t.t_record.amount",'
        '"size":5,"logicalType":"decimal","precision":10,"scale":2}],"default":null},'
        '{"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},'
        '{"name":"day","type":["null",{"type":"int","logicalType":"date"}],"default":null}]}'
    )


@pytest.mark.parametrize(
    ("arrow", "avro", "back"),
    [
        (pa.bool_(), "boolean", pa.bool_()),
        (pa.int8(), "int", pa.int32()),
        (pa.uint16(), "int", pa.int32()),
        (pa.int32(), "int", pa.int32()),
        (pa.uint32(), "long", pa.int64()),
        (pa.int64(), "long", pa.int64()),
        (pa.float32(), "float", pa.float32()),
        (pa.float64(), "double", pa.float64()),
        (pa.large_string(), "string", pa.string()),
        (pa.large_binary(), "bytes", pa.binary()),
        (pa.date64(), {"type": "int", "logicalType": "date"}, pa.date32()),
        (pa.time32("s"), {"type": "int", "logicalType": "time-millis"}, pa.time32("ms")),
        (pa.time64("ns"), {"type": "long", "logicalType": "time-micros"}, pa.time64("us")),
        (pa.timestamp("ms", tz="UTC"), {"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC")),
        (pa.timestamp("ns", tz="Asia/Kolkata"), {"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC")),
        (pa.timestamp("us"), {"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us")),
        (pa.dictionary(pa.int8(), pa.string()), "string", pa.string()),
    ],
)
def test_scalar_types(arrow: pa.DataType, avro: object, back: pa.DataType) -> None:
    record = A.arrow_to_avro_schema(pa.schema([pa.field("c", arrow, nullable=False)]), name="r")
    assert record["fields"][0]["type"] == avro
    assert A.avro_to_arrow_schema(record).field("c").type == back


def test_nested_types_follow_spark_naming() -> None:
    schema = pa.schema(
        [
            pa.field("tags", pa.list_(pa.field("item", pa.string(), nullable=False))),
            pa.field("props", pa.map_(pa.string(), pa.int64())),
            pa.field("addr", pa.struct([pa.field("zip", pa.string()), pa.field("fee", pa.decimal128(5, 1))])),
            pa.field("raw", pa.binary(4)),
        ]
    )
    record = A.arrow_to_avro_schema(schema, name="r", namespace="hoodie.t")
    fields = {f["name"]: f["type"] for f in record["fields"]}
    assert fields["tags"] == ["null", {"type": "array", "items": "string"}]
    assert fields["props"] == ["null", {"type": "map", "values": ["null", "long"]}]
    addr = fields["addr"][1]
    assert (addr["name"], addr["namespace"]) == ("addr", "hoodie.t.r")
    assert addr["fields"][1]["type"][1]["namespace"] == "hoodie.t.r.addr.fee"
    assert fields["raw"] == ["null", {"type": "fixed", "name": "fixed", "namespace": "hoodie.t.r.raw", "size": 4}]
    fastavro.parse_schema(record)  # a valid Avro schema
    assert A.avro_to_arrow_schema(record) == schema


def test_null_column() -> None:
    record = A.arrow_to_avro_schema(pa.schema([pa.field("n", pa.null())]), name="r")
    assert record["fields"][0] == {"name": "n", "type": "null", "default": None}
    assert A.avro_to_arrow_schema(record).field("n").type == pa.null()


@pytest.mark.parametrize("precision,size", [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (15, 7), (18, 8), (38, 16)])
def test_decimal_fixed_size(precision: int, size: int) -> None:
    assert A.decimal_fixed_size(precision) == size


@pytest.mark.parametrize(
    "arrow",
    [pa.uint64(), pa.float16(), pa.duration("s"), pa.month_day_nano_interval(), pa.map_(pa.int32(), pa.string())],
)
def test_unsupported_arrow_types(arrow: pa.DataType) -> None:
    with pytest.raises(UnsupportedFeatureError, match="'c'"):
        A.arrow_to_avro_schema(pa.schema([pa.field("c", arrow)]), name="r")


@pytest.mark.parametrize("bad", ["has space", "1st", "dash-ed"])
def test_names_avro_cannot_carry(bad: str) -> None:
    with pytest.raises(SchemaError):
        A.arrow_to_avro_schema(pa.schema([pa.field(bad, pa.int32())]), name="r")
    with pytest.raises(SchemaError):
        A.arrow_to_avro_schema(pa.schema([pa.field("ok", pa.int32())]), name=bad)


# --------------------------------------------------------------------------------------
# Avro -> Arrow, general schemas
# --------------------------------------------------------------------------------------


def _record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "r", "namespace": "n", "fields": list(fields)}


def test_union_order_and_nullability() -> None:
    s = A.avro_to_arrow_schema(
        _record(
            {"name": "a", "type": ["long", "null"]},
            {"name": "b", "type": ["null", {"type": "string"}]},
            {"name": "c", "type": "int"},
            {"name": "d", "type": ["null"]},
        )
    )
    assert [(f.name, f.type, f.nullable) for f in s] == [
        ("a", pa.int64(), True),
        ("b", pa.string(), True),
        ("c", pa.int32(), False),
        ("d", pa.null(), True),
    ]


def test_named_types_enum_and_references() -> None:
    s = A.avro_to_arrow_schema(
        _record(
            {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
            {"name": "p", "type": {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "double"}]}},
            {"name": "q", "type": ["null", "Point"]},
            {"name": "h", "type": {"type": "fixed", "name": "Hash", "size": 16}},
            {"name": "h2", "type": "n.Hash"},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3}},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "odd", "type": {"type": "long", "logicalType": "no-such-type"}},
        )
    )
    assert s.field("color").type == pa.string()
    assert s.field("q").type == s.field("p").type == pa.struct([pa.field("x", pa.float64(), nullable=False)])
    assert s.field("h2").type == pa.binary(16)
    assert s.field("dec").type == pa.decimal256(40, 3)
    assert s.field("u").type == pa.string()
    assert s.field("odd").type == pa.int64()  # unknown logical types fall back (Avro spec)


def test_json_text_is_accepted() -> None:
    assert A.avro_to_arrow_schema(json.dumps(_record({"name": "a", "type": "string"}))).names == ["a"]


@pytest.mark.parametrize(
    "schema",
    [
        "{not json",
        '"string"',
        json.dumps({"type": "array", "items": "int"}),
        json.dumps(_record({"name": "a", "type": "NoSuchType"})),
        json.dumps(_record({"name": "a", "type": "int"}, {"name": "a", "type": "long"})),
        json.dumps(_record({"name": "a"})),
    ],
)
def test_malformed_schemas(schema: str) -> None:
    with pytest.raises(SchemaError):
        A.avro_to_arrow_schema(schema)


@pytest.mark.parametrize(
    "field_type",
    [
        ["null", "int", "string"],
        ["int", "string"],
        {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]},
    ],
)
def test_unsupported_avro(field_type: object) -> None:
    with pytest.raises(UnsupportedFeatureError):
        A.avro_to_arrow_schema(_record({"name": "a", "type": field_type}))


def test_strip_temporal_logical_types_keeps_decimals() -> None:
    record = _record(
        {"name": "t", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "d", "type": {"type": "fixed", "name": "f", "size": 5, "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "l", "type": {"type": "array", "items": {"type": "int", "logicalType": "date"}}},
    )
    stripped = A.strip_temporal_logical_types(record)
    assert stripped["fields"][0]["type"] == ["null", {"type": "long"}]
    assert stripped["fields"][1]["type"]["logicalType"] == "decimal"
    assert stripped["fields"][2]["type"]["items"] == {"type": "int"}
    assert record["fields"][0]["type"][1]["logicalType"] == "timestamp-micros"  # input untouched
