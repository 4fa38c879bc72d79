"""Apache Hudi log format v1: files of `#HUDI#` blocks.

Before RFC-103, a Hudi file slice's changes after its base file live in *log
files* named `.<fileId>_<instant>.log.<version>_<writeToken>`. A log file is a
sequence of self-delimiting blocks; a writer appends blocks, a reader walks
them front to back. lsm_lab reads these files always and writes them in
compatibility mode (table versions 6 and 8), so that Apache Hudi and hudi-rs
can read what lsm_lab wrote.

One block on disk (all integers big-endian; checked byte by byte against the
real files in `../shared/hudi-log-files/`):

    offset  size  field
    ------  ----  --------------------------------------------------------------
    0       6     magic "#HUDI#"
    6       8     block length L: every byte after this field, trailer included
    14      4     log format version (1)
    18      4     block type: 0 command, 1 delete, 2 corrupt, 3 avro, 4 hfile,
                  5 parquet, 6 cdc
    22      var   header: int32 count, then per entry int32 key ordinal,
                  int32 byte length, UTF-8 value
    ..      8     content length C
    ..      C     content (depends on the block type, see below)
    ..      var   footer: same encoding as the header (count 0 in practice)
    14+L-8  8     total block length = L + 6 (a "reverse pointer"; mismatch = corrupt)

    content of an Avro data block (type 3, also CDC type 6):
        int32 block version (3) | int32 record count N | N x (int32 length, Avro binary record)
        records use the writer schema in the SCHEMA header
    content of a Parquet data block (type 5): a whole Parquet file, PAR1 ... PAR1
    content of a delete block (type 1):
        int32 version (3) | int32 payload length | Avro binary HoodieDeleteRecordList
        {deleteRecordList: [{recordKey, partitionPath, orderingVal}]}
    content of a command block (type 0): empty; headers COMMAND_BLOCK_TYPE "0"
        (rollback) and TARGET_INSTANT_TIME say which earlier blocks to ignore

The published spec mentions 8-byte header/footer length prefixes and 8-byte
record lengths; real files have no such prefixes and 4-byte record lengths.

Corrupt blocks. A crashed writer leaves a partial block at the end of a file
(and on storage that supports appends, later blocks after it). Like Hudi's
`HoodieLogFileReader`, a block is trusted only if its length L stays inside the
file, the trailer equals L + 6 and the next bytes are another magic or the end
of the file. Otherwise the reader scans forward for the next `#HUDI#` and
reports the skipped bytes as a `CORRUPT` block, so callers can see it;
`effective_blocks` drops it. A block whose frame is sound but whose header,
content and footer do not fill the frame exactly is reported the same way.
Content that is framed correctly but cannot be decoded raises
`CorruptFileError`: that is not a torn write, and silently skipping it would
lose committed data. The format has no checksum: a flipped bit inside a record
value goes unnoticed, in Hudi as here.

Delete ordering values. Hudi wraps each delete's ordering value in a union of
one-field records (`IntWrapper{value}`, `LongWrapper{value}`, ...). The reader
unwraps them into one Arrow column whose type follows the wrapper (Int -> int32,
Long -> int64, Float -> float32, Double -> float64, Date -> date32, Decimal ->
decimal128(30, 15), TimeMicros -> time64[us], TimestampMicros ->
timestamp[us, UTC], ...). Every delete in the real tables carries
`IntWrapper(0)`: Hudi's *default* ordering value, which Hudi treats like null
("commit-time ordering": the delete wins whatever the record's ordering value);
see `commit_time_ordering_mask`. When one block mixes wrapper types, that
sentinel becomes null (same meaning), int/long and float/double are widened,
and any other mix is rendered as strings (`str()` of the value, bytes as hex,
multi-field `ArrayWrapper` values as a JSON list).

Simplified compared with Apache Hudi: HFile blocks (metadata table) and Kryo
delete blocks (versions 1-2) raise `UnsupportedFeatureError`; log format
versions other than 1 are refused; Hudi's de-duplication of blocks from retried
Spark tasks (the BLOCK_IDENTIFIER header) and instant-range filtering against
the timeline are left to the table layer; blocks are read eagerly, one at a
time, instead of lazily by content position.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import struct
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, BinaryIO

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.avro_schema import (
    arrow_to_avro_schema,
    avro_schema_json,
    avro_to_arrow_schema,
    hudi_record_names,
    parse_avro_schema,
    storage_type,
    strip_temporal_logical_types,
)
from lsm_lab.errors import (
    ConflictError,
    CorruptFileError,
    InputError,
    SchemaError,
    UnsupportedFeatureError,
)

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
AVRO_DATA_BLOCK_VERSION = 3
DELETE_BLOCK_VERSION = 3
ROLLBACK_COMMAND = "0"

#: version + type + header count + content length + footer count + trailer: the smallest L
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8
_SCAN_CHUNK = 1 << 20
_ROWS_PER_BATCH = 1 << 16


class BlockType(IntEnum):
    """The block type ordinal stored after the format version."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE = 4
    PARQUET_DATA = 5
    CDC = 6


