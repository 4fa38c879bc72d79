"""The overlay merge: a file slice held in memory, its logs folded and laid over the base.

A snapshot read has the whole slice in memory anyway (the base file and its
logs, read by filegroup/read.py), and the base is most of it: in an upsert
workload a base of 83,000 rows meets logs of a few thousand rows each. The
streaming engines treat every row alike (the sorted engine sorts each round
of base and log rows together; the hash engine streams the base in batches).
This engine does the per-key work on the log rows only:

    logs 1..k-1 ──concat──► select_winners ──► folded log winners (key order, `reset`, `deleted`)
                                                        │ look each up in the base:
    base (source 0) ─────────────────────────────────────┤  sorted base: binary search (NumPy, fixed-width keys)
                                                        │  unsorted base: Arrow's hash lookup (`index_in`)
                                     base row kept? log row kept? (the fold's rule, as in hashmerge.py)
                                                        │
                one `take` of the kept rows of [base, logs] ──► output

**Order.** When the base is strictly sorted by key (one vectorised check:
adjacent keys compared), the output is in key order: each kept log row is put
where its key falls in the base (`numpy.searchsorted` over the keys viewed as
``S<width>`` bytes, or Arrow's stable sort of all keys when they differ in
width), so the rows and their order are those of the sorted engine. Otherwise
the output is the kept base rows in base order, then the kept log rows in key
order, as the hash engine would give them (in some order).

**Repeated keys in the base.** A sorted base has none. An unsorted one is
checked with one pass: for keys of one byte width, a 64-bit hash of each key
computed with NumPy over the key bytes, sorted, and compared with its
neighbour (no two equal hashes: no two equal keys; equal hashes, a repeated
key or a collision, send it to the exact check); for other keys, and after a
hash match, Arrow's `unique`. A base that repeats a key is pre-folded first,
like the hash engine does.

**Folding in two halves** is exact for the reasons given in hashmerge.py: the
logs' pre-folded winner plus the ``reset`` flag (the logs hold a
delete-by-key) is all a base record needs to be compared with.

Simplified compared with Apache Hudi: Hudi's file-group reader merges a
base file with a spillable map of log records record by record; here the
whole slice must fit in memory (compaction, which streams, uses the sorted
engine instead).

Taught in: no chapter (every `Table.read()` merges with it; notebooks/06_merge_semantics.ipynb teaches the rule)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab import arrowlit
from lsm_lab.merge.semantics import (
    MergeMode,
    MergeSpec,
    bool_array,
    check_keys_not_null,
    fixed_width_keys,
    indices_array,
    key_prefixes,
    select_winners,
    to_numpy,
)

_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, odd: a multiplicative hash step
_SHIFT = np.uint64(29)
_NOT_FOUND = arrowlit.number(-1, pa.int32())  # `index_in`'s miss, filled without converting a Python value


def _as_array(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def strictly_sorted(keys: pa.Array) -> bool:
    """Whether every key is smaller than the next one (UTF-8 byte order; no key twice)."""
    n = len(keys)
    return n < 2 or bool(pc.all(pc.less(keys.slice(0, n - 1), keys.slice(1))).as_py())


def _fixed_hashes(fixed: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every ``S<width>`` key, computed over its bytes 8 at a time (a loop over words, not rows)."""
    n, width = len(fixed), fixed.dtype.itemsize
    rows = fixed.view(np.uint8).reshape(n, width)
    padded = -(-width // 8) * 8
    if padded != width:
        wide = np.zeros((n, padded), dtype=np.uint8)
        wide[:, :width] = rows
        rows = wide
    else:
        rows = np.ascontiguousarray(rows)
    words = rows.view(np.uint64)
    h = np.full(n, width, dtype=np.uint64)
    for i in range(words.shape[1]):
        h ^= words[:, i]
        h *= _MIX
        h ^= h >> _SHIFT
    return h


def has_repeated_key(keys: pa.Array) -> bool:
    """Whether a key occurs twice (exact: a hash match is confirmed by Arrow's `unique`)."""
    if len(keys) < 2:
        return False
    fixed = fixed_width_keys(keys)
    if fixed is not None:
        hashes = np.sort(_fixed_hashes(fixed))
        if not bool((hashes[1:] == hashes[:-1]).any()):
            return False  # all hashes differ, so all keys do
    return len(pc.unique(keys)) != len(keys)


def _fold(table: pa.Table, spec: MergeSpec) -> tuple[np.ndarray, pa.Table, np.ndarray, np.ndarray]:
    """The fold's winner of every key, in key order: (its row of `table`; the winners' key and ordering
    columns, the only ones the merge reads; its delete flag; its `reset` flag). The other columns are
    taken once, for the winners kept."""
    w = select_winners(table, spec)
    rows = w.rows
    compared = table.select([spec.key] + ([spec.ordering] if spec.ordering else []))
    if not (len(rows) == table.num_rows and bool((rows[1:] > rows[:-1]).all())):  # else: one row per key already
        compared = compared.take(indices_array(rows))
    return rows, compared, w.deleted, w.reset


def log_wins(base: pa.Table, base_rows: np.ndarray, folded: pa.Table, log_rows: np.ndarray,
              reset: np.ndarray, spec: MergeSpec) -> np.ndarray:
    """For matched (base row, log winner) pairs: does the log winner replace the base record?"""
    if spec.mode is MergeMode.COMMIT_TIME_ORDERING or len(base_rows) == 0:
        return np.ones(len(base_rows), dtype=bool)
    assert spec.ordering is not None
    b = _as_array(base.column(spec.ordering).take(indices_array(base_rows)))
    lo = _as_array(folded.column(spec.ordering).take(indices_array(log_rows)))
    ge = to_numpy(pc.greater_equal(lo, b).fill_null(arrowlit.FALSE))
    return cast("np.ndarray", reset[log_rows] | to_numpy(b.is_null()) | ge)


def _prefixes(fixed: np.ndarray) -> np.ndarray:
    """The first 8 bytes of every ``S<width>`` key as a big-endian integer (zero-padded): orders like the bytes."""
    return key_prefixes(fixed, 0)[0]


def _fixed_positions(fixed: np.ndarray, log_fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_positions` for keys of one byte width, searched as 8-byte integer prefixes when those are distinct."""
    n = len(fixed)
    prefix = _prefixes(fixed)
    if n > 1 and not bool((prefix[1:] > prefix[:-1]).all()):  # two base keys share a prefix: compare bytes
        at = np.searchsorted(fixed, log_fixed, side="left")
        hit = at < n
        hit[hit] = fixed[at[hit]] == log_fixed[hit]
        return at, hit
    log_prefix = _prefixes(log_fixed)
    at = np.searchsorted(prefix, log_prefix, side="left")
    same = at < n
    same[same] = prefix[at[same]] == log_prefix[same]
    # a log key with the prefix of base key `at` (at most one): equal, before it, or after it
    rows = np.flatnonzero(same)
    base_bytes, log_bytes = fixed[at[rows]], log_fixed[rows]
    hit = np.zeros(len(log_fixed), dtype=bool)
    hit[rows] = base_bytes == log_bytes
    at[rows[base_bytes < log_bytes]] += 1
    return at, hit


def _positions(base_keys: pa.Array, log_keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """For sorted, distinct base keys and log keys: (where each log key falls in the base, does it match)."""
    n = len(base_keys)
    fixed = fixed_width_keys(base_keys)
    log_fixed = fixed_width_keys(log_keys)
    if fixed is not None and log_fixed is not None and fixed.dtype == log_fixed.dtype:
        return _fixed_positions(fixed, log_fixed)
    # keys of several widths: Arrow's stable sort of both (base first, so a matching base key sorts just before)
    both = pa.concat_arrays([base_keys, log_keys])
    order = to_numpy(pc.sort_indices(both)).astype(np.int64, copy=False)
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    at = rank[n:] - np.arange(len(log_keys))  # base keys sorted before each log key (logs are in key order)
    before = np.maximum(at - 1, 0)
    hit = at > 0
    if n and hit.any():
        cand = base_keys.take(indices_array(before[hit]))
        hit[hit] = to_numpy(pc.equal(cand, log_keys.filter(bool_array(hit))).fill_null(arrowlit.FALSE))
    at = np.where(hit, before, at)
    return at, hit


def decoded(table: pa.Table) -> pa.Table:
    """`table` with its dictionary-encoded columns decoded to their value type."""
    if not any(pa.types.is_dictionary(t) for t in table.schema.types):
        return table
    fields = [f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f for f in table.schema]
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def merge_overlay(sources: Sequence[pa.Table], spec: MergeSpec) -> pa.Table:
    """Merge in-memory sources (0 = base, then logs in fold order) into one row per surviving key.

    Every source has the same schema (key, delete flag, ordering column as in
    `spec`), except that columns of the base other than those three may be
    dictionary-encoded: only the rows kept are decoded. Rows are in key order
    when source 0 is strictly sorted by key, else base rows first. The result's
    schema is the sources' without the delete column (and without dictionaries).
    """
    if not sources:
        raise ValueError("merge_overlay needs at least one source")
    for i, s in enumerate(sources):
        check_keys_not_null(s.column(spec.key), i)
    base = sources[0]
    base_keys = _as_array(base.column(spec.key))
    ordered = strictly_sorted(base_keys)
    if not ordered and has_repeated_key(base_keys):
        # keep one state per key, deletes included (a base delete still takes part)
        w = select_winners(base, spec)
        base = base.take(indices_array(np.sort(w.rows)))
        base_keys = _as_array(base.column(spec.key))
    n = base.num_rows
    logs = [s for s in sources[1:] if s.num_rows]
    base_deleted = to_numpy(_as_array(base.column(spec.delete)).fill_null(arrowlit.FALSE))
    if not logs:
        keep = np.flatnonzero(~base_deleted)
        out = base if len(keep) == n else base.take(indices_array(keep))
        return decoded(out.drop_columns([spec.delete]))
    # one contiguous table of log rows: Arrow's take over several chunks is ~2x slower than over one
    log_table = pa.concat_tables(logs).combine_chunks()
    winner_rows, folded, deleted, reset = _fold(log_table, spec)
    log_keys = _as_array(folded.column(spec.key))
    if ordered:
        at, hit = _positions(base_keys, log_keys)
        log_rows = np.flatnonzero(hit)
        base_rows = at[hit]
    else:
        # Arrow hashes the (fewer) log keys and probes them with every base key
        found = to_numpy(pc.index_in(base_keys, value_set=log_keys).fill_null(_NOT_FOUND)).astype(np.int64)
        base_rows = np.flatnonzero(found >= 0)
        log_rows = found[base_rows]
    wins = log_wins(base, base_rows, folded, log_rows, reset, spec)
    keep_base = ~base_deleted
    keep_base[base_rows[wins]] = False  # replaced (or deleted) by the log winner
    keep_log = ~deleted
    keep_log[log_rows[~wins]] = False  # the base record stays (a base delete stays deleted)
    b_idx = np.flatnonzero(keep_base)
    l_idx = np.flatnonzero(keep_log)
    base, log_table = base.drop_columns([spec.delete]), log_table.drop_columns([spec.delete])
    log_pick = winner_rows[l_idx]  # rows of log_table
    if not ordered:  # two takes: Arrow's take over a table of several chunks is ~2x slower than over one
        return pa.concat_tables([decoded(base.take(indices_array(b_idx))).cast(log_table.schema),
                                 log_table.take(indices_array(log_pick))])
    # each kept log row goes before the first kept base row whose key is not smaller
    log_pos = np.arange(len(l_idx)) + np.searchsorted(b_idx, at[l_idx], side="left")
    idx = np.empty(len(b_idx) + len(l_idx), dtype=np.int64)
    is_log = np.zeros(len(idx), dtype=bool)
    is_log[log_pos] = True
    idx[log_pos] = log_pick + n
    idx[~is_log] = b_idx
    return pa.concat_tables([decoded(base).cast(log_table.schema), log_table]).combine_chunks().take(
        indices_array(idx))


__all__ = ["decoded", "has_repeated_key", "log_wins", "merge_overlay", "strictly_sorted"]
