"""Arrow literals built from buffers: constant columns without pyarrow importing pandas.

Converting a Python value to Arrow (`pa.scalar(v)`, `pa.array([...])`, even `pa.array(ndarray)`)
makes pyarrow ask whether the value is a pandas object, and the first such question imports
pandas (~0.3 s on a quiet machine; more under load): a whole-process `lsm-lab read` would pay it
although it never returns a frame.  The read path builds its constant columns here instead:

    bools(n, False)                   validity bitmap None, data bitmap 0x00 …   (delete flags)
    empty_table(schema)               a table of no rows
    text(["chennai"], pa.string())    offsets int32 [0, 7], data b"chennai"        (one partition value)
    repeat_text("chennai", n)         pa.repeat of that array's scalar          (a constant column)

Only a streamed `Table.scan` of an `lsm_tree` table is kept free of pandas this way (its first
batch should not wait for an import; tests/test_bench_scan.py checks it): other paths call
`Array.to_numpy()`, which asks pyarrow's pandas shim too, and pay the import once.

Simplified compared with a general converter: text and booleans only (what the read path
repeats); anything else goes through pyarrow's own conversion.

Taught in: no chapter (a start-up detail; docs/PERFORMANCE.md)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

STRING = pa.string()
TEXT_TYPES = (STRING, pa.large_string(), pa.binary(), pa.large_binary())


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows (`schema.empty_table()` converts Python values, so it imports pandas)."""
    return pa.Table.from_batches([], schema)


def bools(n: int, value: bool) -> pa.Array:
    """`n` copies of `value` as a boolean array."""
    bits = np.full((n + 7) // 8, 0xFF if value else 0, np.uint8)
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bits)])


def int32_zeros(n: int) -> pa.Array:
    """`n` zeros of type int32 (the indices of a one-entry dictionary)."""
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.zeros(n, np.int32))])


def text(values: Sequence[str | bytes], type: pa.DataType = STRING) -> pa.Array:
    """Non-null strings (or bytes) as an array of a text or binary type."""
    if type not in TEXT_TYPES:
        raise TypeError(f"text() builds string and binary arrays, not {type}")
    data = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in values]
    wide = type in (pa.large_string(), pa.large_binary())
    offsets = np.zeros(len(data) + 1, np.int64 if wide else np.int32)
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def repeat_text(value: str | bytes, n: int, type: pa.DataType = STRING) -> pa.Array:
    """`n` copies of one text value."""
    return pa.repeat(text([value], type)[0], n)


def number(value: int | float, type: pa.DataType) -> pa.Scalar:
    """One integer or float value as an Arrow scalar of `type` (a fill value, a bound to compare with)."""
    if not (pa.types.is_integer(type) or pa.types.is_floating(type)):
        raise TypeError(f"number() builds integer and float scalars, not {type}")
    data = np.array([value], dtype=type.to_pandas_dtype())
    return pa.Array.from_buffers(type, 1, [None, pa.py_buffer(data)])[0]


#: `False` as an Arrow scalar: `fill_null(FALSE)` turns a mask's nulls into False with no conversion
FALSE = bools(1, False)[0]


__all__ = ["FALSE", "TEXT_TYPES", "bools", "empty_table", "int32_zeros", "number", "repeat_text", "text"]