class HeaderKey(IntEnum):
    """Header/footer key ordinals (`HoodieLogBlock.HeaderMetadataType`)."""

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


_DATA_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.HFILE, BlockType.CDC})


@dataclass(frozen=True, eq=False)
class LogBlock:
    """One block of a v1 log file, decoded.

    `offset` is where its magic starts in the file and `length` how many bytes it
    spans (for a CORRUPT block: the skipped range). `records` holds the rows of a
    data block, or the `record_key`/`partition_path`/`ordering_val` table of a
    delete block (None for command and corrupt blocks, and when read with
    `decode=False`). `content_version` is the Avro data or delete block version;
    `detail` says why a CORRUPT block was rejected.
    """

    block_type: BlockType
    format_version: int
    header: dict[str, str]
    footer: dict[str, str]
    offset: int
    length: int
    records: pa.Table | None = None
    content_version: int | None = None
    detail: str = ""

    @property
    def instant_time(self) -> str | None:
        """The INSTANT_TIME header: the commit that wrote this block (for a command block, the rollback's)."""
        return self.header.get("INSTANT_TIME")

    @property
    def target_instant_time(self) -> str | None:
        """The TARGET_INSTANT_TIME header of a command block: the instant it rolls back."""
        return self.header.get("TARGET_INSTANT_TIME")

    @property
    def is_rollback(self) -> bool:
        return self.block_type == BlockType.COMMAND and self.header.get("COMMAND_BLOCK_TYPE") == ROLLBACK_COMMAND

    @property
    def is_data(self) -> bool:
        return self.block_type in _DATA_TYPES

    @property
    def is_delete(self) -> bool:
        return self.block_type == BlockType.DELETE

    @property
    def is_corrupt(self) -> bool:
        return self.block_type == BlockType.CORRUPT

    @property
    def num_rows(self) -> int:
        return 0 if self.records is None else self.records.num_rows

    def describe(self) -> str:
        """One line for dumps: where, what, which instant, how many rows."""
        parts = [f"@{self.offset:<8d}", f"len={self.length:<8d}", f"{self.block_type.name:<12s}"]
        if self.block_type == BlockType.CORRUPT:
            parts.append(self.detail)
            return " ".join(parts).rstrip()
        parts.append(f"v{self.format_version}")
        if self.instant_time is not None:
            parts.append(f"instant={self.instant_time}")
        if self.block_type == BlockType.COMMAND:
            kind = "rollback" if self.is_rollback else f"command {self.header.get('COMMAND_BLOCK_TYPE')}"
            parts.append(f"{kind} -> {self.target_instant_time}")
        if self.records is not None:
            parts.append(f"rows={self.records.num_rows}")
            if self.block_type == BlockType.DELETE:
                parts.append(f"ordering_val:{self.records.schema.field('ordering_val').type}")
            else:
                parts.append(f"cols={self.records.num_columns}")
        others = sorted(k for k in self.header if k not in ("INSTANT_TIME", "TARGET_INSTANT_TIME", "SCHEMA", "COMMAND_BLOCK_TYPE"))
        if others:
            parts.append("header+=" + ",".join(others))
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"LogBlock({self.describe()})"


# --------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------


class _Source:
    """Positioned reads over a seekable binary stream of known size."""

    def __init__(self, stream: BinaryIO, name: str) -> None:
        self.stream = stream
        self.name = name
        stream.seek(0, os.SEEK_END)
        self.size = stream.tell()

    def read_at(self, offset: int, n: int) -> bytes:
        self.stream.seek(offset)
        return self.stream.read(n)

    def long_at(self, offset: int) -> int | None:
        raw = self.read_at(offset, 8)
        return struct.unpack(">q", raw)[0] if len(raw) == 8 else None

    def find_magic(self, start: int) -> int:
        """Offset of the next magic at or after `start`, or the file size when there is none."""
        pos = start
        while pos < self.size:
            chunk = self.read_at(pos, _SCAN_CHUNK)
            hit = chunk.find(MAGIC)
            if hit >= 0:
                return pos + hit
            if pos + len(chunk) >= self.size:
                break
            pos += len(chunk) - (len(MAGIC) - 1)
        return self.size


