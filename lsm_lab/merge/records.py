"""Incoming records: normalise, key, partition, validate, de-duplicate, sort.

Before a batch touches storage it goes through a fixed pipeline, all of it in
Arrow kernels (no per-row Python):

    pyarrow.Table | pandas.DataFrame | list[dict]
      │ to_arrow            one Arrow table; `_hoodie_*` columns the caller passed are dropped
      │ evolve_schema       Hudi's evolution rules: added/left-out nullable columns, promotions (evolution.py)
      │ record_keys         "uuid-1"  or  "id:7,name:x" for composite keys (Hudi's complex keygen)
      │ partition_paths     "chennai" or "city=chennai";  a/b for composite partitions
      │                     (partition_codes: the same, dictionary-encoded: each folder name once)
      │ dedupe              one row per (partition, key): greatest ordering value, ties to the later row
      ▼ sort_by_key         UTF-8 byte order of the record key (lsm_tree layout)

Partition values become folder names, so a value containing `/`, `\\`, `..`, a
leading `.` or a NUL byte is rejected (`PartitionValueError`): it could escape the
table folder or hide the partition from listings.

Simplified compared with Apache Hudi: key generators are limited to simple,
complex and non-partitioned (no timestamp-based or custom generators); a value
is turned into text with Arrow's cast to string.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError, PartitionValueError, SchemaError
from lsm_lab.merge import evolution
from lsm_lab.merge.overlay import strictly_sorted

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
META_SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS])
DELETE_FLAG = "_lsm_delete"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY_PART = "__null__"
EMPTY_KEY_PART = "__empty__"


def to_arrow(data: Any, *, what: str = "data") -> pa.Table:
    """Turn a pyarrow Table/RecordBatch, pandas DataFrame or list of dicts into a pyarrow Table."""
    if isinstance(data, pa.Table):
        table = data
    elif isinstance(data, pa.RecordBatch):
        table = pa.Table.from_batches([data])
    elif isinstance(data, list):
        if data and not all(isinstance(r, dict) for r in data):
            raise InputError(f"{what}: a list must hold dicts (one per record)")
        table = pa.Table.from_pylist(data)
        if table.num_rows != len(data):  # records with no fields at all ([{}]): rows without columns, not none
            table = pa.table({"_": pa.nulls(len(data))}).select([])
    else:
        try:
            import pandas as pd
        except ImportError:  # pragma: no cover - pandas is a dependency
            pd = None
        if pd is not None and isinstance(data, pd.DataFrame):
            _no_duplicates([str(c) for c in data.columns], what)
            table = pa.Table.from_pandas(data, preserve_index=False)
            if table.num_rows != len(data):  # a frame of rows but no columns
                table = pa.table({"_": pa.nulls(len(data))}).select([])
        else:
            raise InputError(f"{what}: expected a pyarrow Table, pandas DataFrame or list of dicts, "
                             f"got {type(data).__name__}")
    _no_duplicates(table.column_names, what)
    keep = [c for c in table.column_names if c not in META_COLUMNS and c != DELETE_FLAG]
    table = table.select(keep)
    if table.num_columns:  # (on a table of no columns, Arrow's replace_schema_metadata drops the rows too)
        table = table.replace_schema_metadata(None)
    return normalize_types(table)


def _no_duplicates(names: list[str], what: str) -> None:
    """Which of two columns of one name would be the value?  (Arrow would fail later with a bare KeyError.)"""
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise SchemaError(f"{what}: column name{'s' if len(twice) > 1 else ''} {', '.join(map(repr, twice))} "
                          f"{'appear' if len(twice) > 1 else 'appears'} more than once; give every column its own name")


def _normal_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return _normal_type(t.value_type)
    return t


def normalize_types(table: pa.Table) -> pa.Table:
    """Large/view strings and dictionaries become plain strings, so files agree on types."""
    fields = [pa.field(f.name, _normal_type(f.type), f.nullable) for f in table.schema]
    target = pa.schema(fields)
    return table if target == table.schema else table.cast(target)


def check_columns(table: pa.Table, needed: Iterable[str], role: str) -> None:
    missing = [c for c in needed if c not in table.column_names]
    if missing:
        raise SchemaError(f"the data has no {role} column{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(repr(m) for m in missing)} (columns: {', '.join(table.column_names) or 'none'})")


def evolve_schema(current: pa.Schema | None, incoming: pa.Schema, *, partial: bool = False,
                  fixed: Collection[str] = ()) -> pa.Schema:
    """The table schema after accepting `incoming`, by Hudi's schema evolution rules (merge/evolution.py):
    new nullable columns at the end, nullable columns left out, type promotions; a SchemaError naming the
    column and the rule for anything else.  `partial=True` (deletes) allows the batch to carry only some
    of the columns; `fixed` names the key, partition and ordering columns, whose type may not change."""
    return evolution.evolve_schema(current, incoming, partial=partial, fixed=fixed)


def cast_column(col: pa.ChunkedArray | pa.Array, to: pa.DataType, name: str, *,
                source: object | None = None) -> pa.ChunkedArray | pa.Array:
    """`col` cast to `to`; SchemaError naming `source` (the file) when its values do not cast."""
    if col.type == to:
        return col
    try:
        return evolution.cast_to(col, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(f"column '{name}' of type {col.type} does not cast to the table's type {to}: {exc}",
                          path=source) from None


def conform(table: pa.Table, schema: pa.Schema, *, source: object | None = None) -> pa.Table:
    """Reorder/cast `table` to `schema`, filling absent columns with nulls.

    A column whose values do not cast to the schema's type (a damaged footer that
    retypes a column, or a file written with another schema) is a SchemaError naming
    `source`, the file the rows came from when the caller knows it.
    """
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            cols.append(cast_column(col, f.type, f.name, source=source))
        else:
            cols.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def one_array(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """`col` as one array: its only chunk as it is (`combine_chunks` would copy it), else the chunks combined."""
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _as_text(col: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """`col` as strings, chunks kept: a string column as it is (no copy), another type cast chunk by chunk."""
    if pa.types.is_string(col.type):
        return col
    try:
        return pc.cast(col, pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as exc:
        raise SchemaError(f"cannot use a column of type {col.type} in a key or partition path: {exc}") from None


def record_keys(table: pa.Table, fields: Sequence[str]) -> pa.Array | pa.ChunkedArray:
    """Record keys as strings: the value for one field, `f1:v1,f2:v2` for several (Hudi complex keygen).

    The keys keep the table's chunks: a key that is one string field is that column itself (a 16M-row
    batch read from Parquet comes in 122 chunks; combining them was a 640 MB copy held by the whole write).
    Callers that need one array make it (`one_array`) from what they take of it."""
    check_columns(table, fields, "record key")
    if len(fields) == 1:
        keys = _as_text(table.column(fields[0]))
        if keys.null_count:
            raise SchemaError(f"record key column '{fields[0]}' has {keys.null_count} null value(s)")
        empty = pc.sum(pc.equal(keys, "")).as_py() or 0
        if empty:  # Hudi rejects an empty record key as it rejects a null one
            raise SchemaError(f"record key column '{fields[0]}' has {empty} empty value(s)")
        return keys
    parts = []
    all_null = None
    for f in fields:
        txt = _as_text(table.column(f))
        is_null = txt.is_null()
        all_null = is_null if all_null is None else pc.and_(all_null, is_null)
        txt = pc.if_else(pc.equal(txt, ""), EMPTY_KEY_PART, txt).fill_null(NULL_KEY_PART)
        parts.append(pc.binary_join_element_wise(f"{f}:", txt, ""))
    if all_null is not None and pc.any(all_null).as_py():
        raise SchemaError(f"record key fields {', '.join(fields)} are all null in some rows")
    return pc.binary_join_element_wise(*parts, ",")


def key_parts(table: pa.Table, fields: Sequence[str]) -> list[pa.Array | pa.ChunkedArray]:
    """The key field values as text, one array per field (nulls stay null): what Hudi's bucket index hashes."""
    check_columns(table, fields, "record key")
    return [_as_text(table.column(f)) for f in fields]


