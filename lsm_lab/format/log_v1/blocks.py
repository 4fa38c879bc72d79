"""v1 blocks: framing a `#HUDI#` log file, block by block, and reading it back.

A v1 log file is a sequence of self-delimiting blocks; a writer appends
blocks, a reader walks them front to back. One block on disk (all integers
big-endian; checked byte by byte against the real files in
`data/hudi-log-files/`):

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
    ..      C     content (avro.py, deletes.py; a Parquet block holds a whole
                  Parquet file; a command block is empty)
    ..      var   footer: same encoding as the header (count 0 in practice)
    14+L-8  8     total block length = L + 6 (a "reverse pointer"; mismatch = corrupt)

The published spec mentions 8-byte header/footer length prefixes and 8-byte
record lengths; real files have no such prefixes and 4-byte record lengths.

**Corrupt blocks.** A crashed writer leaves a partial block at the end of a
file (and on storage that supports appends, later blocks after it). Like
Hudi's `HoodieLogFileReader`, a block is trusted only if its length L stays
inside the file, the trailer equals L + 6 and the next bytes are another
magic or the end of the file. Otherwise the reader scans forward for the next
`#HUDI#` and reports the skipped bytes as a `CORRUPT` block, so callers can
see it; `rollbacks.effective_blocks` drops it. A block whose frame is sound
but whose header, content and footer do not fill the frame exactly is
reported the same way. Content that is framed correctly but cannot be decoded
raises `CorruptFileError`: that is not a torn write, and silently skipping it
would lose committed data. The format has no checksum of its own: a flipped
bit inside an Avro record value goes unnoticed, in Hudi as here (a Parquet
block's pages are checked when they carry CRCs, see format/parquet_read.py).

Simplified compared with Apache Hudi: blocks are read eagerly, one at a
time, instead of lazily by content position. An HFile block (the metadata
table's) becomes its cells, a `key` (string) / `value` (binary Avro) table
(`format/hfile.py`); `table/metadata_table.py` decodes the values.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import io
import os
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, BinaryIO, cast

import pyarrow as pa

from lsm_lab.errors import CorruptFileError, SchemaError, UnsupportedFeatureError
from lsm_lab.format import hfile, parquet_read
from lsm_lab.format.log_v1.avro import decode_avro_records
from lsm_lab.format.log_v1.deletes import decode_delete_records
from lsm_lab.storage import StoragePath, open_read, path_of

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
ROLLBACK_COMMAND = "0"

#: version + type + header count + content length + footer count + trailer: the smallest L
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8
_SCAN_CHUNK = 1 << 20


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


def iter_blocks(path: str | os.PathLike[str] | StoragePath, *, decode: bool = True) -> Iterator[LogBlock]:
    """Yield the blocks of one v1 log file in file order, reading one block at a time.

    With `decode=False`, blocks are framed and their headers parsed but contents are
    not decoded (`records` stays None), so Kryo blocks do not raise: useful
    for dumps of any log file, including the metadata table's.
    """
    with open_read(path) as f:  # a local file read block by block; an object store: one GET of the whole log
        yield from _iter_source(_Source(f, str(path_of(path))), decode=decode)


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
    if block_type == BlockType.HFILE:  # the metadata table's blocks: one whole HFile of key → Avro cells
        return cast("tuple[pa.Table | None, int | None]",
                    _guard(lambda: (hfile.parse_hfile(content, source=f"{name} @{offset}").to_table(), None), where, name))
    if block_type in (BlockType.AVRO_DATA, BlockType.CDC):
        schema_json = header.get("SCHEMA")
        if schema_json is None:
            raise CorruptFileError(f"{where}: no SCHEMA header to decode Avro records with", path=name)
        return cast("tuple[pa.Table | None, int | None]", _guard(lambda: decode_avro_records(content, schema_json), where, name))
    if block_type == BlockType.PARQUET_DATA:
        return cast("tuple[pa.Table | None, int | None]", _guard(lambda: (parquet_read.open_parquet(pa.BufferReader(content)).read(), None), where, name))
    if block_type == BlockType.DELETE:
        return cast("tuple[pa.Table | None, int | None]", _guard(lambda: decode_delete_records(content), where, name))
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


def format_blocks(blocks: Iterable[LogBlock]) -> str:
    """A plain text listing, one block per line (see `LogBlock.describe`)."""
    return "\n".join(b.describe() for b in blocks)


def dump_log_file(path: str | os.PathLike[str], *, decode: bool = False) -> str:
    """A plain text listing of a log file's blocks, headed by its name and size."""
    name = os.path.basename(str(path))
    blocks = read_log_file(path, decode=decode)
    size = path_of(path).stat().st_size
    return f"{name} ({size} bytes, {len(blocks)} blocks)\n{format_blocks(blocks)}"


__all__ = [
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "ROLLBACK_COMMAND",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "decode_log_bytes",
    "dump_log_file",
    "format_blocks",
    "iter_blocks",
    "read_log_file",
]