def iter_blocks(path: str | os.PathLike[str], *, decode: bool = True) -> Iterator[LogBlock]:
    """Yield the blocks of one v1 log file in file order, reading one block at a time.

    With `decode=False`, blocks are framed and their headers parsed but contents are
    not decoded (`records` stays None), so HFile and Kryo blocks do not raise: useful
    for dumps of any log file, including the metadata table's.
    """
    with open(path, "rb") as f:
        yield from _iter_source(_Source(f, os.fspath(path)), decode=decode)


def read_log_file(path: str | os.PathLike[str], *, decode: bool = True) -> list[LogBlock]:
    """All blocks of one v1 log file (see `iter_blocks`)."""
    return list(iter_blocks(path, decode=decode))


def decode_log_bytes(data: bytes, *, source: str = "<bytes>", decode: bool = True) -> list[LogBlock]:
    """All blocks of a v1 log file held in memory; `source` names it in errors."""
    return list(_iter_source(_Source(io.BytesIO(data), source), decode=decode))


def _iter_source(src: _Source, *, decode: bool) -> Iterator[LogBlock]:
    pos = 0
    while pos < src.size:
        block, pos = _read_block(src, pos, decode=decode)
        yield block


def _corrupt(offset: int, end: int, detail: str) -> LogBlock:
    return LogBlock(BlockType.CORRUPT, 0, {}, {}, offset, end - offset, detail=detail)


def _read_block(src: _Source, p: int, *, decode: bool) -> tuple[LogBlock, int]:
    """Read the block whose magic should start at `p`; return it and where the next one starts."""
    remaining = src.size - p
    if remaining < len(MAGIC):
        # Hudi ignores fewer than 6 trailing bytes; lsm_lab shows them
        return _corrupt(p, src.size, f"{remaining} trailing bytes, too short for a block"), src.size
    if src.read_at(p, len(MAGIC)) != MAGIC:
        nxt = src.find_magic(p + 1)
        return _corrupt(p, nxt, "no #HUDI# magic here"), nxt

    length = src.long_at(p + 6)
    problem = _frame_problem(src, p, length)
    if problem:
        nxt = src.find_magic(p + len(MAGIC))
        return _corrupt(p, nxt, problem), nxt
    assert length is not None
    end = p + 14 + length
    body = src.read_at(p + 14, length - 8)
    try:
        version, type_ordinal, header, content_start, content_len, footer = _parse_body(body)
    except _BadBody as exc:
        return _corrupt(p, end, str(exc)), end

    where = f"block at offset {p}"
    if version != LOG_FORMAT_VERSION:
        raise UnsupportedFeatureError(
            f"{where}: log format version {version}; lsm_lab reads version {LOG_FORMAT_VERSION} only",
            path=src.name,
        )
    try:
        block_type = BlockType(type_ordinal)
    except ValueError:
        raise UnsupportedFeatureError(f"{where}: unknown block type {type_ordinal}", path=src.name) from None
    if block_type == BlockType.CORRUPT:
        return _corrupt(p, end, "block written with type CORRUPT"), end

    content = body[content_start : content_start + content_len]
    records: pa.Table | None = None
    content_version: int | None = None
    if decode:
        records, content_version = _decode_content(block_type, header, content, src.name, p)
    block = LogBlock(block_type, version, header, footer, p, end - p, records, content_version)
    return block, end


def _frame_problem(src: _Source, p: int, length: int | None) -> str:
    """Why the frame of the block at `p` cannot be trusted ('' when it can)."""
    if length is None:
        return "file ends inside the block length field"
    if length < _MIN_BLOCK_LENGTH:
        return f"block length {length} is smaller than the smallest block ({_MIN_BLOCK_LENGTH})"
    end = p + 14 + length
    if end > src.size:
        return f"block length {length} runs past the end of the file ({src.size} bytes)"
    trailer = src.long_at(end - 8)
    if trailer != length + 6:
        return f"total block length {trailer} at the end of the block != block length {length} + 6"
    follow = src.read_at(end, len(MAGIC))
    if len(follow) == len(MAGIC) and follow != MAGIC:
        return "no #HUDI# magic right after the block"
    return ""


