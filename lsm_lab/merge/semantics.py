"""Merge semantics: which record of a key survives, shared by every engine.

A file slice is a base file (source 0) plus log files in completion order
(sources 1, 2, ...). The same record key may appear once in several of them.
Merging means: for every key, *fold* its records in source order into one
state, and emit the final state unless it is a delete.

    source:      0 (base)        1 (log)           2 (log)
    key "k1":    {fare: 10, ts:5} {fare: 12, ts:7}  <delete, ts: 6>
                      state  ->  replaced (7 >= 5) -> kept (6 < 7)   => emits fare 12

**The fold.** The state of a key starts empty. Each record of the key, taken
in source order (and, inside one source, in row order), either replaces the
state or is ignored:

* ``COMMIT_TIME_ORDERING``: a later record always replaces the state, whether
  it is an upsert or a delete. The ordering column is ignored. In the example
  above the delete from source 2 would win and ``k1`` would be dropped.
* ``EVENT_TIME_ORDERING``: ordering values decide, and a null ordering value
  compares lower than every non-null one. A record replaces the state iff its
  ordering value is ``>=`` the state's (ties go to the later source, which is
  what makes a re-delivered record with the same event time win). A delete
  *with* an ordering value ``d`` follows the same rule, so it does not remove a
  record with a greater ordering value (the example above). A delete with a
  *null* ordering value is a delete-by-key and is unconditional: it always
  empties the key; the state becomes "deleted, ordering null", which any later
  record replaces (even one with a null ordering value).

A key whose final state is a delete is dropped from the output.

**The vectorised form.** The fold above has a closed form that the fast
engines compute with array kernels instead of a Python loop. Per key, let
``u`` be the position (in fold order) of the last null-ordering delete, or -1.
Records before ``u`` can never matter. Among the records at or after ``u`` the
winner is the maximum by ``(ordering value with nulls lowest, fold position)``:
the unconditional delete itself ranks lowest (null ordering, earliest
position), so it wins only when nothing follows it. Under commit-time ordering
the winner is simply the last record. ``select_winners`` implements this with
one stable sort by key (of order-preserving integer prefixes when the keys
have one byte width, ``prefix_sort``) and a few ``numpy.maximum.reduceat``
passes (over the rows of repeated keys only when no row is a delete and no
ordering value is null), and the
hash engine combines a base record with a pre-folded log state using the
``reset`` flag (did the log contain a delete-by-key?) from the same function.

``fold`` and ``model_merge`` are the plain per-record reference: every test
compares the engines against ``model_merge``. The module also defines what
every engine consumes (``Source``, ``prepare_sources``: a common schema with
the key, delete and ordering columns, checked batch by batch).

Simplified compared with Apache Hudi: Hudi delegates this to pluggable record
mergers and payload classes (``DefaultHoodieRecordPayload``,
``OverwriteWithLatestAvroPayload``, custom mergers, partial updates); lsm_lab
implements the two built-in merge modes only, with deletes as a boolean column
instead of ``_hoodie_is_deleted``/empty payloads. Ordering values are compared
as Arrow sorts them (NaN ordering values are not supported).

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import as_strided

from lsm_lab import arrowlit
from lsm_lab.errors import InputError, SchemaError


class MergeMode(str, enum.Enum):
    """How two records of the same key are ordered."""

    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"


@dataclass(frozen=True)
class MergeSpec:
    """What to merge on.

    ``key`` is a non-null string column; ``ordering`` the column holding the
    ordering value (required for event-time ordering); ``delete`` a boolean
    column, ``True`` for a delete (a null there counts as ``False``).
    """

    mode: MergeMode = MergeMode.COMMIT_TIME_ORDERING
    key: str = "_hoodie_record_key"
    ordering: str | None = None
    delete: str = "_lsm_delete"

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", MergeMode(self.mode))
        if self.mode is MergeMode.EVENT_TIME_ORDERING and not self.ordering:
            raise InputError("EVENT_TIME_ORDERING needs an ordering column (MergeSpec.ordering)")

    @property
    def uses_ordering(self) -> bool:
        """True when ordering values take part in the merge."""
        return self.mode is MergeMode.EVENT_TIME_ORDERING

    def check_schema(self, schema: pa.Schema, *, where: str = "input") -> None:
        """Raise `SchemaError` unless `schema` has the key, delete and ordering columns."""
        names = set(schema.names)
        if self.key not in names:
            raise SchemaError(f"{where}: missing key column {self.key!r} (columns: {schema.names})")
        key_type = schema.field(self.key).type
        if not (pa.types.is_string(key_type) or pa.types.is_large_string(key_type)):
            raise SchemaError(f"{where}: key column {self.key!r} must be a string, not {key_type}")
        if self.delete not in names:
            raise SchemaError(f"{where}: missing delete column {self.delete!r} (columns: {schema.names})")
        if not pa.types.is_boolean(schema.field(self.delete).type):
            raise SchemaError(f"{where}: delete column {self.delete!r} must be bool, "
                              f"not {schema.field(self.delete).type}")
        if self.uses_ordering and self.ordering not in names:
            raise SchemaError(f"{where}: missing ordering column {self.ordering!r} (columns: {schema.names})")

    def output_schema(self, schema: pa.Schema) -> pa.Schema:
        """The merged output's schema: the input schema without the delete column."""
        return schema.remove(schema.get_field_index(self.delete))


