"""Which merge engine runs, and the one fallback: a sorted engine that meets unsorted input hands over to hash.

    requested engine ──► check_engine      unknown name → InputError listing ENGINES
          │ (None)
          ▼
    default_engine(lsm)                    lsm_tree: "sorted" (every file sorted by key)
          │                                default layout: "hash" (files in arrival order)
          ▼
    choose_engine(requested, lsm, inputs_sorted)
          │   a sorted engine, but a footer does not promise key order → "hash" (logged)
          ▼
    merge_to_table_safely(sources, spec, engine)   (lsm_lab.merge)
              a sorted engine that finds a key out of order anyway (InputError) → "hash" again (logged)

Every caller — slice reads, lookups, compaction, clustering, the CLI's `--merge`
choices — uses these, so the rule is the same everywhere: never a wrong row (the
hash engine accepts any order), and a fallback is never silent (a warning on the
`lsm_lab.merge` logger, counted by the caller where it keeps counters). A streaming
caller (compaction, clustering) writing as it merges catches the `InputError`
itself, drops what it wrote and calls `fell_back` before merging again with hash.

Simplified compared with Apache Hudi: Hudi picks its merger by configuration
(`hoodie.record.merge.strategy.id`, the file-group reader's hash map); RFC-103's sorted
merge is lsm_lab's default for `lsm_tree` tables, with this fallback for files whose
order a footer does not promise.

Taught in: notebooks/06_merge_semantics.ipynb
"""

from __future__ import annotations

import logging

from lsm_lab.errors import InputError

ENGINES: tuple[str, ...] = ("sorted", "loser_tree", "hash", "heapq")
SORTED_ENGINES: tuple[str, ...] = ("sorted", "loser_tree", "heapq")

log = logging.getLogger("lsm_lab.merge")


def check_engine(engine: str | None) -> str | None:
    """`engine` itself (None: the default), or `InputError` naming the choices."""
    if engine is not None and engine not in ENGINES:
        raise InputError(f"unknown merge engine {engine!r}; choose one of: {', '.join(ENGINES)}")
    return engine


def default_engine(lsm: bool) -> str:
    """The engine of a table's merges when none is asked for: sorted for lsm_tree tables, else hash."""
    return "sorted" if lsm else "hash"


def fell_back(engine: str, where: str, why: str) -> str:
    """Log a fallback from `engine` to hash (`where`: the slice or file group; `why`: the reason); "hash"."""
    log.warning("%s: %s: the %s merge needs key-sorted input; merging with hash instead", where, why, engine)
    return "hash"


def choose_engine(requested: str | None, *, lsm: bool, inputs_sorted: bool, where: str = "") -> str:
    """The engine to run: the one asked for (checked) or the table's default; hash when a sorted engine's
    inputs do not all promise key order. A default engine falls back quietly (the default layout's files are
    not sorted: that is no surprise); an engine the user asked for is logged."""
    chosen = check_engine(requested) or default_engine(lsm)
    if chosen in SORTED_ENGINES and not inputs_sorted:
        if requested is not None or lsm:
            fell_back(chosen, where or "merge", "an input's footer does not promise key order")
        return "hash"
    return chosen


__all__ = ["ENGINES", "SORTED_ENGINES", "check_engine", "choose_engine", "default_engine", "fell_back"]