class _BadBody(Exception):
    """The parts inside a sound frame do not add up."""


def _parse_body(body: bytes) -> tuple[int, int, dict[str, str], int, int, dict[str, str]]:
    """Split the bytes between the length field and the trailer into their parts."""
    if len(body) < 8:
        raise _BadBody("block too short for version and type")
    version, type_ordinal = struct.unpack_from(">ii", body, 0)
    header, pos = _parse_metadata(body, 8, "header")
    if pos + 8 > len(body):
        raise _BadBody("block ends inside the content length field")
    (content_len,) = struct.unpack_from(">q", body, pos)
    pos += 8
    if content_len < 0 or pos + content_len > len(body):
        raise _BadBody(f"content length {content_len} does not fit in the block")
    content_start = pos
    footer, pos = _parse_metadata(body, pos + content_len, "footer")
    if pos != len(body):
        raise _BadBody(f"{len(body) - pos} unexplained bytes between footer and block end")
    return version, type_ordinal, header, content_start, content_len, footer


def _parse_metadata(body: bytes, pos: int, what: str) -> tuple[dict[str, str], int]:
    if pos + 4 > len(body):
        raise _BadBody(f"block ends inside the {what} count")
    (count,) = struct.unpack_from(">i", body, pos)
    pos += 4
    if count < 0 or count * 8 > len(body) - pos:
        raise _BadBody(f"{what} count {count} does not fit in the block")
    out: dict[str, str] = {}
    for _ in range(count):
        if pos + 8 > len(body):
            raise _BadBody(f"block ends inside a {what} entry")
        key, size = struct.unpack_from(">ii", body, pos)
        pos += 8
        if size < 0 or pos + size > len(body):
            raise _BadBody(f"{what} value length {size} does not fit in the block")
        try:
            value = body[pos : pos + size].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _BadBody(f"{what} value is not UTF-8: {exc}") from None
        pos += size
        out[_header_name(key)] = value
    return out, pos


def _header_name(ordinal: int) -> str:
    try:
        return HeaderKey(ordinal).name
    except ValueError:
        return f"UNKNOWN_{ordinal}"


def _decode_content(
    block_type: BlockType, header: Mapping[str, str], content: bytes, name: str, offset: int
) -> tuple[pa.Table | None, int | None]:
    where = f"{block_type.name} block at offset {offset}"
    if block_type == BlockType.COMMAND:
        return None, None
    if block_type == BlockType.HFILE:
        raise UnsupportedFeatureError(
            f"{where}: HFile data blocks (written by Hudi's metadata table) are not supported; "
            "read with decode=False to list the blocks",
            path=name,
        )
    if block_type in (BlockType.AVRO_DATA, BlockType.CDC):
        schema_json = header.get("SCHEMA")
        if schema_json is None:
            raise CorruptFileError(f"{where}: no SCHEMA header to decode Avro records with", path=name)
        return _guard(lambda: decode_avro_records(content, schema_json), where, name)
    if block_type == BlockType.PARQUET_DATA:
        return _guard(lambda: (pq.read_table(pa.BufferReader(content)), None), where, name)
    if block_type == BlockType.DELETE:
        return _guard(lambda: decode_delete_records(content), where, name)
    raise UnsupportedFeatureError(f"{where}: no decoder", path=name)  # pragma: no cover


def _guard(fn: Any, where: str, name: str) -> Any:
    """Run a content decoder; turn any failure into a CorruptFileError naming the block."""
    try:
        return fn()
    except UnsupportedFeatureError as exc:
        raise UnsupportedFeatureError(f"{where}: {exc.message}", path=name) from exc
    except (CorruptFileError, SchemaError) as exc:  # a malformed SCHEMA header is a damaged file
        raise CorruptFileError(f"{where}: {exc.message}", path=name) from exc
    except Exception as exc:  # fastavro/pyarrow raise many kinds on bad bytes
        raise CorruptFileError(f"{where}: content cannot be decoded ({type(exc).__name__}: {exc})", path=name) from exc


# --------------------------------------------------------------------------------------
# Avro data block content
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _AvroCodec:
    """A writer schema prepared once: fastavro's parsed form and the Arrow schema of the rows."""

    schema: dict[str, Any]
    parsed: Any
    arrow: pa.Schema
    storage: pa.Schema
    map_columns: tuple[str, ...] = field(default=())


