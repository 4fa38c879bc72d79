"""The sorted engine: a streaming k-way merge that does its per-row work in Arrow.

A per-record loser tree (loser_tree.py) makes one Python step per record,
which tops out near 0.3M rows/s. This engine keeps the loser tree but feeds it
*batches*: each input's leaf holds the input's current record batch, keyed by
the batch's **last** key (its tail). Because every input is sorted, the
smallest tail ``t`` across all inputs is a safe horizon:

    input 0:  [a c f h | k ...]        current batch tails: h, g, m
    input 1:  [b c g | j ...]          t = min tail = g (the champion)
    input 2:  [d e g k m | ...]
              └── rows <= g ──┘        every row with key <= g is in a current batch
                                       (later batches only hold keys > their tail >= g)

1. ``t`` = the champion's key (the loser tree's job: find the smallest tail in
   O(log k) after each change, comparing Python strings, which order like
   UTF-8 bytes).
2. From every input, cut the rows with key <= ``t`` (binary search on the
   sorted key column, about log2(batch) scalar probes per input).
3. Concatenate the cuts in source order and resolve them with array kernels:
   one stable sort by key (so equal keys stay in source order), then the
   vectorised fold of semantics.py (``select_winners``), then one ``take``.
   When every key of the round has the same byte width (uuids, hashes,
   fixed-format ids) the keys are viewed as a NumPy ``S<width>`` array without
   copying them, and each becomes an order-preserving ``uint64``: the 8 bytes
   after the prefix every key of the round shares (the common prefix of the
   smallest first key and the horizon), big-endian. NumPy's stable sort
   (timsort) of those integers merges the k sorted cuts in O(n log k), several
   times faster than sorting byte strings; the rare runs of one integer that
   hold different keys are sorted again by the whole key (semantics.py,
   ``prefix_sort``). Keys of mixed widths go through Arrow's ``sort_indices``.
   A cut from a single input needs no sort at all.
4. Pop the champion's group (every input whose tail was ``t``: their batches
   are used up) and advance those inputs: the tree reads their next batches.

**Rounds in parts (off by default).** Runs whose keys are spread alike have
their batches end at nearly the same keys, so one round takes nearly all k
batches (k x batch rows) and the next few take slivers. Any key h < t is a
valid horizon too, so with `ROUND_BATCHES` > 0 (the environment's
`LSM_LAB_MERGE_ROUND_BATCHES`, or `round_rows=`) a round of
more than that many batches of rows is resolved in parts: the keys of the input
with the most rows in the round, every `step` rows, are the parts' horizons
(`_sub_horizons`). The resolver's temporaries are then about one batch, not k
batches: a lower peak RSS, for more rounds and 1.02-1.10x the CPU (issue 33,
docs/PERFORMANCE.md "Stop 41: merge memory"), so it is not the default.

Memory stays O(k x batch): at most one batch per input plus one cut. The loser
tree keeps its role: it is the same state machine (``LoserTree``), its leaves'
records are batches and its keys are batch tails (which strictly increase
inside an input, so they are valid sorted inputs), and popping a key group is
exactly "all inputs whose batch ends at t".

**Checks while streaming.** Each batch is checked to be strictly increasing
(one vectorised ``less`` over adjacent integer prefixes, whole keys compared
only where two prefixes are equal) and to start after the previous batch's
tail; a violation raises `InputError` naming the source index.

**Threads.** With ``read_ahead=True`` each input reads and checks its next
batch on a small thread pool while the merge works on the current one, and
each round is resolved on a worker thread while the next rounds are cut (up to
`ROUNDS_IN_FLIGHT`). Arrow and NumPy release the GIL in their kernels, so on two
cores decoding, merging and (in files.py) encoding overlap:

    readers (pool)  ──batches──▶  main: loser tree + cuts  ──rounds──▶  resolver  ──▶  caller / writer thread

Simplified compared with Apache Hudi: RFC-103 describes a record-at-a-time
loser tree over Avro/Spark rows; here the tree orders batches and the records
are merged by array kernels, which gives the same rows (checked against the
per-record engine by the mirror tests).

Taught in: notebooks/06_merge_semantics.ipynb, notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import bisect
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import InputError
from lsm_lab.merge.loser_tree import LoserTree
from lsm_lab.merge.semantics import (
    MergeSpec,
    SourceInput,
    check_keys_not_null,
    first_unsorted,
    fixed_width_keys,
    merge_resolved,
    to_numpy,
)

T = TypeVar("T")
_END = object()
_READ_THREADS = 1  # one reader thread: decoding needs one core; more threads only add allocator arenas (and no speed)
#: rounds cut ahead of the one being handed to the caller: with two, the cutting stalled whenever a round waited
#: for the resolver (the k-way merge: -11% wall time with three and the writer's deeper queue, PERFORMANCE.md
#: "Seventh pass"); each round holds at most one batch per input, so memory stays O(k x batch)
ROUNDS_IN_FLIGHT = 3
#: with ROUND_BATCHES > 0 a round holds at most about this many merge batches of rows, and never needs to
#: hold fewer than MIN_ROUND_ROWS: a larger one is resolved in parts (`_sub_horizons`). Off (0) by default:
#: at 16M rows, k = 8 it lowered the peak RSS by ~40 MiB (1M rows: by ~20), not the 16M/1M ratio below 1.2,
#: for 1.02-1.10x the CPU (more rounds; docs/PERFORMANCE.md, "Stop 41: merge memory"). Small rounds cost little memory,
#: and splitting them only adds rounds (and smaller output batches)
ROUND_BATCHES = 0
MIN_ROUND_ROWS = 32_768
ROUND_BATCHES_VARIABLE = "LSM_LAB_MERGE_ROUND_BATCHES"  # overrides ROUND_BATCHES (benchmarks/merge_memory.py --env)


def _round_batches() -> int:
    text = os.environ.get(ROUND_BATCHES_VARIABLE)
    try:
        return max(0, int(text)) if text else ROUND_BATCHES
    except ValueError:
        raise InputError(f"{ROUND_BATCHES_VARIABLE} must be a whole number of batches, not {text!r}") from None


@dataclass(frozen=True)
class _Batch:
    """A checked input batch: the rows, their keys as ``S<width>`` (when of one width), the last key."""

    rows: pa.RecordBatch
    fixed: np.ndarray | None
    tail: str


def _checked(inp: SourceInput, key: str) -> Iterator[_Batch]:
    """An input's non-empty batches, checked for null keys and strict key order (also across batches)."""
    last: str | None = None
    for batch in inp.batches():
        n = batch.num_rows
        if n == 0:
            continue
        keys = batch.column(key)
        check_keys_not_null(keys, inp.index)
        first = keys[0].as_py()
        if last is not None and not (last < first):
            raise InputError(f"source {inp.index}: keys are not strictly sorted "
                             f"({last!r} at the end of a batch is followed by {first!r})")
        fixed = fixed_width_keys(keys)
        if n > 1:
            if fixed is not None:
                i = first_unsorted(fixed)
            else:
                ok_arr = pc.less(keys.slice(0, n - 1), keys.slice(1))
                i = -1 if pc.all(ok_arr).as_py() else int(np.flatnonzero(~to_numpy(ok_arr))[0])
            if i >= 0:
                raise InputError(f"source {inp.index}: keys are not strictly sorted "
                                 f"({keys[i].as_py()!r} is followed by {keys[i + 1].as_py()!r})")
        last = keys[n - 1].as_py()
        yield _Batch(batch, fixed, last)


