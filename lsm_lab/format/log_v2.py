"""Log format v2 (RFC-103): a log file is a plain Parquet file.

Version 1 logs wrap records in `#HUDI#` binary blocks that only Hudi can read.
RFC-103 drops the wrapper: one log file = one Parquet file, and the metadata
that v1 kept in block headers moves into the Parquet footer.

Two dialects exist.  Apache Hudi's table version 10 (what lsm_lab writes now):

    <fileId>_<token>_<instant>_<ver>.log.parquet        data log
      columns: the five _hoodie_* meta columns, then the user columns
      footer:  hudi.log.format.metadata = {"VERSION":"2","INSTANT_TIME":"2026...","SCHEMA":"<avro>"}
               (one JSON map, NativeLogFooterMetadata; no block-type key: the name says "log")
    <fileId>_<token>_<instant>_<ver>.deletes.parquet    delete log
      columns: _hoodie_record_key (string, required), then each ordering field with
               its own type, nullable (HoodieSchemas.createDeleteLogSchema); same footer map

and the RFC-103 draft that lsm_lab followed first (still read; written to version 9
tables so that they stay self-consistent until `lsm-lab upgrade`):

    <fileId>_<token>_<instant>_<ver>.parquet            data log
    ┌──────────────────────────────────────────────┐
    │ row groups: _hoodie_commit_time, _hoodie_commit_seqno, _hoodie_record_key,
    │             _hoodie_partition_path, _hoodie_file_name, <user columns...>
    │ footer key-value metadata:
    │   hudi.log.format.metadata = {"VERSION": "2", "INSTANT_TIME": "2026...",
    │                               "SCHEMA": "<avro schema>", ...}      (JSON, values are strings)
    │   hudi.log.block_type      = parquet_data
    │   hoodie_min_record_key / hoodie_max_record_key / lsm_lab.sorted
    └──────────────────────────────────────────────┘

    <fileId>_<token>_<instant>_<ver>.delete.parquet     delete log
      columns: record_key (string, required), ordering_val (binary, nullable),
               partition_path (string);   hudi.log.block_type = delete

Any Parquet reader (pyarrow, DuckDB, Spark, pandas) reads both files with no
lsm_lab code.  `VERSION` lives inside the file, so a reader never relies on the
name alone.

`ordering_val` is binary so that one delete-log schema serves every ordering
type.  lsm_lab's encoding (docs/FORMAT.md): integers, dates and timestamps as
8-byte big-endian two's complement; floats as 8-byte big-endian IEEE 754;
booleans as one byte; strings as UTF-8; anything else as the UTF-8 text of the
value.  Decoding needs the ordering field's type, which the table schema gives.

Readers accept both dialects: the log kind comes from the name (`.deletes.`/
`.delete.`), else from `hudi.log.block_type`; the footer map is read from
`hudi.log.format.metadata`, or from per-entry keys `hudi.log.format.<NAME>` (the
layout proposed in apache/hudi PR #19247, not merged).  A footer whose VERSION is
newer than 2 is refused, as upstream does.

Logs of updates and deletes may carry RECORD_POSITIONS and
BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS in the footer map (format/positions.py).

CDC logs (`….cdc.parquet`) are native logs too, with the same footer; their
columns and writer are in format/cdc.py.

Simplified compared with upstream Hudi: one log file per file group and
commit (no rollover by size, no appends to an open log).

Taught in: notebooks/04_log_format_v2.ipynb
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.avro_schema import arrow_to_avro_schema, avro_schema_json, hudi_record_names
from lsm_lab.errors import CorruptFileError, SchemaError, UnsupportedFeatureError
from lsm_lab.format import naming, parquet_footer, parquet_write
from lsm_lab.storage import StoragePath

FORMAT_VERSION = "2"
KEY_METADATA = "hudi.log.format.metadata"
KEY_BLOCK_TYPE = "hudi.log.block_type"
BLOCK_DATA = "parquet_data"
BLOCK_DELETE = "delete"
BLOCK_CDC = "cdc"

KEY_METADATA_PREFIX = "hudi.log.format."  # per-entry footer keys (apache/hudi PR #19247, read only)
MAX_FORMAT_VERSION = 2
UPSTREAM_KEY_COLUMN = "_hoodie_record_key"  # the key column of upstream delete logs

DELETE_SCHEMA = pa.schema(
    [
        pa.field("record_key", pa.string(), nullable=False),
        pa.field("ordering_val", pa.binary(), nullable=True),
        pa.field("partition_path", pa.string(), nullable=True),
    ]
)


def log_metadata(instant_time: str, *, schema_json: str | None = None, **extra: str) -> dict[str, str]:
    """The header map stored under `hudi.log.format.metadata` (all values strings)."""
    header = {"VERSION": FORMAT_VERSION, "INSTANT_TIME": instant_time}
    if schema_json:
        header["SCHEMA"] = schema_json
    header.update({k: str(v) for k, v in extra.items()})
    return header


def upstream_footer(header: Mapping[str, str]) -> dict[str, str]:
    """The footer upstream writes (`NativeLogFooterMetadata.toFooterMetadata`): one key, a compact JSON map.

    `VERSION` comes first, then the header entries in their order; no block-type key.
    """
    entries = {"VERSION": FORMAT_VERSION, **{k: str(v) for k, v in header.items() if k != "VERSION"}}
    return {KEY_METADATA: json.dumps(entries, separators=(",", ":"), ensure_ascii=False)}


def upstream_delete_schema(table_schema: pa.Schema | None, ordering_fields: list[str] | tuple[str, ...]) -> pa.Schema:
    """Upstream's delete-log schema (`HoodieSchemas.createDeleteLogSchema`).

    `_hoodie_record_key` (string, required), then every ordering field with the
    type it has in the table schema, always nullable (a delete without an ordering
    value stores null).
    """
    fields = [pa.field(UPSTREAM_KEY_COLUMN, pa.string(), nullable=False)]
    for name in ordering_fields:
        if table_schema is None or name not in table_schema.names:
            raise SchemaError(f"ordering field '{name}' is not in the table schema; a delete log needs its type")
        fields.append(pa.field(name, table_schema.field(name).type, nullable=True))
    return pa.schema(fields)


def avro_schema_of(schema: pa.Schema, table_name: str) -> str | None:
    """The `SCHEMA` footer entry: the file's schema as Hudi's Avro record `<t>_record` in `hoodie.<t>`.

    None when a column has no Avro counterpart (such a table cannot be read by Hudi anyway).
    """
    name, namespace = hudi_record_names(table_name)
    try:
        return avro_schema_json(arrow_to_avro_schema(schema, name=name, namespace=namespace))
    except (SchemaError, UnsupportedFeatureError):
        return None


def write_data_log(path: str | os.PathLike[str] | StoragePath, table: pa.Table, *, instant_time: str,
                   is_sorted: bool, schema_json: str | None = None, upstream: bool = False,
                   extra: Mapping[str, str] | None = None,
                   row_group_size: int = parquet_write.DEFAULT_ROW_GROUP_ROWS) -> int:
    """Write a v2 data log (records with meta columns); returns its size in bytes.

    `upstream=True` (table version 10) writes upstream's footer (no block-type key);
    `extra` adds header entries (RECORD_POSITIONS, format/positions.py).
    """
    header = log_metadata(instant_time, schema_json=schema_json, **dict(extra or {}))
    if upstream:
        meta = upstream_footer(header)
    else:
        meta = {KEY_METADATA: json.dumps(header, sort_keys=True), KEY_BLOCK_TYPE: BLOCK_DATA}
    return parquet_write.write_parquet(path, table, metadata=meta, is_sorted=is_sorted, row_group_size=row_group_size)


def write_delete_log(path: str | os.PathLike[str] | StoragePath, deletes: pa.Table, *, instant_time: str,
                     is_sorted: bool, schema: pa.Schema | None = None, schema_json: str | None = None,
                     extra: Mapping[str, str] | None = None,
                     row_group_size: int = parquet_write.DEFAULT_ROW_GROUP_ROWS) -> int:
    """Write a v2 delete log.

    With `schema` (an `upstream_delete_schema`, table version 10) the rows have its
    columns and the footer is upstream's; without it, the draft's DELETE_SCHEMA columns.
    """
    header = log_metadata(instant_time, schema_json=schema_json, **dict(extra or {}))
    if schema is not None:
        deletes = deletes.select(schema.names).cast(schema)
        return parquet_write.write_parquet(path, deletes, metadata=upstream_footer(header),
                                        key_column=UPSTREAM_KEY_COLUMN, is_sorted=is_sorted,
                                        row_group_size=row_group_size)
    deletes = deletes.select(DELETE_SCHEMA.names).cast(DELETE_SCHEMA)
    meta = {KEY_METADATA: json.dumps(header, sort_keys=True), KEY_BLOCK_TYPE: BLOCK_DELETE}
    return parquet_write.write_parquet(path, deletes, metadata=meta, key_column="record_key", is_sorted=is_sorted,
                                    row_group_size=row_group_size)


def delete_key_column(schema: pa.Schema) -> str:
    """The key column of a delete log: `_hoodie_record_key` (upstream) or `record_key` (draft)."""
    return UPSTREAM_KEY_COLUMN if UPSTREAM_KEY_COLUMN in schema.names else "record_key"


def decode_footer(kv: Mapping[str, str], *, path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The decoded header map of a v2 log footer (CorruptFileError if malformed).

    Read from `hudi.log.format.metadata` (one JSON map: upstream and the draft), or,
    when that key is absent, from per-entry keys `hudi.log.format.<NAME>`.
    """
    raw = kv.get(KEY_METADATA)
    if raw is None:
        per_key = {k[len(KEY_METADATA_PREFIX):]: v for k, v in kv.items()
                   if k.startswith(KEY_METADATA_PREFIX) and k != KEY_BLOCK_TYPE}
        if not per_key:
            raise CorruptFileError(f"v2 log footer has no '{KEY_METADATA}'", path=path)
        header = {str(k): str(v) for k, v in per_key.items()}
    else:
        header = decode_header(raw, path=path)
    if "VERSION" not in header or "INSTANT_TIME" not in header:
        raise CorruptFileError(f"v2 log footer '{KEY_METADATA}' lacks VERSION or INSTANT_TIME", path=path)
    version = header["VERSION"].strip()
    if not version.isdigit():
        raise CorruptFileError(f"v2 log footer VERSION {version!r} is not a number", path=path)
    if int(version) > MAX_FORMAT_VERSION:
        raise UnsupportedFeatureError(f"native log format version {version} is newer than the {MAX_FORMAT_VERSION} "
                                      "lsm_lab reads", path=path)
    return header


