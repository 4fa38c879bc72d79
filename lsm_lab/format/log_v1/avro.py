"""v1 Avro data blocks: the rows of a block as Avro binary records, decoded to Arrow.

The content of an Avro data block (type 3, also CDC type 6):

    int32 block version (3; 2 is read too) | int32 record count N |
    N x (int32 length, Avro binary record)

Records use the writer schema carried in the block's SCHEMA header (Avro
JSON). `lsm_lab.avro_schema` turns that schema into an Arrow schema, so an
empty block still has its columns. The records are decoded column-wise by a
native reader (`avro_native`: the block wrapped as an Avro container file for
polars); schemas or blocks it cannot take are decoded by fastavro record by
record, gathered into Arrow record batches of 65,536. Writing does the reverse:
values are cast to the schema's Arrow types first (a lossy cast is a
`SchemaError`), then each row is written with fastavro.

    content ──wrap as an Avro container──► polars (columns) ──cast──► Arrow table
            └─(maps, named refs, damage)─► split by int32 lengths ──fastavro──► dicts ──► Arrow batches
    Arrow table ──conform/cast──► rows ──fastavro──► records ──► content

Simplified compared with Apache Hudi: records are decoded eagerly, one block
at a time; Hudi reads them lazily through its record iterators and can skip
a block's content until it is needed.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro
import pyarrow as pa

from lsm_lab.avro_schema import avro_to_arrow_schema, parse_avro_schema, storage_type, strip_temporal_logical_types
from lsm_lab.errors import CorruptFileError, InputError, SchemaError, UnsupportedFeatureError
from lsm_lab.format.log_v1.avro_native import decode_native, native_supported

AVRO_DATA_BLOCK_VERSION = 3
ROWS_PER_BATCH = 1 << 16


@dataclass(frozen=True)
class _AvroCodec:
    """A writer schema prepared once: fastavro's parsed form and the Arrow schema of the rows."""

    schema: dict[str, Any]
    parsed: Any
    arrow: pa.Schema
    storage: pa.Schema
    map_columns: tuple[str, ...] = field(default=())
    native: bool = False


def _codec(avro_schema: Mapping[str, Any] | str) -> _AvroCodec:
    schema = parse_avro_schema(avro_schema)
    arrow = avro_to_arrow_schema(schema)
    try:
        parsed = fastavro.parse_schema(strip_temporal_logical_types(schema))
    except Exception as exc:
        raise SchemaError(f"fastavro rejects the Avro schema: {exc}") from exc
    storage = pa.schema([f.with_type(storage_type(f.type)) for f in arrow])
    maps = tuple(f.name for f in arrow if _has_map(f.type))
    return _AvroCodec(schema, parsed, arrow, storage, maps, native_supported(schema))


def decode_avro_records(
    content: bytes, schema_json: Mapping[str, Any] | str, *, native: bool = True
) -> tuple[pa.Table, int]:
    """Decode Avro data block content into an Arrow table; returns (table, block version).

    The Arrow schema comes from the Avro schema, so an empty block still has its columns.
    With `native` (the default), schemas the column-wise reader handles are decoded by it
    (`lsm_lab.format.log_v1.avro_native`); everything else, and any block it fails on, record
    by record with fastavro. Both give the same table.
    """
    if len(content) < 8:
        raise CorruptFileError("Avro data content shorter than its version and record count")
    version, count = struct.unpack_from(">ii", content, 0)
    if version not in (2, 3):
        raise UnsupportedFeatureError(f"Avro data block version {version} (lsm_lab reads 2 and 3)")
    if count < 0 or count * 4 > len(content) - 8:
        raise CorruptFileError(f"record count {count} does not fit in {len(content)} content bytes")
    codec = _codec(schema_json)
    if native and codec.native:
        table = decode_native(content, count, codec.schema, codec.arrow)
        if table is not None:
            return table, version
    stream = io.BytesIO(content)
    pos = 8
    batches: list[pa.RecordBatch] = []
    rows: list[dict[str, Any]] = []
    for i in range(count):
        if pos + 4 > len(content):
            raise CorruptFileError(f"content ends before record {i} of {count}")
        (size,) = struct.unpack_from(">i", content, pos)
        start = pos + 4
        if size < 0 or start + size > len(content):
            raise CorruptFileError(f"record {i} length {size} runs past the content")
        stream.seek(start)
        row: Any = fastavro.schemaless_reader(stream, codec.parsed)  # a record schema: always a dict
        rows.append(row)
        if stream.tell() != start + size:
            raise CorruptFileError(f"record {i} decodes to {stream.tell() - start} bytes, its length says {size}")
        pos = start + size
        if len(rows) == ROWS_PER_BATCH:
            batches.append(pa.RecordBatch.from_pylist(rows, schema=codec.arrow))
            rows = []
    if pos != len(content):
        raise CorruptFileError(f"{len(content) - pos} bytes after the last of {count} records")
    if rows or not batches:
        batches.append(pa.RecordBatch.from_pylist(rows, schema=codec.arrow))
    return pa.Table.from_batches(batches, schema=codec.arrow), version


