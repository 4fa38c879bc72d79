"""Arrow <-> Avro schemas, spelled the way Apache Hudi spells them.

A v1 log block carries its writer schema as Avro JSON in the `SCHEMA` header;
lsm_lab holds data as Arrow. This module translates between the two, in both
directions, without looking at any data.

What Hudi writes (seen in the real tables of `../shared/hudi-tables/`, all
produced by Spark's `SchemaConverters` plus Hudi's own post-processing):

    {"type":"record","name":"<table>_record","namespace":"hoodie.<table>","fields":[
      {"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null},
      ...                                       meta columns: doc "" and null first
      {"name":"ts","type":["null","long"],"default":null},
      {"name":"txn_datetime","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
      {"name":"txn_date","type":["null",{"type":"int","logicalType":"date"}],"default":null},
      {"name":"amount","type":["null",{"type":"fixed","name":"fixed",
         "namespace":"hoodie.<table>.<table>_record.amount","size":7,
         "logicalType":"decimal","precision":15,"scale":2}],"default":null}]}

- A nullable column is the union `["null", T]` (null *first*) with `"default": null`;
  a required column is the bare type.
- Decimals are `fixed` types of the fewest bytes that hold the precision, named
  `fixed` in the namespace `<parent namespace>.<record>.<field>`; nested records
  are named after their field, in the namespace `<parent namespace>.<record>`.
- Spark timestamps are `timestamp-micros` (a UTC instant); dates are `date`.

Type mapping (Arrow -> Avro -> Arrow):

    | Arrow                         | Avro                                   | back to Arrow       |
    |-------------------------------|----------------------------------------|---------------------|
    | bool                          | boolean                                | bool                |
    | int8/16/32, uint8/16          | int                                    | int32               |
    | int64, uint32                 | long                                   | int64               |
    | float32 / float64             | float / double                         | float32 / float64   |
    | string, large_string          | string                                 | string              |
    | binary, large_binary          | bytes                                  | binary              |
    | fixed_size_binary(n)          | fixed(n)                               | fixed_size_binary   |
    | decimal128/256(p, s)          | fixed + decimal(p, s)                  | decimal128/256      |
    | date32, date64                | int + date                             | date32              |
    | time32(s, ms)                 | int + time-millis                      | time32(ms)          |
    | time64(us, ns)                | long + time-micros                     | time64(us)          |
    | timestamp(s/ms/us/ns, tz)     | long + timestamp-millis/-micros        | timestamp(ms/us, UTC)|
    | timestamp(s/ms/us/ns) no tz   | long + local-timestamp-millis/-micros  | timestamp(ms/us)    |
    | list, large_list, fixed_list  | array                                  | list                |
    | map<string, V>                | map                                    | map<string, V>      |
    | struct                        | record                                 | struct              |
    | dictionary<_, V>              | as V                                   | as V                |
    | (Avro enum)                   | enum                                   | string              |

Simplified compared with Apache Hudi: no schema evolution or reader/writer schema
resolution (Hudi's `rewriteRecordWithNewSchema`); unions other than "nullable T"
are refused; Arrow time zones other than UTC come back as UTC (same instants);
nanosecond timestamps and times are written as microseconds (the writer refuses
values that would lose precision). Field `doc`s and defaults other than `null`
are ignored when reading.

It sits at the bottom of the package, next to errors.py, because both the
timeline (the Avro table schema Hudi readers find in commit metadata) and the
v1 log format (block writer schemas) need it.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lsm_lab.errors import SchemaError, UnsupportedFeatureError

AvroSchema = dict[str, Any]

#: Hudi's meta columns; Hudi gives them `"doc": ""` in the schemas it writes.
HOODIE_META_COLUMNS: tuple[str, ...] = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
_DOC_COLUMNS = frozenset(HOODIE_META_COLUMNS) | {"_hoodie_operation", "_hoodie_is_deleted"}

_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PRIMITIVE_ARROW: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
#: logical types whose values are plain ints/longs on the wire (decoded raw, typed by Arrow)
_TEMPORAL_LOGICAL = frozenset(
    {
        "date",
        "time-millis",
        "time-micros",
        "timestamp-millis",
        "timestamp-micros",
        "timestamp-nanos",
        "local-timestamp-millis",
        "local-timestamp-micros",
        "local-timestamp-nanos",
    }
)


def hudi_record_names(table_name: str) -> tuple[str, str]:
    """The Avro record name and namespace Hudi uses for a table: `<t>_record`, `hoodie.<t>`."""
    return f"{table_name}_record", f"hoodie.{table_name}"


# --------------------------------------------------------------------------------------
# Arrow -> Avro
# --------------------------------------------------------------------------------------


def arrow_to_avro_schema(schema: pa.Schema, *, name: str, namespace: str | None = None) -> AvroSchema:
    """Translate an Arrow schema into a Hudi-style Avro record schema (a JSON-ready dict).

    `name`/`namespace` name the top-level record; Hudi uses `hudi_record_names(table)`.
    Raises `SchemaError` for names Avro cannot carry and `UnsupportedFeatureError`
    for Arrow types with no Avro counterpart (uint64, float16, durations, unions, ...).
    """
    _check_avro_name(name, what="record name")
    if namespace:
        for part in namespace.split("."):
            _check_avro_name(part, what=f"namespace {namespace!r}")
    child_ns = f"{namespace}.{name}" if namespace else name
    record: AvroSchema = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    record["fields"] = [_arrow_field_to_avro(f, child_ns, path=f.name) for f in schema]
    _check_unique([f.name for f in schema], where=name)
    return record


def avro_schema_json(schema: Mapping[str, Any]) -> str:
    """Compact JSON, the way Avro's Java `Schema.toString()` prints it (no spaces)."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _arrow_field_to_avro(field: pa.Field, namespace: str, *, path: str) -> AvroSchema:
    _check_avro_name(field.name, what=f"column {path!r}")
    avro_type = _arrow_type_to_avro(field.type, field.name, namespace, path=path)
    out: AvroSchema = {"name": field.name}
    if field.nullable and avro_type != "null":
        out["type"] = ["null", avro_type]
    else:
        out["type"] = avro_type
    if field.name in _DOC_COLUMNS:
        out["doc"] = ""
    if field.nullable or avro_type == "null":
        out["default"] = None
    return out


