"""Which metadata-table partitions lsm_lab's writer keeps up to date: the guard before using an index to write.

    Table.upsert ──► tagging: hoodie.index.type=RECORD_INDEX?
                       │  "record_index" in maintained_partitions(config)?
                       ├─ yes: tag existing keys from the record index (table/mdt_use.py), no file's keys read
                       └─ no:  read the keys of the partition's file groups (the key-lookup index)

An index the writer does not update goes stale with the write that reads it: an upsert tagged from
the record index writes new keys the index never hears of, and the next upsert of those keys,
tagged from the same index, would put a second version into a new file group.  So the writer may
trust an index only when it maintains it.  `services/mdt_write.py` writes the MDT partitions lsm_lab
keeps (`files`, the statistics, `record_index`, secondary indexes) and answers
`maintained_partitions(config)`; this module asks it.

Simplified compared with Apache Hudi: upstream's writer always maintains every enabled MDT partition
(`HoodieBackedTableMetadataWriter`), so the question does not arise there.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (use)")
"""

from __future__ import annotations

from lsm_lab.services import mdt_write
from lsm_lab.timeline.config import TableConfig


def maintained_partitions(config: TableConfig) -> frozenset[str]:
    """The MDT partitions lsm_lab's writes keep current on a table of this configuration (empty: none)."""
    return mdt_write.maintained_partitions(config)


__all__ = ["maintained_partitions"]
