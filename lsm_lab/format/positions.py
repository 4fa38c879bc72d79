"""Record positions: which rows of the base file a log's records replace or delete.

A log of updates or deletes may say, besides the record keys, *where* those
keys sit in the slice's base file: their row numbers.  A reader that trusts
them can merge by position (an integer array lookup) instead of by key
(string comparisons).  Upstream Hudi stores them in two header/footer entries:

    RECORD_POSITIONS                             Base64 of the row numbers (two encodings, below)
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS   the instant of the base file the rows are counted in

**Native (Parquet, log format 2) logs: a list in file order.**  One row
number per record, in the order the records sit in the file (so unsorted and
repeated numbers are possible; `LogReaderUtils.encodePositionsAsLongList`,
read back by `decodeRecordPositionsLongList`):

    ┌──────────────────┬──────────┬──────────┬─────┬──────────┐
    │ count: int32, BE │ varlong  │ varlong  │ ... │ varlong  │   exactly `count` varlongs, nothing after
    └──────────────────┴──────────┴──────────┴─────┴──────────┘
    varlong = unsigned LEB128: 7 bits per byte, lowest group first, high bit set on every byte but the last

    [1, 3, 11, 13, 20, 23, 24]  →  00 00 00 07 | 01 03 0b 0d 14 17 18  →  "AAAABwEDCw0UFxg="

A position is valid when it is not negative (`HoodieRecordLocation.isPositionValid`;
-1 means "unknown", e.g. an insert).  Upstream's encoder gives nothing when any
record's position is invalid, and `HoodieNativeLogFormatWriter.addRecordPositionsIfRequired`
then leaves *both* entries out of that file's footer: a native log carries
positions for all of its records or for none.  `encode_position_list` returns
None in that case.  The decoder is strict: a negative count, a missing varlong,
one longer than 64 bits, a negative (≥ 2**63) value or a trailing byte is a
CorruptFileError.  Both ways are vectorised with NumPy (a log may hold ~1M
positions): the decoder finds the last byte of every varlong as the bytes
below 0x80 and assembles the 7-bit groups a byte column at a time.

**v1 (#HUDI#) block headers: a Roaring64 bitmap.**  Upstream's
`LogReaderUtils.encodePositions` writes Base64 of
`Roaring64NavigableMap.serializePortable`, a *set*: the block's records are in
ascending position order, so the i-th record has the i-th smallest position.
The portable 64-bit layout (RoaringFormatSpec, "extension for 64-bit
implementations"; CRoaring's `roaring64_portable`, pyroaring's
`BitMap64.serialize`), all little-endian:

    u64  number of 32-bit bitmaps
    per bitmap, ascending high 32 bits:
      u32  high 32 bits
      ...  a portable 32-bit Roaring bitmap of the low 32 bits
           (cookie 12346 or 12347+runs, container keys and cardinalities, offsets, containers)

lsm_lab writes the list in its native logs and Roaring64 in v1 headers
(`positions_header(..., form=)`).  Native logs written by older lsm_lab
versions carry Roaring64, so `valid_positions` reads either form: the list
first (strictly), then Roaring64.  That is unambiguous: a portable Roaring64
starts with its little-endian u64 bitmap count c, whose first four bytes read
as a big-endian int32 are 0 (an empty bitmap, 8 zero bytes: a list count of
0 followed by 4 bytes, which the strict list decoder rejects) or c·2**24 ≥
16,777,216, a count of varlongs that would need at least as many bytes,
each of them in exactly the right place.  Even a misreading could not give
wrong rows: the merge compares every position's base key with the record's
key before trusting it (filegroup/posmerge.py).

Positions are only valid against the base file they were counted in: a reader
uses them when `BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS` equals the slice's
base instant, and merges by key otherwise.

Simplified compared with Apache Hudi: lsm_lab writes positions only when every
record of the log is in the base file (the same effective rule as upstream's,
above) and sorts such a log's records by position (upstream keeps their
arrival order; lsm_lab reads either); it reads them only when every log of a
slice carries valid ones (filegroup/posmerge.py).

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Literal

import numpy as np
from pyroaring import BitMap64

from lsm_lab.errors import CorruptFileError, InputError

RECORD_POSITIONS = "RECORD_POSITIONS"
BASE_FILE_INSTANT = "BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS"

_MAX_COUNT = (1 << 31) - 1   # the count is a Java int
_MAX_VARLONG_BYTES = 10      # 64 bits in 7-bit groups


def _path(path: object) -> str | None:
    return path if isinstance(path, str) else None


# --------------------------------------------------------------------------- native logs: a list in file order
def encode_position_list(positions: np.ndarray | list[int]) -> str | None:
    """Base64 of a big-endian int32 count and one unsigned LEB128 varlong per position, in the given order.

    None when a position is negative (unknown, e.g. an insert): the log then carries no positions."""
    values = np.asarray(positions, dtype=np.int64).reshape(-1)
    n = len(values)
    if n > _MAX_COUNT:
        raise InputError(f"{n} record positions: more than a 32-bit count can hold")
    if n and int(values.min()) < 0:
        return None
    u = values.astype(np.uint64)
    # bytes per value: 1, plus one per further non-empty 7-bit group
    widths = np.ones(n, dtype=np.int64)
    for k in range(1, _MAX_VARLONG_BYTES):
        more = (u >> np.uint64(7 * k)) != 0
        if not more.any():
            break
        widths += more
    ends = np.cumsum(widths)
    starts = ends - widths
    body = np.empty(int(ends[-1]) if n else 0, dtype=np.uint8)
    for k in range(int(widths.max()) if n else 0):
        has = widths > k
        group = ((u[has] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        body[starts[has] + k] = np.where(widths[has] > k + 1, group | 0x80, group)
    return base64.b64encode(n.to_bytes(4, "big") + body.tobytes()).decode("ascii")


def decode_position_list(text: str, *, path: object = None) -> np.ndarray:
    """The positions (int64, file order) of a list-form `RECORD_POSITIONS`; CorruptFileError when malformed."""
    def bad(problem: str) -> CorruptFileError:
        return CorruptFileError(f"RECORD_POSITIONS is not a position list: {problem}", path=_path(path))

    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise bad(f"not Base64 ({exc})") from None
    if len(raw) < 4:
        raise bad(f"{len(raw)} bytes, shorter than its 4-byte count")
    count = int.from_bytes(raw[:4], "big", signed=True)
    if count < 0:
        raise bad(f"negative count {count}")
    body = np.frombuffer(raw, dtype=np.uint8, offset=4)
    ends = np.flatnonzero(body < 0x80)  # the last byte of each varlong
    if len(ends) < count:
        raise bad(f"count {count} but only {len(ends)} complete varlongs (truncated)")
    used = int(ends[count - 1]) + 1 if count else 0
    if used != len(body):
        raise bad(f"{len(body) - used} trailing bytes after the {count} varlongs")
    if not count:
        return np.zeros(0, dtype=np.int64)
    starts = np.empty(count, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    widths = ends - starts + 1
    longest = int(widths.max())
    if longest > _MAX_VARLONG_BYTES or (longest == _MAX_VARLONG_BYTES
                                        and int(body[ends[widths == _MAX_VARLONG_BYTES]].max()) > 1):
        raise bad(f"varlong {int(np.argmax(widths))} is longer than 64 bits")
    values = (body[starts] & 0x7F).astype(np.uint64)
    for k in range(1, longest):
        has = widths > k
        values[has] |= (body[starts[has] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    if longest == _MAX_VARLONG_BYTES and bool((values >= np.uint64(1 << 63)).any()):
        raise bad(f"position {int(np.argmax(values >= np.uint64(1 << 63)))} is negative as a 64-bit integer")
    return values.astype(np.int64)


# --------------------------------------------------------------------------- v1 headers (and older native logs): Roaring64
def encode_positions(positions: np.ndarray) -> str:
    """Base64 of the portable Roaring64 serialization of a set of non-negative row numbers."""
    values = np.asarray(positions, dtype=np.int64)
    if len(values) and int(values.min()) < 0:
        raise InputError("record positions must not be negative")
    return base64.b64encode(BitMap64(values.astype(np.uint64).tolist()).serialize()).decode("ascii")


def decode_positions(text: str, *, path: object = None) -> np.ndarray:
    """The sorted row numbers of a Roaring64 `RECORD_POSITIONS` value (CorruptFileError when malformed)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        bitmap = BitMap64.deserialize(raw)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise CorruptFileError(f"RECORD_POSITIONS is not a Base64 portable Roaring64 bitmap: {exc}",
                               path=_path(path)) from None
    # `to_array` copies the bitmap out in C (iterating it from Python costs ~35x more)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


