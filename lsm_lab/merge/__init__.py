"""Merging a file slice's sources into one row per key.

``merge_sources(sources, spec, engine=...)`` is the one entry point the table
uses; the engines (``sorted``, ``loser_tree``, ``hash``, ``heapq``) give the
same rows, and all but ``hash`` give them in key order (UTF-8 byte order).
See semantics.py for the rules, loser_tree.py for the RFC-103 state machine,
sorted.py for the production engine, hashmerge.py for Hudi's classic merge.

This package's only code beyond re-exports is the small dispatch below.  The
engines are imported when a merge runs (and the loser tree's names on first use):
a snapshot read, which lays its logs over the base in memory (overlay.py,
filegroup/posmerge.py), loads none of them.

Taught in: notebooks/05_loser_tree.ipynb, notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.merge.policy import (
    ENGINES,
    SORTED_ENGINES,
    check_engine,
    choose_engine,
    default_engine,
    fell_back,
)
from lsm_lab.merge.semantics import MergeMode, MergeSpec, Source, fold, model_merge, prepare_sources

if TYPE_CHECKING:
    from lsm_lab.merge.loser_tree import LeafState, LeafView, LoserTree, MergeIterator, Step, trace_merge

#: names re-exported from the loser tree's module, imported on first use (PEP 562)
_LOSER_TREE_NAMES = frozenset({"LeafState", "LeafView", "LoserTree", "MergeIterator", "Step", "trace_merge"})


def __getattr__(name: str) -> Any:
    if name in _LOSER_TREE_NAMES:
        return getattr(importlib.import_module("lsm_lab.merge.loser_tree"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_merge(sources: Sequence[Source], spec: MergeSpec, *, engine: str = "sorted",
               batch_size: int = 65_536, read_ahead: bool = False, count_comparisons: bool = False,
               stats: dict[str, Any] | None = None) -> tuple[pa.Schema | None, Iterator[pa.RecordBatch]]:
    """Check the arguments now, and return (output schema or None, the lazy batch iterator).

    `read_ahead` (sorted engine): fetch each input's next batch on a thread.
    `count_comparisons` (heapq engine): count heap comparisons (slower).
    `stats`: a dict the engine fills with its counters when the iterator ends.
    """
    check_engine(engine)
    inputs, schema = prepare_sources(list(sources), spec, batch_size)
    if schema is None:
        return None, iter(())
    if engine == "sorted":
        from lsm_lab.merge.sorted import merge_sorted  # start-up: an engine is imported when it merges

        it = merge_sorted(inputs, schema, spec, batch_size, read_ahead=read_ahead, stats=stats)
    elif engine == "loser_tree":
        from lsm_lab.merge.loser_tree import merge_batches  # start-up: an engine is imported when it merges

        it = merge_batches(inputs, schema, spec, batch_size, stats=stats)
    elif engine == "heapq":
        from lsm_lab.merge.heap import merge_heapq  # start-up: an engine is imported when it merges

        it = merge_heapq(inputs, schema, spec, batch_size, count_comparisons=count_comparisons, stats=stats)
    else:
        from lsm_lab.merge.hashmerge import merge_hash  # start-up: an engine is imported when it merges

        it = merge_hash(inputs, schema, spec, batch_size, base_source=sources[0] if sources else None,
                        stats=stats)
    return spec.output_schema(schema), it


def merge_sources(sources: Sequence[Source], spec: MergeSpec, *, engine: str = "sorted",
                  batch_size: int = 65_536, read_ahead: bool = False, count_comparisons: bool = False,
                  stats: dict[str, Any] | None = None) -> Iterator[pa.RecordBatch]:
    """Merge `sources` (0 = base, then logs in completion order) into batches, one row per surviving key.

    The output schema is the input schema without ``spec.delete``. Sorted
    engines need every source sorted by key without repeats (`InputError`
    naming the source otherwise); ``hash`` accepts any order. Batches hold
    at most `batch_size` rows. Arguments are checked when called; the merge
    runs as the iterator is consumed.
    """
    return open_merge(sources, spec, engine=engine, batch_size=batch_size, read_ahead=read_ahead,
                      count_comparisons=count_comparisons, stats=stats)[1]


def merge_to_table(sources: Sequence[Source], spec: MergeSpec, *, engine: str = "sorted",
                   **kw: Any) -> pa.Table:
    """`merge_sources`, concatenated into one table."""
    schema, it = open_merge(sources, spec, engine=engine, **kw)
    if schema is None:
        raise InputError("cannot merge: no source has a schema (only empty iterables were given)")
    return pa.Table.from_batches(list(it), schema=schema)


def merge_to_table_safely(sources: Callable[[], Sequence[Source]], spec: MergeSpec, engine: str,
                          *, where: str = "", **kw: Any) -> pa.Table:
    """`merge_to_table(sources(), spec, engine=engine)`; when a sorted engine finds a key out of order after
    all (`InputError`), the hash engine on fresh sources (`sources` is called again)."""
    try:
        return merge_to_table(sources(), spec, engine=engine, **kw)
    except InputError as exc:
        if engine not in SORTED_ENGINES:
            raise
        fell_back(engine, where or "merge", str(exc).splitlines()[0])
        return merge_to_table(sources(), spec, engine="hash", **kw)


__all__ = [
    "ENGINES",
    "SORTED_ENGINES",
    "LeafState",
    "LeafView",
    "LoserTree",
    "MergeIterator",
    "MergeMode",
    "MergeSpec",
    "Source",
    "Step",
    "check_engine",
    "choose_engine",
    "default_engine",
    "fell_back",
    "fold",
    "merge_sources",
    "merge_to_table",
    "merge_to_table_safely",
    "model_merge",
    "open_merge",
    "trace_merge",
]
