"""Writing HFile version 3 as Apache Hudi's own writer does: the metadata table's base files and log blocks.

`format/hfile.py` reads an HFile; this module writes one, byte for byte in the layout upstream's
pure-Java `HFileWriterImpl` (apache/hudi `hudi-io`, package `org.apache.hudi.io.hfile`) produces:

    cells (sorted by key) ──► DATA blocks of about `block_size` uncompressed bytes
                              (a key never spans two blocks: equal keys stay in one)
    then the load-on-open section:
        IDXROOT2  root data index   one entry per data block: offset, on-disk size, first key
        IDXROOT2  meta index        empty (no meta blocks: see "Simplified" below)
        FILEINF2  file info         "PBUF" + varint length + InfoProto; the writer's own entries
                                    (hfile.LASTKEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_TS,
                                    MAX_MEMSTORE_TS_KEY, KEY_VALUE_VERSION) + the caller's
    TRABLK"$  trailer (4096 bytes)  varint length + TrailerProto, zero padding, version byte 3

    every block: 33-byte header (magic, on-disk size without header *including* the checksum
    bytes, uncompressed size, previous block offset, checksum type 0, bytes per checksum 16384,
    on-disk data size with header), the payload compressed with the file's codec, then 4 zero
    bytes per started 16 KiB of "data size with header" (checksum type NULL, as `HFileBlock.serialize`)

    cell: int32 key length (row + 12), int32 value length, int16 row length, row, family length 0,
    timestamp Long.MAX_VALUE, type 4 (Put), value, MVCC byte 0      (`HFileDataBlock`)

Upstream, read for this module: `HFileWriterImpl` (append, flushCurrentDataBlock,
writeLoadOnOpenSection, writeTrailer, finishFileInfo), `HFileBlock.serialize` (header, checksum
bytes), `HFileDataBlock` (the cell layout), `HFileRootIndexBlock` / `HFileMetaIndexBlock` (index
entries: the data index key is an int16-prefixed row, the meta index key is bare),
`HFileFileInfoBlock` (InfoProto), and the GZIP compressor of `hudi-io`'s `compress` package (a
gzip stream with a zero header).  The trailer's comparator is
`org.apache.hudi.io.storage.HoodieHBaseKVComparator` and its codec ordinal is
`HFileCompressionCodec`'s (GZIP 1, NONE 2).

Simplified compared with Apache Hudi: the file is built in memory and returned as bytes (the
caller publishes it atomically); codecs NONE and GZIP only (the ones hudi-rs reads; GZIP is
Hudi's default for the metadata table); no meta blocks, so no key bloom filter in the file
(Hudi's `HoodieAvroHFileWriter` adds one to base files; readers that find none skip the bloom
check); one index level, as upstream's writer (`TODO(HUDI-9464)`).  The "previous block offset"
of a data block is written as upstream writes it (-1 for the first block, then the offset the
new block starts at), not as HBase defines it; no reader uses it.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError
from lsm_lab.format.hfile import (
    CODECS,
    DATA_MAGIC,
    FILE_INFO_MAGIC,
    HEADER_SIZE,
    PB_MAGIC,
    ROOT_INDEX_MAGIC,
    TRAILER_MAGIC,
    TRAILER_SIZE,
)

#: `HFileWriterImpl`'s comparator class name, recorded in the trailer
COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
#: upstream `HFileContext`'s default block size (uncompressed bytes of cells per data block)
DEFAULT_BLOCK_SIZE = 64 * 1024
BYTES_PER_CHECKSUM = 16 * 1024
_LATEST_TIMESTAMP = (1 << 63) - 1
_PUT = 4
_WRITABLE = ("NONE", "GZIP")


def _varint(n: int) -> bytes:
    """Protobuf base-128 varint (negative numbers as their 64-bit two's complement, as protobuf does)."""
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _field_bytes(number: int, value: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(value)) + value


def _gzip(raw: bytes) -> bytes:
    """A gzip member with the all-zero header upstream's compressor writes (no name, mtime 0, OS 0)."""
    c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
    body = c.compress(raw) + c.flush()
    return (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00" + body
            + struct.pack("<II", zlib.crc32(raw) & 0xFFFFFFFF, len(raw) & 0xFFFFFFFF))


def _block(magic: bytes, payload: bytes, codec: str, previous_offset: int = -1) -> bytes:
    """One block as `HFileBlock.serialize` frames it: header, (compressed) payload, zero checksum bytes."""
    data = _gzip(payload) if codec == "GZIP" else payload
    data_with_header = HEADER_SIZE + len(data)
    chunks = -(-data_with_header // BYTES_PER_CHECKSUM)
    checksum = bytes(4 * chunks)
    header = magic + struct.pack(">iiqbii", len(data) + len(checksum), len(payload), previous_offset, 0,
                                 BYTES_PER_CHECKSUM, data_with_header)
    return header + data + checksum


def _cell(key: bytes, value: bytes) -> bytes:
    return (struct.pack(">iih", len(key) + 12, len(value), len(key)) + key
            + struct.pack(">bqb", 0, _LATEST_TIMESTAMP, _PUT) + value + b"\x00")


def _index_entry(offset: int, size: int, key: bytes) -> bytes:
    """A root data index entry: int64 offset, int32 size, varint(len + 2), int16 len, key."""
    return struct.pack(">qi", offset, size) + _varint(len(key) + 2) + struct.pack(">h", len(key)) + key


def _file_info(entries: Mapping[bytes, bytes]) -> bytes:
    msg = b"".join(_field_bytes(1, _field_bytes(1, k) + _field_bytes(2, v)) for k, v in entries.items())
    return PB_MAGIC + _varint(len(msg)) + msg


def write_hfile(cells: Iterable[tuple[bytes, bytes]], *, codec: str = "GZIP", block_size: int = DEFAULT_BLOCK_SIZE,
                file_info: Mapping[bytes, bytes] | None = None, create_time_ms: int | None = None) -> bytes:
    """An HFile (version 3) holding `cells`, (key, value) pairs in ascending key order, as bytes.

    `codec` is "GZIP" (Hudi's metadata-table default) or "NONE"; `file_info` adds entries to the
    file info (Hudi puts the Avro `schema` and `minRecordKey` / `maxRecordKey` there);
    `create_time_ms` fixes `hfile.CREATE_TIME_TS` (default: now), so equal input gives equal bytes.
    Keys out of order, or longer than an int16 length allows, are an `InputError`."""
    if codec not in _WRITABLE:
        raise InputError(f"HFile codec {codec!r}: lsm_lab writes {', '.join(_WRITABLE)} (hudi-rs reads those)")
    if not isinstance(block_size, int) or block_size < 1:
        raise InputError(f"block_size must be a positive number of bytes, got {block_size!r}")
    out = bytearray()
    index: list[tuple[int, int, bytes]] = []  # (offset, on-disk size, first key)
    block: list[bytes] = []
    block_first = b""
    block_bytes = 0
    previous = -1
    count = total_key = total_value = total_uncompressed = 0
    last: bytes | None = None

    def flush() -> None:
        nonlocal block, block_bytes, previous
        if not block:
            return
        offset = len(out)
        framed = _block(DATA_MAGIC, b"".join(block), codec, previous)
        out.extend(framed)
        index.append((offset, len(framed), block_first))
        previous = len(out)  # upstream starts the next block with the offset it will be written at
        block, block_bytes = [], 0

    for key, value in cells:
        if not isinstance(key, (bytes, bytearray)) or not isinstance(value, (bytes, bytearray)):
            raise InputError(f"HFile cells are (bytes, bytes) pairs, got ({type(key).__name__}, {type(value).__name__})")
        key, value = bytes(key), bytes(value)
        if len(key) > 0x7FFF:
            raise InputError(f"HFile key of {len(key)} bytes; an HFile row is at most 32767 bytes")
        if last is not None and key < last:
            raise InputError(f"HFile cells must be sorted by key: {key[:40]!r} after {last[:40]!r}")
        size = len(key) + len(value) + 9
        if block and key != last and block_bytes + size > block_size:
            flush()
        if not block:
            block_first = key
        block.append(_cell(key, value))
        block_bytes += size
        total_uncompressed += size
        count += 1
        total_key += len(key)
        total_value += len(value)
        last = key
    flush()
    return _finish(out, index, codec, file_info, create_time_ms, last=last, count=count, total_key=total_key,
                   total_value=total_value, total_uncompressed=total_uncompressed)


def _finish(out: bytearray, index: list[tuple[int, int, bytes]], codec: str, file_info: Mapping[bytes, bytes] | None,
            create_time_ms: int | None, *, last: bytes | None, count: int, total_key: int, total_value: int,
            total_uncompressed: int) -> bytes:
    """The load-on-open section and the trailer after the data blocks (`writeLoadOnOpenSection`, `writeTrailer`)."""
    first_data_offset = index[0][0] if index else -1
    last_data_offset = index[-1][0] if index else 0

    load_on_open = len(out)
    out.extend(_block(ROOT_INDEX_MAGIC, b"".join(_index_entry(*e) for e in index), codec))
    out.extend(_block(ROOT_INDEX_MAGIC, b"", codec))  # the meta index: present even when empty
    file_info_offset = len(out)
    info: dict[bytes, bytes] = {b"MAX_MEMSTORE_TS_KEY": struct.pack(">q", 0)}
    info.update(file_info or {})
    info[b"hfile.LASTKEY"] = struct.pack(">h", len(last)) + last if last else b""
    info[b"hfile.AVG_KEY_LEN"] = struct.pack(">i", total_key // count if count else 0)
    stamp = int(time.time() * 1000) if create_time_ms is None else int(create_time_ms)
    info[b"hfile.CREATE_TIME_TS"] = struct.pack(">q", stamp)
    info[b"hfile.AVG_VALUE_LEN"] = struct.pack(">i", total_value // count if count else 0)
    info.setdefault(b"KEY_VALUE_VERSION", struct.pack(">i", 1))
    out.extend(_block(FILE_INFO_MAGIC, _file_info(info), codec))

    trailer = b"".join([
        _field_varint(1, file_info_offset), _field_varint(2, load_on_open),
        _field_varint(3, total_uncompressed), _field_varint(5, len(index)), _field_varint(6, 0),
        _field_varint(7, count), _field_varint(8, 1), _field_varint(9, first_data_offset),
        _field_varint(10, last_data_offset), _field_bytes(11, COMPARATOR.encode()),
        _field_varint(12, CODECS.index(codec)),
    ])
    tail = TRAILER_MAGIC + _varint(len(trailer)) + trailer
    out.extend(tail + bytes(TRAILER_SIZE - len(tail) - 1) + b"\x03")
    return bytes(out)


def write_hfile_arrays(keys: pa.Array, values: pa.Array, *, codec: str = "GZIP", block_size: int = DEFAULT_BLOCK_SIZE,
                       file_info: Mapping[bytes, bytes] | None = None, create_time_ms: int | None = None) -> bytes:
    """`write_hfile` for cells given as two Arrow binary arrays (keys sorted ascending, no nulls): the same
    bytes, with every cell laid out by NumPy scatters instead of a Python loop (the metadata table's record
    index writes a million cells at a time)."""
    if codec not in _WRITABLE:
        raise InputError(f"HFile codec {codec!r}: lsm_lab writes {', '.join(_WRITABLE)} (hudi-rs reads those)")
    if not isinstance(block_size, int) or block_size < 1:
        raise InputError(f"block_size must be a positive number of bytes, got {block_size!r}")
    keys = keys.cast(pa.large_binary())
    values = values.cast(pa.large_binary())
    n = len(keys)
    if len(values) != n or keys.null_count or values.null_count:
        raise InputError("HFile cells: keys and values must be equally long binary arrays without nulls")
    if n > 1 and not pc.all(pc.less_equal(keys.slice(0, n - 1), keys.slice(1))).as_py():
        raise InputError("HFile cells must be sorted by key")
    koff, kdata = _offsets(keys)
    voff, vdata = _offsets(values)
    klen, vlen = np.diff(koff), np.diff(voff)
    if n and int(klen.max()) > 0x7FFF:
        raise InputError(f"HFile key of {int(klen.max())} bytes; an HFile row is at most 32767 bytes")
    cell = klen + vlen + 21  # 4 + 4 + 2 + key + 1 + 8 + 1 + value + 1
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(cell, out=starts[1:])
    buf = np.zeros(int(starts[-1]), dtype=np.uint8)
    head = np.empty((n, 10), dtype=np.uint8)
    head[:, 0:4] = (klen + 12).astype(">i4").view(np.uint8).reshape(n, 4)
    head[:, 4:8] = vlen.astype(">i4").view(np.uint8).reshape(n, 4)
    head[:, 8:10] = klen.astype(">i2").view(np.uint8).reshape(n, 2)
    buf[(starts[:-1, None] + np.arange(10)).ravel()] = head.ravel()
    _scatter(buf, starts[:-1] + 10, kdata, koff, klen)
    tail = np.frombuffer(struct.pack(">bqb", 0, _LATEST_TIMESTAMP, _PUT), dtype=np.uint8)
    after_key = starts[:-1] + 10 + klen
    buf[(after_key[:, None] + np.arange(10)).ravel()] = np.tile(tail, n)
    _scatter(buf, after_key + 10, vdata, voff, vlen)
    # (the MVCC byte after each value is the buffer's zero)
    out = bytearray()
    index: list[tuple[int, int, bytes]] = []
    accounted = np.zeros(n + 1, dtype=np.int64)  # the scalar writer's block accounting: key + value + 9
    np.cumsum(klen + vlen + 9, out=accounted[1:])
    previous, i = -1, 0
    raw = buf.tobytes()
    while i < n:
        j = int(np.searchsorted(accounted, accounted[i] + block_size, side="right")) - 1
        j = max(j, i + 1)
        offset = len(out)
        framed = _block(DATA_MAGIC, raw[int(starts[i]):int(starts[j])], codec, previous)
        out.extend(framed)
        index.append((offset, len(framed), bytes(kdata[int(koff[i]):int(koff[i + 1])])))
        previous = len(out)
        i = j
    last = bytes(kdata[int(koff[n - 1]):int(koff[n])]) if n else None
    return _finish(out, index, codec, file_info, create_time_ms, last=last, count=n, total_key=int(klen.sum()),
                   total_value=int(vlen.sum()), total_uncompressed=int(accounted[-1]))


def _offsets(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    arr = pa.concat_arrays([arr]) if arr.offset else arr
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64, count=len(arr) + 1)
    data = arr.buffers()[2]
    return offsets, (np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8))


def _scatter(buf: np.ndarray, dest: np.ndarray, data: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> None:
    """Copy each item's bytes `data[offsets[i]:offsets[i+1]]` to `buf[dest[i]:]`, all at once."""
    total = int(lengths.sum())
    if not total:
        return
    shift = np.repeat(dest - offsets[:-1], lengths)
    src = np.repeat(offsets[:-1], lengths) + (np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    buf[src + shift] = data[src]


__all__ = ["COMPARATOR", "DEFAULT_BLOCK_SIZE", "write_hfile", "write_hfile_arrays"]
