"""CDC logs: the change-data-capture log of one file group, one commit, as a native Parquet log.

A table created with `cdc=True` (`hoodie.table.cdc.enabled=true`) gets, next to
the data a write adds to a file group, one more log in the same file group and
the same commit:

    <fileId>_<writeToken>_<instant>_<version>.cdc.parquet       (HoodieCDCUtils.CDC_LOGFILE_SUFFIX)

Its rows are the changes the commit made to that file group, one per record
key, sorted by key, and its columns depend on the table's supplemental logging
mode (`hoodie.table.cdc.supplemental.logging.mode`,
`HoodieCDCSupplementalLoggingMode`; the schemas of
`HoodieCDCUtils.schemaBySupplementalLoggingMode`):

    DATA_BEFORE_AFTER   op · ts_ms · before · after      everything: a reader needs nothing else
    DATA_BEFORE         op · record_key · before         after-images come from the snapshot of the commit
    OP_KEY_ONLY         op · record_key                  both images come from the snapshots around it

    op       "i" insert · "u" update · "d" delete          (HoodieCDCOperation)
    ts_ms    the writing instant's begin time, as upstream's logger writes it (a string)
    before   the stored record before the commit: a struct of the table's columns (meta columns
    after    first), null for an insert / after a delete

The footer is that of any native log (`format/log_v2.py`): the header map under
`hudi.log.format.metadata` with VERSION, INSTANT_TIME and the Avro SCHEMA of the
CDC record, plus the draft's `hudi.log.block_type = cdc` on tables of version 9;
the `.cdc.` in the name says what the file holds.  `read_cdc_log` takes the mode
from the columns and refuses a file whose columns or ops are not one of these
shapes (`CorruptFileError` naming the file).

Data readers skip CDC logs (`filegroup/v1read.py`, compaction and clustering plans):
they hold no rows of the table, only its history.

Simplified compared with Apache Hudi: one CDC log per file group and commit, no
rollover by size, written whole after the data file (upstream's `HoodieCDCLogger`
streams records into a log block as the merge handle runs).

Taught in: notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import parquet_footer, parquet_read, parquet_write
from lsm_lab.storage import StoragePath
from lsm_lab.timeline.config import CDC_MODES

OP = "op"
TS = "ts_ms"
BEFORE = "before"
AFTER = "after"
RECORD_KEY = "record_key"
INSERT, UPDATE, DELETE = "i", "u", "d"
OPS = (INSERT, UPDATE, DELETE)
DATA_BEFORE_AFTER, DATA_BEFORE, OP_KEY_ONLY = CDC_MODES


def log_schema(mode: str, image: pa.Schema) -> pa.Schema:
    """The columns of a CDC log in `mode`; `image` is the struct of a before/after image (nullable fields)."""
    img = pa.struct([pa.field(f.name, f.type, True) for f in image])
    if mode == DATA_BEFORE_AFTER:
        return pa.schema([pa.field(OP, pa.string()), pa.field(TS, pa.string()),
                          pa.field(BEFORE, img), pa.field(AFTER, img)])
    if mode == DATA_BEFORE:
        return pa.schema([pa.field(OP, pa.string()), pa.field(RECORD_KEY, pa.string()), pa.field(BEFORE, img)])
    if mode == OP_KEY_ONLY:
        return pa.schema([pa.field(OP, pa.string()), pa.field(RECORD_KEY, pa.string())])
    raise ValueError(f"unknown CDC mode {mode!r}")


def mode_of(schema: pa.Schema) -> str | None:
    """The logging mode a CDC log's columns say, or None when they are no CDC log's."""
    names = schema.names
    if names == [OP, TS, BEFORE, AFTER]:
        return DATA_BEFORE_AFTER
    if names == [OP, RECORD_KEY, BEFORE]:
        return DATA_BEFORE
    if names == [OP, RECORD_KEY]:
        return OP_KEY_ONLY
    return None


def to_log_rows(changes: pa.Table, mode: str, image: pa.Schema, instant_time: str) -> pa.Table:
    """Changes (`op`, `record_key`, `before`, `after`: one row per key, sorted) → the rows of the mode's log."""
    schema = log_schema(mode, image)
    n = changes.num_rows
    cols: dict[str, pa.Array | pa.ChunkedArray] = {OP: changes.column(OP)}
    if mode == DATA_BEFORE_AFTER:
        cols[TS] = pa.repeat(pa.scalar(instant_time, pa.string()), n)
    else:
        cols[RECORD_KEY] = changes.column(RECORD_KEY)
    if mode != OP_KEY_ONLY:
        cols[BEFORE] = changes.column(BEFORE)
    if mode == DATA_BEFORE_AFTER:
        cols[AFTER] = changes.column(AFTER)
    return pa.table(cols).cast(schema)


