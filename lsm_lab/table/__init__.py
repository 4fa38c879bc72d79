"""Layer 7, the table: the whole table's state, and reads across its file groups.

    state.py      TableState: timeline, schema, file-system view, read context (what services read)
    scan.py       a whole-table read with a filter: partition and key pruning, then a slice read per slice
    cdc.py        change-data-capture reads (incremental and CDC queries)
    inspect.py    file_slices, dump_levels, footers
    lookup.py     PrunedReader, KeyLookup: Table.lookup's engine and read(filter=...)'s key pruning
    footer.py     FileInfo, FooterCache: a data file's key range, bloom and row-group statistics, read once
    predicate.py  KeyPredicate: the keys (or key range) a filter or a lookup asks for
    stats.py      LookupStats: what a lookup read and skipped (files, row groups, rows)

Below: filegroup/ (one group's slices), merge/, format/, timeline/, storage/.
Above: services/ (which take a `TableState`), then api.py (`Table`, the facade).

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/08_point_lookups.ipynb
"""
