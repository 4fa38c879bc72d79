"""lsm_lab: the LSM tree layout of Apache Hudi RFC-103, for real, with a notebook series.

The public API, re-exported here (see docs/ARCHITECTURE.md for the layers):

    create_table, open_table, Table          a table: write, read, inspect
    TableState                               what services read: timeline, schema, files (Table is one)
    Instant, State                           one action on the timeline
    InstantTime, TimeLike, FilterLike        a validated instant time; what a time or a filter argument takes
    footers                                  decoded Parquet footers of a table's files
    LookupStats                              what a point lookup read and skipped
    MergeMode, MergeSpec, merge_sources      the merge engines
    LsmLabError and subclasses               every error lsm_lab raises on purpose

Taught in: notebooks/00_why_lsm.ipynb, notebooks/01_build_a_table.ipynb
"""

import logging
import os
from typing import TYPE_CHECKING, Any

from lsm_lab.errors import (
    ConflictError,
    CorruptFileError,
    CorruptTableError,
    InputError,
    LostCommitError,
    LsmLabError,
    MissingDependencyError,
    PartitionValueError,
    RetentionError,
    SchemaError,
    TableConfigError,
    TableNotFoundError,
    TimelineError,
    TimeTravelError,
    UnsafePathError,
    UnsupportedFeatureError,
)

if os.name != "posix":  # the local table lock, heartbeats and the instant clock are fcntl locks
    raise ImportError("lsm_lab runs on POSIX systems (Linux, macOS; on Windows, inside WSL): "
                      "its local locks use fcntl")

# The library's warnings (skipped v1 blocks, merge fallbacks) go to loggers under "lsm_lab";
# like every library, it leaves the handlers to the application.
logging.getLogger("lsm_lab").addHandler(logging.NullHandler())


# The rest of the API is imported on first use (PEP 562), so that `import lsm_lab.merge`
# in a benchmark child or `lsm-lab --help` does not pay for pandas and the table layer.
_LAZY = {
    "ENGINES": "lsm_lab.merge",
    "merge_sources": "lsm_lab.merge",
    "merge_to_table": "lsm_lab.merge",
    "MergeMode": "lsm_lab.merge.semantics",
    "MergeSpec": "lsm_lab.merge.semantics",
    "footers": "lsm_lab.table.inspect",
    "LookupStats": "lsm_lab.table.stats",
    "Table": "lsm_lab.api",
    "TableState": "lsm_lab.table.state",
    "create_table": "lsm_lab.api",
    "open_table": "lsm_lab.api",
    "Instant": "lsm_lab.timeline.instant",
    "State": "lsm_lab.timeline.instant",
    "InstantTime": "lsm_lab.timeline.instanttime",
    "CompletionTime": "lsm_lab.timeline.instanttime",
    "TimeLike": "lsm_lab.timeline.instanttime",
    "FilterLike": "lsm_lab.table.predicate",
}

if TYPE_CHECKING:  # pragma: no cover
    from lsm_lab.api import Table, create_table, open_table
    from lsm_lab.merge import ENGINES, merge_sources, merge_to_table
    from lsm_lab.merge.semantics import MergeMode, MergeSpec
    from lsm_lab.table.inspect import footers
    from lsm_lab.table.predicate import FilterLike
    from lsm_lab.table.state import TableState
    from lsm_lab.table.stats import LookupStats
    from lsm_lab.timeline.instant import Instant, State
    from lsm_lab.timeline.instanttime import CompletionTime, InstantTime, TimeLike


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lsm_lab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__version__ = "0.1.0"

__all__ = [
    "ENGINES",
    "CompletionTime",
    "ConflictError",
    "CorruptFileError",
    "CorruptTableError",
    "FilterLike",
    "InputError",
    "Instant",
    "InstantTime",
    "LookupStats",
    "LostCommitError",
    "LsmLabError",
    "MergeMode",
    "MergeSpec",
    "MissingDependencyError",
    "PartitionValueError",
    "RetentionError",
    "SchemaError",
    "State",
    "Table",
    "TableConfigError",
    "TableNotFoundError",
    "TableState",
    "TimeLike",
    "TimeTravelError",
    "TimelineError",
    "UnsafePathError",
    "UnsupportedFeatureError",
    "create_table",
    "footers",
    "merge_sources",
    "merge_to_table",
    "open_table",
]