def _codec(avro_schema: Mapping[str, Any] | str) -> _AvroCodec:
    schema = parse_avro_schema(avro_schema)
    arrow = avro_to_arrow_schema(schema)
    try:
        parsed = fastavro.parse_schema(strip_temporal_logical_types(schema))
    except Exception as exc:
        raise SchemaError(f"fastavro rejects the Avro schema: {exc}") from exc
    storage = pa.schema([f.with_type(storage_type(f.type)) for f in arrow])
    maps = tuple(f.name for f in arrow if _has_map(f.type))
    return _AvroCodec(schema, parsed, arrow, storage, maps)


def decode_avro_records(content: bytes, schema_json: Mapping[str, Any] | str) -> tuple[pa.Table, int]:
    """Decode Avro data block content into an Arrow table; returns (table, block version).

    The Arrow schema comes from the Avro schema, so an empty block still has its columns.
    """
    if len(content) < 8:
        raise CorruptFileError("Avro data content shorter than its version and record count")
    version, count = struct.unpack_from(">ii", content, 0)
    if version not in (2, 3):
        raise UnsupportedFeatureError(f"Avro data block version {version} (lsm_lab reads 2 and 3)")
    if count < 0 or count * 4 > len(content) - 8:
        raise CorruptFileError(f"record count {count} does not fit in {len(content)} content bytes")
    codec = _codec(schema_json)
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
        rows.append(fastavro.schemaless_reader(stream, codec.parsed))
        if stream.tell() != start + size:
            raise CorruptFileError(f"record {i} decodes to {stream.tell() - start} bytes, its length says {size}")
        pos = start + size
        if len(rows) == _ROWS_PER_BATCH:
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
    conformed = _conform(table, codec.arrow)
    if conformed.num_rows > 2**31 - 1:
        raise InputError(f"{conformed.num_rows} rows do not fit in one block (int32 count)")
    try:
        storage = conformed.cast(codec.storage)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"cannot lay out values for Avro: {exc}") from exc
    out = bytearray(struct.pack(">ii", AVRO_DATA_BLOCK_VERSION, conformed.num_rows))
    buf = io.BytesIO()
    map_types = {name: codec.arrow.field(name).type for name in codec.map_columns}
    for batch in storage.to_batches(max_chunksize=_ROWS_PER_BATCH):
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


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
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


# --------------------------------------------------------------------------------------
# delete block content (version 3: Avro HoodieDeleteRecordList)
# --------------------------------------------------------------------------------------

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
    decoded = fastavro.schemaless_reader(stream, _DELETE_SCHEMA, return_record_name=True)
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
        return column.cast(pa.string()).to_pylist()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"{name}: cannot be read as strings: {exc}") from exc


# --------------------------------------------------------------------------------------
# writing blocks and files
# --------------------------------------------------------------------------------------

#: header/footer entries keyed by `HeaderKey`, ordinal or name, in the order to write them
HeaderLike = Mapping[HeaderKey | int | str, str]


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
    conformed = _conform(table, avro_to_arrow_schema(schema))
    sink = io.BytesIO()
    pq.write_table(conformed, sink)
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


def write_log_file(path: str | os.PathLike[str], blocks: Sequence[bytes]) -> int:
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
    target = os.fspath(path)
    folder = os.path.dirname(target) or "."
    if os.path.lexists(target):
        raise ConflictError("log file already exists; v1 log files are never overwritten", path=target)
    tmp = os.path.join(folder, f".lsm_lab-tmp-{uuid.uuid4().hex}")
    size = 0
    try:
        with open(tmp, "xb") as f:
            for b in blocks:
                f.write(b)
                size += len(b)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise ConflictError("log file already exists; v1 log files are never overwritten", path=target) from None
        except OSError:
            # file systems without hard links: rename after the existence check above
            if os.path.lexists(target):
                raise ConflictError("log file already exists; v1 log files are never overwritten", path=target) from None
            os.replace(tmp, target)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    return size


# --------------------------------------------------------------------------------------
# rollbacks
# --------------------------------------------------------------------------------------


