"""HFile (version 3, as Apache Hudi writes it): the base files and log blocks of the metadata table.

Hudi's metadata table keeps its records as sorted key → value cells in HBase's HFile format:
every base file of `.hoodie/metadata/<partition>/` is one (`…_<instant>.hfile`), and every data
block of its `#HUDI#` logs (block type 4, HFILE_DATA_BLOCK) holds one whole HFile as its content.
This module reads such a file from its bytes; what the values mean is `table/metadata_table.py`'s.

    offset 0
    ┌────────────────────┐  "DATABLK*"  data blocks: cells sorted by key
    │ DATA  ... DATA     │
    ├────────────────────┤  "METABLKc"  meta blocks (Hudi: the bloom filter of the keys), skipped
    │ META  ...          │
    ├────────────────────┤  load-on-open section (trailer.load_on_open_offset):
    │ IDXROOT2  data idx │    root of the data block index (first key, offset, size per block;
    │ IDXROOT2  meta idx │      with num_data_index_levels > 1 its entries point at IDXINTE2 /
    │ FILEINF2  file info│      IDXLEAF2 blocks that point at the data blocks)
    ├────────────────────┤    file info: "PBUF" + a length-delimited InfoProto (name → bytes)
    │ TRABLK"$  trailer  │  last 4096 bytes: magic, a length-delimited TrailerProto, zero padding,
    └────────────────────┘  and the version int (minor << 24 | major) in the last 4 bytes

    block header (33 bytes, big-endian)         cell (inside a DATA block, after decompression)
    0   8  magic                                 0  4  key length K
    8   4  on-disk size without header           4  4  value length V
    12  4  uncompressed size without header      8  K  key: int16 row length R, row (the key
    16  8  previous block offset                        content, UTF-8), family length (0),
    24  1  checksum type (0 = none)                     timestamp int64, type byte
    25  4  bytes per checksum                    8+K V  value (Hudi: an Avro record)
    29  4  on-disk data size with header             1  MVCC version (a varint; always 0 in Hudi)

The block's payload is `onDiskDataSizeWithHeader - 33` bytes compressed with the trailer's codec
(ordinals: 0 LZO, 1 GZIP, 2 NONE, 3 SNAPPY, 4 LZ4, 5 BZIP2, 6 ZSTD); checksum bytes follow it
inside the on-disk size.  The shipped tables' files all use GZIP (Hudi's default for the
metadata table) and checksum type 0.

Reading is strict: every offset and length is checked against the bytes it points into, and
anything that does not add up — truncation, a wrong magic, a trailer pointing past the file,
a cell running past its block, a decompressed size that differs from the header's — is a
`CorruptFileError` naming the file and the problem.  The protobuf messages (trailer, file info)
are decoded field by field from their wire format; nothing is evaluated or unpickled.

**A whole file as Arrow columns** (`HFile.to_table`, what the metadata table's merge and the record index's
log blocks read): a cell's length is in its own header, so finding where cells start is the one
sequential step — a struct read and an addition per cell, no object made (`_cell_starts`; one stride for
a block of equal cells, `_uniform_starts`).  Everything else is NumPy or Arrow over all blocks laid end to
end: every length and MVCC byte checked at once, then each key and value becomes a 16-byte Arrow *view*
(length, inline bytes or prefix, offset) into the blocks, and Arrow's cast to string/binary copies the
bytes out in one C++ pass (and checks UTF-8):

    blocks  | k1 v1 | k2 v2 | k3 v3 |…      starts [0, 57, 114, …] ─► views ─► cast ─► key: string, value: binary

Upstream, read for this module (apache/hudi `hudi-io/src/main/java/org/apache/hudi/io/hfile/`):
`HFileReaderImpl` / `BaseHFileReaderImpl` (open: trailer, root and multi-level data index, meta
index, file info), `HFileTrailer`, `HFileBlock` (header layout, checksum size), `HFileDataBlock`
(cells), `HFileRootIndexBlock` / `HFileLeafIndexBlock` (index entries), `HFileFileInfoBlock`,
`HFileCompressionCodec` (codec ordinals); and hudi-rs `crates/core/src/hfile/compression.rs`
(GZIP and NONE only).

Simplified compared with Apache Hudi: the whole file is read into memory and every cell decoded
(no block cache, no seek cursor; `get` / `block_of` binary-search the index, and only the block read is
decompressed and parsed — the record index's point lookups, `table/mdt_lookup.py`); codecs:
NONE and GZIP (Python's zlib), BZIP2 (Python's bz2); LZO, SNAPPY, LZ4 and ZSTD raise
`UnsupportedFeatureError` (hudi-rs reads GZIP and NONE only, Hudi writes GZIP by default);
block checksums are not verified (Hudi's own reader does not either, and writes checksum type 0);
meta blocks (the key bloom filter) are listed, not decoded.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (read)")
"""

