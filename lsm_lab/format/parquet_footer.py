"""A data file's Parquet footer: the keys lsm_lab stores there, the one decoder, and what statistics prove.

The footer keys shared by base and log files (documented in docs/FORMAT.md):

    hoodie_min_record_key / hoodie_max_record_key   key range (Hudi's base-file names)
    lsm_lab.sorted = "true"                          rows sorted by record key (UTF-8 bytes),
                                                     no key twice (only written when true)
    lsm_lab.bloom                                    base64 bloom filter of the file's keys
                                                     (format in lsm_lab/format/bloom.py)

The writer (format/parquet_write.py) puts them there; `read_footer` is the one decoder of the
key-value map, and `is_sorted_footer` the one reading of `lsm_lab.sorted`:

    file tail ──(local: read the last bytes; object: ranged.tail_bytes, one GET)──► footer bytes
        ──pq.read_metadata──► FileMetaData ──footercheck.check_footer──► (metadata, {key: value})

**Damaged footers.** pyarrow raises on a footer whose Thrift does not parse, but the column-chunk
metadata of a row group (statistics, sizes) becomes C++ objects only when first asked for, and a C++
exception there aborts the process.  Every footer handed out here (and by `parquet_read.open_parquet`
without a `metadata=`) has passed `footercheck.check_footer` first: damage it would trip on is a
`CorruptFileError` naming the file, never SIGABRT.

**Columns of one value** (`constant_text`): a text column whose statistics show the same single value
and no null in every row group (a partition column, `_hoodie_partition_path`, a base file's
`_hoodie_file_name`) can be filled from the footer instead of decoded (`parquet_read.read_parquet`,
lookups); `few_values` tells a column stored as dictionary indices throughout.

Simplified compared with Apache Hudi: the bloom filter is lsm_lab's own format under its own key
(Hudi's `org.apache.hudi.bloomfilter` is a Java-serialised Hadoop filter), and `lsm_lab.sorted` has
no counterpart in Hudi (RFC-103 keeps sortedness in the layout, not in each file).

Taught in: notebooks/03_sorted_writes_and_levels.ipynb, notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError
from lsm_lab.format.footercheck import check_footer
from lsm_lab.format.ranged import tail_bytes
from lsm_lab.storage import StoragePath

KEY_MIN = "hoodie_min_record_key"
KEY_MAX = "hoodie_max_record_key"
KEY_SORTED = "lsm_lab.sorted"
KEY_BLOOM = "lsm_lab.bloom"
OWN_KEYS = (KEY_MIN, KEY_MAX, KEY_SORTED, KEY_BLOOM)
RECORD_KEY = "_hoodie_record_key"  # the key column: its range and bloom are the footer's key facts
#: the text types whose one-value columns `constant_text` may prove
TEXT_TYPES = (pa.string(), pa.large_string())


def source_name(source: Any) -> str:
    """How errors name a data file: its path or URI (`<buffer>` for bytes in memory)."""
    if isinstance(source, StoragePath):
        return str(source)
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<buffer>"


@contextmanager
def read_errors(name: str, what: str) -> Iterator[None]:
    """Turn what pyarrow raises on a damaged file into a `CorruptFileError` naming the file (`what`: the step)."""
    try:
        yield
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"{what}: {exc}", path=name) from None


def local_tail(path: str | os.PathLike[str]) -> bytes | None:
    """A local file's Parquet footer and its 8-byte trailer (None: not a Parquet tail)."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size < 12:
            return None
        f.seek(size - 8)
        trailer = f.read(8)
        n = int.from_bytes(trailer[:4], "little")
        if trailer[4:] != b"PAR1" or n + 8 > size:
            return None
        f.seek(size - 8 - n)
        return f.read(n + 8)


def kv_text(meta: Mapping[bytes, bytes] | None) -> dict[str, str]:
    """Key-value metadata as Arrow hands it over (a footer's, a schema's), decoded as UTF-8, Arrow's schema
    key excluded."""
    return {k.decode("utf-8", errors="replace"): v.decode("utf-8", errors="replace")
            for k, v in (meta or {}).items() if k != b"ARROW:schema"}


def footer_kv(md: pq.FileMetaData) -> dict[str, str]:
    """The footer key-value map of a file's metadata, decoded as UTF-8 (Arrow's schema key excluded)."""
    return kv_text(md.metadata)


