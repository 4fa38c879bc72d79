"""Position-based merge: apply a slice's logs to its base file by row number instead of by key.

When every log of a slice says where its records sit in the base file
(`RECORD_POSITIONS`, counted in the base whose instant is
`BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS`; format/positions.py), the
merge needs no key comparison at all:

    base rows        0    1    2    3    4    5
    log 1 (update)        ▲         ▲                positions {1, 3}
    log 2 (delete)                  ✗    ✗           positions {3, 4}
    winner           b0   l1   b2   –    –    b5     an int array per position: -1 = base, i = log i

Under commit-time ordering the latest log touching a position wins, and a
delete removes the row; the output is one `take` over the concatenated
sources, in base-file order (for a sorted base, key order).  Any log without
valid positions — an insert, a log counted against an older base, a compacted
or v1 log — sends the whole slice back to the key-based merge
(`PositionBasedFileGroupRecordBuffer` upstream falls back per block the same
way).

Under event-time ordering the winner of a position is decided by the ordering
field, as by key: `overlay_by_position` (the default snapshot read's, from
filegroup/read.py) folds the logs with the positions standing in for the keys and
compares each winner with the base row at its position, with the rules of
merge/overlay.py; the keys themselves are never compared or searched, and the
output's key column is the base's.

A log's positions come in its file order (format/positions.py): a native log
written by upstream Hudi keeps its records' arrival order, so its positions
may be unsorted, and a key written twice in one log repeats its position.
Neither merge needs them sorted; a repeated position is settled as a repeated
key is: under commit-time ordering the log's later record wins
(`last_of_each`), under event-time ordering the fold decides.

Writers (`positions_for`) attach positions to a log of updates or deletes
when every record is in the base file, sorting the records by position.
`hoodie.write.record.positions=false` turns that off.  The base's keys come
from a per-process cache of base-file key columns (`base_keys`): a base file
written by this process is remembered as it is written, any other is read
once; a stream of upserts then reads no base keys at all.

**A position is checked before it is trusted.** Both merges compare each log
record's key with the key of the base row its position names
(`positions_name_their_keys`: NumPy views of one-width keys; about a tenth of
a 1M-row read's CPU, `benchmarks/bench_read_cpu.py --trust-positions`); a RECORD_POSITIONS that decodes but names other rows
(damaged, or written by a hostile or buggy writer) sends the slice to the
merge by key instead of putting one record's values under another's key.
Hudi trusts the positions.

Simplified compared with Apache Hudi: positions are used only when every log
of the slice carries them; under event-time ordering only by the default
(in-memory) snapshot read, not by a named merge engine or compaction.

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab import arrowlit
from lsm_lab.filegroup import v1read
from lsm_lab.filegroup.fsview import DataFile, FileSlice
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import parquet_footer, parquet_read, positions
from lsm_lab.merge.overlay import decoded, log_wins
from lsm_lab.merge.records import DELETE_FLAG, RECORD_KEY, one_array
from lsm_lab.merge.semantics import (
    MergeMode,
    MergeSpec,
    bool_array,
    check_keys_not_null,
    fixed_width_keys,
    indices_array,
    select_winners,
    to_numpy,
)
from lsm_lab.timeline.config import TableConfig

KEY_WRITE_POSITIONS = "hoodie.write.record.positions"


def writes_positions(config: TableConfig) -> bool:
    return str(config.props.get(KEY_WRITE_POSITIONS, "true")).strip().lower() != "false"


#: bytes of base-file key columns kept in memory between writes (`remember_base_keys`)
BASE_KEY_CACHE_BYTES = 64 << 20
_base_keys: OrderedDict[tuple[str, int], pa.ChunkedArray] = OrderedDict()
_base_keys_lock = threading.Lock()


def remember_base_keys(path: object, size: int, keys: pa.ChunkedArray | pa.Array) -> None:
    """Keep a base file's key column, row by row as written, for the next writes' positions.

    Files are immutable and named once (instant, write token), so (path, size) names
    their content: a cached column is never stale.  The least recently used columns
    go first once `BASE_KEY_CACHE_BYTES` is exceeded (a 1M-row table of 36-byte keys
    holds ~40 MiB of them)."""
    col = keys if isinstance(keys, pa.ChunkedArray) else pa.chunked_array([keys])
    if col.nbytes > BASE_KEY_CACHE_BYTES:
        return
    with _base_keys_lock:
        _base_keys[(str(path), int(size))] = col
        _base_keys.move_to_end((str(path), int(size)))
        total = sum(c.nbytes for c in _base_keys.values())
        while total > BASE_KEY_CACHE_BYTES and _base_keys:
            total -= _base_keys.popitem(last=False)[1].nbytes


def forget_base_keys() -> None:
    """Drop every cached key column (tests and benchmarks that want cold writes)."""
    with _base_keys_lock:
        _base_keys.clear()


def base_keys(base: DataFile) -> pa.ChunkedArray:
    """A base file's `_hoodie_record_key` column in row order: from the cache, else read (and cached)."""
    key = (str(base.path), int(base.size))
    with _base_keys_lock:
        hit = _base_keys.get(key)
        if hit is not None:
            _base_keys.move_to_end(key)
            return hit
    col = parquet_read.read_parquet(base.path, [RECORD_KEY]).column(RECORD_KEY)
    remember_base_keys(base.path, base.size, col)
    return col


