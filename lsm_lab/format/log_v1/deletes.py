"""v1 delete blocks: the keys a commit deleted, with their ordering values.

The content of a delete block (type 1, version 3):

    int32 version (3) | int32 payload length | Avro binary HoodieDeleteRecordList
    {deleteRecordList: [{recordKey, partitionPath, orderingVal}]}

Versions 1 and 2 (Hudi < 0.12) are Kryo-serialised Java objects and raise
`UnsupportedFeatureError`.

**Ordering values.** Hudi wraps each delete's ordering value in a union of
one-field records (`IntWrapper{value}`, `LongWrapper{value}`, ...). The reader
unwraps them into one Arrow column whose type follows the wrapper (Int ->
int32, Long -> int64, Float -> float32, Double -> float64, Date -> date32,
Decimal -> decimal128(30, 15), TimeMicros -> time64[us], TimestampMicros ->
timestamp[us, UTC], ...). Every delete in the real tables carries
`IntWrapper(0)`: Hudi's *default* ordering value, which Hudi treats like null
("commit-time ordering": the delete wins whatever the record's ordering
value); see `commit_time_ordering_mask`. When one block mixes wrapper types,
that sentinel becomes null (same meaning), int/long and float/double are
widened, and any other mix is rendered as strings (`str()` of the value,
bytes as hex, multi-field `ArrayWrapper` values as a JSON list).

    content ──fastavro──► [{recordKey, partitionPath, orderingVal: Wrapper{value}}]
            ──unwrap──► record_key | partition_path | ordering_val  (one Arrow table)

Simplified compared with Apache Hudi: only version 3 is read; the ordering
value column gets one Arrow type per block (Hudi keeps a Java object per
record).

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import datetime as dt
import io
import json
import struct
from collections.abc import Sequence
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.avro_schema import storage_type
from lsm_lab.errors import CorruptFileError, SchemaError, UnsupportedFeatureError

DELETE_BLOCK_VERSION = 3

_MODEL_NS = "org.apache.hudi.avro.model"

#: (wrapper record name, Avro type of its `value`, Arrow type of the unwrapped column),
#: in the union order of HoodieDeleteRecordList.orderingVal (after "null"). Temporal
#: logical types are left out on purpose: the wire bytes are the same and the raw
#: ints are typed by Arrow.
_WRAPPERS: tuple[tuple[str, Any, pa.DataType], ...] = (
    ("BooleanWrapper", "boolean", pa.bool_()),
    ("IntWrapper", "int", pa.int32()),
    ("LongWrapper", "long", pa.int64()),
    ("FloatWrapper", "float", pa.float32()),
    ("DoubleWrapper", "double", pa.float64()),
    ("BytesWrapper", "bytes", pa.binary()),
    ("StringWrapper", "string", pa.string()),
    ("DateWrapper", "int", pa.date32()),
    ("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}, pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", "long", pa.time64("us")),
    ("TimestampMicrosWrapper", "long", pa.timestamp("us", tz="UTC")),
)
_WRAPPER_ARROW = {name: arrow for name, _, arrow in _WRAPPERS}


def _delete_record_list_schema() -> dict[str, Any]:
    """HoodieDeleteRecordList as in Hudi 1.x (the last union branch, ArrayWrapper, is read only)."""
    wrappers = [
        {"type": "record", "name": name, "namespace": _MODEL_NS, "fields": [{"name": "value", "type": avro}]}
        for name, avro, _ in _WRAPPERS
    ]
    array_wrapper = {
        "type": "record",
        "name": "ArrayWrapper",
        "namespace": _MODEL_NS,
        "fields": [
            {
                "name": "wrappedValues",
                "type": [
                    "null",
                    {
                        "type": "array",
                        "items": ["null", *[f"{_MODEL_NS}.{name}" for name, _, _ in _WRAPPERS],
                                  {"type": "record", "name": "LocalDateWrapper", "namespace": _MODEL_NS,
                                   "fields": [{"name": "value", "type": "int"}]}],
                    },
                ],
                "default": None,
            }
        ],
    }
    nullable_string = ["null", "string"]
    return {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": _MODEL_NS,
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "fields": [
                            {"name": "recordKey", "type": nullable_string, "default": None},
                            {"name": "partitionPath", "type": nullable_string, "default": None},
                            {"name": "orderingVal", "type": ["null", *wrappers, array_wrapper], "default": None},
                        ],
                    },
                },
            }
        ],
    }


_DELETE_SCHEMA = fastavro.parse_schema(_delete_record_list_schema())
_DELETE_COLUMNS = ("record_key", "partition_path", "ordering_val")


def decode_delete_records(content: bytes) -> tuple[pa.Table, int]:
    """Decode delete block content into (`record_key`, `partition_path`, `ordering_val`), version."""
    if len(content) < 8:
        raise CorruptFileError("delete content shorter than its version and length")
    version, size = struct.unpack_from(">ii", content, 0)
    if version in (1, 2):
        raise UnsupportedFeatureError(
            f"delete block version {version} is Kryo-serialized Java objects (Hudi < 0.12); "
            "lsm_lab reads version 3 only"
        )
    if version != DELETE_BLOCK_VERSION:
        raise UnsupportedFeatureError(f"delete block version {version} (lsm_lab reads version 3)")
    if size < 0 or 8 + size != len(content):
        raise CorruptFileError(f"delete payload length {size} does not match the content ({len(content) - 8} bytes)")
    stream = io.BytesIO(content[8:])
    decoded: Any = fastavro.schemaless_reader(stream, _DELETE_SCHEMA, return_record_name=True)
    if stream.tell() != size:
        raise CorruptFileError(f"delete payload decodes to {stream.tell()} bytes, its length says {size}")
    entries = decoded["deleteRecordList"]
    keys = [e["recordKey"] for e in entries]
    if any(k is None for k in keys):
        raise CorruptFileError("a delete record has no record key")
    table = pa.table(
        {
            "record_key": pa.array(keys, type=pa.string()),
            "partition_path": pa.array([e["partitionPath"] for e in entries], type=pa.string()),
            "ordering_val": _ordering_column([e["orderingVal"] for e in entries]),
        }
    )
    return table, version


def _unwrap(value: Any) -> tuple[str, Any] | None:
    """(wrapper short name, raw value) of one decoded orderingVal union, None for null."""
    if value is None:
        return None
    name, record = value
    short = name.rsplit(".", 1)[-1]
    if short == "ArrayWrapper":
        items = record.get("wrappedValues") or []
        return short, tuple(_natural(*u) if u is not None else None for u in map(_unwrap, items))
    return short, record["value"]


_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _natural(kind: str, raw: Any) -> Any:
    """The Python value a wrapper stands for (dates, times and timestamps from their raw ints)."""
    if kind in ("DateWrapper", "LocalDateWrapper"):
        return _EPOCH_DATE + dt.timedelta(days=raw)
    if kind == "TimeMicrosWrapper":
        return (dt.datetime.min + dt.timedelta(microseconds=raw)).time()
    if kind == "TimestampMicrosWrapper":
        return _EPOCH + dt.timedelta(microseconds=raw)
    return raw


def _as_text(kind: str, raw: Any) -> str:
    value = raw if kind == "ArrayWrapper" else _natural(kind, raw)
    if kind == "ArrayWrapper":
        return json.dumps([_jsonable(v) for v in value])
    return _jsonable(value) if isinstance(value, bytes) else str(value)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def _ordering_column(values: Sequence[Any]) -> pa.Array:
    unwrapped = [_unwrap(v) for v in values]
    kinds = {u[0] for u in unwrapped if u is not None}
    if len(kinds) > 1:
        # Hudi's default ordering value Integer(0) means the same as null
        unwrapped = [None if u == ("IntWrapper", 0) else u for u in unwrapped]
        kinds = {u[0] for u in unwrapped if u is not None}
    raw = [None if u is None else u[1] for u in unwrapped]
    if not kinds:
        return pa.nulls(len(raw))
    if kinds <= {"IntWrapper", "LongWrapper"}:
        return pa.array(raw, type=pa.int64() if "LongWrapper" in kinds else pa.int32())
    if kinds <= {"FloatWrapper", "DoubleWrapper"}:
        return pa.array(raw, type=pa.float64() if "DoubleWrapper" in kinds else pa.float32())
    if len(kinds) == 1 and "ArrayWrapper" not in kinds:
        return pa.array(raw, type=_WRAPPER_ARROW[next(iter(kinds))])
    return pa.array([None if u is None else _as_text(*u) for u in unwrapped], type=pa.string())


def commit_time_ordering_mask(deletes: pa.Table) -> pa.ChunkedArray:
    """True for deletes that win regardless of ordering values (Hudi's "commit-time ordering").

    Hudi treats a delete whose ordering value is null or the Integer 0 default
    (`IntWrapper(0)`, which Spark writes when a delete carries no ordering value)
    as newer than anything before it. A Long 0 does not count.
    """
    col = deletes.column("ordering_val")
    if pa.types.is_int32(col.type):
        return pa.chunked_array([pc.fill_null(pc.equal(c, 0), True) for c in col.chunks], pa.bool_())
    return pc.is_null(col)


def _wrapper_for(t: pa.DataType, column: str) -> tuple[str, pa.DataType]:
    """(wrapper name, Arrow type whose Python values fastavro writes) for an ordering column type."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_boolean(t):
        return "BooleanWrapper", pa.bool_()
    if t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16()):
        return "IntWrapper", pa.int32()
    if t in (pa.int64(), pa.uint32(), pa.uint64()):
        return "LongWrapper", pa.int64()
    if t == pa.float32():
        return "FloatWrapper", pa.float32()
    if t in (pa.float16(), pa.float64()):
        return "DoubleWrapper", pa.float64()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "StringWrapper", pa.string()
    if pa.types.is_decimal(t):
        return "DecimalWrapper", pa.decimal128(30, 15)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "BytesWrapper", pa.binary()
    if pa.types.is_date(t):
        return "DateWrapper", pa.date32()
    if pa.types.is_time(t):
        return "TimeMicrosWrapper", pa.time64("us")
    if pa.types.is_timestamp(t):
        return "TimestampMicrosWrapper", pa.timestamp("us", tz=t.tz)
    raise UnsupportedFeatureError(f"column {column!r}: no Hudi ordering value wrapper for Arrow type {t}")


