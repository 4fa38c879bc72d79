"""The heapq engine: the textbook k-way merge, as a reference.

Python's ``heapq.merge`` keeps the k inputs' heads in a binary heap and yields
the smallest. Each input becomes a stream of ``(key, source, row)`` tuples, so
the heap orders by key and then by source index, exactly the order the loser
tree uses; ``itertools.groupby`` then gathers one key's records (in source
order) and ``semantics.fold`` merges them:

    input 0: (a,0,..) (c,0,..)  ─┐
    input 1: (a,1,..) (b,1,..)  ─┼─ heapq.merge ─▶ (a,0) (a,1) │ (b,1) │ (c,0) ─▶ fold per key
    input 2: (c,2,..)           ─┘                 └─ group a ─┘

A binary heap pays up to two comparisons per level when it sifts (``heapq``
uses a sift-to-leaf-then-up strategy), where a loser tree pays exactly one per
level; ``count_comparisons=True`` wraps the items to count them, for the
benchmark's comparisons-per-record column.

Simplified compared with Apache Hudi: Hudi has no heap-based merge; this
engine exists to check the others and to give the loser tree a baseline.

Taught in: notebooks/05_loser_tree.ipynb, notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.merge.semantics import MergeSpec, SourceInput, check_keys_not_null, fold, surviving_row


class _Counter:
    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


class _Item:
    """A heap item that counts its comparisons (only with ``count_comparisons=True``)."""

    __slots__ = ("counter", "key", "row", "source")

    def __init__(self, key: str, source: int, row: Mapping[str, Any], counter: _Counter) -> None:
        self.key, self.source, self.row, self.counter = key, source, row, counter

    def __lt__(self, other: _Item) -> bool:
        self.counter.n += 1
        return (self.key, self.source) < (other.key, other.source)


def _tuples(inp: SourceInput, spec: MergeSpec) -> Iterator[tuple[str, int, dict[str, Any]]]:
    key, src = spec.key, inp.index
    last: str | None = None
    for batch in inp.batches():
        if batch.num_rows == 0:
            continue
        check_keys_not_null(batch.column(key), src)
        for row in batch.to_pylist():
            k = row[key]
            if last is not None and not (last < k):
                raise InputError(f"source {src}: keys are not strictly sorted ({last!r} is followed by {k!r})")
            last = k
            yield k, src, row


def merge_heapq(inputs: Sequence[SourceInput], schema: pa.Schema, spec: MergeSpec, batch_size: int, *,
                count_comparisons: bool = False,
                stats: dict[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
    """The ``heapq`` engine: merged batches in key order."""
    out_schema = spec.output_schema(schema)
    counter = _Counter()
    records = 0
    buf: list[dict[str, Any]] = []
    rows_of: Callable[[Iterable[Any]], Iterator[Any]]
    if count_comparisons:
        streams = [(_Item(k, s, r, counter) for k, s, r in _tuples(inp, spec)) for inp in inputs]
        merged: Iterator[Any] = heapq.merge(*streams)
        groups: Iterator[tuple[str, Iterator[Any]]] = itertools.groupby(merged, key=lambda item: item.key)
        rows_of = lambda items: (item.row for item in items)  # noqa: E731
    else:
        merged = heapq.merge(*[_tuples(inp, spec) for inp in inputs])
        groups = itertools.groupby(merged, key=lambda item: item[0])
        rows_of = lambda items: (item[2] for item in items)  # noqa: E731
    for _key, items in groups:
        group = list(rows_of(items))
        records += len(group)
        row = surviving_row(fold(group, spec), spec)
        if row is not None:
            buf.append(row)
            if len(buf) >= batch_size:
                yield pa.RecordBatch.from_pylist(buf, schema=out_schema)
                buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=out_schema)
    if stats is not None:
        stats["records"] = records
        if count_comparisons:
            stats["comparisons"] = counter.n


__all__ = ["merge_heapq"]