def _nullable(avro_type: Any, nullable: bool) -> Any:
    return ["null", avro_type] if nullable and avro_type != "null" else avro_type


def _arrow_type_to_avro(t: pa.DataType, record_name: str, namespace: str, *, path: str) -> Any:
    if pa.types.is_dictionary(t):
        return _arrow_type_to_avro(t.value_type, record_name, namespace, path=path)
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "boolean"
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "int"
    if t in (pa.int64(), pa.uint32()):
        return "long"
    if t == pa.float32():
        return "float"
    if t == pa.float64():
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or _is_view(t, "string"):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or _is_view(t, "binary"):
        return "bytes"
    if pa.types.is_fixed_size_binary(t) and not pa.types.is_decimal(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{record_name}", "size": t.byte_width}
    if pa.types.is_decimal(t):
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{namespace}.{record_name}",
            "size": decimal_fixed_size(t.precision),
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_timestamp(t):
        unit = "millis" if t.unit in ("s", "ms") else "micros"
        prefix = "timestamp" if t.tz is not None else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or _is_view(t, "list"):
        item = t.value_field
        items = _arrow_type_to_avro(item.type, record_name, namespace, path=f"{path}[]")
        return {"type": "array", "items": _nullable(items, item.nullable)}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise UnsupportedFeatureError(
                f"column {path!r}: Avro maps need string keys, not {t.key_type}"
            )
        item = t.item_field
        values = _arrow_type_to_avro(item.type, record_name, namespace, path=f"{path}{{}}")
        return {"type": "map", "values": _nullable(values, item.nullable)}
    if pa.types.is_struct(t):
        child_ns = f"{namespace}.{record_name}"
        fields = [t.field(i) for i in range(t.num_fields)]
        _check_unique([f.name for f in fields], where=path)
        return {
            "type": "record",
            "name": record_name,
            "namespace": namespace,
            "fields": [_arrow_field_to_avro(f, child_ns, path=f"{path}.{f.name}") for f in fields],
        }
    raise UnsupportedFeatureError(f"column {path!r}: Arrow type {t} has no Avro counterpart in lsm_lab")


def _is_view(t: pa.DataType, kind: str) -> bool:
    check = getattr(pa.types, f"is_{kind}_view", None)
    return bool(check and check(t))


def decimal_fixed_size(precision: int) -> int:
    """Fewest bytes of a two's complement integer that hold `precision` decimal digits (Spark's rule)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _check_avro_name(name: str, *, what: str) -> None:
    if not isinstance(name, str) or not _AVRO_NAME.match(name):
        raise SchemaError(f"{what}: {name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)")


def _check_unique(names: list[str], *, where: str) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise SchemaError(f"{where}: duplicate field name {n!r}")
        seen.add(n)


# --------------------------------------------------------------------------------------
# Avro -> Arrow
# --------------------------------------------------------------------------------------


def parse_avro_schema(avro_schema: Mapping[str, Any] | str) -> AvroSchema:
    """Accept a schema as a dict or JSON text; check it is a record. Returns a dict."""
    if isinstance(avro_schema, str):
        try:
            parsed = json.loads(avro_schema)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"Avro schema is not valid JSON: {exc}") from exc
    else:
        parsed = dict(avro_schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError("an Avro table schema must be a record, got " + _short(parsed))
    return parsed


def avro_to_arrow_schema(avro_schema: Mapping[str, Any] | str) -> pa.Schema:
    """Translate an Avro record schema (dict or JSON text) into an Arrow schema.

    A field is nullable exactly when its type is `null` or a union holding `null`.
    Raises `SchemaError` for malformed schemas and `UnsupportedFeatureError` for
    unions of several non-null types and recursive types.
    """
    record = parse_avro_schema(avro_schema)
    conv = _AvroToArrow()
    struct, _ = conv.convert(record, namespace="", path=record.get("name", "record"))
    return pa.schema([struct.field(i) for i in range(struct.num_fields)])


class _AvroToArrow:
    """Walks an Avro schema, remembering named types (records, enums, fixed) by full name."""

    def __init__(self) -> None:
        self.named: dict[str, pa.DataType] = {}
        self.in_progress: set[str] = set()

    def convert(self, s: Any, *, namespace: str, path: str) -> tuple[pa.DataType, bool]:
        """Return (arrow type, nullable) for an Avro type."""
        if isinstance(s, str):
            if s in _PRIMITIVES:
                return _PRIMITIVE_ARROW[s], s == "null"
            return self._reference(s, namespace, path), False
        if isinstance(s, list):
            return self._union(s, namespace=namespace, path=path)
        if not isinstance(s, dict) or "type" not in s:
            raise SchemaError(f"{path}: not an Avro type: {_short(s)}")
        kind = s["type"]
        logical = s.get("logicalType")
        if isinstance(kind, (dict, list)):
            return self.convert(kind, namespace=namespace, path=path)
        if kind in _PRIMITIVES:
            return self._primitive(kind, logical, s), kind == "null"
        if kind == "record":
            return self._record(s, namespace, path), False
        if kind == "enum":
            self._define(s, namespace, pa.string(), path)
            return pa.string(), False
        if kind == "fixed":
            if not isinstance(s.get("size"), int) or s["size"] <= 0:
                raise SchemaError(f"{path}: fixed type without a positive size")
            arrow: pa.DataType = pa.binary(s["size"])
            if logical == "decimal" and _valid_decimal(s):
                arrow = _decimal(s["precision"], s.get("scale", 0))
            self._define(s, namespace, arrow, path)
            return arrow, False
        if kind == "array":
            if "items" not in s:
                raise SchemaError(f"{path}: array without items")
            t, nullable = self.convert(s["items"], namespace=namespace, path=f"{path}[]")
            return pa.list_(pa.field("item", t, nullable=nullable)), False
        if kind == "map":
            if "values" not in s:
                raise SchemaError(f"{path}: map without values")
            t, nullable = self.convert(s["values"], namespace=namespace, path=f"{path}{{}}")
            return pa.map_(pa.string(), pa.field("value", t, nullable=nullable)), False
        if isinstance(kind, str):
            return self._reference(kind, namespace, path), False
        raise SchemaError(f"{path}: unknown Avro type {_short(kind)}")

    def _primitive(self, kind: str, logical: Any, s: Mapping[str, Any]) -> pa.DataType:
        if kind == "int":
            if logical == "date":
                return pa.date32()
            if logical == "time-millis":
                return pa.time32("ms")
        elif kind == "long":
            if logical == "time-micros":
                return pa.time64("us")
            for unit, arrow_unit in (("millis", "ms"), ("micros", "us"), ("nanos", "ns")):
                if logical == f"timestamp-{unit}":
                    return pa.timestamp(arrow_unit, tz="UTC")
                if logical == f"local-timestamp-{unit}":
                    return pa.timestamp(arrow_unit)
        elif kind == "bytes" and logical == "decimal" and _valid_decimal(s):
            return _decimal(s["precision"], s.get("scale", 0))
        # unknown or misplaced logical types fall back to the underlying type (Avro spec)
        return _PRIMITIVE_ARROW[kind]

    def _record(self, s: Mapping[str, Any], namespace: str, path: str) -> pa.DataType:
        full, ns = _full_name(s, namespace, path)
        fields_in = s.get("fields")
        if not isinstance(fields_in, list):
            raise SchemaError(f"{path}: record {full!r} has no field list")
        if full in self.named or full in self.in_progress:
            raise SchemaError(f"{path}: Avro type {full!r} is defined twice")
        self.in_progress.add(full)
        fields = []
        names = []
        for f in fields_in:
            if not isinstance(f, dict) or "name" not in f or "type" not in f:
                raise SchemaError(f"{path}: malformed field {_short(f)}")
            names.append(f["name"])
            t, nullable = self.convert(f["type"], namespace=ns, path=f"{path}.{f['name']}")
            fields.append(pa.field(f["name"], t, nullable=nullable))
        _check_unique(names, where=path)
        self.in_progress.discard(full)
        struct = pa.struct(fields)
        self.named[full] = struct
        return struct

    def _define(self, s: Mapping[str, Any], namespace: str, arrow: pa.DataType, path: str) -> None:
        full, _ = _full_name(s, namespace, path)
        if full in self.named or full in self.in_progress:
            raise SchemaError(f"{path}: Avro type {full!r} is defined twice")
        self.named[full] = arrow

    def _reference(self, name: str, namespace: str, path: str) -> pa.DataType:
        candidates = [name] if "." in name else [f"{namespace}.{name}" if namespace else name, name]
        for full in candidates:
            if full in self.in_progress:
                raise UnsupportedFeatureError(f"{path}: recursive Avro type {full!r} has no Arrow form")
            if full in self.named:
                return self.named[full]
        raise SchemaError(f"{path}: unknown Avro type {name!r}")

    def _union(self, branches: list[Any], *, namespace: str, path: str) -> tuple[pa.DataType, bool]:
        has_null = any(b == "null" or (isinstance(b, dict) and b.get("type") == "null") for b in branches)
        others = [b for b in branches if not (b == "null" or (isinstance(b, dict) and b.get("type") == "null"))]
        if not others:
            return pa.null(), True
        if len(others) > 1:
            raise UnsupportedFeatureError(
                f"{path}: Avro union of several types {_short(others)} is not supported "
                "(only nullable unions [\"null\", T])"
            )
        t, inner_nullable = self.convert(others[0], namespace=namespace, path=path)
        return t, has_null or inner_nullable


def _full_name(s: Mapping[str, Any], namespace: str, path: str) -> tuple[str, str]:
    """(full name, namespace for its children) of a named Avro type."""
    name = s.get("name")
    if not isinstance(name, str) or not name:
        raise SchemaError(f"{path}: named Avro type without a name: {_short(s)}")
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    ns = s.get("namespace", namespace) or ""
    return (f"{ns}.{name}" if ns else name), ns


def _valid_decimal(s: Mapping[str, Any]) -> bool:
    p, sc = s.get("precision"), s.get("scale", 0)
    return isinstance(p, int) and isinstance(sc, int) and p > 0 and 0 <= sc <= p


def _decimal(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def _short(obj: Any) -> str:
    text = json.dumps(obj, default=str) if not isinstance(obj, str) else obj
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------------------------------
# helpers for the codec (lsm_lab.format.log_v1)
# --------------------------------------------------------------------------------------


def strip_temporal_logical_types(avro_schema: Any) -> Any:
    """A copy of the schema without date/time/timestamp/uuid logical types.

    The wire bytes are identical; a codec using this copy gets plain ints (and
    strings for uuid) instead of Python datetime objects, which Arrow then types
    from the schema `avro_to_arrow_schema` derived. Decimal logical types stay.
    """
    if isinstance(avro_schema, list):
        return [strip_temporal_logical_types(b) for b in avro_schema]
    if not isinstance(avro_schema, dict):
        return avro_schema
    out = {}
    for key, value in avro_schema.items():
        if key == "logicalType" and (value in _TEMPORAL_LOGICAL or value == "uuid"):
            continue
        if key in ("type", "items", "values"):
            out[key] = strip_temporal_logical_types(value)
        elif key == "fields" and isinstance(value, list):
            out[key] = [
                {**f, "type": strip_temporal_logical_types(f.get("type"))} if isinstance(f, dict) else f
                for f in value
            ]
        else:
            out[key] = value
    return out


def storage_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type whose Python values fastavro writes for `t`: temporal types become ints."""
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_list(t):
        f = t.value_field
        return pa.list_(f.with_type(storage_type(f.type)))
    if pa.types.is_map(t):
        f = t.item_field
        return pa.map_(t.key_type, f.with_type(storage_type(f.type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(storage_type(t.field(i).type)) for i in range(t.num_fields)])
    return t


__all__ = [
    "HOODIE_META_COLUMNS",
    "AvroSchema",
    "arrow_to_avro_schema",
    "avro_schema_json",
    "avro_to_arrow_schema",
    "decimal_fixed_size",
    "hudi_record_names",
    "parse_avro_schema",
    "storage_type",
    "strip_temporal_logical_types",
]
