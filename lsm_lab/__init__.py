"""lsm_lab: the LSM tree layout of Apache Hudi RFC-103, for real, with a notebook series.

The public API, re-exported here (see docs/ARCHITECTURE.md for the layers):

    create_table, open_table, Table          a table: write, read, inspect
    Instant, State                           one action on the timeline
    footers                                  decoded Parquet footers of a table's files
    MergeMode, MergeSpec, merge_sources      the merge engines
    LsmLabError and subclasses               every error lsm_lab raises on purpose
"""

from lsm_lab.errors import (
    ConflictError,
    CorruptFileError,
    InputError,
    LsmLabError,
    PartitionValueError,
    SchemaError,
    TableConfigError,
    TableNotFoundError,
    TimelineError,
    UnsupportedFeatureError,
)
from lsm_lab.merge import ENGINES, merge_sources, merge_to_table
from lsm_lab.merge.semantics import MergeMode, MergeSpec
from lsm_lab.table.inspect import footers
from lsm_lab.table.table import Table, create_table, open_table
from lsm_lab.timeline.instant import Instant, State

__version__ = "0.1.0"

__all__ = [
    "ENGINES",
    "ConflictError",
    "CorruptFileError",
    "InputError",
    "Instant",
    "LsmLabError",
    "MergeMode",
    "MergeSpec",
    "PartitionValueError",
    "SchemaError",
    "State",
    "Table",
    "TableConfigError",
    "TableNotFoundError",
    "TimelineError",
    "UnsupportedFeatureError",
    "create_table",
    "footers",
    "merge_sources",
    "merge_to_table",
    "open_table",
]
