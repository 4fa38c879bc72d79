"""Writing v1 log files: encode blocks, then publish the file atomically.

lsm_lab writes v1 logs only in compatibility mode (table versions 6 and 8),
so that Apache Hudi and hudi-rs can read what lsm_lab wrote. A block is
framed by `encode_block` (layout in blocks.py); the `encode_*_block`
functions build the header and content of each kind:

    encode_avro_data_block     INSTANT_TIME, SCHEMA     + avro.encode_avro_records
    encode_parquet_data_block  INSTANT_TIME, SCHEMA     + a whole Parquet file (page CRCs on)
    encode_delete_block        INSTANT_TIME, [SCHEMA]   + deletes.encode_delete_records
    encode_command_block       INSTANT_TIME, TARGET_INSTANT_TIME, COMMAND_BLOCK_TYPE "0"

Headers are written in ordinal order (Hudi keeps them in a hash map, so real
files show any order). `write_log_file` writes the blocks to a temporary file
and links it to its name (`lsm_lab.storage.atomic`): a log file is never overwritten
and never seen half-written. File names come from `layout.naming`.

Simplified compared with Apache Hudi: Hudi appends blocks to an open log file
(rolling over at a size limit); lsm_lab always starts a new file version, so
a file is immutable once visible.

Taught in: notebooks/04_log_format_v2.ipynb
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.avro_schema import arrow_to_avro_schema, avro_schema_json, avro_to_arrow_schema, hudi_record_names
from lsm_lab.errors import ConflictError, InputError
from lsm_lab.format import parquet_write
from lsm_lab.format.log_v1.avro import conform, encode_avro_records
from lsm_lab.format.log_v1.blocks import LOG_FORMAT_VERSION, MAGIC, ROLLBACK_COMMAND, BlockType, HeaderKey
from lsm_lab.format.log_v1.deletes import encode_delete_records
from lsm_lab.storage import StoragePath, atomic

#: header/footer entries keyed by `HeaderKey`, ordinal or name, in the order to write them
HeaderLike = Mapping[HeaderKey, str] | Mapping[int, str] | Mapping[str, str] | Mapping[HeaderKey | int | str, str]


def _key_ordinal(key: HeaderKey | int | str) -> int:
    if isinstance(key, HeaderKey):
        return int(key)
    if isinstance(key, int):
        return key
    if key.startswith("UNKNOWN_") and key[8:].isdigit():
        return int(key[8:])
    try:
        return int(HeaderKey[key])
    except KeyError:
        raise InputError(f"unknown log block header key {key!r}") from None


def _encode_metadata(entries: HeaderLike | None) -> bytes:
    entries = entries or {}
    out = bytearray(struct.pack(">i", len(entries)))
    for key, value in entries.items():
        raw = value.encode("utf-8")
        out += struct.pack(">ii", _key_ordinal(key), len(raw))
        out += raw
    return bytes(out)


def encode_block(
    block_type: BlockType,
    header: HeaderLike,
    content: bytes = b"",
    footer: HeaderLike | None = None,
) -> bytes:
    """Frame one block: magic, lengths, version 1, type, header (in the given order), content, footer.

    The building block of the `encode_*_block` functions; header keys may be
    `HeaderKey`s, ordinals or names.
    """
    body = (
        struct.pack(">ii", LOG_FORMAT_VERSION, int(block_type))
        + _encode_metadata(header)
        + struct.pack(">q", len(content))
        + content
        + _encode_metadata(footer)
    )
    length = len(body) + 8
    return MAGIC + struct.pack(">q", length) + body + struct.pack(">q", length + 6)


def _check_instant(instant: str, what: str) -> None:
    if not isinstance(instant, str) or not instant.isdigit():
        raise InputError(f"{what} must be an instant time of digits, got {instant!r}")


def _resolve_schema(
    table: pa.Table, schema_json: Mapping[str, Any] | str | None, table_name: str | None
) -> tuple[Mapping[str, Any] | str, str]:
    """(schema, SCHEMA header text): the given schema (text kept verbatim) or one derived from Arrow."""
    if schema_json is None:
        if table_name is None:
            raise InputError("pass the Avro writer schema (schema_json) or the table_name to derive it from")
        name, namespace = hudi_record_names(table_name)
        schema_json = arrow_to_avro_schema(table.schema, name=name, namespace=namespace)
    text = schema_json if isinstance(schema_json, str) else avro_schema_json(schema_json)
    return schema_json, text


def encode_avro_data_block(
    table: pa.Table,
    *,
    instant_time: str,
    schema_json: Mapping[str, Any] | str | None = None,
    table_name: str | None = None,
    extra_header: HeaderLike | None = None,
) -> bytes:
    """A whole Avro data block (format v1, block version 3) holding the rows of `table`.

    `schema_json` is the Avro writer schema (JSON text, stored verbatim in the
    SCHEMA header, or a dict). Without it, the schema is derived from the table's
    Arrow schema the way Hudi names it for `table_name` (`<t>_record` in `hoodie.<t>`).
    `extra_header` adds headers such as IS_PARTIAL or BLOCK_IDENTIFIER.
    """
    _check_instant(instant_time, "instant_time")
    schema, text = _resolve_schema(table, schema_json, table_name)
    content = encode_avro_records(table, schema)
    header: dict[Any, str] = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: text}
    header.update(extra_header or {})
    return encode_block(BlockType.AVRO_DATA, _ordered(header), content)


def encode_parquet_data_block(
    table: pa.Table,
    *,
    instant_time: str,
    schema_json: Mapping[str, Any] | str | None = None,
    table_name: str | None = None,
    extra_header: HeaderLike | None = None,
) -> bytes:
    """A Parquet data block: the rows as one Parquet file, the Avro schema in the header.

    Hudi's compatibility writer emits Avro blocks; this exists for tests and tools.
    """
    _check_instant(instant_time, "instant_time")
    schema, text = _resolve_schema(table, schema_json, table_name)
    conformed = conform(table, avro_to_arrow_schema(schema))
    sink = io.BytesIO()
    pq.write_table(conformed, sink, compression=parquet_write.COMPRESSION, write_page_checksum=True)
    header: dict[Any, str] = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: text}
    header.update(extra_header or {})
    return encode_block(BlockType.PARQUET_DATA, _ordered(header), sink.getvalue())


def encode_delete_block(
    keys: pa.Table,
    *,
    instant_time: str,
    schema_json: Mapping[str, Any] | str | None = None,
    extra_header: HeaderLike | None = None,
) -> bytes:
    """A delete block (version 3) for the keys in `keys` (see `encode_delete_records`).

    Hudi's data writers put the table schema in the SCHEMA header of delete blocks
    too; pass it as `schema_json` to do the same (the metadata table leaves it out).
    """
    _check_instant(instant_time, "instant_time")
    header: dict[Any, str] = {HeaderKey.INSTANT_TIME: instant_time}
    if schema_json is not None:
        header[HeaderKey.SCHEMA] = schema_json if isinstance(schema_json, str) else avro_schema_json(schema_json)
    header.update(extra_header or {})
    return encode_block(BlockType.DELETE, _ordered(header), encode_delete_records(keys))


def encode_command_block(*, instant_time: str, target_instant_time: str, command: str = ROLLBACK_COMMAND) -> bytes:
    """A command block; the only command Hudi knows is "0", rollback of `target_instant_time`.

    `instant_time` is the rollback action's own instant.
    """
    _check_instant(instant_time, "instant_time")
    _check_instant(target_instant_time, "target_instant_time")
    if command != ROLLBACK_COMMAND:
        raise InputError(f"unknown command block type {command!r}; Hudi defines only rollback ({ROLLBACK_COMMAND!r})")
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
        HeaderKey.COMMAND_BLOCK_TYPE: command,
    }
    return encode_block(BlockType.COMMAND, header)


def _ordered(header: Mapping[Any, str]) -> dict[int, str]:
    """Headers by ordinal (Hudi keeps them in a hash map, so real files show any order)."""
    by_ordinal = {_key_ordinal(k): v for k, v in header.items()}
    return dict(sorted(by_ordinal.items()))


def write_log_file(path: str | os.PathLike[str] | StoragePath, blocks: Sequence[bytes]) -> int:
    """Write encoded blocks as a new log file, atomically; return the file size.

    The bytes go to a temporary file in the same folder, are flushed to disk, and
    are then linked to `path`, which fails if `path` exists: a log file is never
    overwritten (`ConflictError`). Hudi appends to an open log file; lsm_lab always
    starts a new file version instead.
    """
    if not blocks:
        raise InputError("a log file needs at least one block")
    for i, b in enumerate(blocks):
        if not isinstance(b, (bytes, bytearray)) or not bytes(b[:6]) == MAGIC:
            raise InputError(f"block {i} is not an encoded #HUDI# block")
    data = b"".join(bytes(b) for b in blocks)
    atomic.create_file(path, data, on_exists=lambda p: ConflictError(
        "log file already exists; v1 log files are never overwritten", path=p))
    return len(data)


__all__ = [
    "encode_avro_data_block",
    "encode_block",
    "encode_command_block",
    "encode_delete_block",
    "encode_parquet_data_block",
    "write_log_file",
]