def positions_for(config: TableConfig, latest: FileSlice | None, rows: pa.Table) -> tuple[pa.Table, dict[str, str]]:
    """(rows in base-position order, footer entries) for a log of updates or deletes; ({} when not all are in the base)."""
    if (not writes_positions(config) or latest is None or latest.base_file is None
            or latest.base_file.name.ext != "parquet" or rows.num_rows == 0):
        return rows, {}
    base_keys_ = base_keys(latest.base_file)
    keys = one_array(rows.column(RECORD_KEY))
    # the base's rows looked up in the batch (a hash set of the batch's few keys, not of the whole base)
    row_of = pc.index_in(base_keys_, value_set=keys).combine_chunks()
    found = np.flatnonzero(row_of.is_valid().to_numpy(zero_copy_only=False))
    if len(found) != len(keys):  # an insert (or a key only in a log), or a base holding a key twice
        return rows, {}  # no positions for this block
    rows_at = row_of.filter(row_of.is_valid()).to_numpy(zero_copy_only=False).astype(np.int64)
    pos = np.full(len(keys), -1, dtype=np.int64)
    pos[rows_at] = found
    if (pos < 0).any():  # two base rows of one key took another key's place
        return rows, {}
    order = np.argsort(pos, kind="stable")
    if not np.all(order == np.arange(len(order))):
        rows, pos = rows.take(pa.array(order)), pos[order]
    return rows, positions.positions_header(pos, latest.base_instant)


def may_apply(spec: MergeSpec, fs: FileSlice) -> bool:
    """Whether `merge_sources` may merge `fs` by position (commit-time ordering, a base, v2 Parquet logs only)."""
    if spec.mode is not MergeMode.COMMIT_TIME_ORDERING or fs.base_file is None or not fs.log_files:
        return False
    return all(f.name.log_format == 2 and f.name.ext == "parquet" for f in fs.log_files)