def decode_header(raw: str, *, path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The value of a `hudi.log.format.metadata` footer key as a map of strings (CorruptFileError if not a JSON object)."""
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CorruptFileError(f"v2 log footer '{KEY_METADATA}' is not JSON: {exc}", path=path) from None
    if not isinstance(header, dict):
        raise CorruptFileError(f"v2 log footer '{KEY_METADATA}' is not a JSON object", path=path)
    return {str(k): str(v) for k, v in header.items()}


def block_type_of(kv: Mapping[str, str], path: str | os.PathLike[str] | StoragePath) -> str:
    """What a log holds: from its name (native `.deletes.`/`.cdc.`, draft `.delete.`), else the draft's footer key."""
    parsed = naming.parse(os.path.basename(str(path)))
    if parsed is not None and parsed.is_log and KEY_BLOCK_TYPE not in kv:
        return {"delete": BLOCK_DELETE, "cdc": BLOCK_CDC}.get(parsed.content, BLOCK_DATA)
    return kv.get(KEY_BLOCK_TYPE, BLOCK_DATA)


def read_log_header(path: str | os.PathLike[str] | StoragePath) -> dict[str, str]:
    """Read and decode a v2 log file's footer header (plus `BLOCK_TYPE`, from the name or the footer)."""
    kv = parquet_footer.footer(path)
    header = decode_footer(kv, path=str(path))
    header["BLOCK_TYPE"] = block_type_of(kv, path)
    return header


# --------------------------------------------------------------------------- ordering values
def _as_int64(values: pa.Array) -> pa.Array:
    t = values.type
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return values.view(pa.int64()) if t.bit_width == 64 else pc.cast(values.view(pa.int32()), pa.int64())
    return pc.cast(values, pa.int64())


def encode_ordering(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Ordering values → binary, vectorised (see the module docstring for the encoding)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    n = len(values)
    if pa.types.is_null(t):
        return pa.nulls(n, pa.binary())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pc.cast(pc.cast(values, pa.string()), pa.binary())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return pc.cast(values, pa.binary())
    if pa.types.is_integer(t) or pa.types.is_temporal(t):
        raw = _as_int64(values).fill_null(0).to_numpy(zero_copy_only=False).astype(">i8").tobytes()
        width = 8
    elif pa.types.is_floating(t):
        raw = pc.cast(values, pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False).astype(">f8").tobytes()
        width = 8
    elif pa.types.is_boolean(t):
        raw = values.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes()
        width = 1
    else:
        return pc.cast(pc.cast(values, pa.string()), pa.binary())
    mask = values.is_null()
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(raw)])
    binary = pc.cast(fixed, pa.binary())
    return pc.if_else(mask, pa.scalar(None, pa.binary()), binary)