def _check_partition_values(values: pa.Array, field: str) -> None:
    bad = pc.or_(
        pc.or_(pc.match_substring(values, "/"), pc.match_substring(values, "\\")),
        pc.or_(pc.match_substring(values, ".."), pc.or_(pc.starts_with(values, "."),
                                                          pc.match_substring(values, "\x00"))),
    )
    if pc.any(bad).as_py():
        sample = values.filter(bad)[0].as_py()
        raise PartitionValueError(
            f"partition column '{field}' has the value {sample!r}: partition values may not contain "
            "'/', '\\', '..' or NUL, nor start with '.', because they become folder names"
        )


def _distinct(col: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """(the distinct values, a null among them, and each row's index into them); (the column as one array,
    None) for a type Arrow cannot dictionary-encode.  A column of several chunks is encoded as it is (Arrow
    gives every chunk the whole dictionary): only the indices are joined, not the values."""
    try:
        enc = pc.dictionary_encode(col, null_encoding="encode")
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        return one_array(col), None
    if isinstance(enc, pa.ChunkedArray):
        pieces = enc.chunks
        if not pieces or any(not p.dictionary.equals(pieces[-1].dictionary) for p in pieces):
            enc = pc.dictionary_encode(one_array(col), null_encoding="encode")  # (not seen: one dictionary)
        else:
            enc = pa.DictionaryArray.from_arrays(one_array(pa.chunked_array([p.indices for p in pieces])),
                                                 pieces[-1].dictionary)
    if enc.indices.null_count:  # an input already dictionary-encoded keeps null indices: use the rows as they are
        return one_array(col), None
    return enc.dictionary, enc.indices


def _folder_names(col: pa.ChunkedArray | pa.Array, field: str, *, hive_style: bool) -> tuple[pa.Array, pa.Array | None]:
    """The folder names of one partition column's distinct values (checked, `f=v` when hive-style) and each
    row's index into them; (one name per row, None) for a type Arrow cannot dictionary-encode."""
    # a batch has few partition values: each folder name is built and checked once, from the column's
    # distinct values
    values, rows = _distinct(col)
    txt = _as_text(values)
    txt = pc.if_else(pc.equal(txt, ""), DEFAULT_PARTITION, txt).fill_null(DEFAULT_PARTITION)
    _check_partition_values(txt, field)
    names = pc.binary_join_element_wise(f"{field}=", txt, "") if hive_style else txt
    longest = pc.max(pc.binary_length(names)).as_py() or 0
    if longest > 255:  # a folder name longer than that fails in the file system (OSError)
        raise PartitionValueError(f"partition column '{field}' has a value whose folder name is {longest} bytes "
                                  "long; the limit is 255")
    return names, rows


def partition_paths(table: pa.Table, fields: Sequence[str], *, hive_style: bool) -> pa.Array:
    """Relative partition folder of every row ("" for a non-partitioned table), one string per row."""
    n = table.num_rows
    if not fields:
        return pa.repeat(pa.scalar("", pa.string()), n)  # (not a Python list of n strings: 1.4 s at 16M rows)
    check_columns(table, fields, "partition")
    parts = []
    for f in fields:
        names, rows = _folder_names(table.column(f), f, hive_style=hive_style)
        parts.append(names if rows is None else names.take(rows))  # laid out per row with one take
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")


def partition_codes(table: pa.Table, fields: Sequence[str], *, hive_style: bool) -> pa.DictionaryArray:
    """`partition_paths` dictionary-encoded: each partition's folder once (no name twice) and an index per row.

        city: chennai, pune, chennai, …      →   dictionary ["chennai", "pune"],  indices [0, 1, 0, …]

    A batch has few partitions, so the rows need not carry the name each: a 16M-row batch partitioned by
    city held 210 MB of per-row strings, against 64 MB of indices.  The bucket write keeps its batch's
    partition path this way (`write.prepare`); a file group's rows get it back as text, one repeated value
    (`write.GroupRows`), so files hold plain strings either way.  A partition path of several fields is
    joined per row first, then encoded."""
    n = table.num_rows
    if not fields:
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([""], pa.string()))
    if len(fields) == 1:
        check_columns(table, fields, "partition")
        names, rows = _folder_names(table.column(fields[0]), fields[0], hive_style=hive_style)
        if rows is None:  # (a type Arrow cannot dictionary-encode: one name per row already)
            return names.dictionary_encode()
        distinct = pc.dictionary_encode(names)  # "" and null both name the default partition: one entry
        if len(distinct.dictionary) < len(names):
            names, rows = distinct.dictionary, distinct.indices.take(rows)
        return pa.DictionaryArray.from_arrays(rows, names)
    return partition_paths(table, fields, hive_style=hive_style).dictionary_encode()


