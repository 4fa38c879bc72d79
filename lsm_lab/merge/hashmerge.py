"""The hash merge: Hudi's classic way to read a file slice.

Hudi's merge-on-read reader (``HoodieMergedLogRecordScanner``, upstream
``hudi-common/.../common/table/log/HoodieMergedLogRecordScanner.java``) reads every
log block of the slice into one map keyed by record key (its ``records``, an
``ExternalSpillableMap<String, HoodieRecord>``), folding records of the same key
as it goes (``processNextRecord``: ``records.get(key)``, pre-combine, ``put``);
then the base file is streamed, each base record merged with the map entry of
its key (one O(1) ``get``), and finally the entries no base record claimed are
emitted (inserts that only exist in logs). The same here, vectorised:

    logs 1..k-1 ──fold (select_winners)──▶ folded: one row per log key + deleted, reset
                └──KeyMap(folded keys)──▶ hash table key -> row of folded: built ONCE
    base (source 0) ──stream──▶ per batch: KeyMap.find(batch keys) ──▶ merge ──▶ output (base order)
                                    └──▶ then: folded rows no base key found (log-only keys)

The cost is linear: the log records are hashed once into the table
(merge/keymap.py), each base key is hashed once and probed in O(1) expected,
whatever the number of base batches. (Until issue 33 each base batch called
``pyarrow.compute.index_in(batch keys, value_set=log keys)``, which rebuilds
Arrow's hash set of every log key on every call: O(base batches x log records),
86 s instead of about 1 s for chapter 10's 1.6M rows in 1,024-row batches;
``benchmarks/hash_scaling.py`` times both.)

It needs no sorted input, which is why the table falls back to it for slices
written before the LSM layout was switched on; the price is a map of every log
record in memory (the sorted engine needs O(k x batch)).

**Memory budget.** The map holds the folded log records (one Arrow row per
distinct log key, every column) plus 16 to 24 bytes per key of hash table
(merge/keymap.py); `stats` reports both as ``map_records`` and ``map_bytes``.
While the logs are read and folded, their rows before folding are held once
too. The budget is therefore the size of the slice's log records; nothing is
spilled. Hudi bounds the in-memory part of its map instead (``HoodieMemoryConfig``:
for compaction ``hoodie.memory.compaction.max.size``, unset by default and then
``hoodie.memory.compaction.fraction`` = 0.6 of the memory Spark leaves to user
code, at least 100 MiB, 1 GiB without Spark; ``hoodie.memory.merge.max.size``,
1 GiB, for merges while writing) and spills the entries beyond it to a disk map
(BitCask files or RocksDB), each later ``get`` of a spilled key a disk read. A slice whose logs do not fit in memory should be
merged with the sorted engine, which streams.

**Folding in two halves.** The fold of semantics.py is a left fold over the
sources, but here the logs are folded *before* the base is seen. That is exact
because of the vectorised form: the logs' pre-folded winner plus one flag,
``reset`` ("the logs contain a delete-by-key"), is all the base needs. If
``reset`` is set the base cannot matter; otherwise the log winner replaces the
base record iff it would in the fold (commit time: always; event time:
ordering value ``>=`` the base's, nulls lowest).

**Repeated keys inside a source.** The hash engine accepts them: inside one
source the later row wins, as if it came from a later source (the same rule
`model_merge` applies). Log sources are folded whole. The base is handled per
batch; a base given as a `pyarrow.Table` or `RecordBatch` is checked as a
whole (one hash pass) and pre-folded if it repeats a key. A base given as
a stream is assumed not to repeat a key *across* its batches, like a Hudi base
file (checking that would need a set of every base key).

Simplified compared with Apache Hudi: no spilling (above), and the map is
an Arrow table of pre-folded log records with a NumPy hash table from key to
row (merge/keymap.py), probed a batch of base keys at a time (the whole base
at once when it is in memory), not a map of Avro records probed one record at
a time.

Taught in: notebooks/06_merge_semantics.ipynb, notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab import arrowlit
from lsm_lab.merge.keymap import KeyMap
from lsm_lab.merge.semantics import (
    MergeMode,
    MergeSpec,
    Source,
    SourceInput,
    check_keys_not_null,
    select_winners,
    to_numpy,
)


def _log_map(logs: Sequence[SourceInput], schema: pa.Schema,
             spec: MergeSpec) -> tuple[pa.Table, np.ndarray, np.ndarray, KeyMap]:
    """Fold every log record into (table of winners, deleted, reset, the map: winner's key -> its row)."""
    batches: list[pa.RecordBatch] = []
    for inp in logs:
        for batch in inp.batches():
            if batch.num_rows:
                check_keys_not_null(batch.column(spec.key), inp.index)
                batches.append(batch)
    table = pa.Table.from_batches(batches, schema=schema)
    winners = select_winners(table, spec)
    folded = table.take(pa.array(winners.rows, type=pa.int64()))
    del table, batches
    # the map, built once: every base batch probes it (Hudi's ExternalSpillableMap.get per base record)
    return folded, winners.deleted, winners.reset, KeyMap(folded.column(spec.key))


def _log_wins(base: pa.RecordBatch, base_rows: np.ndarray, folded: pa.Table, log_rows: np.ndarray,
              reset: np.ndarray, spec: MergeSpec) -> np.ndarray:
    """For matched (base row, log winner) pairs: does the log winner replace the base record?"""
    if spec.mode is MergeMode.COMMIT_TIME_ORDERING or len(base_rows) == 0:
        return np.ones(len(base_rows), dtype=bool)
    assert spec.ordering is not None
    b = base.column(spec.ordering).take(pa.array(base_rows, type=pa.int64()))
    lo = folded.column(spec.ordering).take(pa.array(log_rows, type=pa.int64()))
    lo = lo.combine_chunks() if isinstance(lo, pa.ChunkedArray) else lo
    ge = to_numpy(pc.greater_equal(lo, b).fill_null(arrowlit.FALSE))
    base_null = to_numpy(b.is_null())
    return cast("np.ndarray", reset[log_rows] | base_null | ge)


def merge_hash(inputs: Sequence[SourceInput], schema: pa.Schema, spec: MergeSpec,
               batch_size: int, base_source: Source | None = None,
               stats: dict[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
    """Merge with a map of log records, streaming the base (source 0). Output order is unspecified.

    `stats` (when given) receives, once the merge ends: ``map_records`` (folded log records in the map),
    ``map_bytes`` (their Arrow buffers plus the hash table), ``map_probes`` (lookups of a batch of base keys)."""
    if not inputs:
        return
    out_schema = spec.output_schema(schema)
    folded, deleted, reset, log_map = _log_map(inputs[1:], schema, spec)
    used = np.zeros(folded.num_rows, dtype=bool)

    base_batches: Iterator[pa.RecordBatch] = inputs[0].batches()
    # a whole base (a Table or RecordBatch) is checked for repeated keys once, and probed once (`found_all`)
    found_all: np.ndarray | None = None
    if isinstance(base_source, (pa.Table, pa.RecordBatch)) and base_source.num_rows:
        keys = base_source.column(spec.key)
        check_keys_not_null(keys, 0)
        if len(pc.unique(keys)) != base_source.num_rows:  # a hash pass (count_distinct is ~2x slower)
            whole = base_source if isinstance(base_source, pa.Table) else pa.Table.from_batches([base_source])
            # keep one state per key, deletes included (a base delete still takes part)
            w = select_winners(whole, spec)
            whole = whole.take(pa.array(np.sort(w.rows), type=pa.int64()))
            base_batches = iter(whole.to_batches(max_chunksize=batch_size))
            keys = whole.column(spec.key)
        found_all = log_map.find(keys)
    at = 0  # rows of the whole base consumed so far
    probes = 0

    for batch in base_batches:
        if batch.num_rows == 0:
            continue
        keys_arr = batch.column(spec.key)
        if found_all is not None:  # checked above: no key twice in the whole base
            found = found_all[at:at + batch.num_rows]
            at += batch.num_rows
        else:
            check_keys_not_null(keys_arr, 0)
            if batch.num_rows > 1 and not pc.all(pc.less(keys_arr.slice(0, batch.num_rows - 1),
                                                         keys_arr.slice(1))).as_py():
                # not strictly sorted: maybe a repeated key inside the batch; fold it first
                w = select_winners(batch, spec)
                if len(w.rows) != batch.num_rows:
                    batch = batch.take(pa.array(np.sort(w.rows), type=pa.int64()))
                    keys_arr = batch.column(spec.key)
            # the map lookup, vectorised: the batch's keys hashed and looked up in the map built once
            found = log_map.find(keys_arr)
            probes += 1
        matched = found >= 0
        base_rows = np.flatnonzero(matched)
        log_rows = found[matched]
        used[log_rows] = True
        wins = _log_wins(batch, base_rows, folded, log_rows, reset, spec)
        base_deleted = to_numpy(batch.column(spec.delete).fill_null(arrowlit.FALSE))
        keep_base = ~matched & ~base_deleted
        keep_base[base_rows[~wins & ~base_deleted[base_rows]]] = True
        take_log = log_rows[wins & ~deleted[log_rows]]
        if keep_base.any():
            yield from _batched(pa.Table.from_batches([batch]).filter(pa.array(keep_base))
                                .drop_columns([spec.delete]), out_schema, batch_size)
        if len(take_log):
            yield from _batched(folded.take(pa.array(take_log, type=pa.int64())).drop_columns([spec.delete]),
                                out_schema, batch_size)

    rest = np.flatnonzero(~used & ~deleted)
    if len(rest):
        yield from _batched(folded.take(pa.array(rest, type=pa.int64())).drop_columns([spec.delete]),
                            out_schema, batch_size)
    if stats is not None:
        stats.update(map_records=folded.num_rows, map_bytes=int(folded.nbytes) + log_map.nbytes,
                     map_probes=probes if found_all is None else 1)


def _batched(table: pa.Table, schema: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    for b in table.to_batches(max_chunksize=batch_size):
        if b.num_rows:
            yield b if b.schema.equals(schema) else pa.RecordBatch.from_arrays(b.columns, schema=schema)


__all__ = ["merge_hash"]