def merge_sources(spec: MergeSpec, completion_of: dict[str, str], read_time: str | None, fs: FileSlice,
                  sources: Sequence[pa.Table], needed: Sequence[str]) -> pa.Table | None:
    """The slice merged by position, or None when some log carries no valid positions (merge by key).

    `sources` are `table/read.load_sources`'s: the base first, then one per log in
    merge order (`v1read.ordered_units`)."""
    if not may_apply(spec, fs):
        return None
    units = v1read.ordered_units(completion_of, read_time, fs)
    if len(units) != len(sources) - 1:
        return None
    base_rows = sources[0].num_rows
    src = np.zeros(base_rows, dtype=np.int64)       # 0 = the base, i = the i-th log source
    row = np.arange(base_rows, dtype=np.int64)
    deletes = []
    checks: list[tuple[pa.ChunkedArray, np.ndarray]] = []
    for i, unit in enumerate(units, start=1):
        f = unit.file
        header = v2.decode_footer(parquet_footer.footer(f.path), path=str(f.path))
        pos = positions.valid_positions(header, fs.base_instant, sources[i].num_rows, path=str(f.path))
        if pos is None or not _in_base(pos, base_rows):
            return None
        checks.append((sources[i].column(spec.key), pos))
        at, rows_at = last_of_each(pos)
        src[at] = i
        row[at] = rows_at
        if f.name.is_delete:
            deletes.append(i)
    if not positions_name_their_keys(sources[0].column(spec.key), checks):
        return None
    offsets = np.cumsum([0] + [s.num_rows for s in sources])
    keep = ~np.isin(src, deletes) if deletes else np.ones(base_rows, dtype=bool)
    take = (offsets[src] + row)[keep]
    names = sources[0].schema.names
    merged = pa.concat_tables([s.select(names) for s in sources]).take(pa.array(take))
    if DELETE_FLAG in merged.column_names:
        merged = merged.drop_columns([DELETE_FLAG])
    return merged.select(list(needed))


def _in_base(pos: np.ndarray, base_rows: int) -> bool:
    """Whether every position names a row of the base (any order: a list-form log keeps its file order)."""
    return not len(pos) or (int(pos.min()) >= 0 and int(pos.max()) < base_rows)


