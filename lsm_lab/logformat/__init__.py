"""Log file formats of a file slice: the records written after its base file.

Two formats live here, one module each:

- `lsm_lab.logformat.v1`: Apache Hudi's log format v1, the `#HUDI#` block files
  (`.<fileId>_<instant>.log.<version>_<writeToken>`) that every Hudi release up to
  table version 9 writes. lsm_lab reads them always and writes them only in
  compatibility mode (table versions 6 and 8), so that older readers keep working.
- `lsm_lab.logformat.v2`: RFC-103's native Parquet log files.

`lsm_lab.avro_schema` (below the timeline, which needs it too) translates
between the Avro schemas that v1 blocks carry and the Arrow schemas lsm_lab
works with.

This package imports nothing on purpose: import the submodule you need.

Taught in: notebooks/04_log_format_v2.ipynb
"""