def write_cdc_log(path: str | os.PathLike[str] | StoragePath, rows: pa.Table, *, instant_time: str,
                  upstream: bool, table_name: str) -> int:
    """Write a CDC log (rows already in the mode's columns, sorted by key); returns its size in bytes."""
    schema_json = v2.avro_schema_of(rows.schema, table_name)
    header = v2.log_metadata(instant_time, schema_json=schema_json)
    if upstream:
        meta = v2.upstream_footer(header)
    else:
        meta = {v2.KEY_METADATA: json.dumps(header, sort_keys=True), v2.KEY_BLOCK_TYPE: v2.BLOCK_CDC}
    key = RECORD_KEY if RECORD_KEY in rows.column_names else None
    # no key bloom filter: a CDC log is read whole, never probed for a key
    return parquet_write.write_parquet(path, rows, metadata=meta, key_column=key, is_sorted=True, bloom_fpp=None)


def read_cdc_log(path: str | os.PathLike[str] | StoragePath) -> tuple[str, pa.Table, dict[str, str]]:
    """(mode, rows, footer header) of a CDC log; `CorruptFileError` naming the file if it is not one."""
    pf = parquet_read.open_parquet(path)
    header = v2.decode_footer(parquet_footer.footer_kv(pf.metadata), path=str(path))
    try:
        table = pf.read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise CorruptFileError(f"cannot read CDC log: {exc}", path=path) from None
    mode = mode_of(table.schema)
    if mode is None:
        raise CorruptFileError(f"not a CDC log: columns {table.schema.names} match no supplemental logging mode "
                               f"({', '.join(CDC_MODES)})", path=path)
    for name in (OP, TS, RECORD_KEY):
        if name in table.column_names and not pa.types.is_string(table.schema.field(name).type):
            raise CorruptFileError(f"CDC log column '{name}' has type {table.schema.field(name).type}, not string",
                                   path=path)
    for name in (BEFORE, AFTER):
        if name in table.column_names and not pa.types.is_struct(table.schema.field(name).type):
            raise CorruptFileError(f"CDC log column '{name}' has type {table.schema.field(name).type}, not a struct",
                                   path=path)
    ops = table.column(OP)
    bad = pc.invert(pc.fill_null(pc.is_in(ops, value_set=pa.array(OPS)), False))
    if table.num_rows and pc.any(bad).as_py():
        first = ops.filter(bad)[0].as_py()
        raise CorruptFileError(f"CDC log holds the op {first!r}; expected one of {', '.join(OPS)}", path=path)
    if RECORD_KEY in table.column_names and table.column(RECORD_KEY).null_count:
        raise CorruptFileError("CDC log has a row without record_key", path=path)
    return mode, table, header


__all__ = ["AFTER", "BEFORE", "DATA_BEFORE", "DATA_BEFORE_AFTER", "DELETE", "INSERT", "OP", "OPS", "OP_KEY_ONLY",
           "RECORD_KEY", "TS", "UPDATE", "log_schema", "mode_of", "read_cdc_log", "to_log_rows", "write_cdc_log"]