class _Keys:
    """A read-only sequence view of a key column for `bisect` (Python str per probe)."""

    __slots__ = ("_arr",)

    def __init__(self, arr: pa.Array) -> None:
        self._arr = arr

    def __len__(self) -> int:
        return len(self._arr)

    def __getitem__(self, i: int) -> str:
        return str(self._arr[i].as_py())


@dataclass(frozen=True)
class _Piece:
    source: int
    rows: pa.RecordBatch
    fixed: np.ndarray | None


class _Run:
    """One input of the merge: the unconsumed rest of its current batch, and its batch stream."""

    def __init__(self, index: int, key: str, batches: Iterator[_Batch]) -> None:
        self.index = index
        self.key_name = key
        self.batches = batches
        self.rest: pa.RecordBatch | None = None
        self.fixed: np.ndarray | None = None

    def stream(self) -> Iterator[tuple[str, None]]:
        """The loser tree's view of this input: one item per batch, keyed by its last key."""
        for b in self.batches:
            self.rest, self.fixed = b.rows, b.fixed
            yield b.tail, None
        self.rest, self.fixed = None, None

    def count(self, horizon: str, horizon_bytes: bytes) -> int:
        """How many rows of the current batch have a key <= horizon."""
        rest = self.rest
        if rest is None or rest.num_rows == 0:
            return 0
        fixed = self.fixed
        if fixed is not None and fixed.dtype.itemsize == len(horizon_bytes):
            return int(np.searchsorted(fixed, horizon_bytes, side="right"))
        keys = rest.column(self.key_name)
        n = int(rest.num_rows)
        if keys[0].as_py() > horizon:
            return 0
        if keys[n - 1].as_py() <= horizon:
            return n
        return int(bisect.bisect_right(_Keys(keys), horizon, 0, n))

    def cut(self, horizon: str, horizon_bytes: bytes) -> _Piece | None:
        """Take the rows with key <= horizon from the current batch (None when there are none)."""
        i = self.count(horizon, horizon_bytes)
        if i == 0:
            return None
        rest, fixed = self.rest, self.fixed
        assert rest is not None
        n = rest.num_rows
        if i == n:
            self.rest, self.fixed = rest.slice(n), None if fixed is None else fixed[n:]
            return _Piece(self.index, rest, fixed)
        self.rest = rest.slice(i)
        self.fixed = None if fixed is None else fixed[i:]
        return _Piece(self.index, rest.slice(0, i), None if fixed is None else fixed[:i])


