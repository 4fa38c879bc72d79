"""Apache Hudi log format v1: files of `#HUDI#` blocks.

Before RFC-103, a Hudi file slice's changes after its base file live in *log
files* named `.<fileId>_<instant>.log.<version>_<writeToken>` (parsed by the
one file-name grammar, `lsm_lab.format.naming`). A log file is a sequence of
self-delimiting blocks; lsm_lab reads these files always and writes them in
compatibility mode (table versions 6 and 8), so that Apache Hudi and hudi-rs
can read what lsm_lab wrote. One concept per module:

    blocks.py     the frame of a block, reading a file block by block, torn writes → CORRUPT blocks
    avro.py       Avro data block content ⇄ Arrow rows
    deletes.py    delete block content (HoodieDeleteRecordList) ⇄ keys + ordering values
    writer.py     encoding blocks and publishing a new log file atomically
    rollbacks.py  command blocks: which blocks still count for a file slice

    .<fileId>_<instant>.log.<version>_<token>
    ┌──────────────┬──────────────┬──────────────┬────────────────────┐
    │ #HUDI# data  │ #HUDI# delete│ #HUDI# data  │ #HUDI# command     │ ...
    │ @t1 (avro)   │ @t1          │ @t2 (avro)   │ rollback → t2      │
    └──────────────┴──────────────┴──────────────┴────────────────────┘
      blocks.iter_blocks ──► LogBlock(records=Arrow table) ──► rollbacks.effective_blocks

Every public name of the modules is importable from here
(`from lsm_lab.format import v1; v1.read_log_file(...)`); which blocks
count for a *read* (instants, completion order) is decided by
`lsm_lab.filegroup.v1read`.

HFile blocks (the metadata table's) decode to `key`/`value` cells
(`format/hfile.py`).

Simplified compared with Apache Hudi: Kryo delete blocks (versions 1-2) raise
`UnsupportedFeatureError`; log format
versions other than 1 are refused; files are written whole, never appended to.

Taught in: notebooks/09_real_hudi_tables.ipynb
"""

from lsm_lab.format.log_v1.avro import AVRO_DATA_BLOCK_VERSION, decode_avro_records, encode_avro_records
from lsm_lab.format.log_v1.blocks import (
    LOG_FORMAT_VERSION,
    MAGIC,
    ROLLBACK_COMMAND,
    BlockType,
    HeaderKey,
    LogBlock,
    decode_log_bytes,
    dump_log_file,
    format_blocks,
    iter_blocks,
    read_log_file,
)
from lsm_lab.format.log_v1.deletes import (
    DELETE_BLOCK_VERSION,
    commit_time_ordering_mask,
    decode_delete_records,
    encode_delete_records,
)
from lsm_lab.format.log_v1.rollbacks import effective_blocks
from lsm_lab.format.log_v1.writer import (
    encode_avro_data_block,
    encode_block,
    encode_command_block,
    encode_delete_block,
    encode_parquet_data_block,
    write_log_file,
)

__all__ = [
    "AVRO_DATA_BLOCK_VERSION",
    "DELETE_BLOCK_VERSION",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "ROLLBACK_COMMAND",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "commit_time_ordering_mask",
    "decode_avro_records",
    "decode_delete_records",
    "decode_log_bytes",
    "dump_log_file",
    "effective_blocks",
    "encode_avro_data_block",
    "encode_avro_records",
    "encode_block",
    "encode_command_block",
    "encode_delete_block",
    "encode_delete_records",
    "encode_parquet_data_block",
    "format_blocks",
    "iter_blocks",
    "read_log_file",
    "write_log_file",
]
