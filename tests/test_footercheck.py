"""Damaged Parquet footers are typed errors, never a process abort (issue 28, finding 6).

pyarrow builds a row group's column-chunk metadata only when it is first asked for, and a C++
exception there used to abort the process ("Definition level histogram size mismatch",
"ColumnMetaData type does not match ColumnDescriptor physical type").  `format/footercheck.py`
walks the footer first.  Here every single-bit flip of a small file's footer is classified by
the check alone (safe in-process), and the cases it refuses are opened the way readers open them.
The subprocess campaign over the same flips is tests/fuzz/test_footer_flips.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import CorruptFileError
from lsm_lab.format import parquet_footer, parquet_read
from lsm_lab.format.footercheck import footer_problem
from lsm_lab.table.footer import FooterCache


@pytest.fixture(scope="module")
def base_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    t = lsm_lab.create_table(tmp_path_factory.mktemp("fc") / "t", name="fc", record_key="id", partition_by="p",
                             num_buckets=1)
    t.insert([{"id": f"k{i:03d}", "p": "a", "v": i} for i in range(20)])
    t.compact(strategy="full")
    (f,) = [p for p in local(t.path).rglob("*.parquet") if ".hoodie" not in p.parts]
    return f


def _flips(data: bytes) -> dict[str, bytes]:
    """One damaged copy per kind of problem the check names (first word groups), from all single-bit flips."""
    n = len(data)
    start = n - 8 - int.from_bytes(data[-8:-4], "little")
    out: dict[str, bytes] = {}
    for off in range(start, n - 8):
        for bit in range(8):
            b = bytearray(data)
            b[off] ^= 1 << bit
            try:
                md = pq.read_metadata(pa.BufferReader(bytes(b)))
            except (OSError, ValueError, pa.ArrowException):
                continue  # pyarrow raises: no accessor is ever reached
            problem = footer_problem(md, bytes(b))
            for kind in ("definition level histogram", "physical type", "encryption", "rows are not the sum",
                         "statistics bound"):
                if kind in problem:
                    out.setdefault(kind, bytes(b))
    return out


def test_the_undamaged_footer_passes(base_file: Path) -> None:
    data = base_file.read_bytes()
    assert footer_problem(pq.read_metadata(base_file), data) == ""


def test_damage_that_aborted_is_a_typed_error(base_file: Path, tmp_path: Path) -> None:
    cases = _flips(base_file.read_bytes())
    # the flips that aborted the process before the check (and the one that crashed pyarrow's footer writer)
    assert {"definition level histogram", "physical type", "encryption"} <= set(cases), sorted(cases)
    for kind, damaged in cases.items():
        path = tmp_path / f"{kind.replace(' ', '_')}.parquet"
        path.write_bytes(damaged)
        with pytest.raises(CorruptFileError, match="damaged Parquet footer") as err:
            parquet_read.open_parquet(path)
        assert str(path) in str(err.value), kind
        with pytest.raises(CorruptFileError, match="damaged Parquet footer"):
            parquet_footer.read_footer(path)
        with pytest.raises(CorruptFileError):
            parquet_read.open_parquet(pa.BufferReader(damaged))  # a v1 log's Parquet block is opened from memory
        with pytest.raises(CorruptFileError):
            FooterCache().get(path)  # lookups


def test_a_key_range_that_disagrees_with_the_statistics_is_refused(base_file: Path, tmp_path: Path) -> None:
    data = base_file.read_bytes()
    key = parquet_footer.KEY_MIN.encode()
    at = data.rindex(key)
    # the value follows the key in the footer's key-value list: flip a bit of its last character
    value = parquet_footer.read_footer(base_file)[1][parquet_footer.KEY_MIN].encode()
    pos = data.index(value, at) + len(value) - 1
    damaged = bytearray(data)
    damaged[pos] ^= 0x08
    path = tmp_path / "range.parquet"
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptFileError, match="key range"):
        FooterCache().get(path)