def read_footer(path: str | os.PathLike[str] | StoragePath,
                size: int | None = None) -> tuple[pq.FileMetaData, dict[str, str]]:
    """A data file's Parquet metadata and its decoded key-value map (`CorruptFileError` if unreadable).

    On an object store: one ranged GET of the file's tail (plus a HEAD unless `size` is given)."""
    with read_errors(source_name(path), "not a readable Parquet file"):
        if isinstance(path, StoragePath):
            tail: bytes | None = tail_bytes(path, size)
            md = pq.read_metadata(pa.BufferReader(tail))
        else:
            md = pq.read_metadata(path)
            tail = local_tail(path)
    return check_footer(md, source_name(path), tail), footer_kv(md)


def footer(path: str | os.PathLike[str] | StoragePath) -> dict[str, str]:
    """The decoded footer key-value map of a data file (see `read_footer`)."""
    return read_footer(path)[1]


def is_sorted_footer(kv: Mapping[str, str]) -> bool:
    """Whether a decoded footer marks its file sorted by key (`lsm_lab.sorted = "true"`)."""
    return kv.get(KEY_SORTED) == "true"


def is_text_leaf(column: Any) -> bool:
    """Whether a Parquet leaf column (`FileMetaData.schema.column(i)`) holds UTF-8 text."""
    return bool(column.physical_type == "BYTE_ARRAY" and str(column.logical_type) == "String")


def constant_text(md: pq.FileMetaData, columns: Collection[str],
                  row_groups: Collection[int] | None = None) -> dict[str, str]:
    """Those of `columns` (top-level names) that hold one text value in every row of `row_groups`
    (default: the whole file), with that value, as the footer's statistics prove it.

    A flat UTF-8 column qualifies when, in every row group, its chunk's statistics have min == max
    (raw bytes), the same value in each, a null count of 0 and one value per row.  A Hudi file's
    `_hoodie_partition_path`, `_hoodie_file_name` (a base file's), a bulk insert's
    `_hoodie_commit_time` and a partition column are such columns; decoding a column chunk has a
    fixed cost (~0.1 ms for a small dictionary-encoded one) however few its values, so readers fill
    these instead.  The statistics are trusted as row-group pruning trusts them; a column without
    them, with truncated ones (min != max) or with a null is left out (decoded).
    """
    groups = range(md.num_row_groups) if row_groups is None else row_groups
    if not columns or not groups or md.num_rows == 0:
        return {}
    schema = md.schema
    leaves = {schema.column(i).path: i for i in range(md.num_columns)}
    # a flat column's one leaf has the column's own name (a nested one's leaves have dotted paths)
    candidates = {c: leaves[c] for c in columns if c in leaves and is_text_leaf(schema.column(leaves[c]))}
    found: dict[str, bytes] = {}
    for r in groups:
        rg = md.row_group(r)
        for name, leaf in list(candidates.items()):
            chunk = rg.column(leaf)
            st = chunk.statistics
            if (st is None or not st.has_min_max or not st.has_null_count or st.null_count != 0
                    or chunk.num_values != rg.num_rows or st.min_raw != st.max_raw
                    or found.setdefault(name, st.min_raw) != st.min_raw):
                del candidates[name]
                found.pop(name, None)
        if not candidates:
            return {}
    out: dict[str, str] = {}
    for name, raw in found.items():
        try:
            out[name] = raw.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            continue
    return out


def few_values(md: pq.FileMetaData, column: str, max_bytes_per_value: int = 8) -> bool:
    """Whether every row group stores `column` with a dictionary page and few bytes per value.

    Few bytes per value means the pages hold dictionary indices, not values a
    writer fell back to (Parquet's writers give up on a dictionary that grows
    too large and write the rest of the chunk plain; decoding those into a
    dictionary would hash every value)."""
    index = next((i for i in range(md.num_columns) if md.schema.column(i).path == column), None)
    if index is None or md.num_row_groups == 0:
        return False
    for r in range(md.num_row_groups):
        chunk = md.row_group(r).column(index)
        if not chunk.has_dictionary_page or chunk.total_uncompressed_size > max_bytes_per_value * max(chunk.num_values, 1):
            return False
    return True


__all__ = [
    "KEY_BLOOM",
    "KEY_MAX",
    "KEY_MIN",
    "KEY_SORTED",
    "OWN_KEYS",
    "RECORD_KEY",
    "TEXT_TYPES",
    "constant_text",
    "few_values",
    "footer",
    "footer_kv",
    "is_sorted_footer",
    "is_text_leaf",
    "kv_text",
    "local_tail",
    "read_errors",
    "read_footer",
    "source_name",
]
