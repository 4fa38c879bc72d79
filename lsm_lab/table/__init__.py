"""The table: records in, records out, and what is on disk.

    records.py   rows in: normalise, key, partition, validate, de-duplicate, sort
    index.py     which file group a key goes to (bucket index, key-lookup index)
    v1read.py    v1 (#HUDI#) log blocks as ordered merge units of a slice
    read.py      one file slice → merge sources → rows (ReadContext and the slice-read helpers)
    write.py     one file group's share of a batch → a base file or a log file
    state.py     TableState: timeline, schema, file-system view, read context (what services read)
    scan.py      a whole-table read with a filter: partition and key pruning, then read.py per slice
    inspect.py   file_slices, dump_levels, footers
    table.py     Table (TableState plus the verbs), create_table, open_table — above lsm_lab.services

Everything here but table.py sits below lsm_lab.services; table.py sits above
them (tests/test_architecture.py checks the order).

Taught in: notebooks/01_build_a_table.ipynb
"""
