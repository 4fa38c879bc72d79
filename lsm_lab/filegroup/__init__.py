"""Layer 6, file groups: one file group's slices, read and written (L0 logs over an L1 base).

    fsview.py       the file-system view: partitions → file groups → file slices (what is visible)
    index.py        which file group a key goes to (bucket index, key-lookup index)
    read.py         one file slice → merge sources → rows (ReadContext and the slice-read helpers)
    v1read.py       v1 (#HUDI#) log blocks as ordered merge units of a slice
    readstats.py    what the last read did (v1 blocks skipped, fallbacks), and its warnings
    posmerge.py     position-based merging of logs that carry RECORD_POSITIONS
    deletes.py      delete logs and delete resolution against a slice
    write.py        one file group's share of a batch → a base file or a log file
    smallfiles.py   routing inserts into small file groups
    cdclog.py       the CDC log written beside a data log
    compat.py       what a table of version 6 or 8 must look like for older readers
    planner.py      the hybrid compaction planner: per file group, FULL, LOG or nothing

Below: merge/, format/, timeline/, storage/. Above: table/ (the whole table's state,
scans and lookups), which composes these per-group pieces.

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""
