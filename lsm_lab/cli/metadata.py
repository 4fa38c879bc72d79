"""`lsm-lab show metadata PATH [--partition NAME] [--json]`: Hudi's metadata table of a table, read.

Without `--partition`: one row per metadata-table partition (file groups, live records) and the
data partitions `__all_partitions__` lists.  With it, the partition's records as
`Table.metadata_table()` returns them (table/metadata_table.py): `files` → partition, file
name, size; `column_stats` / `partition_stats` → min, max and counts per column; `record_index`
→ where every key lives; `secondary_index_<name>` → value, record key; `bloom_filters` → per base
file its decoded filter's shape (type, rows, bits, hashes; format/hudi_bloom.py).  A table without a metadata table prints one line saying so.

`lsm-lab create-index PATH NAME COLUMN`: a secondary index `secondary_index_NAME` on COLUMN, built in
the metadata table and kept by later writes (`Table.create_index`, services/mdt_write.py).

`lsm_lab/cli/app.py` registers `SHOW` under `lsm-lab show`, and `register` adds `create-index`.

Taught in: no chapter (README, "What the Hudi world reads of lsm_lab's tables"; docs/FORMAT.md, "The metadata table (read)" and "(write)")
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from lsm_lab.cli.console import print_frame

if TYPE_CHECKING:  # start-up: the metadata table (and pyarrow) load when `show metadata` runs
    import pyarrow as pa

    from lsm_lab.table.metadata_table import MetadataTable


def metadata_frame(mdt: MetadataTable, partition: str | None) -> pa.Table:
    """What `show metadata` prints: the summary, or one partition's records."""
    import pyarrow as pa

    from lsm_lab.table.metadata_table import SECONDARY_PREFIX  # start-up: on first use

    if partition is None:
        return mdt.summary()
    if partition == "files":
        return mdt.files()
    if partition == "column_stats":
        return mdt.column_stats()
    if partition == "partition_stats":
        return mdt.partition_stats()
    if partition == "record_index":
        return mdt.record_index(mdt.record_keys())
    if partition.startswith(SECONDARY_PREFIX):
        return mdt.secondary_index(partition)
    if partition == "bloom_filters":
        return mdt.bloom_filters()
    recs = mdt.records(partition)  # any other: raw keys and types (raises for unknown names)
    return pa.table({"key": pa.array(list(recs), pa.string()),
                     "type": pa.array([r.type for r in recs.values()], pa.int32())})


def show_metadata(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use

    table = open_table(args.path)
    mdt = table.metadata_table()
    if mdt is None:
        print(f"{args.path}: no metadata table (hoodie.table.metadata.partitions is empty or .hoodie/metadata "
              "is missing)")
        return 0
    partition = getattr(args, "partition", None)
    frame = metadata_frame(mdt, partition)
    print_frame(frame.to_pandas(integer_object_nulls=True), args.json)
    if partition is None and not args.json:
        print("data partitions (__all_partitions__): " + (", ".join(p or "(root)" for p in mdt.all_partitions())
                                                           if "files" in mdt.partitions() else "-"))
    print(f"({frame.num_rows} rows)", file=sys.stderr)
    return 0


SHOW = {"metadata": show_metadata}


def cmd_create_index(args: argparse.Namespace) -> int:
    from lsm_lab.api import open_table  # start-up: on first use

    part = open_table(args.path).create_index(args.name, args.column)
    print(f"{args.path}: secondary index {part} on {args.column} built in the metadata table")
    return 0


def register(sub: Any) -> None:
    """Add `create-index` to the `lsm-lab` command parser."""
    p = sub.add_parser("create-index", help="a secondary index on a column, kept in the metadata table",
                       description="Define secondary_index_NAME on COLUMN (.hoodie/.index_defs/index.json) and "
                                   "build it in the metadata table from the committed rows, as Hudi's "
                                   "CREATE INDEX does; later writes keep it up to date. The table needs "
                                   "hoodie.metadata.enable=true. Read it with `lsm-lab show metadata PATH "
                                   "--partition secondary_index_NAME`.")
    p.add_argument("path", help="table folder or URL")
    p.add_argument("name", help="index name (letters, digits, _)")
    p.add_argument("column", help="the indexed column")
    p.set_defaults(func=cmd_create_index)


__all__ = ["SHOW", "cmd_create_index", "metadata_frame", "register", "show_metadata"]