def effective_blocks(blocks: Iterable[LogBlock]) -> list[LogBlock]:
    """The data and delete blocks that count, in order, after applying rollbacks.

    Pass the blocks of *all* log files of a file slice, in file then block order: a
    rollback usually sits in a later log file than the blocks it cancels. As in
    Hudi's log record reader, a rollback command removes every block read *before*
    it whose INSTANT_TIME equals the command's TARGET_INSTANT_TIME (a retried task
    may have written several); a rollback that matches nothing is ignored. CORRUPT
    blocks are dropped, command blocks consumed. Unknown commands raise
    `UnsupportedFeatureError`.
    """
    kept: list[LogBlock] = []
    for block in blocks:
        if block.block_type == BlockType.CORRUPT:
            continue
        if block.block_type == BlockType.COMMAND:
            if not block.is_rollback:
                raise UnsupportedFeatureError(
                    f"command block type {block.header.get('COMMAND_BLOCK_TYPE')!r} at offset {block.offset}"
                )
            target = block.target_instant_time
            kept = [b for b in kept if b.instant_time != target]
            continue
        kept.append(block)
    return kept


# --------------------------------------------------------------------------------------
# file names and dumps
# --------------------------------------------------------------------------------------

_NAME = re.compile(
    r"^\.(?P<file_id>.+)_(?P<instant>[^_/]*)\.log\.(?P<version>\d+)"
    r"(?:_(?P<write_token>\d+-\d+-\d+))?(?P<cdc>\.cdc)?$"
)
_TOKEN = re.compile(r"^\d+-\d+-\d+$")


@dataclass(frozen=True)
class LogFileName:
    """The parts of a v1 log file name `.<file_id>_<instant>.log.<version>_<write_token>`.

    `instant` is the base file's instant in table version 6 and the writing
    deltacommit's in 8+. `write_token` is None in names from very old writers;
    `is_cdc` marks change-data-capture logs (suffix `.cdc`).
    """

    file_id: str
    instant: str
    version: int
    write_token: str | None
    is_cdc: bool = False

    @property
    def name(self) -> str:
        token = f"_{self.write_token}" if self.write_token is not None else ""
        return f".{self.file_id}_{self.instant}.log.{self.version}{token}{'.cdc' if self.is_cdc else ''}"


def is_log_file_name(name: str) -> bool:
    """Whether `name` (a file name, not a path) is a v1 log file name."""
    return _NAME.match(name) is not None


def parse_log_file_name(name: str) -> LogFileName:
    """Split a v1 log file name into its parts; `InputError` if it is not one."""
    m = _NAME.match(name)
    if m is None:
        raise InputError(f"{name!r} is not a v1 log file name (.<fileId>_<instant>.log.<version>_<writeToken>)")
    return LogFileName(m["file_id"], m["instant"], int(m["version"]), m["write_token"], m["cdc"] is not None)


def log_file_name(file_id: str, instant: str, version: int, write_token: str) -> str:
    """`.<file_id>_<instant>.log.<version>_<write_token>`, checking each part."""
    if not file_id or "/" in file_id or file_id.startswith("."):
        raise InputError(f"bad file id {file_id!r}")
    _check_instant(instant, "instant")
    if not isinstance(version, int) or version < 1:
        raise InputError(f"log version must be an int >= 1, got {version!r}")
    if not _TOKEN.match(write_token):
        raise InputError(f"write token must look like '<task>-<stage>-<attempt>', got {write_token!r}")
    return LogFileName(file_id, instant, version, write_token).name


def format_blocks(blocks: Iterable[LogBlock]) -> str:
    """A plain text listing, one block per line (see `LogBlock.describe`)."""
    return "\n".join(b.describe() for b in blocks)


def dump_log_file(path: str | os.PathLike[str], *, decode: bool = False) -> str:
    """A plain text listing of a log file's blocks, headed by its name and size."""
    name = os.path.basename(os.fspath(path))
    blocks = read_log_file(path, decode=decode)
    size = os.path.getsize(path)
    return f"{name} ({size} bytes, {len(blocks)} blocks)\n{format_blocks(blocks)}"


__all__ = [
    "AVRO_DATA_BLOCK_VERSION",
    "DELETE_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "ROLLBACK_COMMAND",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "commit_time_ordering_mask",
    "decode_avro_records",
    "decode_delete_records",
    "decode_log_bytes",
    "dump_log_file",
    "effective_blocks",
    "encode_avro_data_block",
    "encode_avro_records",
    "encode_block",
    "encode_command_block",
    "encode_delete_block",
    "encode_delete_records",
    "encode_parquet_data_block",
    "format_blocks",
    "is_log_file_name",
    "iter_blocks",
    "log_file_name",
    "parse_log_file_name",
    "read_log_file",
    "write_log_file",
]
