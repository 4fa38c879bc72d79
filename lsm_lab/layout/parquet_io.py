"""Writing and opening the Parquet files of a table (base files and v2 logs alike).

Every data file lsm_lab writes goes through `write_parquet`:

    rows (Arrow table, already sorted for lsm_tree)
      │  ParquetWriter → <final dir>/.<name>.<random>.tmp      (row groups of `row_group_size`)
      │  footer key-value metadata: hoodie_min/max_record_key, lsm_lab.sorted, + caller's keys
      ▼
    os.link(tmp, final) ; unlink(tmp)                           (never overwrites, never half-visible)

Row groups matter: every `write_table` call would start a new row group, so the
table is written in explicit slices of at most `row_group_size` rows.  A sorted
file's row groups are also capped at `row_group_bytes` of in-memory Arrow data
(default 2 MiB, about 7k trips rows, 0.9 MB compressed): their min/max key
statistics are then disjoint, narrow ranges, and a point lookup reads one small
row group instead of 64k rows (10.7 MB).  Measured on 1M sorted trips rows:
files grow ~4% (128 → 134 MB), scan time did not change beyond the noise of
the machine; see lsm_lab/lookup/lookup.py.

The footer keys shared by base and log files (documented in docs/FORMAT.md):

    hoodie_min_record_key / hoodie_max_record_key   key range (Hudi's base-file names)
    lsm_lab.sorted = "true"                          rows sorted by record key (UTF-8 bytes),
                                                     no key twice (only written when true)
    lsm_lab.bloom                                    base64 bloom filter of the file's keys
                                                     (format in lsm_lab/lookup/bloom.py)

The first three are also in the Arrow schema metadata (readers of the table see
them); the bloom filter is added to the Parquet footer only
(`ParquetWriter.add_key_value_metadata`), so it is not stored a second time
inside `ARROW:schema` nor carried along by every table read from the file.
The key column additionally gets Parquet's own split-block bloom filter per
row group (`bloom_filter_options`, read by engines such as DuckDB and Spark)
and, in sorted files, a `sorting_columns` entry.

Simplified compared with Apache Hudi: the bloom filter is lsm_lab's own format
under its own key (Hudi's `org.apache.hudi.bloomfilter` is a Java-serialised
Hadoop filter); row groups are sized by rows and in-memory bytes, not by
Parquet's on-disk block size.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError, CorruptTableError, LsmLabError

KEY_MIN = "hoodie_min_record_key"
KEY_MAX = "hoodie_max_record_key"
KEY_SORTED = "lsm_lab.sorted"
KEY_BLOOM = "lsm_lab.bloom"
RECORD_KEY = "_hoodie_record_key"
DEFAULT_ROW_GROUP_ROWS = 65_536
SORTED_ROW_GROUP_BYTES = 2 << 20
MIN_ROW_GROUP_ROWS = 1_024
BLOOM_FPP = 0.01
PARQUET_BLOOM_FPP = 0.01
COMPRESSION = "snappy"


def key_range(keys: pa.Array | pa.ChunkedArray) -> tuple[str | None, str | None]:
    if len(keys) == 0:
        return None, None
    mm = pc.min_max(keys)
    return mm["min"].as_py(), mm["max"].as_py()


def rows_per_group(table: pa.Table, row_group_size: int, row_group_bytes: int | None) -> int:
    """Rows per row group: at most `row_group_size`, and about `row_group_bytes` of Arrow data when given."""
    rows = max(1, int(row_group_size))
    if row_group_bytes and table.num_rows:
        per_row = max(1.0, table.nbytes / table.num_rows)
        rows = min(rows, max(MIN_ROW_GROUP_ROWS, int(row_group_bytes / per_row)))
    return rows


def write_parquet(
    path: str | os.PathLike[str],
    table: pa.Table,
    *,
    metadata: Mapping[str, str] | None = None,
    key_column: str | None = RECORD_KEY,
    is_sorted: bool = False,
    row_group_size: int = DEFAULT_ROW_GROUP_ROWS,
    row_group_bytes: int | None = None,
    bloom_fpp: float | None = BLOOM_FPP,
) -> int:
    """Write `table` to `path` atomically with footer metadata; returns the file size in bytes.

    `row_group_size` caps the rows per row group; `row_group_bytes` caps its
    in-memory size (default: `SORTED_ROW_GROUP_BYTES` for sorted files, no cap
    otherwise).  `bloom_fpp` is the false-positive rate of the key bloom filter
    written under `lsm_lab.bloom` (None: no filter).
    """
    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    kv: dict[str, str] = dict(metadata or {})
    has_key = key_column is not None and key_column in table.column_names and table.num_rows > 0
    footer_only: dict[str, str] = {}
    if has_key:
        assert key_column is not None
        keys = table.column(key_column)
        lo, hi = key_range(keys)
        if lo is not None:
            kv[KEY_MIN], kv[KEY_MAX] = lo, hi
        if bloom_fpp is not None and keys.null_count == 0 and _is_text(keys.type):
            from lsm_lab.lookup.bloom import BloomFilter

            footer_only[KEY_BLOOM] = BloomFilter.build(keys, bloom_fpp).to_base64()
    if is_sorted:
        kv[KEY_SORTED] = "true"
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **{k.encode(): v.encode() for k, v in kv.items()}})
    if row_group_bytes is None and is_sorted:
        row_group_bytes = SORTED_ROW_GROUP_BYTES
    rows = rows_per_group(table, row_group_size, row_group_bytes)
    options: dict[str, object] = {}
    if has_key and key_column is not None:
        options["bloom_filter_options"] = {key_column: {"ndv": max(1, min(rows, table.num_rows)),
                                                        "fpp": PARQUET_BLOOM_FPP}}
        if is_sorted:
            options["sorting_columns"] = [pq.SortingColumn(table.schema.get_field_index(key_column))]
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        try:
            writer = pq.ParquetWriter(tmp, schema, compression=COMPRESSION, write_statistics=True, **options)
        except TypeError:  # an older pyarrow without bloom_filter_options / sorting_columns
            writer = pq.ParquetWriter(tmp, schema, compression=COMPRESSION, write_statistics=True)
        with writer:
            if table.num_rows == 0:
                writer.write_table(table.cast(schema))
            for start in range(0, table.num_rows, rows):
                writer.write_table(table.slice(start, rows).cast(schema), row_group_size=rows)
            if footer_only:
                writer.add_key_value_metadata(footer_only)
        try:
            os.link(tmp, final)
        except FileExistsError:
            raise LsmLabError("refusing to overwrite an existing data file", path=final) from None
    finally:
        tmp.unlink(missing_ok=True)
    return final.stat().st_size


def _is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


def footer(path: str | os.PathLike[str]) -> dict[str, str]:
    """The footer key-value metadata of a Parquet file, decoded as UTF-8 (Arrow's schema key excluded)."""
    try:
        meta = pq.read_metadata(path).metadata or {}
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"not a readable Parquet file: {exc}", path=path) from None
    out: dict[str, str] = {}
    for k, v in meta.items():
        key = k.decode("utf-8", errors="replace")
        if key == "ARROW:schema":
            continue
        out[key] = v.decode("utf-8", errors="replace")
    return out


def read_parquet(path: str | os.PathLike[str], columns: list[str] | None = None, *,
                 allowed: Collection[str] | None = None) -> pa.Table:
    """Read a Parquet data file (selected columns that exist), with a typed error on corruption.

    `allowed`: the columns the table's stored schema knows; a file holding another one
    is a `CorruptTableError` (the stored schema would silently drop it from reads).
    """
    try:
        pf = pq.ParquetFile(path)
        names = pf.schema_arrow.names
        cols = None if columns is None else [c for c in columns if c in names]
        if allowed is not None:
            check_columns(path, names, allowed)
        return pf.read(columns=cols)
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"cannot read Parquet file: {exc}", path=path) from None


# columns Hudi may write into data files besides the table schema's
OPTIONAL_META_COLUMNS = ("_hoodie_operation",)


def check_columns(path: str | os.PathLike[str], names: Collection[str], allowed: Collection[str]) -> None:
    """CorruptTableError when a data file holds a column the table's stored schema lacks."""
    extra = [n for n in names if n not in allowed and n not in OPTIONAL_META_COLUMNS]
    if extra:
        raise CorruptTableError(f"the file holds column{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} "
                                "that the table's stored schema lacks (reads would silently drop them)",
                                path=path, field="extraMetadata schema")
