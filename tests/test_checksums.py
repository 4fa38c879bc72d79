"""Page checksums: data files are written with a CRC per page and every read verifies it.

One flipped byte inside a data page of a committed file must surface as a
`CorruptFileError` naming the file, on every path that reads data files
(snapshot read, point lookup, compaction), never as a different value.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import CorruptFileError
from lsm_lab.format import parquet_read, parquet_write

N = 5_000
# distinct random values: written plain, and stored by snappy as literals, so a flipped bit in the page is
# another value for a reader that does not check (in a compressible page it would break the decompression)
VALUES = [random.Random(i).getrandbits(62) for i in range(N)]


def _flip_in_data_page(path: Path, column: str) -> None:
    """Flip one bit in the middle of `column`'s last data page of row group 0 (its values, not a header)."""
    md = pq.read_metadata(path)
    index = md.schema.to_arrow_schema().get_field_index(column)
    chunk = md.row_group(0).column(index)
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end = start + chunk.total_compressed_size
    assert chunk.data_page_offset < end
    at = chunk.data_page_offset + (end - chunk.data_page_offset) * 3 // 4
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))


def _table_with_one_file(tmp_table: Callable[..., lsm_lab.Table]) -> tuple[lsm_lab.Table, Path]:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    table.bulk_insert(pa.table({"id": [f"k{i:05d}" for i in range(N)], "ts": [0] * N,
                                "v": VALUES}))
    (fs,) = table.latest_slices()
    assert fs.base_file is not None
    return table, local(fs.base_file.path)


def test_data_files_carry_page_checksums(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table, path = _table_with_one_file(tmp_table)
    assert table.read(columns=["v"]).num_rows == N
    # a reader that does not verify sees the flipped value; the one reader of lsm_lab refuses it
    _flip_in_data_page(path, "v")
    unchecked = pq.ParquetFile(path).read(columns=["v"]).column("v").to_pylist()
    assert unchecked != VALUES
    with pytest.raises(CorruptFileError, match="CRC") as err:
        parquet_read.open_parquet(path).read(columns=["v"])
    assert err.value.path == str(path)


def test_a_flipped_byte_in_a_committed_file_is_a_typed_error_on_every_read_path(
        tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table, path = _table_with_one_file(tmp_table)
    _flip_in_data_page(path, "v")
    with pytest.raises(CorruptFileError) as err:
        table.read(columns=["id", "v"])
    assert err.value.path == str(path)
    with pytest.raises(CorruptFileError) as err:
        table.lookup([f"k{i:05d}" for i in range(0, N, 50)], columns=["id", "v"])
    assert err.value.path == str(path)
    table.upsert(pa.table({"id": ["k00001"], "ts": [1], "v": [-1]}))
    with pytest.raises(CorruptFileError) as err:
        table.compact(strategy="full", progress=False)
    assert err.value.path == str(path)


def test_files_without_checksums_still_read(tmp_path: Path) -> None:
    path = tmp_path / "plain.parquet"
    data = pa.table({"k": ["a", "b"], "v": [1, 2]})
    pq.write_table(data, path)  # another engine's file: no page CRCs
    assert parquet_read.open_parquet(path).read().equals(data)
    assert parquet_read.read_parquet(path, ["v", "missing"]).equals(data.select(["v"]))


def test_a_truncated_file_is_a_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    parquet_write.write_parquet(path, pa.table({"_hoodie_record_key": ["a", "b"], "v": [1, 2]}))
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CorruptFileError) as err:
        parquet_read.read_parquet(path)
    assert err.value.path == str(path)