# --------------------------------------------------------------------------------------
# The per-record reference: fold and model_merge
# --------------------------------------------------------------------------------------

def _ordering_key(value: Any) -> tuple[int, Any]:
    """Nulls compare lowest: (0,) < (1, v) for every v."""
    return (0, 0) if value is None else (1, value)


def is_delete(row: Mapping[str, Any], spec: MergeSpec) -> bool:
    """True when `row` is a delete (a null delete flag counts as an upsert)."""
    return bool(row.get(spec.delete))


def replaces(state: Mapping[str, Any] | None, row: Mapping[str, Any], spec: MergeSpec) -> bool:
    """One step of the fold: does `row` (from a later position) replace `state`?"""
    if state is None or spec.mode is MergeMode.COMMIT_TIME_ORDERING:
        return True
    assert spec.ordering is not None
    new = row.get(spec.ordering)
    if new is None and is_delete(row, spec):
        return True  # delete-by-key: unconditional
    return _ordering_key(new) >= _ordering_key(state.get(spec.ordering))


def fold(rows: Iterable[Mapping[str, Any]], spec: MergeSpec) -> Mapping[str, Any] | None:
    """Fold the records of one key (in source order) into the final state.

    Returns the winning row, which may be a delete (check `is_delete`), or
    None when `rows` is empty.
    """
    state: Mapping[str, Any] | None = None
    for row in rows:
        if replaces(state, row, spec):
            state = row
    return state


def surviving_row(state: Mapping[str, Any] | None, spec: MergeSpec) -> dict[str, Any] | None:
    """The output row for a final state: None for a delete, else the row without the delete column."""
    if state is None or is_delete(state, spec):
        return None
    return {name: value for name, value in state.items() if name != spec.delete}