def decode_ordering(binary: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """Inverse of `encode_ordering` for an ordering field of type `target`."""
    if isinstance(binary, pa.ChunkedArray):
        binary = binary.combine_chunks()
    n = len(binary)
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return pc.cast(pc.cast(binary, pa.binary()), target)
    if pa.types.is_binary(target) or pa.types.is_large_binary(target):
        return pc.cast(binary, target)
    width = 1 if pa.types.is_boolean(target) else 8
    numeric = pa.types.is_integer(target) or pa.types.is_temporal(target) or pa.types.is_floating(target)
    if not (numeric or pa.types.is_boolean(target)):
        return pc.cast(pc.cast(binary, pa.string()), target)
    mask = binary.is_null()
    filled = binary.fill_null(b"\x00" * width)
    lengths = pc.binary_length(filled)
    if n and (pc.min(lengths).as_py() != width or pc.max(lengths).as_py() != width):
        raise SchemaError(f"delete log ordering values are not {width}-byte encodings of {target}")
    filled = pc.cast(filled, pa.binary())
    if n == 0:
        data = b""
    else:
        offsets = np.frombuffer(filled.buffers()[1], dtype=np.int32)[filled.offset : filled.offset + n + 1]
        data = np.frombuffer(filled.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]].tobytes()
    if pa.types.is_boolean(target):
        arr = pa.array(np.frombuffer(data, dtype=np.uint8).astype(bool))
    elif pa.types.is_floating(target):
        arr = pc.cast(pa.array(np.frombuffer(data, dtype=">f8").astype(np.float64)), target)
    else:
        ints = pa.array(np.frombuffer(data, dtype=">i8").astype(np.int64))
        if pa.types.is_integer(target):
            arr = pc.cast(ints, target)
        elif target.bit_width == 64:
            arr = ints.view(target)
        else:
            arr = pc.cast(ints, pa.int32()).view(target)
    return pc.if_else(mask, pa.scalar(None, target), arr)


def validate_ordering_type(t: pa.DataType, field_name: str) -> None:
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise SchemaError(f"ordering field '{field_name}' has type {t}; it must be a scalar (number, string, time)")