from __future__ import annotations

import bisect
import bz2
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
from lsm_lab.storage import StoragePath, path_of

TRAILER_SIZE = 4096
HEADER_SIZE = 33
TRAILER_MAGIC = b'TRABLK"$'
DATA_MAGIC = b"DATABLK*"
ROOT_INDEX_MAGIC = b"IDXROOT2"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
FILE_INFO_MAGIC = b"FILEINF2"
META_MAGIC = b"METABLKc"
PB_MAGIC = b"PBUF"
#: `HFileCompressionCodec` ordinals (their order is the on-disk value)
CODECS = ("LZO", "GZIP", "NONE", "SNAPPY", "LZ4", "BZIP2", "ZSTD")
#: the file-info key under which Hudi's HFile writer stores the Avro schema of the values
SCHEMA_KEY = b"schema"
_MAX_LEVELS = 8  # index depth; Hudi writes 1, HBase rarely more than 3


class _Bad(Exception):
    """A structural problem; `HFile` turns it into a CorruptFileError naming the file."""


@dataclass(frozen=True)
class Trailer:
    """The fields of `TrailerProto` lsm_lab uses (`HFileTrailer`)."""

    major_version: int
    minor_version: int
    file_info_offset: int = 0
    load_on_open_offset: int = 0
    uncompressed_data_index_size: int = 0
    total_uncompressed_bytes: int = 0
    data_index_count: int = 0
    meta_index_count: int = 0
    entry_count: int = 0
    num_data_index_levels: int = 1
    first_data_block_offset: int = 0
    last_data_block_offset: int = 0
    comparator: str = ""
    codec: str = "NONE"


@dataclass(frozen=True)
class IndexEntry:
    """One block index entry: the block's first key (content only), offset and on-disk size."""

    first_key: bytes
    offset: int
    size: int


