"""Record positions: which rows of the base file a log's records replace or delete.

A log block of updates or deletes may say, besides the record keys, *where*
those keys sit in the slice's base file: their row numbers.  A reader that
trusts them can merge by position (an integer array lookup) instead of by key
(string comparisons).  Upstream Hudi stores them in two header/footer entries:

    RECORD_POSITIONS                             Base64( Roaring64NavigableMap.serializePortable )
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS   the instant of the base file the rows are counted in

The bitmap is a *set*: the block's records are in ascending position order, so
the i-th record has the i-th smallest position.  The portable 64-bit layout
(RoaringFormatSpec, "extension for 64-bit implementations"; Java's
`Roaring64NavigableMap.serializePortable`, CRoaring's `roaring64_portable`,
pyroaring's `BitMap64.serialize`), all little-endian:

    u64  number of 32-bit bitmaps
    per bitmap, ascending high 32 bits:
      u32  high 32 bits
      ...  a portable 32-bit Roaring bitmap of the low 32 bits
           (cookie 12346 or 12347+runs, container keys and cardinalities, offsets, containers)

Positions are only valid against the base file they were counted in: a reader
uses them when `BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS` equals the slice's
base instant, and merges by key otherwise.

Simplified compared with Apache Hudi: lsm_lab writes positions only when every
record of the block is in the base file (a block with inserts carries none,
as upstream does), and reads them only when every log of a slice carries
valid ones (filegroup/posmerge.py).

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

import numpy as np
from pyroaring import BitMap64

from lsm_lab.errors import CorruptFileError, InputError

RECORD_POSITIONS = "RECORD_POSITIONS"
BASE_FILE_INSTANT = "BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS"


def encode_positions(positions: np.ndarray) -> str:
    """Base64 of the portable Roaring64 serialization of a set of non-negative row numbers."""
    values = np.asarray(positions, dtype=np.int64)
    if len(values) and int(values.min()) < 0:
        raise InputError("record positions must not be negative")
    return base64.b64encode(BitMap64(values.astype(np.uint64).tolist()).serialize()).decode("ascii")


def decode_positions(text: str, *, path: object = None) -> np.ndarray:
    """The sorted row numbers of a `RECORD_POSITIONS` value (CorruptFileError when malformed)."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
        bitmap = BitMap64.deserialize(raw)
    except (binascii.Error, ValueError, UnicodeEncodeError) as exc:
        raise CorruptFileError(f"RECORD_POSITIONS is not a Base64 portable Roaring64 bitmap: {exc}",
                               path=path if isinstance(path, str) else None) from None
    # `to_array` copies the bitmap out in C (iterating it from Python costs ~35x more)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


def positions_header(positions: np.ndarray, base_instant: str) -> dict[str, str]:
    """The two footer/header entries for a block whose records sit at `positions` of the base at `base_instant`."""
    return {RECORD_POSITIONS: encode_positions(positions), BASE_FILE_INSTANT: base_instant}


def valid_positions(header: Mapping[str, str], base_instant: str | None, rows: int, *,
                    path: object = None) -> np.ndarray | None:
    """The block's positions if they were counted in the base at `base_instant` (and there is one per row)."""
    text = header.get(RECORD_POSITIONS)
    if not text or base_instant is None or header.get(BASE_FILE_INSTANT) != base_instant:
        return None
    found = decode_positions(text, path=path)
    return found if len(found) == rows else None


__all__ = ["BASE_FILE_INSTANT", "RECORD_POSITIONS", "decode_positions", "encode_positions", "positions_header",
           "valid_positions"]