def check_partition_path(path: str) -> None:
    """Reject a partition path that would leave the table folder (for paths given directly)."""
    pieces = path.split("/") if path else []
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") or p.startswith(".") for p in pieces):
        raise PartitionValueError(f"partition path {path!r} would escape the table folder")


def has_duplicates(keys: pa.Array | pa.ChunkedArray) -> bool:
    """Whether some value occurs twice (one hash pass, no sort)."""
    return len(pc.unique(keys)) < len(keys)


def dedupe(table: pa.Table, key: str | Sequence[str], ordering: str | None, *, deletes: bool = False,
           keep_order: bool = False) -> pa.Table:
    """One row per key: the greatest ordering value wins, ties (and no ordering) go to the later row.

    `key` is one column or several (the writer passes the partition path and the record key:
    a record key is unique within its partition, not across partitions).

    A null ordering value ranks lowest, except in a batch of deletes (`deletes=True`): there a
    delete without an ordering value is unconditional, so it beats every ordered delete of its
    key, wherever it stands in the batch (applying the rows one by one gives the same result).

    The result is sorted by the key column(s) (UTF-8 byte order), or, with
    `keep_order=True`, in the order the surviving rows had in the batch (the
    `default` layout writes files in arrival order, as Hudi does); a batch with no key
    twice (one hash of the last key column, unique when the batch is) then comes back
    as it is, with no sort."""
    if table.num_rows == 0:
        return table
    keys = [key] if isinstance(key, str) else list(key)
    if keep_order and not has_duplicates(table.column(keys[-1])):
        return table  # no key twice: nothing to drop, no order to restore
    sort_keys: list[tuple[str, str, str]] = [(k, "ascending", "at_start") for k in keys]
    if ordering is not None:  # nulls lowest (a non-null ordering wins), highest among deletes
        sort_keys.append((ordering, "ascending", "at_end" if deletes else "at_start"))
    # Arrow's sort is stable: among equal (key, ordering) the later row of the batch stays later
    columns = list(dict.fromkeys(name for name, _, _ in sort_keys))
    order = pc.sort_indices(table.select(columns), sort_keys=sort_keys)
    n = table.num_rows
    if n > 1:
        last = np.zeros(n - 1, dtype=bool)  # row i is the last of its key: it differs from row i + 1
        for k in keys:
            col = table.column(k).take(order).combine_chunks()
            last |= pc.not_equal(col.slice(0, n - 1), col.slice(1)).to_numpy(zero_copy_only=False)
        order = order.filter(pa.array(np.append(last, True)))
    if keep_order:
        order = pa.array(np.sort(order.to_numpy()))
    return table.take(order)  # the one full-width take, of the surviving rows only