@dataclass
class HFile:
    """One HFile, parsed: `trailer`, `file_info`, the data and meta block indexes; cells on demand."""

    source: str
    data: bytes
    trailer: Trailer
    file_info: dict[bytes, bytes]
    data_index: list[IndexEntry]
    meta_index: list[IndexEntry]
    _first_keys: list[bytes] = field(default_factory=list, repr=False)

    @property
    def entry_count(self) -> int:
        return self.trailer.entry_count

    @property
    def avro_schema(self) -> str | None:
        """The Avro schema JSON of the values (Hudi's writer keeps it in the file info), if present."""
        raw = self.file_info.get(SCHEMA_KEY)
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptFileError("the file info 'schema' is not UTF-8", path=self.source) from None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) cell in key order; the key is the row content (Hudi's record key, UTF-8)."""
        count = 0
        previous: bytes | None = None
        for i in range(len(self.data_index)):
            for key, value in self._block_cells(i):
                if previous is not None and key < previous:
                    raise CorruptFileError(f"keys out of order in data block {i}: {key!r} after {previous!r}",
                                           path=self.source)
                previous = key
                count += 1
                yield key, value
        if count != self.trailer.entry_count:
            raise CorruptFileError(f"the trailer counts {self.trailer.entry_count} cells, the data blocks hold {count}",
                                   path=self.source)

    def get(self, key: bytes) -> bytes | None:
        """The value of `key`, or None: the block index picks the one block that may hold it."""
        i = self.block_of(key)
        if i < 0:
            return None
        for k, v in self._block_cells(i):
            if k == key:
                return v
            if k > key:
                break
        return None

    def block_of(self, key: bytes) -> int:
        """The data block that may hold `key` (the last whose first key is ≤ it), -1 before the first block:
        the seek of upstream's `HFileReaderImpl.seekTo` on the block index, no data block read."""
        return bisect.bisect_right(self._first_keys, key) - 1

    def block_cells(self, i: int) -> list[tuple[bytes, bytes]]:
        """The (key, value) cells of data block `i` (decompressed and parsed: one block read)."""
        if not 0 <= i < len(self.data_index):
            raise IndexError(f"data block {i} of {len(self.data_index)}")
        return self._block_cells(i)

    def to_table(self) -> pa.Table:
        """The cells as an Arrow table: `key` (string), `value` (binary).

        Per block, one loop finds where the cells start (`_cell_starts`: a struct read per cell, no object);
        the blocks laid end to end, every key's and value's bytes are then gathered by one NumPy index each into
        Arrow buffers (no Python object per cell); order, count and UTF-8 are checked."""
        payloads: list[bytes] = []
        for i, entry in enumerate(self.data_index):
            try:
                payloads.append(_read_block(self.data, entry.offset, DATA_MAGIC, self.trailer.codec, limit=entry.size))
            except _Bad as exc:
                raise CorruptFileError(f"data block {i} at offset {entry.offset}: {exc}", path=self.source) from None
        try:
            joined, kstart, klens, vstart, vlens = _blocks_spans(payloads)
        except _BadBlock as exc:
            entry = self.data_index[exc.block]
            raise CorruptFileError(f"data block {exc.block} at offset {entry.offset}: {exc.bad}",
                                   path=self.source) from None
        count = len(klens)
        if count != self.trailer.entry_count:
            raise CorruptFileError(f"the trailer counts {self.trailer.entry_count} cells, the data blocks hold {count}",
                                   path=self.source)
        big = len(joined) >= 2**31 or int(klens.sum()) >= 2**31 or int(vlens.sum()) >= 2**31
        buf = np.frombuffer(joined, np.uint8)
        if big:  # past int32 offsets: gather the bytes with NumPy into large arrays
            koff = np.concatenate([[0], np.cumsum(klens)])
            voff = np.concatenate([[0], np.cumsum(vlens)])
            raw_keys = pa.Array.from_buffers(pa.large_binary(), count, [None, pa.py_buffer(koff),
                                                                       pa.py_buffer(_gather(buf, kstart, klens))])
            values = pa.Array.from_buffers(pa.large_binary(), count, [None, pa.py_buffer(voff),
                                                                     pa.py_buffer(_gather(buf, vstart, vlens))])
        else:  # views into the blocks, copied out by Arrow's cast (one C++ pass, no index per byte)
            raw_keys = _view_array(joined, buf, kstart, klens)
            values = _view_array(joined, buf, vstart, vlens).cast(pa.binary())
        try:
            keys = raw_keys.cast(pa.string())
            keys.validate(full=True)
        except pa.ArrowInvalid:
            bad = next(k for k in raw_keys.to_pylist() if not _is_utf8(k))
            raise CorruptFileError(f"key {bad[:40]!r} is not UTF-8", path=self.source) from None
        if count > 1:
            ordered = pc.less_equal(keys.slice(0, count - 1), keys.slice(1))  # UTF-8 bytes order = code point order
            if not pc.all(ordered).as_py():
                at = int(pc.index(ordered, False).as_py()) + 1
                kb = keys.cast(pa.large_binary())
                raise CorruptFileError(f"keys out of order: {kb[at].as_py()!r} after {kb[at - 1].as_py()!r}",
                                       path=self.source)
        if big:
            values = values.cast(pa.binary())
        return pa.table({"key": keys, "value": values})

    def _block_cells(self, i: int) -> list[tuple[bytes, bytes]]:
        entry = self.data_index[i]
        try:
            payload = _read_block(self.data, entry.offset, DATA_MAGIC, self.trailer.codec, limit=entry.size)
            return _cells(payload)
        except _Bad as exc:
            raise CorruptFileError(f"data block {i} at offset {entry.offset}: {exc}", path=self.source) from None


def read_hfile(path: str | os.PathLike[str] | StoragePath) -> HFile:
    """Open an HFile on disk or in an object store (read whole)."""
    p = path_of(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CorruptFileError("the HFile does not exist", path=p) from None
    return parse_hfile(data, source=str(p))


def parse_hfile(data: bytes, *, source: str = "<bytes>") -> HFile:
    """Parse the trailer, the block indexes and the file info of an HFile held in memory."""
    try:
        trailer = _trailer(data)
        return _open(data, trailer, source)
    except _Bad as exc:
        raise CorruptFileError(f"not a readable HFile: {exc}", path=source) from None


# ---------------------------------------------------------------------------------- internals

def _open(data: bytes, trailer: Trailer, source: str) -> HFile:
    end = len(data) - TRAILER_SIZE
    if not 0 <= trailer.load_on_open_offset < end:
        raise _Bad(f"load-on-open offset {trailer.load_on_open_offset} is outside the blocks (0..{end})")
    pos = trailer.load_on_open_offset
    root, pos = _read_block_at(data, pos, ROOT_INDEX_MAGIC, trailer.codec, end, "root data index")
    levels = trailer.num_data_index_levels
    if not 1 <= levels <= _MAX_LEVELS:
        raise _Bad(f"data index levels {levels} (expected 1..{_MAX_LEVELS})")
    entries = _root_entries(root, trailer.data_index_count, "root data index")
    for level in range(levels - 1, 0, -1):  # BFS down to the leaves, as BaseHFileReaderImpl.readDataBlockIndex
        magic = INTERMEDIATE_INDEX_MAGIC if level > 1 else LEAF_INDEX_MAGIC
        lower: list[IndexEntry] = []
        for e in entries:
            block = _read_block(data, e.offset, magic, trailer.codec, limit=e.size, end=end)
            lower.extend(_nonroot_entries(block))
        entries = lower
    meta, pos = _read_block_at(data, pos, ROOT_INDEX_MAGIC, trailer.codec, end, "meta index")
    meta_entries = _root_entries(meta, trailer.meta_index_count, "meta index", content_only=True)
    info_block, _ = _read_block_at(data, pos, FILE_INFO_MAGIC, trailer.codec, end, "file info")
    info = _file_info(info_block)
    for e in entries:
        if not 0 <= e.offset < trailer.load_on_open_offset or e.size < HEADER_SIZE:
            raise _Bad(f"data index entry points at offset {e.offset} size {e.size}, outside the data section")
    first_keys = [e.first_key for e in entries]
    if first_keys != sorted(first_keys):
        raise _Bad("data index keys are not sorted")
    if trailer.entry_count and not entries:
        raise _Bad(f"the trailer counts {trailer.entry_count} cells but the data index is empty")
    return HFile(source, data, trailer, info, entries, meta_entries, first_keys)


def _trailer(data: bytes) -> Trailer:
    if len(data) < TRAILER_SIZE + HEADER_SIZE * 3:
        raise _Bad(f"{len(data)} bytes, shorter than a trailer ({TRAILER_SIZE}) and the load-on-open blocks")
    (version,) = struct.unpack_from(">i", data, len(data) - 4)
    major, minor = version & 0x00FFFFFF, (version >> 24) & 0xFF
    if major in (1, 2):
        raise UnsupportedFeatureError(f"HFile version {major}.{minor}; lsm_lab reads version 3 (Hudi 0.10+) only")
    if major != 3:
        raise _Bad(f"version field {version:#x} at the end of the file is not an HFile version")
    t = len(data) - TRAILER_SIZE
    if data[t : t + 8] != TRAILER_MAGIC:
        raise _Bad(f"trailer magic {data[t : t + 8]!r} != {TRAILER_MAGIC!r}")
    length, pos = _varint(data, t + 8, len(data) - 4)
    if pos + length > len(data) - 4:
        raise _Bad(f"trailer message length {length} runs past the trailer")
    fields = _proto_fields(data[pos : pos + length], "trailer")
    codec_id = _uint(fields, 12, 2)
    if codec_id >= len(CODECS):
        raise _Bad(f"compression codec ordinal {codec_id} is unknown")
    comparator = fields.get(11, [b""])[-1]
    return Trailer(
        major_version=major, minor_version=minor,
        file_info_offset=_uint(fields, 1), load_on_open_offset=_uint(fields, 2),
        uncompressed_data_index_size=_uint(fields, 3), total_uncompressed_bytes=_uint(fields, 4),
        data_index_count=_uint(fields, 5), meta_index_count=_uint(fields, 6), entry_count=_uint(fields, 7),
        num_data_index_levels=_uint(fields, 8, 1), first_data_block_offset=_uint(fields, 9),
        last_data_block_offset=_uint(fields, 10),
        comparator=comparator.decode("utf-8", "replace") if isinstance(comparator, bytes) else "",
        codec=CODECS[codec_id],
    )


def _uint(fields: dict[int, list[int | bytes]], number: int, default: int = 0) -> int:
    values = fields.get(number)
    if not values:
        return default
    v = values[-1]
    if not isinstance(v, int):
        raise _Bad(f"trailer field {number} is not a number")
    return v


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A protobuf base-128 varint at `pos` (at most 10 bytes, before `end`)."""
    result = 0
    for shift in range(0, 70, 7):
        if pos >= end:
            raise _Bad("a varint runs past its bounds")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
    raise _Bad("a varint longer than 10 bytes")


def _proto_fields(msg: bytes, what: str) -> dict[int, list[int | bytes]]:
    """Protobuf wire format → field number → values (varints as int, length-delimited as bytes)."""
    out: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(msg):
        tag, pos = _varint(msg, pos, len(msg))
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise _Bad(f"{what}: field number 0")
        value: int | bytes
        if wire == 0:
            value, pos = _varint(msg, pos, len(msg))
        elif wire == 2:
            n, pos = _varint(msg, pos, len(msg))
            if pos + n > len(msg):
                raise _Bad(f"{what}: field {number} length {n} runs past the message")
            value, pos = msg[pos : pos + n], pos + n
        elif wire == 1 or wire == 5:
            size = 8 if wire == 1 else 4
            if pos + size > len(msg):
                raise _Bad(f"{what}: field {number} runs past the message")
            value, pos = int.from_bytes(msg[pos : pos + size], "little"), pos + size
        else:
            raise _Bad(f"{what}: unsupported wire type {wire} of field {number}")
        out.setdefault(number, []).append(value)
    return out


def _header(data: bytes, offset: int, magic: bytes, end: int) -> tuple[int, int, int]:
    """(on-disk size without header, uncompressed size without header, on-disk data size with header)."""
    if offset < 0 or offset + HEADER_SIZE > end:
        raise _Bad(f"block header at offset {offset} runs past the blocks (end {end})")
    got = data[offset : offset + 8]
    if got != magic:
        raise _Bad(f"block magic {got!r} at offset {offset}, expected {magic!r}")
    on_disk, uncompressed, _prev, _ctype, _per, data_with_header = struct.unpack_from(">iiqbii", data, offset + 8)
    if on_disk < 0 or uncompressed < 0 or offset + HEADER_SIZE + on_disk > end:
        raise _Bad(f"block at offset {offset}: on-disk size {on_disk} runs past the blocks (end {end})")
    if not HEADER_SIZE <= data_with_header <= HEADER_SIZE + on_disk:
        raise _Bad(f"block at offset {offset}: data size {data_with_header} does not fit its on-disk size {on_disk}")
    return on_disk, uncompressed, data_with_header


def _read_block(data: bytes, offset: int, magic: bytes, codec: str, *, limit: int | None = None,
                end: int | None = None) -> bytes:
    """The uncompressed payload of the block at `offset` (header checked, sizes checked)."""
    stop = len(data) - TRAILER_SIZE if end is None else end
    if limit is not None:
        if limit < HEADER_SIZE:
            raise _Bad(f"index says the block at offset {offset} has {limit} bytes, less than a header")
        stop = min(stop, offset + limit)
    _, uncompressed, data_with_header = _header(data, offset, magic, stop)
    raw = data[offset + HEADER_SIZE : offset + data_with_header]
    payload = _decompress(raw, codec, uncompressed)
    if len(payload) != uncompressed:
        raise _Bad(f"block at offset {offset}: {len(payload)} bytes after {codec}, the header says {uncompressed}")
    return payload


def _read_block_at(data: bytes, offset: int, magic: bytes, codec: str, end: int, what: str) -> tuple[bytes, int]:
    """A load-on-open block and where the next one starts."""
    try:
        on_disk, _, _ = _header(data, offset, magic, end)
        return _read_block(data, offset, magic, codec, end=end), offset + HEADER_SIZE + on_disk
    except _Bad as exc:
        raise _Bad(f"{what}: {exc}") from None


def _decompress(raw: bytes, codec: str, expected: int) -> bytes:
    if codec == "NONE":
        return raw
    if codec == "GZIP":
        try:
            d = zlib.decompressobj(wbits=47)  # gzip or zlib header, auto-detected
            out = d.decompress(raw, expected + 1)
        except zlib.error as exc:
            raise _Bad(f"GZIP payload cannot be decompressed ({exc})") from None
        return out
    if codec == "BZIP2":
        try:
            return bz2.BZ2Decompressor().decompress(raw, expected + 1)
        except (OSError, ValueError, EOFError) as exc:
            raise _Bad(f"BZIP2 payload cannot be decompressed ({exc})") from None
    raise UnsupportedFeatureError(f"HFile blocks compressed with {codec}; lsm_lab reads NONE, GZIP and BZIP2")


def _root_entries(block: bytes, count: int, what: str, *, content_only: bool = False) -> list[IndexEntry]:
    """Root index: per entry int64 offset, int32 size, varint key length, key (`HFileRootIndexBlock`).

    Data index keys are HBase keys (their row is the first key); meta index keys are the block's
    name as it is (`content_only`, upstream's `UTF8StringKey`)."""
    if count < 0 or count * 13 > len(block):
        raise _Bad(f"{what}: {count} entries cannot fit in {len(block)} bytes")
    out: list[IndexEntry] = []
    pos = 0
    for _ in range(count):
        if pos + 12 > len(block):
            raise _Bad(f"{what}: entry runs past the block")
        offset, size = struct.unpack_from(">qi", block, pos)
        n, pos = _varint(block, pos + 12, len(block))
        if pos + n > len(block):
            raise _Bad(f"{what}: key length {n} runs past the block")
        key = block[pos : pos + n]
        out.append(IndexEntry(key if content_only else _key_content(key, what), offset, size))
        pos += n
    return out


def _nonroot_entries(block: bytes) -> list[IndexEntry]:
    """Leaf/intermediate index: int32 count, count+1 int32 relative offsets, entries (`HFileLeafIndexBlock`)."""
    if len(block) < 4:
        raise _Bad("index block too short for its entry count")
    (count,) = struct.unpack_from(">i", block, 0)
    if count < 0 or 4 + 4 * (count + 1) > len(block):
        raise _Bad(f"index block: {count} entries cannot fit in {len(block)} bytes")
    rel = struct.unpack_from(f">{count + 1}i", block, 4)
    base = 4 + 4 * (count + 1)
    out: list[IndexEntry] = []
    for i in range(count):
        start, stop = base + rel[i], base + rel[i + 1]
        if not (base <= start and start + 12 <= stop <= len(block)):
            raise _Bad(f"index block entry {i} spans {start}..{stop}, outside the block")
        offset, size = struct.unpack_from(">qi", block, start)
        out.append(IndexEntry(_key_content(block[start + 12 : stop], "index block"), offset, size))
    return out


def _key_content(key: bytes, what: str) -> bytes:
    """The row of an HBase key: int16 length, then that many bytes (family, timestamp, type follow)."""
    if len(key) < 2:
        raise _Bad(f"{what}: key of {len(key)} bytes has no row length")
    (n,) = struct.unpack_from(">h", key, 0)
    if n < 0 or 2 + n > len(key):
        raise _Bad(f"{what}: row length {n} runs past the key ({len(key)} bytes)")
    return key[2 : 2 + n]


_CELL_HEAD = struct.Struct(">iih")


def _cells(payload: bytes) -> list[tuple[bytes, bytes]]:
    """The cells of a data block, every length checked (one tight loop: this is the cost of reading an HFile)."""
    out: list[tuple[bytes, bytes]] = []
    append = out.append
    head = _CELL_HEAD.unpack_from
    pos = 0
    n = len(payload)
    while pos < n:
        if pos + 10 > n:
            raise _Bad(f"cell at {pos} runs past the block")
        klen, vlen, rlen = head(payload, pos)
        start = pos + 8
        stop = start + klen
        if klen < 2 or vlen < 0 or stop + vlen + 1 > n:
            raise _Bad(f"cell at {pos}: key length {klen}, value length {vlen} run past the block ({n} bytes)")
        if rlen < 0 or 2 + rlen > klen:
            raise _Bad(f"cell: row length {rlen} runs past the key ({klen} bytes)")
        append((payload[start + 2 : start + 2 + rlen], payload[stop : stop + vlen]))
        pos = stop + vlen
        if payload[pos] < 0x80:  # the MVCC version (Hudi writes 0): a one-byte varint
            pos += 1
        else:
            _, pos = _varint(payload, pos, n)
    return out


def _be32(b: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Big-endian int32 at each offset of `at` in the byte array `b` (as int64; only the bytes read are widened)."""
    u = (b[at].astype(np.int64) << 24) | (b[at + 1].astype(np.int64) << 16) \
        | (b[at + 2].astype(np.int64) << 8) | b[at + 3].astype(np.int64)
    out: np.ndarray = np.where(u >= 1 << 31, u - (1 << 32), u)
    return out


def _uniform_starts(payload: bytes, b: np.ndarray) -> np.ndarray | None:
    """The cell starts when every cell of the block has the first cell's key and value lengths (fixed-length
    record keys and record-index values: the usual case), checked for every cell; else None."""
    n = len(payload)
    if n < 10:
        return None
    klen, vlen = _CELL_LENGTHS.unpack_from(payload, 0)
    stride = 9 + klen + vlen
    if klen < 2 or vlen < 0 or n % stride:
        return None
    starts = np.arange(0, n, stride, dtype=np.int64)
    if (_be32(b, starts) != klen).any() or (_be32(b, starts + 4) != vlen).any() or b[starts + stride - 1].any():
        return None
    return starts


def _cell_starts(payload: bytes) -> list[int] | None:
    """Where each cell of a data block starts, unchecked: the one sequential step (a cell's length is in its
    header), a struct read and an addition per cell.  None when the cells do not end at the block's end.  The
    caller checks the lengths and the MVCC bytes with NumPy (`_checked_spans`)."""
    starts: list[int] = []
    append = starts.append
    head = _CELL_ULENGTHS.unpack_from
    pos = 0
    n = len(payload)
    try:
        while pos < n:
            append(pos)
            klen, vlen = head(payload, pos)
            pos += 9 + klen + vlen  # unsigned: always forward
    except struct.error:
        return None
    return starts if pos == n else None


def _checked_starts(payload: bytes) -> np.ndarray | None:
    """`_cell_starts` one checked cell at a time: raises `_Bad` on the first cell that does not fit."""
    starts: list[int] = []
    append = starts.append
    head = _CELL_LENGTHS.unpack_from
    pos = 0
    n = len(payload)
    while pos < n:
        if pos + 10 > n:
            raise _Bad(f"cell at {pos} runs past the block")
        klen, vlen = head(payload, pos)
        append(pos)
        pos += 8 + klen + vlen
        if klen < 2 or vlen < 0 or pos >= n:
            raise _Bad(f"cell at {starts[-1]}: key length {klen}, value length {vlen} run past the block ({n} bytes)")
        if payload[pos] != 0:
            return None
        pos += 1
    return np.array(starts, np.int64)


_CELL_ULENGTHS = struct.Struct(">II")
_CELL_LENGTHS = struct.Struct(">ii")


def _gather(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The bytes of `buf` at [start, start + len) for each pair, concatenated (no Python loop): one index per
    byte taken, so the cost follows the bytes gathered, not the buffer's size."""
    total = int(lens.sum())
    if not total:
        return np.zeros(0, np.uint8)
    ends = np.cumsum(lens)
    index = np.repeat(starts - (ends - lens), lens) + np.arange(total, dtype=np.int64)
    out: np.ndarray = buf[index]
    return out


class _BadBlock(Exception):
    """A damaged data block among several: its number and the problem."""

    def __init__(self, block: int, bad: _Bad) -> None:
        super().__init__(str(bad))
        self.block, self.bad = block, bad


def _spans_at(buf: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(key starts, key lengths, value starts, value lengths) of the cells starting at `starts` in `buf` (uint8):
    the key is the cell key's row (Hudi's record key), every length checked against the cell's."""
    if not len(starts):
        none = np.zeros(0, np.int64)
        return none, none, none, none
    klen = _be32(buf, starts)
    rlen = (buf[starts + 8].astype(np.int64) << 8) | buf[starts + 9].astype(np.int64)
    rlen = np.where(rlen >= 1 << 15, rlen - (1 << 16), rlen)  # int16
    if ((rlen < 0) | (rlen + 2 > klen)).any():
        at = int(np.argmax((rlen < 0) | (rlen + 2 > klen)))
        raise _Bad(f"cell: row length {int(rlen[at])} runs past the key ({int(klen[at])} bytes)")
    return starts + 10, rlen, starts + 8 + klen, _be32(buf, starts + 4)


def _blocks_spans(payloads: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every data block's cells at once: (the blocks laid end to end, key starts, key lengths, value starts, value
    lengths).  Each block's cell starts (`_uniform_starts`, else `_cell_starts`), then every length and MVCC byte
    checked at once over all blocks (a block's cells end at its end, so laid end to end each cell's MVCC byte is
    just before the next start).  If a check fails, each block is parsed again one checked cell at a time
    (`_checked_starts`): a damaged block is `_BadBlock` naming it; a block whose MVCC versions are not the
    one-byte 0 is parsed by `_cells`, and the cells are laid out anew."""
    starts: list[np.ndarray] = []
    base = 0
    ok = True
    for payload in payloads:
        found: np.ndarray | list[int] | None = _uniform_starts(payload, np.frombuffer(payload, np.uint8))
        if found is None:
            found = _cell_starts(payload)
        if found is None:
            ok = False
            break
        starts.append(np.asarray(found, np.int64) + base)
        base += len(payload)
    joined = payloads[0] if len(payloads) == 1 else b"".join(payloads)
    if ok:
        at = np.concatenate(starts) if starts else np.zeros(0, np.int64)
        buf = np.frombuffer(joined, np.uint8)
        if not len(at) or ((_be32(buf, at) >= 2).all() and (_be32(buf, at + 4) >= 0).all()
                           and not buf[np.append(at[1:], len(buf)) - 1].any()):
            try:
                return (joined, *_spans_at(buf, at))
            except _Bad:
                pass
    parsed = False
    for i, payload in enumerate(payloads):  # the slow, checked way: find the damaged block, or the MVCC versions
        try:
            one = _checked_starts(payload)
            if one is None:
                _cells(payload)
                parsed = True
            else:
                _spans_at(np.frombuffer(payload, np.uint8), one)
        except _Bad as exc:
            raise _BadBlock(i, exc) from None
    if not parsed:
        raise _BadBlock(0, _Bad("cells do not parse"))
    cells = [c for payload in payloads for c in _cells(payload)]  # laid out key, value, key, value ...
    lens = np.array([len(x) for c in cells for x in c], np.int64)
    at = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    return b"".join(x for c in cells for x in c), at[0::2], lens[0::2], at[1::2], lens[1::2]


def _view_array(joined: bytes, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> pa.Array:
    """A `binary_view` array of the byte ranges [start, start + len) of `joined` (< 2 GiB), built without copying
    them: Arrow's view layout, 16 bytes per value (its length, then up to 12 bytes inline, or a 4-byte prefix, the
    buffer's number and the offset).  A cast to binary or string then copies the bytes out in one C++ pass."""
    count = len(starts)
    views = np.zeros((count, 16), np.uint8)
    views[:, 0:4] = lens.astype("<i4").view(np.uint8).reshape(count, 4)
    short = lens <= 12
    if short.any():
        s, n = starts[short], lens[short]
        inline = buf[np.minimum(s[:, None] + np.arange(12), len(buf) - 1)]
        inline[np.arange(12)[None, :] >= n[:, None]] = 0  # padded with zeros
        views[short, 4:16] = inline
    long = ~short
    if long.any():
        s = starts[long]
        views[long, 4:8] = buf[s[:, None] + np.arange(4)]  # the prefix; buffer number 0
        views[long, 12:16] = s.astype("<i4").view(np.uint8).reshape(-1, 4)
    return pa.Array.from_buffers(pa.binary_view(), count, [None, pa.py_buffer(views), pa.py_buffer(joined)])


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _file_info(block: bytes) -> dict[bytes, bytes]:
    """"PBUF" + a length-delimited InfoProto: repeated BytesBytesPair map_entry = 1 {first = 1, second = 2}."""
    if block[:4] != PB_MAGIC:
        raise _Bad(f"file info starts with {block[:4]!r}, not {PB_MAGIC!r}")
    length, pos = _varint(block, 4, len(block))
    if pos + length > len(block):
        raise _Bad(f"file info message length {length} runs past the block")
    out: dict[bytes, bytes] = {}
    for entry in _proto_fields(block[pos : pos + length], "file info").get(1, []):
        if not isinstance(entry, bytes):
            raise _Bad("file info entry is not a message")
        pair = _proto_fields(entry, "file info entry")
        first, second = pair.get(1, [b""])[-1], pair.get(2, [b""])[-1]
        if not isinstance(first, bytes) or not isinstance(second, bytes):
            raise _Bad("file info entry fields are not bytes")
        out[first] = second
    return out


__all__ = [
    "CODECS",
    "SCHEMA_KEY",
    "TRAILER_SIZE",
    "HFile",
    "IndexEntry",
    "Trailer",
    "parse_hfile",
    "read_hfile",
]