def model_merge(sources: Sequence[Iterable[Mapping[str, Any]]], spec: MergeSpec) -> dict[str, dict[str, Any]]:
    """The dict model: merge lists of row dicts (source 0 first) into ``{key: row}``.

    Rows of one key are folded in source order, then row order inside a source,
    so a key repeated inside one source behaves like a key in two consecutive
    sources. Deleted keys are absent from the result.
    """
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for source in sources:
        for row in source:
            groups.setdefault(row[spec.key], []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for key, rows in groups.items():
        survivor = surviving_row(fold(rows, spec), spec)
        if survivor is not None:
            out[key] = dict(survivor)
    return out


# --------------------------------------------------------------------------------------
# Inputs: what an engine consumes
# --------------------------------------------------------------------------------------

Source = Union[pa.Table, pa.RecordBatch, pa.RecordBatchReader, Iterable[pa.RecordBatch]]  # noqa: UP007 - a runtime alias


class SourceInput:
    """One normalised source: its index, its schema (once known) and its batches.

    Every batch handed out has been checked against the common schema; a
    batch with a different schema raises `SchemaError` naming the source.
    """

    def __init__(self, index: int, source: Source, batch_size: int) -> None:
        self.index = index
        self.schema: pa.Schema | None
        self._peeked: pa.RecordBatch | None = None
        self._iter: Iterator[pa.RecordBatch]
        if isinstance(source, pa.Table):
            self.schema = source.schema
            self._iter = iter(source.to_batches(max_chunksize=batch_size))
        elif isinstance(source, pa.RecordBatch):
            self.schema = source.schema
            self._iter = iter([source.slice(i, batch_size) for i in range(0, source.num_rows, batch_size)])
        elif isinstance(source, pa.RecordBatchReader):
            self.schema = source.schema
            self._iter = iter(source)
        else:
            try:
                self._iter = iter(source)
            except TypeError:
                raise InputError(f"source {index}: expected a pyarrow Table, RecordBatch, "
                                 f"RecordBatchReader or an iterable of RecordBatch, "
                                 f"got {type(source).__name__}") from None
            self.schema = None
            self._peeked = next(self._iter, None)
            if self._peeked is not None:
                if not isinstance(self._peeked, pa.RecordBatch):
                    raise InputError(f"source {index}: expected RecordBatch items, "
                                     f"got {type(self._peeked).__name__}")
                self.schema = self._peeked.schema
        self._expected: pa.Schema | None = None

    def expect(self, schema: pa.Schema) -> None:
        """Set the common schema every batch must match."""
        self._expected = schema

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The source's batches (possibly empty ones), each checked against the schema."""
        expected = self._expected
        if self._peeked is not None:
            first, self._peeked = self._peeked, None
            yield self._check(first, expected)
        for batch in self._iter:
            yield self._check(batch, expected)

    def _check(self, batch: pa.RecordBatch, expected: pa.Schema | None) -> pa.RecordBatch:
        if not isinstance(batch, pa.RecordBatch):
            raise InputError(f"source {self.index}: expected RecordBatch items, got {type(batch).__name__}")
        if expected is not None and batch.schema is not expected and not batch.schema.equals(expected):
            raise SchemaError(f"source {self.index}: batch schema differs from the other sources:\n"
                              f"{batch.schema}\nexpected:\n{expected}")
        return batch


def prepare_sources(sources: Sequence[Source], spec: MergeSpec,
                    batch_size: int) -> tuple[list[SourceInput], pa.Schema | None]:
    """Normalise `sources` and check that they share one schema with the merge columns.

    Returns the inputs and the common input schema (None when no source has
    a schema, e.g. only empty iterables).
    """
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")
    inputs = [SourceInput(i, s, batch_size) for i, s in enumerate(sources)]
    schema: pa.Schema | None = None
    first = -1
    for inp in inputs:
        if inp.schema is None:
            continue
        if schema is None:
            spec.check_schema(inp.schema, where=f"source {inp.index}")
            schema, first = inp.schema, inp.index
        elif not inp.schema.equals(schema):
            raise SchemaError(f"source {inp.index}: schema differs from source {first}:"
                              f"\n{inp.schema}\nexpected:\n{schema}")
    if schema is not None:
        for inp in inputs:
            inp.expect(schema)
    return inputs, schema


def check_keys_not_null(keys: pa.Array | pa.ChunkedArray, source: int) -> None:
    """Raise `SchemaError` when a key is null."""
    if keys.null_count:
        raise SchemaError(f"source {source}: {keys.null_count} null record key(s)")


# --------------------------------------------------------------------------------------
# The vectorised rule
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Winners:
    """`select_winners` result, one entry per distinct key, in key order.

    ``rows``: index of the winning row in the input table; ``deleted``: the
    winner is a delete; ``reset``: the key's records contain a delete-by-key
    (null-ordering delete), so earlier sources cannot matter (always True
    under commit-time ordering, where the last record always wins).
    """

    rows: np.ndarray
    deleted: np.ndarray
    reset: np.ndarray


def to_numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A null-free boolean, integer or float array as NumPy, without going through pandas.

    ``Array.to_numpy`` (and ``np.asarray`` of an Arrow array) imports pandas on
    its first call in a process: 0.17 s of CPU inside a merge that never needs
    pandas. Numbers are a view of the data buffer; booleans are unpacked from
    their bitmap. Anything else (nulls, other types) goes through Arrow.
    """
    values = _as_array(values)
    t = values.type
    data = values.buffers()[1] if len(values) and not values.null_count else None
    if data is not None and pa.types.is_boolean(t):
        bits = np.frombuffer(data, dtype=np.uint8)
        return np.unpackbits(bits, count=values.offset + len(values), bitorder="little")[values.offset:].view(bool)
    if data is not None and (pa.types.is_integer(t) or pa.types.is_floating(t)) and t.bit_width > 8:
        width = t.bit_width // 8
        kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
        return np.frombuffer(data, dtype=f"<{kind}{width}", count=len(values), offset=values.offset * width)
    return cast("np.ndarray", values.to_numpy(zero_copy_only=False))


#: 0 as an int64 scalar (a fill value built without converting a Python value: see `indices_array`)
_ZERO = arrowlit.number(0, pa.int64())


def _orderable(values: pa.Array) -> np.ndarray:
    """Ordering values as a NumPy array that orders like Arrow does (nulls filled, mask kept apart)."""
    t = values.type
    if pa.types.is_signed_integer(t) or (pa.types.is_unsigned_integer(t) and t.bit_width < 64):
        as_int = values.cast(pa.int64())
        return to_numpy(as_int.fill_null(_ZERO) if as_int.null_count else as_int)
    if pa.types.is_boolean(t):
        return to_numpy(values.cast(pa.int64()).fill_null(_ZERO))
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return to_numpy(values.cast(pa.int64()).fill_null(_ZERO))
    if pa.types.is_floating(t):
        arr = to_numpy(values.cast(pa.float64()).fill_null(arrowlit.number(0.0, pa.float64())))
        if not np.isnan(arr).any():
            return arr
    # strings, dates, decimals, floats with NaN, ...: Arrow's own order as dense ranks
    try:  # pyarrow >= 25: null placement per sort key
        ranks = pc.rank(values, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    except (TypeError, ValueError, pa.ArrowInvalid):
        ranks = pc.rank(values, sort_keys="ascending", null_placement="at_start", tiebreaker="dense")
    return to_numpy(ranks).astype(np.int64)


def _as_array(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def fixed_width_keys(keys: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """The keys as a NumPy ``S<width>`` array, when every key has the same non-zero byte length.

    Equal-length byte strings order like ``memcmp``, so NumPy's stable sort
    (timsort, which exploits the already-sorted runs of a k-way merge) and
    element-wise ``!=`` give the same answers as Arrow, with fewer copies.
    """
    chunks = keys.chunks if isinstance(keys, pa.ChunkedArray) else [keys]
    parts = []
    width = -1
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if chunk.null_count:
            return None
        off_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=off_type)[chunk.offset:chunk.offset + len(chunk) + 1]
        w = int(offsets[1] - offsets[0])
        if w <= 0 or (width >= 0 and w != width) or int(offsets[-1] - offsets[0]) != w * len(chunk):
            return None
        if len(chunk) > 2 and not (np.diff(offsets) == w).all():
            return None
        width = w
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
        parts.append(data.view(f"S{w}"))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def common_prefix_length(fixed: np.ndarray) -> int:
    """How many leading bytes every key of an ``S<width>`` array shares (0 for fewer than two keys)."""
    n, width = len(fixed), fixed.dtype.itemsize
    if n < 2:
        return 0
    cols = np.ascontiguousarray(fixed).view(np.uint8).reshape(n, width)
    for j in range(width):
        if not (cols[:, j] == cols[0, j]).all():
            return j
    return width


def key_prefixes(fixed: np.ndarray, common: int | None = None) -> tuple[np.ndarray, bool]:
    """Order-preserving ``uint64`` prefixes of equal-width keys, and whether they are exact.

    The bytes every key shares (`common`, computed when None; a caller may pass
    any length it knows the keys share) cannot order them, so each prefix is
    the big-endian number made of the 8 bytes that follow them (the last 8 bytes
    of the key when fewer remain; keys shorter than 8 bytes are zero-padded).
    ``a < b`` as numbers implies ``a < b`` as keys; equal numbers mean equal
    keys only when the 8 bytes reach the end of the key (``exact``). Integer
    sorts and comparisons are several times faster than NumPy's byte-string ones.
    """
    fixed = np.ascontiguousarray(fixed)
    n, width = len(fixed), fixed.dtype.itemsize
    if width < 8:
        padded = np.zeros((n, 8), dtype=np.uint8)
        padded[:, :width] = fixed.view(np.uint8).reshape(n, width)
        return padded.view(">u8").ravel().astype(np.uint64), True
    start = min(common_prefix_length(fixed) if common is None else common, width - 8)
    # a read-only view of the 8 bytes at `start` of every key as a big-endian integer (keys are `width`
    # bytes apart; start + 8 <= width, so no view reaches past the last key); astype gathers and swaps
    raw = fixed.view(np.uint8)
    words = as_strided(raw[start:start + 8].view(">u8"), shape=(n,), strides=(width,), writeable=False)
    return words.astype(np.uint64), start + 8 >= width


def first_unsorted(fixed: np.ndarray) -> int:
    """The first i with ``fixed[i] >= fixed[i + 1]`` (-1 when the keys strictly increase), comparing
    integer prefixes and, where two prefixes are equal, the whole keys."""
    if len(fixed) < 2:
        return -1
    prefixes, exact = key_prefixes(fixed)
    ok = prefixes[:-1] < prefixes[1:]
    if ok.all():
        return -1
    suspects = np.flatnonzero(~ok)
    bad = prefixes[suspects] > prefixes[suspects + 1]
    if not exact:  # equal prefixes: only the whole keys can tell
        bad |= fixed[suspects] >= fixed[suspects + 1]
    else:
        bad[:] = True
    hits = suspects[bad]
    return int(hits[0]) if len(hits) else -1


def prefix_sort(fixed: np.ndarray, common: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(stable order by key, flags marking the first row of each key in that order) of equal-width keys.

    Sorts the integer prefixes of `key_prefixes` (a stable sort, so equal keys
    keep their input order). When the prefixes are not exact, the runs of one
    prefix that hold different keys (rare with random keys) are sorted again
    by the whole key: a prefix orders whole runs, so only those rows move.
    """
    if len(fixed) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    prefixes, exact = key_prefixes(fixed, common)
    order = np.argsort(prefixes, kind="stable")
    ordered = prefixes[order]
    starts_flag = np.empty(len(fixed), dtype=bool)
    starts_flag[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts_flag[1:])
    if exact:
        return order, starts_flag
    ties = np.flatnonzero(~starts_flag[1:])  # positions i where rows i and i + 1 share a prefix
    if len(ties) == 0:
        return order, starts_flag
    differ = fixed[order[ties]] != fixed[order[ties + 1]]
    if not differ.any():
        return order, starts_flag
    run = np.cumsum(starts_flag) - 1  # the prefix run of every position
    mixed = np.zeros(int(run[-1]) + 1, dtype=bool)
    mixed[run[ties[differ]]] = True
    rows = np.flatnonzero(mixed[run])  # the positions of those runs, in order
    sub = order[rows]  # ascending input positions inside each run (the first sort was stable)
    resorted = sub[np.argsort(fixed[sub], kind="stable")]  # runs stay in place: their keys are ordered
    order[rows] = resorted
    keys = fixed[resorted]
    inner = np.flatnonzero(~starts_flag[rows])  # not the first row of a run: the previous row is in `rows`
    starts_flag[rows[inner]] = keys[inner] != keys[inner - 1]
    return order, starts_flag


def _sort_and_group(keys: pa.ChunkedArray | pa.Array, n: int, fixed: np.ndarray | None = None,
                    common: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(stable order by key, flags marking the first row of each key in that order)."""
    starts_flag = np.empty(n, dtype=bool)
    starts_flag[0] = True
    if fixed is None:
        fixed = fixed_width_keys(keys)
    if fixed is not None:
        return prefix_sort(fixed, common)
    flat = _as_array(keys)
    order_arr = pc.sort_indices(flat)
    sorted_keys = flat.take(order_arr)
    if n > 1:
        starts_flag[1:] = to_numpy(pc.not_equal(sorted_keys.slice(1), sorted_keys.slice(0, n - 1)))
    return to_numpy(order_arr).astype(np.int64, copy=False), starts_flag


def _bool_column(col: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """A boolean column as a NumPy array (nulls as False), or None when it holds no True."""
    if not pc.any(col).as_py():
        return None
    return to_numpy(_as_array(col).fill_null(arrowlit.FALSE))


def _latest_of_repeats(order: np.ndarray, starts_flag: np.ndarray, values: np.ndarray) -> Winners:
    """Event-time winners when no row is a delete and no ordering value is null: per key the row with
    the greatest (value, position). Only the rows of keys that occur more than once are compared
    (a k-way merge of runs that mostly hold different keys leaves most keys alone)."""
    n = len(order)
    repeated = np.zeros(n, dtype=bool)
    ties = np.flatnonzero(~starts_flag[1:])  # rows i and i + 1 hold the same key
    repeated[ties] = True
    repeated[ties + 1] = True
    sub = np.flatnonzero(repeated)  # in key order; each repeated key's rows are adjacent
    keep = starts_flag & ~repeated  # keys seen once: their only row wins
    if len(sub):
        firsts = np.flatnonzero(starts_flag[sub])
        v = values[order[sub]]
        best = np.repeat(np.maximum.reduceat(v, firsts), np.diff(np.append(firsts, len(sub))))
        latest = np.maximum.reduceat(np.where(v == best, np.arange(len(sub)), -1), firsts)
        keep[sub[latest]] = True
    rows = order[keep]
    return Winners(rows, np.zeros(len(rows), dtype=bool), np.zeros(len(rows), dtype=bool))


def select_winners(table: pa.Table | pa.RecordBatch, spec: MergeSpec, *,
                   presorted: bool = False, fixed_keys: np.ndarray | None = None,
                   common_prefix: int | None = None) -> Winners:
    """Apply the fold to every key of `table` at once.

    The rows of `table` must be in fold order (source, then row order). With
    ``presorted=True`` the caller promises the rows are already sorted by key
    (equal keys adjacent, in fold order); otherwise a stable sort by key is
    done first. `fixed_keys` may pass the keys already viewed as a NumPy
    ``S<width>`` array (all keys of one byte length), saving that conversion, and
    `common_prefix` a number of leading bytes they are known to share.
    """
    n = table.num_rows
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Winners(empty, np.zeros(0, dtype=bool), np.zeros(0, dtype=bool))
    keys = table.column(spec.key)
    if presorted:
        order = np.arange(n, dtype=np.int64)
        flat = _as_array(keys)
        starts_flag = np.empty(n, dtype=bool)
        starts_flag[0] = True
        if n > 1:
            starts_flag[1:] = to_numpy(pc.not_equal(flat.slice(1), flat.slice(0, n - 1)))
    else:
        order, starts_flag = _sort_and_group(keys, n, fixed_keys, common_prefix)
    deletes_all = _bool_column(table.column(spec.delete))
    distinct = int(np.count_nonzero(starts_flag))
    if (spec.mode is MergeMode.EVENT_TIME_ORDERING and deletes_all is None and distinct < n
            and not table.column(spec.ordering).null_count):
        assert spec.ordering is not None
        return _latest_of_repeats(order, starts_flag, _orderable(_as_array(table.column(spec.ordering))))
    starts = np.flatnonzero(starts_flag)
    deletes = np.zeros(n, dtype=bool) if deletes_all is None else deletes_all[order]

    if distinct == n:  # every key once: each row is its own winner
        reset = np.ones(n, dtype=bool) if spec.mode is MergeMode.COMMIT_TIME_ORDERING else \
            np.zeros(n, dtype=bool) if deletes_all is None else deletes.copy()
        if spec.mode is MergeMode.EVENT_TIME_ORDERING and deletes_all is not None:
            assert spec.ordering is not None
            reset &= ~to_numpy(_as_array(table.column(spec.ordering)).is_valid())[order]
        return Winners(order, deletes, reset)
    if spec.mode is MergeMode.COMMIT_TIME_ORDERING:
        win = np.empty(len(starts), dtype=np.int64)
        win[:-1] = starts[1:] - 1
        win[-1] = n - 1
        reset = np.ones(len(starts), dtype=bool)
        return Winners(order[win], deletes[win], reset)

    assert spec.ordering is not None
    ordering = _as_array(table.column(spec.ordering))
    group = np.cumsum(starts_flag) - 1
    pos = np.arange(n, dtype=np.int64)
    values = _orderable(ordering)[order]
    candidates: np.ndarray | None = None
    if ordering.null_count or deletes_all is not None:
        notnull = to_numpy(ordering.is_valid())[order]
        # u: last delete-by-key of each key; rows before it are dead
        upos = np.where(deletes & ~notnull, pos, -1)
        ustart = np.maximum.reduceat(upos, starts)
        reset = ustart >= 0
        alive = pos >= ustart[group]
        # among live rows, non-null ordering values beat nulls
        k1 = np.where(alive, notnull.astype(np.int8), np.int8(-1))
        candidates = k1 == np.maximum.reduceat(k1, starts)[group]
    else:
        reset = np.zeros(len(starts), dtype=bool)
    # max by (value, position) among the candidates
    if candidates is None:
        best = np.maximum.reduceat(values, starts)[group]
        top = values == best
    else:
        low = -np.inf if values.dtype.kind == "f" else np.iinfo(values.dtype).min
        best = np.maximum.reduceat(np.where(candidates, values, low), starts)[group]
        top = candidates & (values == best)
    win = np.maximum.reduceat(np.where(top, pos, -1), starts)
    return Winners(order[win], deletes[win], reset)


def indices_array(rows: np.ndarray) -> pa.Array:
    """Row positions as an Arrow ``int64`` array sharing `rows`' memory.

    Built from the buffer rather than with ``pa.array``, whose first call in
    a process imports pandas (to check for pandas objects): 0.17 s of CPU
    inside a merge that never needs pandas.
    """
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(rows), [None, pa.py_buffer(rows)])


def bool_array(mask: np.ndarray) -> pa.Array:
    """A NumPy boolean mask as an Arrow ``bool`` array, built from its packed bits (not with ``pa.array``,
    which imports pandas: see `indices_array`)."""
    mask = np.ascontiguousarray(mask, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(np.packbits(mask, bitorder="little"))])


def merge_resolved(table: pa.Table, spec: MergeSpec, *, presorted: bool = False,
                   fixed_keys: np.ndarray | None = None, common_prefix: int | None = None) -> pa.Table:
    """Merge the rows of one in-memory table (in fold order): one row per surviving key, key order."""
    winners = select_winners(table, spec, presorted=presorted, fixed_keys=fixed_keys, common_prefix=common_prefix)
    keep = winners.rows[~winners.deleted] if winners.deleted.any() else winners.rows
    payload = table.drop_columns([spec.delete])
    if presorted and len(keep) == table.num_rows:
        return payload  # already one row per key, in key order, no deletes
    return payload.take(indices_array(keep))


__all__ = [
    "MergeMode",
    "MergeSpec",
    "Source",
    "SourceInput",
    "Winners",
    "bool_array",
    "check_keys_not_null",
    "fixed_width_keys",
    "fold",
    "indices_array",
    "is_delete",
    "merge_resolved",
    "model_merge",
    "prepare_sources",
    "replaces",
    "select_winners",
    "surviving_row",
    "to_numpy",
]
