"""Indexes: which file group does a record belong to?

Two strategies, chosen by the table's layout:

* **bucket index** (`lsm_tree`, the default there).  A record's file group is a
  pure function of its key, so writers never look anything up, every version of
  a key lands in the same file group, and a file group is one sorted run per
  level.  Table version 10 hashes as Apache Hudi's simple bucket index does
  (`BucketIdentifier`):

      h       = Java List<String>.hashCode() of the key field values
                = 31^k + sum_j  String.hashCode(v_j) * 31^(k-1-j)      (mod 2^32, null -> 0)
      String.hashCode(s) = sum_i  s[i] * 31^(n-1-i)                 over UTF-16 code units
      bucket  = (h & 0x7FFFFFFF) mod num_buckets
      file id = "<bucket:08d>-0000-0000-0000-000000000000-0"        (Hudi's fixed per-bucket id)

  computed for a whole column at once in NumPy (`java_string_hashes`): the UTF-8
  buffer is transcoded to UTF-16 in one call, every code unit gets its power of
  31 from a table, and per-string sums come from one cumulative sum, all modulo
  2^32.  Tables of versions 6-9 that lsm_lab wrote keep their older placement:

      bucket  = crc32(utf8(record_key)) mod num_buckets
      file id = "<bucket:08d>" + <uuid5(table, partition, bucket)>[8:] + "-0"

  (zlib's CRC-32, which equals Spark SQL's `crc32(cast(key as binary))`).

* **key-lookup index** (`default` layout).  The keys already stored in a
  partition's latest file slices are read (key column only) and joined with the
  batch: known keys go to their file group; new keys go to new file groups of at
  most `max_records_per_file_group` records.

Simplified compared with Apache Hudi: the hashed values are the key field values
lsm_lab derives from the columns (Hudi re-parses the `f1:v1,f2:v2` key string,
with heuristics for values holding ',' or ':'); Hudi's SIMPLE/BLOOM indexes join
with bloom filters and key ranges.  No consistent hashing (bucket resizing).

Taught in: notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError

_NAMESPACE = uuid.UUID("6f1d2c3e-1b0a-4c5d-9e8f-7a6b5c4d3e2f")


def crc32_strings(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """CRC-32 (zlib's, = Spark's `crc32`) of every string's UTF-8 bytes.

    One C call per key: measured at ~4M keys/s, faster here than a NumPy
    byte-column kernel (which needs one vector pass per byte position).  A chunked
    column is hashed chunk by chunk (`_by_chunk`).
    """
    if isinstance(keys, pa.ChunkedArray):
        return _by_chunk(crc32_strings, keys)
    binary = keys.cast(pa.binary()).to_pylist()
    return np.fromiter((zlib.crc32(b) for b in binary), dtype=np.uint32, count=len(binary))


def _by_chunk(hashes: Callable[[pa.Array], np.ndarray], column: pa.ChunkedArray) -> np.ndarray:
    """`hashes` of a column of several chunks, chunk by chunk: a hash is per row, so joining the chunks
    first (a copy of the column: 640 MB for 16M UUID keys) would change nothing but the memory."""
    if column.num_chunks == 1:
        return hashes(column.chunk(0))
    if column.num_chunks == 0:
        return np.zeros(0, dtype=np.uint32)
    return np.concatenate([hashes(c) for c in column.chunks])


def bucket_ids(keys: pa.Array | pa.ChunkedArray, num_buckets: int) -> np.ndarray:
    return (crc32_strings(keys) % np.uint32(num_buckets)).astype(np.int64)


def bucket_file_id(table_name: str, partition: str, bucket: int) -> str:
    """The deterministic file id of a bucket's file group (Hudi's `<bucket:08d>...-0` shape)."""
    u = str(uuid.uuid5(_NAMESPACE, f"{table_name}/{partition}/{bucket}"))
    return f"{bucket:08d}{u[8:]}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    head = file_id[:8]
    return int(head) if head.isdigit() else None


def new_file_id() -> str:
    return f"{uuid.uuid4()}-0"


# --------------------------------------------------------------------------- Hudi's bucket hash (table version 10)
NULL_KEY_PART = "__null__"    # Hudi's KeyGenUtils placeholders inside a composite key string
EMPTY_KEY_PART = "__empty__"


def _pow31(n: int) -> np.ndarray:
    """31**i mod 2**32 for i in 0..n-1, as uint32 (NumPy's uint32 products wrap modulo 2**32)."""
    if n <= 0:
        return np.zeros(0, dtype=np.uint32)
    powers = np.full(n, 31, dtype=np.uint32)
    powers[0] = 1
    return np.cumprod(powers, dtype=np.uint32)


def java_string_hashes(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Java's `String.hashCode()` of every string, as uint32 (a null hashes to 0, as Objects.hashCode).

    Vectorised: no Python loop over the strings.  Java hashes UTF-16 code units,
    so a character outside the Basic Multilingual Plane counts as two units
    (its surrogate pair).  All arithmetic is uint32, which wraps modulo 2**32
    exactly like Java's int.  A chunked column is hashed chunk by chunk (`_by_chunk`).
    """
    if isinstance(values, pa.ChunkedArray):
        return _by_chunk(java_string_hashes, values)
    arr = values
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pc.cast(arr, pa.string())
    n = len(arr)
    if n == 0:
        return np.zeros(0, dtype=np.uint32)
    arr = arr.fill_null("")
    raw, offsets = _utf8_bytes(arr)
    if len(raw) and int(raw.max()) < 0x80:  # ASCII (UUIDs, ids): one UTF-16 unit per byte
        return _ascii_hashes(raw, offsets)
    # UTF-16 length of each string: one unit per code point, two for a 4-byte UTF-8 sequence
    lengths = pc.utf8_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    four = raw >= 0xF0
    if four.any():
        cum4 = np.concatenate(([0], np.cumsum(four, dtype=np.int64)))
        lengths = lengths + np.diff(cum4[offsets])
    units = np.frombuffer(raw.tobytes().decode("utf-8").encode("utf-16-le"), dtype="<u2").astype(np.uint32)
    u16_off = np.concatenate(([0], np.cumsum(lengths)))
    total = int(u16_off[-1])
    if total != len(units):  # cannot happen for valid UTF-8 (Arrow validates strings)
        raise InputError("key values are not valid UTF-8 strings")
    if total == 0:
        return np.zeros(n, dtype=np.uint32)
    # unit i of a string of length L is multiplied by 31^(L-1-i)
    from_end = np.repeat(u16_off[1:] - 1, lengths) - np.arange(total, dtype=np.int64)
    contrib = units * _pow31(int(lengths.max()))[from_end]
    sums = np.concatenate(([np.uint32(0)], np.cumsum(contrib, dtype=np.uint32)))  # wraps modulo 2**32
    return sums[u16_off[1:]] - sums[u16_off[:-1]]


_HASH_BLOCK_BYTES = 1 << 20  # key bytes hashed per block of rows by `_ascii_hashes`


def _ascii_hashes(raw: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """`java_string_hashes` of ASCII strings: Horner's rule over byte columns when all lengths are equal."""
    lengths = np.diff(offsets)
    n = len(lengths)
    width = int(lengths[0])
    if (lengths == width).all():
        grid = raw.reshape(n, width)
        h = np.zeros(n, dtype=np.uint32)
        # a loop over the key width, not the rows; in blocks of rows that stay in the CPU cache across the
        # width's passes (over the whole grid, each pass read every cache line of it again: 3x slower)
        rows = max(1, _HASH_BLOCK_BYTES // max(1, width))
        for start in range(0, n, rows):
            block, out = grid[start:start + rows], h[start:start + rows]
            for j in range(width):
                out *= np.uint32(31)
                out += block[:, j]
        return h
    units = raw.astype(np.uint32)
    total = len(units)
    from_end = np.repeat(offsets[1:] - 1, lengths) - np.arange(total, dtype=np.int64)
    contrib = units * _pow31(int(lengths.max()))[from_end]
    sums = np.concatenate(([np.uint32(0)], np.cumsum(contrib, dtype=np.uint32)))
    return cast("np.ndarray", sums[offsets[1:]] - sums[offsets[:-1]])


def _utf8_bytes(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of all strings of `arr` concatenated (a view), and each string's offset into them."""
    wide = pa.types.is_large_string(arr.type)
    all_offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)
    offsets = all_offsets[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    rel = offsets - offsets[0]
    data = arr.buffers()[2]
    if data is None or rel[-1] == 0:
        return np.zeros(0, dtype=np.uint8), rel
    return np.frombuffer(data, dtype=np.uint8)[int(offsets[0]) : int(offsets[-1])], rel


_SCALAR_ROWS = 4  # up to this many rows (a point lookup's keys), `java_list_hashes` works on Python ints


def _java_string_hash(value: str | None) -> int:
    """Java's `String.hashCode()` of one string (0 for null), over its UTF-16 code units."""
    if value is None:
        return 0
    units = value.encode("utf-16-le")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] | units[i + 1] << 8)) & 0xFFFFFFFF
    return h


def _scalar_list_hashes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """`java_list_hashes` of a few rows with Python ints: the same values as the vector path (a Hypothesis
    test compares them) without NumPy's fixed cost per operation (~0.1 ms for one 36-character key, one
    pass per character; up to 0.5 ms when another reader has just flushed the CPU caches)."""
    rows = [(col if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
             else pc.cast(col, pa.string())).to_pylist() for col in columns]
    out = []
    for values in zip(*rows):
        h = 1
        for v in values:
            h = (31 * h + _java_string_hash(v)) & 0xFFFFFFFF
        out.append(h)
    return np.array(out, dtype=np.uint32)


def java_list_hashes(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """Java's `List<String>.hashCode()` of each row's values (h = 1; h = 31*h + e.hashCode()), as uint32."""
    if not columns:
        raise InputError("a bucket hash needs at least one key field")
    if len(columns[0]) <= _SCALAR_ROWS:
        return _scalar_list_hashes(columns)
    k = len(columns)
    powers = _pow31(k + 1)
    h = np.full(len(columns[0]), powers[k], dtype=np.uint32)  # the initial 1, multiplied k times by 31
    for j, col in enumerate(columns):
        h += java_string_hashes(col) * powers[k - 1 - j]
    return h


def hudi_bucket_ids(columns: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> np.ndarray:
    """Hudi's simple bucket index: `(hashKeyFields.hashCode() & Integer.MAX_VALUE) % numBuckets`."""
    h = java_list_hashes(columns) & np.uint32(0x7FFFFFFF)
    return (h % np.uint32(num_buckets)).astype(np.int64)


def hudi_bucket_file_id(bucket: int) -> str:
    """Hudi's deterministic file id of a bucket (`BucketIdentifier.newBucketFileIdForNBCC`)."""
    return f"{bucket:08d}-0000-0000-0000-000000000000-0"


def key_values_from_keys(keys: pa.Array | pa.ChunkedArray, fields: Sequence[str]) -> list[pa.Array] | None:
    """Split record key strings into key field values, as Hudi does for a key string (lookups).

    One field: the key itself.  Several: `f1:v1,f2:v2` parsed at ',' then after
    each `f:` prefix; `__null__` becomes null and `__empty__` "".  Vectorised (Arrow
    kernels).  None when some key does not split into exactly these fields (a
    value holding ','): the caller must then not prune by bucket.
    """
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    if len(fields) <= 1:
        return [arr]
    parts = pc.split_pattern(arr, ",")
    if len(arr) and not pc.all(pc.equal(pc.list_value_length(parts), len(fields))).as_py():
        return None
    out = []
    for j, f in enumerate(fields):
        item = pc.list_element(parts, j) if len(arr) else pa.array([], pa.string())
        prefix = f"{f}:"
        if len(arr) and not pc.all(pc.starts_with(item, prefix)).as_py():
            return None
        value = pc.utf8_slice_codeunits(item, len(prefix))
        value = pc.if_else(pc.equal(value, NULL_KEY_PART), pa.scalar(None, pa.string()), value)
        out.append(pc.if_else(pc.equal(value, EMPTY_KEY_PART), "", value))
    return out


def bucket_ids_of(upstream: bool, key_columns: Sequence[pa.Array | pa.ChunkedArray],
                  record_keys: pa.Array | pa.ChunkedArray, num_buckets: int) -> np.ndarray:
    """Bucket of every row: Hudi's hash of the key field values (table version 10) or CRC-32 of the key."""
    return hudi_bucket_ids(key_columns, num_buckets) if upstream else bucket_ids(record_keys, num_buckets)


def file_id_of_bucket(upstream: bool, table_name: str, partition: str, bucket: int) -> str:
    return hudi_bucket_file_id(bucket) if upstream else bucket_file_id(table_name, partition, bucket)
