"""Opening a data file for reading: the checked reader every data file of a table goes through.

    open_parquet(source)  ─►  CheckedParquetFile (a pq.ParquetFile)
        local file, buffer:    read as it is
        object-store key:      one GET of the object, or ranged GETs (format/ranged.py)
        then:                  footer checked (footercheck) unless handed over;
                               page CRC-32s verified on every read;
                               pyarrow's errors → CorruptFileError naming the file

    read_parquet(path, columns, allowed=, read_dictionary=)
        columns of one value filled from the footer (parquet_footer.constant_text), the rest decoded

**Checksums.** Every page is written with its CRC-32 (format/parquet_write.py) and `open_parquet`,
the one way data files are opened for reading, verifies them (`page_checksum_verification`): a
flipped bit in a data page is a `CorruptFileError` naming the file, never a different value.
Files written without checksums (older lsm_lab, other engines) are read as before.

**Damaged footers.** A footer opened here (without a `metadata=` handed over, which comes from
`parquet_footer.read_footer` or another open: already checked) passes `footercheck.check_footer`
before anything touches its row groups: a damaged one is a `CorruptFileError`, never SIGABRT.

**Columns of one value** (`parquet_footer.constant_text`): a text column whose statistics show the
same single value and no null in every row group (a partition column, `_hoodie_partition_path`, a
base file's `_hoodie_file_name`) is filled from them by `read_parquet` (and by lookups), not
decoded: a column chunk costs a fixed ~0.1 ms to decode however few its values.  Its pages are not
read, so their checksums are not checked either; a flipped bit there changes nothing that is read.

**Stored schema.** `read_parquet(allowed=...)` refuses a file holding a column the table's stored
schema lacks (`check_columns`): reads by that schema would silently drop it.

Simplified compared with Apache Hudi: Hudi reads base files through parquet-mr's record readers
(Avro or Spark rows) and verifies page checksums only when configured to; here every read is
Arrow's, always checked.

Taught in: notebooks/03_sorted_writes_and_levels.ipynb, notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab import arrowlit
from lsm_lab.errors import CorruptTableError
from lsm_lab.format.footercheck import check_footer
from lsm_lab.format.parquet_footer import (
    TEXT_TYPES,
    constant_text,
    few_values,
    footer_kv,
    local_tail,
    read_errors,
    read_footer,
    source_name,
)
from lsm_lab.format.ranged import object_source, stream_source, tail_bytes
from lsm_lab.storage import StoragePath

VERIFY_PAGE_CHECKSUMS = True  # benchmarks/bench_checksums.py turns it (and the writer's) off to measure their cost

# columns Hudi may write into data files besides the table schema's
OPTIONAL_META_COLUMNS = ("_hoodie_operation",)


def check_columns(path: str | os.PathLike[str] | StoragePath, names: Collection[str], allowed: Collection[str]) -> None:
    """CorruptTableError when a data file holds a column the table's stored schema lacks."""
    extra = [n for n in names if n not in allowed and n not in OPTIONAL_META_COLUMNS]
    if extra:
        raise CorruptTableError(f"the file holds column{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} "
                                "that the table's stored schema lacks (reads would silently drop them)",
                                path=path, field="extraMetadata schema")


def _opened_tail(opened: Any, source: Any, size: int | None) -> bytes | None:
    """The footer bytes of what `CheckedParquetFile` opened (None: a source they cannot be read from)."""
    if isinstance(opened, (str, os.PathLike)):
        return local_tail(opened)
    if isinstance(source, StoragePath) and not isinstance(opened, pa.BufferReader):
        return tail_bytes(source, size)  # ranged reads: one more GET (lookups hand the checked footer over)
    if isinstance(opened, pa.NativeFile) and opened.seekable():
        total = opened.size()
        if total < 12:
            return None
        trailer = opened.read_at(8, total - 8)
        n = int.from_bytes(trailer[:4], "little")
        return opened.read_at(n + 8, total - 8 - n) if n + 8 <= total else None
    return None


