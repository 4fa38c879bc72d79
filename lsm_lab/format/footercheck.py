"""Checking a Parquet footer before its column-chunk metadata is touched: no footer may abort the process.

pyarrow parses a footer (the Thrift `FileMetaData`) when a file is opened and raises a Python
exception when the Thrift does not parse.  But the column-chunk metadata of each row group is
only turned into C++ objects when it is first asked for (`md.row_group(r).column(c)`, its
`statistics`, ...), and pyarrow's bindings of those accessors cannot pass a C++ exception on:
one that is thrown there ends the process (`terminate called after throwing an instance of
'parquet::ParquetException'`, SIGABRT).  One flipped bit in a footer suffices, e.g. in a
schema element's repetition type ("Definition level histogram size mismatch").

`check_footer` walks the footer's Thrift once, in Python, and checks what the C++ constructors
of that metadata would throw on (or read out of bounds for):

    the file's row count          the sum of its row groups' (readers fill columns of one value by it)
    every struct                  no field twice (one flipped bit in a field header can turn
                                  max_value into a second min_value: a forged "one value" column)
    every row group               as many column chunks as the schema has leaf columns
    every column chunk            its metadata present and not encrypted, its physical type the leaf's,
                                  as many values as rows (a flat column), sizes and offsets not negative
    statistics                    min/max of a fixed-width type exactly that wide
    size statistics               level histograms empty or max level + 1 long; byte-array
                                  data bytes only on a BYTE_ARRAY column
    geospatial statistics         only on a geometry/geography column

Any other damage (and a footer naming an encryption algorithm) is a `CorruptFileError` naming
the file.  The Thrift walked is the footer's bytes as stored (a local file's tail is read again,
from the page cache; an object's comes with the one GET of its tail), not `md` re-serialised:
pyarrow's footer writer itself crashes on a footer that names an encryption algorithm.  The walk
costs about 5-15 µs per column chunk, once per footer: verdicts are remembered by the footer's
BLAKE2 digest (~1 µs per kB), so a file read again is not walked again.

Simplified compared with Apache Hudi: parquet-mr (Java) throws ordinary exceptions on a
damaged footer; this check exists only because of the C++ reader's bindings.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any

import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError

# Thrift compact protocol type ids
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)
_MAX_DEPTH = 64

# Parquet physical types: width of a plain-encoded value (None: variable or per column)
_WIDTH = {0: 1, 1: 4, 2: 8, 3: 12, 4: 4, 5: 8, 6: None, 7: None}
_TYPE_NAMES = {"BOOLEAN": 0, "INT32": 1, "INT64": 2, "INT96": 3, "FLOAT": 4, "DOUBLE": 5, "BYTE_ARRAY": 6,
               "FIXED_LEN_BYTE_ARRAY": 7}


class _Bad(Exception):
    pass


def _varint(d: bytes, p: int) -> tuple[int, int]:
    b = d[p]
    p += 1
    if b < 0x80:
        return b, p
    out, shift = b & 0x7F, 7
    while True:
        b = d[p]
        p += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, p
        shift += 7
        if shift > 70:
            raise _Bad("varint too long")


def _value(d: bytes, p: int, k: int, depth: int) -> tuple[Any, int]:
    """A Thrift compact-protocol value of type `k` at `p` (running past the end: IndexError)."""
    if k <= 2:  # a bool inside a struct: the field header carried it
        return k == 1, p
    if k == _BYTE:
        return d[p], p + 1
    if k <= _I64:
        b = d[p]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), p + 1
        v, p = _varint(d, p)
        return (v >> 1) ^ -(v & 1), p
    if k == _DOUBLE:
        if p + 8 > len(d):
            raise _Bad("footer ends inside a double")
        return None, p + 8
    if k == _BINARY:
        n, p = _varint(d, p)
        if p + n > len(d):
            raise _Bad("footer ends inside a binary value")
        return d[p:p + n], p + n
    if depth > _MAX_DEPTH:
        raise _Bad("footer nested too deeply")
    if k == _STRUCT:
        return _struct(d, p, depth + 1)
    if k in (_LIST, _SET):
        return _list(d, p, depth)
    if k == _MAP:
        n, p = _varint(d, p)
        if n == 0:
            return {}, p
        if 2 * n > len(d) - p:
            raise _Bad(f"a map of {n} entries cannot fit")
        kinds = d[p]
        p += 1
        pairs = {}
        for i in range(n):
            key, p = _value(d, p, kinds >> 4, depth + 1)
            val, p = _value(d, p, kinds & 0x0F, depth + 1)
            pairs[i] = (key, val)
        return pairs, p
    raise _Bad(f"unknown Thrift type {k}")


def _list(d: bytes, p: int, depth: int) -> tuple[list[Any], int]:
    """A list (or set) at `p`, whose elements sit at `depth + 1`: `_value` of each, with the common
    element types (one-byte integers, structs, binaries) decoded inline (this walk is the CPU a cold
    read spends holding the GIL)."""
    head = d[p]
    p += 1
    n, elem = head >> 4, head & 0x0F
    if n == 15:
        n, p = _varint(d, p)
    if n > len(d) - p:
        raise _Bad(f"a list of {n} elements cannot fit")
    out: list[Any] = []
    append = out.append
    if elem <= 2:
        for _ in range(n):
            append(d[p] == 1)
            p += 1
        return out, p
    if elem == _STRUCT:
        if n and depth + 1 > _MAX_DEPTH:  # (as `_value` would find at the first element)
            raise _Bad("footer nested too deeply")
        for _ in range(n):
            item, p = _struct(d, p, depth + 2)
            append(item)
        return out, p
    if _BYTE < elem <= _I64:
        for _ in range(n):
            b = d[p]
            if b < 0x80:
                append((b >> 1) ^ -(b & 1))
                p += 1
            else:
                v, p = _varint(d, p)
                append((v >> 1) ^ -(v & 1))
        return out, p
    if elem == _BINARY:
        size = len(d)
        for _ in range(n):
            m = d[p]
            if m < 0x80:
                p += 1
            else:
                m, p = _varint(d, p)
            if p + m > size:
                raise _Bad("footer ends inside a binary value")
            append(d[p:p + m])
            p += m
        return out, p
    for _ in range(n):
        v, p = _value(d, p, elem, depth + 1)
        append(v)
    return out, p


def _struct(d: bytes, p: int, depth: int = 0) -> tuple[dict[int, Any], int]:
    """A Thrift struct at `p` as {field id: value}, and where it ends.

    The same values as `_value` would give for each field; integers, binaries and nested structs
    are decoded inline (one Python call per struct or list rather than per value)."""
    out: dict[int, Any] = {}
    last = 0
    while True:
        head = d[p]
        p += 1
        if head == 0:
            return out, p
        delta, k = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            v, p = _varint(d, p)
            fid = (v >> 1) ^ -(v & 1)
        if fid in out:  # no writer repeats a field; one flipped bit can turn a field into its neighbour
            raise _Bad(f"field {fid} twice in one struct")
        if k <= 2:
            out[fid] = k == 1
        elif k <= _I64:
            b = d[p]
            p += 1
            if k == _BYTE:
                out[fid] = b
            elif b < 0x80:  # the common case: a one-byte integer
                out[fid] = (b >> 1) ^ -(b & 1)
            else:  # a longer varint (offsets, sizes, counts), as `_varint` reads it
                v, shift = b & 0x7F, 7
                while True:
                    b = d[p]
                    p += 1
                    v |= (b & 0x7F) << shift
                    if b < 0x80:
                        break
                    shift += 7
                    if shift > 70:
                        raise _Bad("varint too long")
                out[fid] = (v >> 1) ^ -(v & 1)
        elif k == _BINARY:
            n = d[p]
            if n < 0x80:
                p += 1
            else:
                n, p = _varint(d, p)
            if p + n > len(d):
                raise _Bad("footer ends inside a binary value")
            out[fid] = d[p:p + n]
            p += n
        elif k == _STRUCT:
            if depth > _MAX_DEPTH:
                raise _Bad("footer nested too deeply")
            out[fid], p = _struct(d, p, depth + 1)
        elif k in (_LIST, _SET):
            if depth > _MAX_DEPTH:
                raise _Bad("footer nested too deeply")
            out[fid], p = _list(d, p, depth)
        else:
            out[fid], p = _value(d, p, k, depth)
        last = fid


def _leaves(md: pq.FileMetaData) -> list[tuple[int, int, int, int | None, bool]]:
    """(max definition level, max repetition level, physical type, FLBA length, geo) of each leaf column."""
    schema = md.schema
    out = []
    for i in range(md.num_columns):
        c = schema.column(i)
        ptype = _TYPE_NAMES.get(c.physical_type, -1)
        length = c.length if ptype == 7 else None
        geo = str(c.logical_type).startswith(("Geometry", "Geography"))
        out.append((c.max_definition_level, c.max_repetition_level, ptype, length, geo))
    return out


def _check_chunk(chunk: dict[int, Any], leaf: tuple[int, int, int, int | None, bool], where: str,
                 rows: int) -> None:
    max_def, max_rep, ptype, length, geo = leaf
    if 8 in chunk or 9 in chunk:
        raise _Bad(f"{where}: encrypted column metadata (not supported)")
    meta = chunk.get(3)
    if not isinstance(meta, dict):
        raise _Bad(f"{where}: no column metadata")
    if meta.get(1) != ptype:
        raise _Bad(f"{where}: physical type {meta.get(1)} is not the schema's {ptype}")
    values = meta.get(5)
    if not isinstance(values, int) or values < 0 or (max_rep == 0 and values != rows):
        raise _Bad(f"{where}: {values} values in a row group of {rows} rows")
    for fid, name in ((6, "uncompressed size"), (7, "compressed size"), (9, "data page offset")):
        v = meta.get(fid)
        if not isinstance(v, int) or v < 0:
            raise _Bad(f"{where}: {name} {v}")
    width = _WIDTH.get(ptype) if ptype != 7 else length
    stats = meta.get(12)
    if stats is not None:
        if not isinstance(stats, dict):
            raise _Bad(f"{where}: statistics are not a struct")
        for fid in (1, 2, 5, 6):  # max, min (deprecated), max_value, min_value
            v = stats.get(fid)
            if v is None:
                continue
            if not isinstance(v, bytes):
                raise _Bad(f"{where}: a statistics bound is not binary")
            if width is not None and len(v) != width:
                raise _Bad(f"{where}: a statistics bound of {len(v)} bytes for a {width}-byte type")
    size = meta.get(16)
    if size is not None:
        if not isinstance(size, dict):
            raise _Bad(f"{where}: size statistics are not a struct")
        for fid, top, name in ((2, max_rep, "repetition"), (3, max_def, "definition")):
            hist = size.get(fid)
            if hist is None:
                continue
            if not isinstance(hist, list):
                raise _Bad(f"{where}: {name} level histogram is not a list")
            if hist and len(hist) != top + 1:
                raise _Bad(f"{where}: {name} level histogram of {len(hist)} entries, max level {top}")
        if 1 in size and ptype != 6:
            raise _Bad(f"{where}: byte-array data bytes on a column that is not BYTE_ARRAY")
    if 17 in meta and not geo:
        raise _Bad(f"{where}: geospatial statistics on a column that is not geometry")


def footer_problem(md: pq.FileMetaData, tail: bytes) -> str:
    """Why the column-chunk metadata of `md` must not be touched ('' when it may).

    `tail`: the bytes `md` was parsed from, ending with the footer, its length and `PAR1` (never
    `md` re-serialised: pyarrow's writer of a footer that names an encryption algorithm crashes)."""
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        return "no Parquet footer at the end of the file"
    n = int.from_bytes(tail[-8:-4], "little")
    if n + 8 > len(tail):
        return f"footer length {n} runs past the bytes read"
    body = tail[len(tail) - 8 - n:len(tail) - 8]
    try:
        meta, _ = _struct(body, 0)
        if 8 in meta or 9 in meta:
            raise _Bad("the footer names an encryption algorithm (encrypted files are not supported)")
        leaves = _leaves(md)
        groups = meta.get(4) or []
        if not isinstance(groups, list) or len(groups) != md.num_row_groups:
            raise _Bad(f"{len(groups) if isinstance(groups, list) else '?'} row groups, pyarrow sees {md.num_row_groups}")
        rows: list[Any] = [rg.get(3) if isinstance(rg, dict) else None for rg in groups]
        if any(not isinstance(r, int) or r < 0 for r in rows) or sum(rows) != md.num_rows:
            raise _Bad(f"the file's {md.num_rows} rows are not the sum of its row groups' ({rows})")
        for r, rg in enumerate(groups):
            cols = rg.get(1) if isinstance(rg, dict) else None
            if not isinstance(cols, list) or len(cols) != len(leaves):
                raise _Bad(f"row group {r}: {len(cols) if isinstance(cols, list) else 'no'} column chunks, "
                           f"the schema has {len(leaves)} columns")
            for c, chunk in enumerate(cols):
                if not isinstance(chunk, dict):
                    raise _Bad(f"row group {r} column {c}: not a struct")
                _check_chunk(chunk, leaves[c], f"row group {r} column {c}", rows[r])
    except _Bad as exc:
        return str(exc)
    except (IndexError, ValueError, TypeError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


_VERDICTS: OrderedDict[bytes, str] = OrderedDict()  # footer digest → footer_problem's answer
_VERDICTS_MAX = 4096
_LOCK = threading.Lock()


def _verdict(md: pq.FileMetaData, tail: bytes) -> str:
    """`footer_problem`, remembered by the footer's digest: a file read again (every full read opens its
    files) is not walked again, and equal bytes are equally sound, whatever their path."""
    key = hashlib.blake2b(tail[-8 - int.from_bytes(tail[-8:-4], "little"):] if len(tail) >= 8 else tail,
                          digest_size=16).digest()
    with _LOCK:
        found = _VERDICTS.get(key)
        if found is not None:
            _VERDICTS.move_to_end(key)
            return found
    problem = footer_problem(md, tail)
    with _LOCK:
        _VERDICTS[key] = problem
        while len(_VERDICTS) > _VERDICTS_MAX:
            _VERDICTS.popitem(last=False)
    return problem


def check_footer(md: pq.FileMetaData, path: Any, tail: bytes | None) -> pq.FileMetaData:
    """`md`, once its column-chunk metadata is known safe to read; else a `CorruptFileError` naming `path`.

    `tail`: the file's last bytes, footer included (None: a source they cannot be read from, e.g. a
    Python stream without random access; nothing is checked)."""
    problem = _verdict(md, tail) if tail is not None else ""
    if problem:
        name = path if isinstance(path, str) else os.fspath(path) if isinstance(path, os.PathLike) else str(path)
        raise CorruptFileError(f"damaged Parquet footer: {problem}", path=name)
    return md


__all__ = ["check_footer", "footer_problem"]