_ALL64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _prefixes(arr: pa.Array) -> np.ndarray | None:
    """The first 8 UTF-8 bytes of every string, zero-padded, as big-endian uint64 (None: not a plain string array)."""
    if arr.null_count or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
                              or pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
        return None
    n = len(arr)
    wide = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if wide else np.int32)[arr.offset: arr.offset + n + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    buf = arr.buffers()[2]
    data = np.zeros(last - first + 8, dtype=np.uint8)  # 8 bytes of zero padding after the last string
    if buf is not None and last > first:
        data[: last - first] = np.frombuffer(buf, dtype=np.uint8)[first:last]
    # a big-endian word starting at every byte offset (a strided view, no copy)
    at = np.ndarray((len(data) - 7,), dtype=">u8", buffer=data, strides=(1,))
    words = at[offsets[:-1] - first].astype(np.uint64)
    short = np.minimum(np.diff(offsets), 8).astype(np.uint64)  # bytes of the word that belong to the string
    keep = np.where(short == 0, np.uint64(0), _ALL64 << ((np.uint64(8) - short) * np.uint64(8) % np.uint64(64)))
    return cast("np.ndarray | None", words & keep)


def key_prefixes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """The first 8 UTF-8 bytes of every key as big-endian uint64 (`key_sort_indices`' sort keys), chunk by
    chunk (no joined copy of the keys); None when they are not plain strings without nulls."""
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    parts = []
    for c in chunks:
        prefix = _prefixes(c)
        if prefix is None:
            return None
        parts.append(prefix)
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, np.uint64)