class CheckedParquetFile(pq.ParquetFile):
    """A `pq.ParquetFile` that verifies page checksums and turns read failures into `CorruptFileError`."""

    def __init__(self, source: Any, **options: Any) -> None:
        self.name = source_name(source)
        by_range = bool(options.pop("ranged", False))
        size = options.pop("size", None)
        if isinstance(source, StoragePath) and (by_range or "metadata" in options):
            options.setdefault("pre_buffer", True)  # coalesce the column chunks a read needs into few GETs
        opened = object_source(source, by_range or "metadata" in options, size)
        with read_errors(self.name, "not a readable Parquet file"):
            super().__init__(opened, page_checksum_verification=VERIFY_PAGE_CHECKSUMS, **options)
        if "metadata" not in options:  # a footer handed over comes from `read_footer` or another open: checked
            with read_errors(self.name, "not a readable Parquet file"):
                tail = _opened_tail(opened, source, size)
            check_footer(self.metadata, self.name, tail)

    def read(self, *args: Any, **kwargs: Any) -> pa.Table:
        with read_errors(self.name, "cannot read Parquet data"):
            return super().read(*args, **kwargs)

    def read_row_group(self, *args: Any, **kwargs: Any) -> pa.Table:
        with read_errors(self.name, "cannot read Parquet data"):
            return super().read_row_group(*args, **kwargs)

    def read_row_groups(self, *args: Any, **kwargs: Any) -> pa.Table:
        with read_errors(self.name, "cannot read Parquet data"):
            return super().read_row_groups(*args, **kwargs)

    def iter_batches(self, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        with read_errors(self.name, "cannot read Parquet data"):
            yield from super().iter_batches(*args, **kwargs)


def open_parquet(source: str | os.PathLike[str] | StoragePath | pa.NativeFile | Any,
                 **options: Any) -> CheckedParquetFile:
    """Open a data file (or an in-memory Parquet buffer) for reading; pages are checked against their CRC.

    `options` are `pq.ParquetFile`'s (`metadata=`, `pre_buffer=`, `buffer_size=`, ...).  A file on an
    object store is fetched with one GET of the whole object (fastest for whole-file reads, see
    benchmarks/bench_storage.py), or with ranged GETs when `ranged=True` or the footer is
    passed as `metadata=` (lookups that read a few row groups); `size=` spares a HEAD.
    """
    return CheckedParquetFile(source, **options)


def open_stream(path: str | os.PathLike[str] | StoragePath,
                size: int | None = None) -> tuple[Any, pq.FileMetaData, dict[str, str]]:
    """A source to stream a whole data file from, its checked footer and the footer's key-value map.

    A local file is its path (the footer read by `read_footer`).  An object is fetched for a
    streamed read as `ranged.stream_source` does: one GET of the whole object when it is small
    (the footer comes with it), else a tail GET and about one GET per window of row groups; each
    object is read once, and no HEAD is sent when `size` (from a listing) is given.
    Open the source with `open_parquet(source, metadata=footer, pre_buffer=False)`."""
    if not isinstance(path, StoragePath):
        md, kv = read_footer(path)
        return path, md, kv
    with read_errors(source_name(path), "not a readable Parquet file"):
        source, tail = stream_source(path, size)
        md = pq.read_metadata(pa.BufferReader(tail))
    return source, check_footer(md, source_name(path), tail), footer_kv(md)


def read_parquet(path: str | os.PathLike[str] | StoragePath, columns: list[str] | None = None, *,
                 allowed: Collection[str] | None = None, read_dictionary: Collection[str] = (),
                 use_threads: bool = True) -> pa.Table:
    """Read a Parquet data file (selected columns that exist), checksums verified, with a typed error on corruption.

    `allowed`: the columns the table's stored schema knows; a file holding another one
    is a `CorruptTableError` (the stored schema would silently drop it from reads).
    `read_dictionary`: string columns to return dictionary-encoded, as Parquet stores
    them when they hold few values (a file name, a commit time): no string per row is
    built until the caller decodes the rows it keeps. Only columns that the footer
    shows dictionary-encoded throughout (`few_values`) are; names the file lacks are ignored.
    `use_threads=False`: decode in the calling thread (a caller that reads files on several
    threads already; Arrow's column threads then cost CPU and gain nothing).
    A text column that the footer proves holds one value in every row (`constant_text`: a
    partition column, the partition path, a file name) is filled with it, not decoded.
    """
    # an object is fetched once even when it is opened twice (to learn its columns, then to read)
    source: Any = object_source(path, False) if read_dictionary and isinstance(path, StoragePath) else path
    pf = open_parquet(source)
    schema = pf.schema_arrow
    names = schema.names
    cols = names if columns is None else [c for c in columns if c in names]
    if allowed is not None:
        check_columns(path, names, allowed)
    md = pf.metadata
    constants = constant_text(md, [c for c in cols if schema.field(c).type in TEXT_TYPES])
    decode = [c for c in cols if c not in constants] if constants else cols
    wanted = [c for c in read_dictionary if c in names and c in decode and few_values(md, c)]
    if wanted:  # the footer is handed over, not parsed again
        pf = open_parquet(source, metadata=md, read_dictionary=wanted)
    pf.name = source_name(path)
    table = pf.read(columns=decode, use_threads=use_threads)
    if not constants:
        return table
    n = md.num_rows
    by_name = dict(zip(decode, table.columns))
    fields, arrays = [], []
    for c in cols:
        field = schema.field(c)
        if c in constants:
            value = arrowlit.text([constants[c]], field.type)  # not pa.scalar: no pandas import (arrowlit)
            if c in read_dictionary:  # as the caller asked: one dictionary entry, every index 0
                array: Any = pa.DictionaryArray.from_arrays(arrowlit.int32_zeros(n), value)
                field = field.with_type(array.type)
            else:
                array = pa.repeat(value[0], n)
        else:
            array = by_name[c]
            field = table.schema.field(c)
        fields.append(field)
        arrays.append(array)
    with read_errors(source_name(path), "cannot read Parquet data"):  # a footer's row count that its pages do not hold
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=table.schema.metadata))


__all__ = ["OPTIONAL_META_COLUMNS", "VERIFY_PAGE_CHECKSUMS", "CheckedParquetFile", "check_columns", "open_parquet",
           "open_stream", "read_parquet"]