def last_of_each(pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, the row of the log that wins each) — for a repeated position, its last row in file order.

    Under commit-time ordering the later of two records of one key in one log wins (as
    `select_winners` folds a source in row order). A strictly ascending list (lsm_lab's
    own logs, any Roaring64 one) is returned as is; otherwise the last occurrence of each
    position is found on the reversed list (NumPy does not promise which of repeated
    indices a fancy assignment keeps)."""
    rows = np.arange(len(pos), dtype=np.int64)
    if len(pos) < 2 or bool((pos[1:] > pos[:-1]).all()):
        return pos, rows
    at, first_from_end = np.unique(pos[::-1], return_index=True)
    return at, len(pos) - 1 - first_from_end


def positions_name_their_keys(base_keys: pa.Array | pa.ChunkedArray,
                              logs: Sequence[tuple[pa.Array | pa.ChunkedArray, np.ndarray]]) -> bool:
    """Whether every log record's key is the key of the base row its position names.

    `logs`: (the log's keys, its positions) per log. A position stands in for the
    key only if it names the right row; a damaged or hostile RECORD_POSITIONS
    (it decodes, but names wrong rows) would otherwise put one record's values under
    another's key. Keys of one byte width (uuids, hashes) are compared as NumPy
    ``S<width>`` views, others with one Arrow `take` and comparison per log. On a
    mismatch the caller merges the slice by key, which needs no positions."""
    if any(len(pos) != len(keys) for keys, pos in logs):
        return False
    logs = [(keys, pos) for keys, pos in logs if len(pos)]
    if not logs:
        return True
    n = len(base_keys)
    if any(int(pos.min()) < 0 or int(pos.max()) >= n for _, pos in logs):
        return False  # a position past the base (a damaged RECORD_POSITIONS): merge by key
    strings = (pa.types.is_string, pa.types.is_large_string)
    base_fixed = fixed_width_keys(base_keys) if any(t(base_keys.type) for t in strings) else None
    for keys, pos in logs:
        log_fixed = fixed_width_keys(keys) if base_fixed is not None and any(t(keys.type) for t in strings) else None
        if base_fixed is not None and log_fixed is not None:
            if log_fixed.dtype != base_fixed.dtype or not bool((base_fixed[pos] == log_fixed).all()):
                return False
        elif pc.all(pc.equal(base_keys.take(indices_array(pos)), keys)).as_py() is not True:
            return False
    return True


def _log_positions(fs: FileSlice, key: str, sources: Sequence[pa.Table],
                   footers: Sequence[tuple[object, Mapping[str, str]] | None]) -> list[np.ndarray] | None:
    """Each log source's RECORD_POSITIONS in the slice's base (None when one log lacks valid ones).

    `footers`: (file, footer map) per log source, in the sources' order."""
    if fs.base_file is None or not footers or len(footers) != len(sources) - 1:
        return None
    if not all(f.name.log_format == 2 and f.name.ext == "parquet" for f in fs.log_files):
        return None
    base_rows = sources[0].num_rows
    found = []
    for footer, src in zip(footers, sources[1:], strict=True):
        if footer is None:
            return None
        path, kv = str(footer[0]), footer[1]
        header = v2.decode_footer(kv, path=path)
        pos = positions.valid_positions(header, fs.base_instant, src.num_rows, path=path)
        if pos is None or not _in_base(pos, base_rows):
            return None
        found.append(np.asarray(pos, dtype=np.int64))
    if not positions_name_their_keys(sources[0].column(key),
                                     [(src.column(key), pos) for src, pos in zip(sources[1:], found, strict=True)]):
        return None
    return found


def overlay_by_position(spec: MergeSpec, fs: FileSlice, sources: Sequence[pa.Table],
                        footers: Sequence[tuple[object, Mapping[str, str]] | None]) -> pa.Table | None:
    """`merge.overlay.merge_overlay` of a slice whose logs all carry valid positions, under event-time ordering.

    The key of a log record is replaced by its row number in the base: the logs
    are folded on those integers (`select_winners` over the positions viewed as
    8-byte big-endian strings, which order like the numbers), and each winner is
    compared with the base row at its position by `overlay.log_wins`, the rule
    `merge_overlay` applies after its key search. No key is compared or searched,
    and the output's key column is the base's, filtered: a position names its
    base row's key (trusted as `merge_sources` trusts it; the writer attaches
    positions only when every key is in that base, once). Rows come out in base
    order (key order for a sorted base, as `merge_overlay` gives them); a log
    row that wins takes its base row's place.

    `sources` are `load_sources`'s (base first, then one per log in merge order,
    delete flag included, base columns possibly dictionary-encoded) and `footers`
    the logs' (file, footer map) pairs it collected. None when the slice does not qualify
    (another merge mode, a log without valid positions): merge by key."""
    if spec.mode is not MergeMode.EVENT_TIME_ORDERING or spec.ordering is None or len(sources) < 2:
        return None
    found = _log_positions(fs, spec.key, sources, footers)
    if found is None:
        return None
    for i, s in enumerate(sources):
        check_keys_not_null(s.column(spec.key), i)
    base = sources[0]
    logs = pa.concat_tables(sources[1:])  # not combined: a log row is copied once, if it wins
    at_all = np.concatenate(found)
    # the fold, keyed by base position: 8 big-endian bytes per row order like the integers
    fixed = at_all.astype(">u8").view("S8")
    keyed = pa.table({spec.key: pa.Array.from_buffers(pa.binary(8), len(fixed), [None, pa.py_buffer(fixed)]),
                      spec.delete: one_array(logs.column(spec.delete)),
                      spec.ordering: one_array(logs.column(spec.ordering))})
    w = select_winners(keyed, spec, fixed_keys=fixed, common_prefix=0)
    at = at_all[w.rows]
    folded = keyed.select([spec.ordering]).take(indices_array(w.rows))
    wins = log_wins(base, at, folded, np.arange(len(at), dtype=np.int64), w.reset, spec)
    keep = ~to_numpy(one_array(base.column(spec.delete)).fill_null(arrowlit.FALSE))
    keep[at[wins & w.deleted]] = False  # deleted by the log winner
    replaced = wins & ~w.deleted
    keep[at[replaced]] = True
    base, logs = base.drop_columns([spec.delete]), logs.drop_columns([spec.delete])
    dropped = not bool(keep.all())
    kept = bool_array(keep)
    if not replaced.any():
        out = base.filter(kept) if dropped else base
        return decoded(out).cast(logs.schema)
    # a log winner takes the place of its base row, and the deleted rows go: each column is written once,
    # into the output. With no row dropped, the base's values with the winners' swapped in (one pass,
    # `replace_with_mask`, which takes the replacements in row order); with rows dropped, one gather from
    # the base's and the logs' chunks side by side (a swap, then a filter, would write it twice). No copy of
    # base and logs into one array first: at 16M rows each such copy was a fresh mapping of 50 MB or more,
    # paid in page faults (docs/PERFORMANCE.md, "Stop 41"). The key column is the base's (a position names
    # its row's key). A dictionary-encoded base column stays encoded until the rows are final
    # (`_swapped_indices`): its text is written once.
    where = at[replaced]
    order = np.argsort(where, kind="stable")
    where, winners = where[order], w.rows[replaced][order]
    rows = np.flatnonzero(keep) if dropped else None
    cols = [(base.column(f.name).filter(kept) if dropped else base.column(f.name)) if f.name == spec.key
            else _swapped(base.column(f.name), where, logs.column(f.name), winners, f.type, rows)
            for f in logs.schema]
    out = pa.Table.from_arrays(cols, schema=pa.schema([f.with_type(c.type) for f, c in zip(logs.schema, cols)],
                                                      metadata=logs.schema.metadata))
    return decoded(out).cast(logs.schema)


def _swapped(values: pa.ChunkedArray, where: np.ndarray, logs: pa.ChunkedArray, winners: np.ndarray,
             type_: pa.DataType, rows: np.ndarray | None = None) -> pa.ChunkedArray | pa.Array:
    """`values` with row `where[i]` (ascending) replaced by log row `winners[i]`, then only the rows `rows`
    (ascending; None: all) kept; of type `type_`, or still dictionary-encoded when `values` is a dictionary
    of `type_` (the caller decodes the final rows)."""
    if pa.types.is_dictionary(values.type) and values.type.value_type == type_:
        return _swapped_indices(values, where, logs, winners, rows)
    values = decoded(pa.table({"c": values})).column(0)
    if rows is None and _replaceable(type_):
        swap = np.zeros(len(values), dtype=bool)
        swap[where] = True
        return pc.replace_with_mask(values, bool_array(swap), one_array(logs.take(indices_array(winners))))
    # rows dropped, or a nested type (no replace kernel): one gather from base and logs side by side
    n = len(values)
    at = np.arange(n, dtype=np.int64)
    at[where] = n + winners
    return pa.chunked_array(values.chunks + logs.chunks, type=type_).take(indices_array(at if rows is None else at[rows]))


def _replaceable(t: pa.DataType) -> bool:
    """Whether Arrow's `replace_with_mask` has a kernel for `t` (flat types; not nested, dictionary or extension)."""
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t) or isinstance(t, pa.ExtensionType))


