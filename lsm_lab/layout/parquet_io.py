"""Writing and opening the Parquet files of a table (base files and v2 logs alike).

Every data file lsm_lab writes goes through `write_parquet`:

    rows (Arrow table, already sorted for lsm_tree)
      │  ParquetWriter → <final dir>/.<name>.<random>.tmp      (row groups of `row_group_size`)
      │  footer key-value metadata: hoodie_min/max_record_key, lsm_lab.sorted, + caller's keys
      ▼
    os.link(tmp, final) ; unlink(tmp)                           (never overwrites, never half-visible)

Row groups matter: every `write_table` call would start a new row group, so the
table is written in explicit slices of `row_group_size` rows; on sorted files the
per-row-group min/max statistics of the key then prune lookups well.

The footer keys shared by base and log files (documented in docs/FORMAT.md):

    hoodie_min_record_key / hoodie_max_record_key   key range (Hudi's base-file names)
    lsm_lab.sorted = "true"                          rows sorted by record key (UTF-8 bytes),
                                                     no key twice (only written when true)

Simplified compared with Apache Hudi: no bloom filter yet (Hudi base files carry
`org.apache.hudi.bloomfilter`), no parquet block-size tuning by bytes.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError, LsmLabError

KEY_MIN = "hoodie_min_record_key"
KEY_MAX = "hoodie_max_record_key"
KEY_SORTED = "lsm_lab.sorted"
RECORD_KEY = "_hoodie_record_key"
DEFAULT_ROW_GROUP_ROWS = 65_536
COMPRESSION = "snappy"


def key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str | None, str | None]:
    if len(keys) == 0:
        return None, None
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def write_parquet(
    path: str | os.PathLike[str],
    table: pa.Table,
    *,
    metadata: Mapping[str, str] | None = None,
    key_column: str | None = RECORD_KEY,
    is_sorted: bool = False,
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
) -> int:
    """Write `table` to `path` atomically with footer metadata; returns the file size in bytes."""
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    kv: dict[str, str] = dict(metadata or {})
    if key_column is not None and key_column in table.column_names:
        lo, hi = key_range(table.column(key_column))
        if lo is not None:
            kv[KEY_MIN], kv[KEY_MAX] = lo, hi
    if is_sorted:
        kv[KEY_SORTED] = "true"
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in kv.items()}})
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema, compression=COMPRESSION, write_statistics=True) as writer:
            if table.num_rows == 0:
                writer.write_table(table.cast(schema))
            for start in range(0, table.num_rows, row_group_size):
                writer.write_table(table.slice(start, row_group_size).cast(schema), row_group_size=row_group_size)
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise LsmLabError("refusing to overwrite an existing data file", path=final) from None
    finally:
        tmp.unlink(missing_ok=True)
    return final.stat().st_size


def footer(path: str | os.PathLike[str]) -> dict[str, str]:
    """The footer key-value metadata of a Parquet file, decoded as UTF-8 (Arrow's schema key excluded)."""
    try:
        meta = pq.read_metadata(path).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorruptFileError(f"not a readable Parquet file: {exc}", path=path) from None
    out: dict[str, str] = {}
    for k, v in meta.items():
        key = k.decode("utf-8", errors="replace")
        if key == "ARROW:schema":
            continue
        out[key] = v.decode("utf-8", errors="replace")
    return out


def read_parquet(path: str | os.PathLike[str], columns: list[str] | None = None) -> pa.Table:
    """Read a Parquet data file (selected columns that exist), with a typed error on corruption."""
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        cols = None if columns is None else [c for c in columns if c in names]
        return pf.read(columns=cols)
    except (OSError, pa.ArrowInvalid) as exc:
        raise CorruptFileError(f"cannot read Parquet file: {exc}", path=path) from None