def _sub_horizons(runs: Sequence[_Run], horizon: str, horizon_bytes: bytes, limit: int) -> list[tuple[str, bytes]]:
    """Horizons below `horizon` that split its round into rounds of about `limit` rows (none when it is smaller).

    Every key <= horizon is in a current batch, so any key h < horizon is a valid horizon too: the rows
    <= h form a round of their own. The run with the most rows in the round guides: its keys at every
    `step` rows, so each part holds about `limit` rows when the runs are alike (and never more rows than
    the whole round).
    """
    counts = [run.count(horizon, horizon_bytes) for run in runs]
    total = sum(counts)
    if total <= limit:
        return []
    guide = max(range(len(runs)), key=counts.__getitem__)
    rows = counts[guide]
    step = max(1, rows * limit // total)
    rest = runs[guide].rest
    assert rest is not None
    keys = rest.column(runs[guide].key_name)
    out = []
    for i in range(step - 1, rows - 1, step):  # strictly below the guide's last key <= horizon
        key = keys[i].as_py()
        out.append((key, key.encode("utf-8")))
    return out


def _read_ahead(it: Iterator[T], pool: ThreadPoolExecutor) -> Iterator[T]:
    """Yield the items of `it` while the next one is being fetched on `pool`."""
    future = pool.submit(next, it, _END)
    while True:
        item = future.result()
        if item is _END:
            return
        future = pool.submit(next, it, _END)
        yield item  # type: ignore[misc]


def _resolve(pieces: list[_Piece], spec: MergeSpec, horizon: bytes) -> pa.Table:
    """Merge one round's cuts (in source order) into one row per surviving key, in key order."""
    table = pa.Table.from_batches([p.rows for p in pieces])
    if len(pieces) == 1:
        return merge_resolved(table, spec, presorted=True)
    fixed = None
    widths = {p.fixed.dtype.itemsize if p.fixed is not None else -1 for p in pieces}
    if len(widths) == 1 and -1 not in widths:
        parts = [p.fixed for p in pieces if p.fixed is not None]
        fixed = np.concatenate(parts)
        # every key of the round lies between the smallest first key and the horizon (the largest),
        # so it shares their common prefix: the integer prefixes start after it
        lowest = min(bytes(part[:1].view(np.uint8)) for part in parts)
        common = next((i for i, (a, b) in enumerate(zip(lowest, horizon)) if a != b), min(len(lowest), len(horizon)))
        return merge_resolved(table, spec, fixed_keys=fixed, common_prefix=common)
    return merge_resolved(table, spec, fixed_keys=fixed)


def merge_sorted(inputs: Sequence[SourceInput], schema: pa.Schema, spec: MergeSpec, batch_size: int, *,
                 read_ahead: bool = False, stats: dict[str, Any] | None = None,
                 round_rows: int | None = None) -> Iterator[pa.RecordBatch]:
    """The ``sorted`` engine: merged batches (at most `batch_size` rows) in key order.

    With `read_ahead`, inputs are read and checked one batch ahead on a small
    thread pool, and each round is resolved on a worker thread while the next
    round is cut (`ROUNDS_IN_FLIGHT` rounds in flight at most).
    """
    out_schema = spec.output_schema(schema)
    pool = ThreadPoolExecutor(max_workers=_READ_THREADS,
                              thread_name_prefix="lsm-merge-read") if read_ahead else None
    resolver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lsm-merge-resolve") if read_ahead else None
    try:
        runs = []
        for inp in inputs:
            batches = _checked(inp, spec.key)
            runs.append(_Run(inp.index, spec.key, _read_ahead(batches, pool) if pool else batches))
        tree: LoserTree[str, None] = LoserTree([run.stream() for run in runs])
        rounds = sorted_cuts = 0
        pending: deque[Future[pa.Table]] = deque()

        def emit(merged: pa.Table) -> Iterator[pa.RecordBatch]:
            for batch in merged.to_batches(max_chunksize=batch_size):
                if batch.num_rows:
                    yield batch if batch.schema.equals(out_schema) else \
                        pa.RecordBatch.from_arrays(batch.columns, schema=out_schema)

        def resolve(pieces: list[_Piece], horizon_bytes: bytes) -> Iterator[pa.RecordBatch]:
            """Resolve one round (here, or on the resolver thread) and hand out what is done."""
            nonlocal rounds, sorted_cuts
            rounds += 1
            sorted_cuts += len(pieces) > 1
            if resolver is None:
                yield from emit(_resolve(pieces, spec, horizon_bytes))
                return
            pending.append(resolver.submit(_resolve, pieces, spec, horizon_bytes))
            # hand out every round already resolved (the first batch does not wait for a full queue),
            # and block on the oldest only when ROUNDS_IN_FLIGHT are in flight
            while pending and (len(pending) >= ROUNDS_IN_FLIGHT or pending[0].done()):
                yield from emit(pending.popleft().result())

        parts_of = _round_batches()
        limit = round_rows if round_rows is not None else parts_of and max(parts_of * batch_size, MIN_ROUND_ROWS)
        while not tree.is_exhausted():
            head = tree.peek()
            assert head is not None
            horizon = head[0]
            horizon_bytes = horizon.encode("utf-8")
            # a round that would hold more than `limit` rows is resolved in parts (see ROUND_BATCHES)
            for sub, sub_bytes in (_sub_horizons(runs, horizon, horizon_bytes, limit) if limit > 0 else ()):
                yield from resolve([piece for run in runs if (piece := run.cut(sub, sub_bytes)) is not None], sub_bytes)
            pieces = [piece for run in runs if (piece := run.cut(horizon, horizon_bytes)) is not None]
            # every input whose batch ended at the horizon is used up: advance those (the tree reads)
            tree.pop_group()
            tree.advance_popped()
            yield from resolve(pieces, horizon_bytes)
        while pending:
            yield from emit(pending.popleft().result())
        if stats is not None:
            stats.update(rounds=rounds, sorted_cuts=sorted_cuts, tree_comparisons=tree.comparisons)
    finally:
        for executor in (pool, resolver):
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)


__all__ = ["merge_sorted"]