def _swapped_indices(values: pa.ChunkedArray, where: np.ndarray, logs: pa.ChunkedArray,
                     winners: np.ndarray, rows: np.ndarray | None = None) -> pa.Array:
    """`_swapped` of a dictionary-encoded base column (`load_sources`' read of few-valued text: a file name,
    a partition, a category), still encoded: the winners' values are encoded too, the dictionaries unified
    and the indices gathered, so that the text is written once, when the caller decodes the final rows
    (decoding the whole base column first wrote it once more: with that and the logs no longer combined,
    a 990,000-row read of the peers workload allocates ~1.1 GiB of Arrow memory instead of ~1.46;
    `lsm-lab bench startup` reports it)."""
    encoded = one_array(logs.take(indices_array(winners))).dictionary_encode()
    if encoded.type != values.type:
        encoded = encoded.cast(values.type)
    both = pa.chunked_array([*values.chunks, encoded], type=values.type).unify_dictionaries()
    n = len(values)
    at = np.arange(n, dtype=np.int64)
    at[where] = n + np.arange(len(where), dtype=np.int64)
    return both.combine_chunks().take(indices_array(at if rows is None else at[rows]))


__all__ = ["BASE_KEY_CACHE_BYTES", "KEY_WRITE_POSITIONS", "base_keys", "forget_base_keys", "last_of_each",
           "may_apply", "merge_sources", "overlay_by_position", "positions_for", "positions_name_their_keys",
           "remember_base_keys", "writes_positions"]