def encode_delete_records(keys: pa.Table) -> bytes:
    """Delete block content (version 3) for a table of `record_key` [, `partition_path`, `ordering_val`].

    A missing `partition_path` means "" (a non-partitioned table). A missing
    `ordering_val` column writes `IntWrapper(0)`, what Spark writes for a delete
    without an ordering value; a null `ordering_val` writes the null branch. Both
    make a "commit-time ordering" delete in Hudi (see `commit_time_ordering_mask`).
    """
    unknown = [c for c in keys.column_names if c not in _DELETE_COLUMNS]
    if "record_key" not in keys.column_names or unknown:
        raise SchemaError(
            f"a delete table needs record_key and may have partition_path, ordering_val; got {keys.column_names}"
        )
    n = keys.num_rows
    record_keys = _string_values(keys, "record_key")
    if any(k is None for k in record_keys):
        raise SchemaError("record_key holds nulls; every delete needs a key")
    partitions = _string_values(keys, "partition_path") if "partition_path" in keys.column_names else [""] * n
    if "ordering_val" in keys.column_names:
        column = keys.column("ordering_val")
        if pa.types.is_null(column.type):
            ordering: list[Any] = [None] * n
        else:
            name, arrow = _wrapper_for(column.type, "ordering_val")
            target = storage_type(arrow) if name != "DecimalWrapper" else arrow
            try:
                raw = column.cast(arrow, safe=True).cast(target).to_pylist()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(f"ordering_val: cannot store {column.type} in a {name}: {exc}") from exc
            full = f"{_MODEL_NS}.{name}"
            ordering = [None if v is None else (full, {"value": v}) for v in raw]
    else:
        ordering = [(f"{_MODEL_NS}.IntWrapper", {"value": 0})] * n
    datum = {
        "deleteRecordList": [
            {"recordKey": k, "partitionPath": p, "orderingVal": o}
            for k, p, o in zip(record_keys, partitions, ordering)
        ]
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _DELETE_SCHEMA, datum)
    payload = buf.getvalue()
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(payload)) + payload


def _string_values(table: pa.Table, name: str) -> list[str | None]:
    column = table.column(name)
    try:
        return cast("list[str | None]", column.cast(pa.string()).to_pylist())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"{name}: cannot be read as strings: {exc}") from exc


__all__ = ["DELETE_BLOCK_VERSION", "commit_time_ordering_mask", "decode_delete_records", "encode_delete_records"]