def key_sort_indices(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Indices that sort string keys by UTF-8 bytes, as `pc.sort_indices` (stable) returns them.

    Fast path: one NumPy sort of the keys' first 8 bytes as big-endian integers (4-6x
    faster than Arrow's string sort) orders every key whose prefix no other key shares
    (random ids such as UUIDs: 8 hex digits, so among 83k of them a pair or two share one);
    the keys of equal-prefix runs, when they are at most `_FEW_TIES` of the array, are
    then sorted by Arrow (stable) among themselves and put back into the runs' places
    (prefix order never contradicts byte order). More ties (common prefixes, many
    repeated keys) send the whole array to Arrow's sort."""
    arr = one_array(keys)
    if len(arr) <= 1:
        return np.arange(len(arr), dtype=np.int64)
    return prefix_sort_indices(_prefixes(arr), lambda at: arr if at is None else arr.take(pa.array(at)))


def prefix_sort_indices(prefix: np.ndarray | None,
                        keys_at: Callable[[np.ndarray | None], pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """`key_sort_indices` of keys given by their prefixes (`key_prefixes`; None: unknown) and `keys_at(rows)`,
    the keys at those ascending positions (None: all of them), asked only for the keys whose prefix ties.

    A bucket write sorts each file group's keys this way from the batch's prefixes (`write._tag_buckets`):
    8 bytes a row gathered per group, and only the few tied keys themselves, not all of the group's."""
    if prefix is not None:
        order = np.argsort(prefix).astype(np.int64, copy=False)
        ranked = prefix[order]
        same = ranked[1:] == ranked[:-1]
        if not same.any():  # distinct prefixes: the order of the whole keys
            return order
        tied = np.zeros(len(order), dtype=bool)  # places in `order` that belong to an equal-prefix run
        tied[1:] |= same
        tied[:-1] |= same
        places = np.flatnonzero(tied)
        if len(places) <= _FEW_TIES * len(order):
            members = np.sort(order[places])  # ascending row numbers: Arrow's stable sort keeps their order
            order[places] = members[pc.sort_indices(keys_at(members)).to_numpy()]
            return order
    return cast("np.ndarray", pc.sort_indices(keys_at(None)).to_numpy().astype(np.int64, copy=False))


#: at most this share of the keys in equal-prefix runs for `key_sort_indices` to sort only those with Arrow
_FEW_TIES = 0.05


def sort_by_key(table: pa.Table, key: str = RECORD_KEY) -> pa.Table:
    if table.num_rows <= 1:
        return table
    return table.take(pa.array(key_sort_indices(table.column(key))))


def is_strictly_sorted(keys: pa.Array | pa.ChunkedArray) -> bool:
    """True when the keys increase strictly (UTF-8 byte order), i.e. sorted with no key twice."""
    return strictly_sorted(one_array(keys))
