"""Native HFile logs: the metadata table's log files on table version 10 (whole files, no `#HUDI#` blocks).

A table of version 8 or 9 keeps its metadata table's (MDT's) changes in v1 logs: `#HUDI#` files
whose HFILE_DATA_BLOCKs each hold a whole HFile (`format/log_v1`).  Upstream Hudi's writer targeting
table version 10 writes *native* logs instead (`CommonClientUtils.shouldWriteNativeLogs`, PR #19118),
and the MDT's writer inherits the data writer's version (`HoodieMetadataWriteUtils
.createMetadataWriteConfig`: `withWriteTableVersion(writeConfig.getWriteVersion())`), so the MDT of a
version 10 table is itself version 10.  A native log is written in the table's base file format
(`HoodieNativeLogAppendHandle` passes `hoodieTable.getBaseFileFormat()` to
`HoodieNativeLogFormatWriter`), which for the MDT is HFILE:

    <fileId>_<writeToken>_<instant>_<version>.log.hfile       a whole HFile: cell key = MDT record key,
                                                              value = HoodieMetadataRecord (Avro, schema
                                                              in the file info `schema`), as a base file
    <fileId>_<writeToken>_<instant>_<version>.deletes.hfile   a whole HFile of `hudi_delete_log_record`
                                                              values {_hoodie_record_key}: the keys removed
    file info `hudi.log.format.metadata` = {"VERSION":"2","INSTANT_TIME":t,"SCHEMA":…}
        (`NativeLogFooterMetadata.toFooterMetadata`, stored through `HoodieAvroHFileWriter
        .addFooterMetadata` as an HFile file-info entry, PR #19129)

Names follow `FileNameParser.NATIVE_LOG_FILE_PATTERN` (MDT file ids such as `files-0000-0` hold no
`.` or `_`); the delete schema is `HoodieSchemas.createDeleteLogSchema` with no ordering field (the
MDT merges by `HoodieMetadataPayload`, not by an ordering value).  Readers outside Hudi read such
files too (Trino's Hudi connector reads `*.log.hfile` MDT deltas, apache/hudi#19279).

Simplified compared with Apache Hudi: no bloom filter meta block; GZIP cells as lsm_lab's base files;
a reader needs the footer entry (upstream's schema discovery needs it too).

Taught in: no chapter (docs/FORMAT.md, "The metadata table (write)")
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
from lsm_lab.format import hfile, hfile_write
from lsm_lab.format import log_v2 as v2
from lsm_lab.format.naming import FileName
from lsm_lab.storage import StoragePath

FORMAT = "hfile"
#: the file-info key of the native log's header map (one compact JSON object, `VERSION` first)
FOOTER_KEY = v2.KEY_METADATA.encode()
#: `HoodieSchemas.createDeleteLogSchema(tableSchema, [])`: the record key alone
DELETE_SCHEMA_TEXT = json.dumps({"type": "record", "name": "hudi_delete_log_record",
                                 "fields": [{"name": v2.UPSTREAM_KEY_COLUMN, "type": "string"}]},
                                separators=(",", ":"))


def data_log(keys: pa.Array, values: pa.Array, header: Mapping[str, str], schema_text: str) -> bytes:
    """A `.log.hfile`: the cells (binary keys in ascending order, binary values) as one HFile whose file info
    holds the value schema, the min/max key (as `HoodieAvroHFileWriter` writes them) and the log header."""
    info = {b"schema": schema_text.encode(), FOOTER_KEY: _footer(header)}
    if len(keys):
        info[b"minRecordKey"] = keys[0].as_py()
        info[b"maxRecordKey"] = keys[-1].as_py()
    return hfile_write.write_hfile_arrays(keys, values, file_info=info)


def delete_log(keys: Sequence[str], header: Mapping[str, str]) -> bytes:
    """A `.deletes.hfile`: one cell per removed key (key → the Avro `hudi_delete_log_record` of it)."""
    arr = pc.unique(pa.array(list(keys), pa.string())).cast(pa.binary())
    arr = arr.take(pc.sort_indices(arr))
    return hfile_write.write_hfile_arrays(arr, _avro_strings(arr),
                                          file_info={b"schema": DELETE_SCHEMA_TEXT.encode(), FOOTER_KEY: _footer(header)})


def _footer(header: Mapping[str, str]) -> bytes:
    return v2.upstream_footer(header)[v2.KEY_METADATA].encode()


def _avro_strings(keys: pa.Array) -> pa.Array:
    """The Avro binary of a one-string record per key: zigzag varint of the byte length, then the bytes
    (vectorised: one varint per distinct length, gathered and joined by Arrow)."""
    lengths = pc.binary_length(keys).to_numpy(zero_copy_only=False).astype(np.int64)
    distinct, where = np.unique(lengths, return_inverse=True)
    prefixes = pa.array([_varint(2 * int(n)) for n in distinct], pa.binary())
    return pc.binary_join_element_wise(prefixes.take(pa.array(where)), keys, pa.scalar(b"", pa.binary()))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


@dataclass(frozen=True)
class NativeHFileLog:
    """One native HFile log, read: its header (VERSION, INSTANT_TIME, SCHEMA, …), whether it removes keys,
    its keys (string) and, for a data log, its values (binary) and their Avro schema."""

    header: dict[str, str]
    is_delete: bool
    keys: pa.Array
    values: pa.Array | None
    schema: str | None

    @property
    def instant_time(self) -> str:
        return self.header["INSTANT_TIME"]


def read(path: str | os.PathLike[str] | StoragePath, name: FileName) -> NativeHFileLog:
    """Read a native log of the MDT (`name` parsed from its file name); CorruptFileError when it is no HFile or
    lacks the header entry, UnsupportedFeatureError for a log format version newer than lsm_lab reads."""
    if name.ext != FORMAT:
        raise UnsupportedFeatureError(f"native .{name.ext} log in the metadata table: its logs are HFiles "
                                      "(the table's base file format)", path=path)
    h = hfile.read_hfile(path)
    raw = h.file_info.get(FOOTER_KEY)
    if raw is None:
        raise CorruptFileError(f"native HFile log has no '{v2.KEY_METADATA}' file-info entry", path=path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptFileError(f"'{v2.KEY_METADATA}' is not UTF-8", path=path) from None
    header = v2.decode_footer({v2.KEY_METADATA: text}, path=str(path))
    if header["INSTANT_TIME"] != name.instant:
        raise CorruptFileError(f"native log header INSTANT_TIME {header['INSTANT_TIME']} differs from the "
                               f"instant {name.instant} of its name", path=path)
    cells = h.to_table()
    keys = cells.column("key").combine_chunks()
    if name.is_delete:
        return NativeHFileLog(header, True, keys, None, h.avro_schema)
    return NativeHFileLog(header, False, keys, cells.column("value").combine_chunks(),
                          h.avro_schema or header.get("SCHEMA"))


__all__ = ["DELETE_SCHEMA_TEXT", "FOOTER_KEY", "FORMAT", "NativeHFileLog", "data_log", "delete_log", "read"]
