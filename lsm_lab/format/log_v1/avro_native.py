"""v1 Avro data blocks decoded column-wise, by a native (Rust) Avro reader.

A v1 Avro data block holds N records, each behind a 4-byte big-endian length:

    int32 version | int32 N | int32 len₀ record₀ | int32 len₁ record₁ | ...

Decoding that record by record in Python (fastavro's `schemaless_reader`)
runs near 0.2M records/s. A vectorized reader wants an Avro *object
container file* instead (magic, header with the schema, data blocks, sync
markers). The trick used here: each length prefix is 4 bytes on the wire, and
so is an Avro `fixed(4)`. Prepend such a field to the writer schema and the
block's bytes after the 8-byte preamble *are* N records of that widened
schema, without copying or splitting anything:

    container = "Obj\\x01" | {avro.schema: widened schema, avro.codec: null} | sync
              | long N | long size | <content[8:] as is> | sync

polars' Avro reader (Rust, arrow2 lineage) decodes it into columns; the
length column comes back as 4-byte strings, read as big-endian int32 by NumPy,
and checked: every length non-negative and 8 + Σ(4 + len) equal to the
content size. The columns are then cast to the Arrow schema that
`lsm_lab.avro_schema` derives from the writer schema, so both decoders return
the same table (tests/test_avro_native.py holds them equal on Hudi's own log
files and on random records).

    content[8:] ──wrap in a container──► polars.read_avro ──► Arrow ──cast──► table

Only schemas the native reader handles are sent to it (`native_supported`):
primitives, records, arrays, enums, fixed, decimals, dates, times,
timestamps, and nullable unions. Maps (polars does not read them), nullable
enums (polars panics), references to named types, and other unions stay on
the fastavro path; so does any block
the native reader fails on, which lets fastavro name the damage precisely.

Simplified compared with Apache Hudi: Hudi decodes records lazily one at a
time through Avro's Java `GenericDatumReader`; here a whole block is decoded
at once into columns, which is what an Arrow-based reader wants anyway.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

#: the field that reads each record's int32 length prefix as part of the record
_LENGTH_FIELD = "_lsm_lab_record_length"
_SYNC = b"lsm_lab.avro.syn"  # any 16 bytes: the container has a single data block
_PRIMITIVES = frozenset({"boolean", "int", "long", "float", "double", "bytes", "string"})
_LOGICAL_OK: dict[str, frozenset[str]] = {
    "int": frozenset({"date", "time-millis"}),
    "long": frozenset({"time-micros", "timestamp-millis", "timestamp-micros",
                       "local-timestamp-millis", "local-timestamp-micros"}),
    "bytes": frozenset({"decimal"}),
    "fixed": frozenset({"decimal"}),
}


def native_supported(schema: Mapping[str, Any]) -> bool:
    """True when every type in the record schema is one the native reader decodes like fastavro."""
    fields = schema.get("fields")
    if not isinstance(fields, list) or not fields:
        return False
    names = [f.get("name") for f in fields if isinstance(f, dict)]
    if _LENGTH_FIELD in names:
        return False
    return all(isinstance(f, dict) and _supported(f.get("type"), under_null=False) for f in fields)


def _supported(t: Any, *, under_null: bool) -> bool:
    """`under_null`: inside a nullable record, where a required field would not cast back exactly
    (the native reader leaves its slots null under a null parent; Arrow refuses them in a required field)."""
    if isinstance(t, str):
        return t in _PRIMITIVES and not under_null  # another bare name refers to a named type: not handled
    if isinstance(t, list):
        others = [b for b in t if b != "null"]
        return (len(t) == 2 and t[0] == "null" and len(others) == 1 and not _is_enum(others[0])
                and _supported_value(others[0]))  # polars 2.1 panics on a nullable enum
    return not under_null and _supported_value(t, under_null=False)


def _is_enum(t: Any) -> bool:
    return isinstance(t, dict) and (t.get("type") == "enum" or _is_enum(t.get("type")))


def _supported_value(t: Any, *, under_null: bool = True) -> bool:
    """A non-null type; its record fields are `under_null` when the type sits in a nullable union."""
    if isinstance(t, str):
        return t in _PRIMITIVES
    if not isinstance(t, dict):
        return False
    kind = t.get("type")
    logical = t.get("logicalType")
    if isinstance(kind, dict):
        return logical is None and _supported_value(kind, under_null=under_null)
    if kind in _PRIMITIVES or kind == "fixed":
        return logical is None or logical in _LOGICAL_OK.get(kind, frozenset())
    if kind == "record":
        fields = t.get("fields")
        return isinstance(fields, list) and bool(fields) and all(
            isinstance(f, dict) and _supported(f.get("type"), under_null=under_null) for f in fields
        )
    if kind == "array":
        return _supported(t.get("items"), under_null=False)  # a null list has no items
    return kind == "enum"


def decode_native(content: bytes, count: int, schema: Mapping[str, Any], arrow: pa.Schema) -> pa.Table | None:
    """Decode the `count` records of Avro data block `content`; None if the native reader cannot.

    `content` is the whole block content (version and count first); `schema` a record schema
    that `native_supported` accepts; `arrow` the Arrow schema of the result.
    """
    if count == 0:
        return None
    widened = dict(schema)
    widened["fields"] = [{"name": _LENGTH_FIELD, "type": {"type": "fixed", "name": _LENGTH_FIELD, "size": 4}},
                         *schema["fields"]]
    body = memoryview(content)[8:]
    container = b"".join((_header(json.dumps(widened)), _long(count), _long(len(body)), body, _SYNC))
    import polars as pl  # on the first v1 block, not at import: ~25 MiB that a v2-only process never needs
    from polars.exceptions import PanicException, PolarsError

    try:
        frame = pl.read_avro(io.BytesIO(container))
        table = frame.to_arrow()
    except (PolarsError, PanicException, OSError, ValueError, TypeError):  # fastavro decodes again, names the damage
        return None
    if table.num_rows != count or table.num_columns != len(arrow) + 1:
        return None
    lengths = _lengths(table.column(0))
    if lengths is None or (lengths < 0).any() or 8 + int(lengths.sum()) + 4 * count != len(content):
        return None
    try:
        columns = [_cast(table.column(i + 1), f.type) for i, f in enumerate(arrow)]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    for column, f in zip(columns, arrow):
        if not f.nullable and column.null_count:
            return None
    return pa.Table.from_arrays(columns, schema=arrow)


def _lengths(column: pa.ChunkedArray) -> np.ndarray | None:
    """The record lengths: 4-byte big-endian strings as int64."""
    if column.null_count:
        return None
    joined = column.combine_chunks().cast(pa.large_binary())
    data = joined.buffers()[2]
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int64)[joined.offset: joined.offset + len(joined) + 1]
    if data is None or int(offsets[-1] - offsets[0]) != 4 * len(joined) or not (np.diff(offsets) == 4).all():
        return None
    raw = np.frombuffer(data, dtype=np.uint8)[int(offsets[0]): int(offsets[-1])]
    return raw.view(">i4").astype(np.int64)


def _cast(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """polars' column to the Arrow type the schema module derives (large → regular, dictionary → plain...)."""
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if column.type == target:
        return column
    return column.cast(target, safe=True)


def _header(schema_json: str) -> bytes:
    """An Avro object container header: magic, metadata map (schema, codec), sync marker."""
    out = bytearray(b"Obj\x01")
    entries = ((b"avro.schema", schema_json.encode("utf-8")), (b"avro.codec", b"null"))
    out += _long(len(entries))
    for key, value in entries:
        out += _long(len(key)) + key + _long(len(value)) + value
    out += _long(0)
    out += _SYNC
    return bytes(out)


def _long(n: int) -> bytes:
    """Avro's zig-zag varint encoding of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


__all__ = ["decode_native", "native_supported"]