# --------------------------------------------------------------------------- either form
def decode_any(text: str, *, path: object = None) -> np.ndarray:
    """A `RECORD_POSITIONS` value in either form: the list (file order) if it decodes strictly, else Roaring64."""
    try:
        return decode_position_list(text, path=path)
    except CorruptFileError as as_list:
        try:
            return decode_positions(text, path=path)
        except CorruptFileError as as_bitmap:
            raise CorruptFileError(f"RECORD_POSITIONS is neither a position list ({as_list.message.split(': ', 1)[-1]}) "
                                   f"nor a portable Roaring64 bitmap ({as_bitmap.message.split(': ', 1)[-1]})",
                                   path=_path(path)) from None


def positions_header(positions: np.ndarray, base_instant: str, *,
                     form: Literal["list", "roaring"] = "list") -> dict[str, str]:
    """The two footer/header entries for a log whose records sit at `positions` of the base at `base_instant`.

    `form="list"` (native logs; one position per record, in file order) or `"roaring"` (v1 block
    headers; a set). {} when a list position is negative: upstream then writes neither entry."""
    if form == "roaring":
        return {RECORD_POSITIONS: encode_positions(positions), BASE_FILE_INSTANT: base_instant}
    text = encode_position_list(positions)
    return {} if text is None else {RECORD_POSITIONS: text, BASE_FILE_INSTANT: base_instant}


def valid_positions(header: Mapping[str, str], base_instant: str | None, rows: int, *,
                    path: object = None) -> np.ndarray | None:
    """The log's positions if they were counted in the base at `base_instant` (and there is one per row).

    Either form is read (`decode_any`): the list (in file order, possibly unsorted or
    repeated) or Roaring64 (sorted, distinct)."""
    text = header.get(RECORD_POSITIONS)
    if not text or base_instant is None or header.get(BASE_FILE_INSTANT) != base_instant:
        return None
    found = decode_any(text, path=path)
    return found if len(found) == rows else None


__all__ = ["BASE_FILE_INSTANT", "RECORD_POSITIONS", "decode_any", "decode_position_list", "decode_positions",
           "encode_position_list", "encode_positions", "positions_header", "valid_positions"]
