"""Log format v2 (RFC-103): a log file is a plain Parquet file.

Version 1 logs wrap records in `#HUDI#` binary blocks that only Hudi can read.
RFC-103 drops the wrapper: one log file = one Parquet file, and the metadata
that v1 kept in block headers moves into the Parquet footer:

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

Simplified compared with RFC-103: no CDC logs and no RECORD_POSITIONS (positional
merging) are written.

Taught in: notebooks/04_log_format_v2.ipynb
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, SchemaError
from lsm_lab.layout import parquet_io

FORMAT_VERSION = "2"
KEY_METADATA = "hudi.log.format.metadata"
KEY_BLOCK_TYPE = "hudi.log.block_type"
BLOCK_DATA = "parquet_data"
BLOCK_DELETE = "delete"
BLOCK_CDC = "cdc"

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


def write_data_log(path: str | os.PathLike[str], table: pa.Table, *, instant_time: str,
                   is_sorted: bool, schema_json: str | None = None,
                   row_group_size: int = parquet_io.DEFAULT_ROW_GROUP_ROWS) -> int:
    """Write a v2 data log (records with meta columns); returns its size in bytes."""
    meta = {
        KEY_METADATA: json.dumps(log_metadata(instant_time, schema_json=schema_json), sort_keys=True),
        KEY_BLOCK_TYPE: BLOCK_DATA,
    }
    return parquet_io.write_parquet(path, table, metadata=meta, is_sorted=is_sorted, row_group_size=row_group_size)


def write_delete_log(path: str | os.PathLike[str], deletes: pa.Table, *, instant_time: str,
                     is_sorted: bool, row_group_size: int = parquet_io.DEFAULT_ROW_GROUP_ROWS) -> int:
    """Write a v2 delete log; `deletes` has DELETE_SCHEMA's columns."""
    deletes = deletes.select(DELETE_SCHEMA.names).cast(DELETE_SCHEMA)
    meta = {
        KEY_METADATA: json.dumps(log_metadata(instant_time), sort_keys=True),
        KEY_BLOCK_TYPE: BLOCK_DELETE,
    }
    return parquet_io.write_parquet(path, deletes, metadata=meta, key_column="record_key", is_sorted=is_sorted,
                                    row_group_size=row_group_size)


def decode_footer(kv: Mapping[str, str], *, path: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """The decoded `hudi.log.format.metadata` map of a v2 log footer (CorruptFileError if malformed)."""
    raw = kv.get(KEY_METADATA)
    if raw is None:
        raise CorruptFileError(f"v2 log footer has no '{KEY_METADATA}'", path=path)
    try:
        header = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CorruptFileError(f"v2 log footer '{KEY_METADATA}' is not JSON: {exc}", path=path) from None
    if not isinstance(header, dict) or "VERSION" not in header or "INSTANT_TIME" not in header:
        raise CorruptFileError(f"v2 log footer '{KEY_METADATA}' lacks VERSION or INSTANT_TIME", path=path)
    return {str(k): str(v) for k, v in header.items()}


def read_log_header(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and decode a v2 log file's footer header (plus `BLOCK_TYPE`)."""
    kv = parquet_io.footer(path)
    header = decode_footer(kv, path=path)
    header["BLOCK_TYPE"] = kv.get(KEY_BLOCK_TYPE, BLOCK_DATA)
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