def encode_avro_records(table: pa.Table, avro_schema: Mapping[str, Any] | str) -> bytes:
    """Avro data block content (version 3) for the rows of `table` under `avro_schema`.

    The table must have exactly the schema's fields (any order); values are cast
    to the schema's types, refusing lossy casts (`SchemaError`).
    """
    codec = _codec(avro_schema)
    conformed = conform(table, codec.arrow)
    if conformed.num_rows > 2**31 - 1:
        raise InputError(f"{conformed.num_rows} rows do not fit in one block (int32 count)")
    try:
        storage = conformed.cast(codec.storage)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"cannot lay out values for Avro: {exc}") from exc
    out = bytearray(struct.pack(">ii", AVRO_DATA_BLOCK_VERSION, conformed.num_rows))
    buf = io.BytesIO()
    map_types = {name: codec.arrow.field(name).type for name in codec.map_columns}
    for batch in storage.to_batches(max_chunksize=ROWS_PER_BATCH):
        for row in batch.to_pylist():
            for name, t in map_types.items():
                row[name] = _maps_to_dicts(row[name], t)
            buf.seek(0)
            buf.truncate()
            try:
                fastavro.schemaless_writer(buf, codec.parsed, row)
            except (ValueError, TypeError, OverflowError) as exc:
                raise SchemaError(f"row does not fit the Avro schema: {exc}") from exc
            out += struct.pack(">i", buf.tell())
            out += buf.getvalue()
    return bytes(out)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Select and order the table's columns as in `schema`, casting safely; check required columns."""
    names = set(table.column_names)
    missing = [f.name for f in schema if f.name not in names]
    extra = [n for n in table.column_names if schema.get_field_index(n) < 0]
    if missing or extra:
        raise SchemaError(f"table columns do not match the Avro schema: missing {missing}, unexpected {extra}")
    columns = []
    for f in schema:
        col = table.column(f.name)
        if not f.nullable and col.null_count:
            raise SchemaError(f"column {f.name!r} is required by the Avro schema but holds {col.null_count} nulls")
        if col.type != f.type:
            try:
                col = col.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                raise SchemaError(f"column {f.name!r}: cannot store {col.type} as {f.type}: {exc}") from exc
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def _has_map(t: pa.DataType) -> bool:
    if pa.types.is_map(t):
        return True
    if pa.types.is_list(t):
        return _has_map(t.value_type)
    if pa.types.is_struct(t):
        return any(_has_map(t.field(i).type) for i in range(t.num_fields))
    return False


def _maps_to_dicts(value: Any, t: pa.DataType) -> Any:
    """Arrow gives maps as lists of (key, value) pairs; fastavro wants dicts."""
    if value is None or not _has_map(t):
        return value
    if pa.types.is_map(t):
        return {k: _maps_to_dicts(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [_maps_to_dicts(v, t.value_type) for v in value]
    return {t.field(i).name: _maps_to_dicts(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}


__all__ = ["AVRO_DATA_BLOCK_VERSION", "conform", "decode_avro_records", "encode_avro_records"]
