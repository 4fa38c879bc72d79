"""format/hfile.py: the real metadata-table HFiles read; malformed ones are CorruptFileError, never another error.

Malformed inputs: truncated files, a wrong trailer/block magic, offsets pointing outside the file,
a decompressed size that disagrees with its header, and a Hypothesis fuzz of byte flips and
truncations of a real file (every outcome is a parsed file or a CorruptFileError /
UnsupportedFeatureError naming the source).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError
from lsm_lab.format import hfile


@pytest.fixture(scope="module")
def real_hfiles(real_table: Callable[[str], Path]) -> list[Path]:
    files = sorted((real_table("v9_txns_simple_meta") / ".hoodie" / "metadata").rglob("*.hfile"))
    assert len(files) >= 20
    return files


@pytest.fixture(scope="module")
def column_stats_bytes(real_hfiles: list[Path]) -> bytes:
    return next(f for f in real_hfiles if "col-stats" in f.name).read_bytes()


def test_real_files_parse(real_hfiles: list[Path]) -> None:
    total = 0
    for f in real_hfiles:
        h = hfile.read_hfile(f)
        assert h.trailer.major_version == 3 and h.trailer.codec == "GZIP"
        cells = list(h.items())
        assert len(cells) == h.entry_count
        assert [k for k, _ in cells] == sorted(k for k, _ in cells)
        for k, v in cells:
            assert h.get(k) == v
        assert h.get(b"\xff-not-a-key") is None and h.get(b"") is None
        assert h.avro_schema and "HoodieMetadataRecord" in h.avro_schema
        table = h.to_table()
        assert table.num_rows == len(cells) and table.column_names == ["key", "value"]
        total += len(cells)
    assert total > 100


def test_truncated_and_bad_magic(column_stats_bytes: bytes) -> None:
    data = column_stats_bytes
    for cut in (0, 10, 4095, len(data) // 2, len(data) - 1):
        with pytest.raises(CorruptFileError, match="x.hfile"):
            list(hfile.parse_hfile(data[:cut], source="x.hfile").items())
    t = len(data) - hfile.TRAILER_SIZE
    with pytest.raises(CorruptFileError, match="trailer magic"):
        hfile.parse_hfile(data[:t] + b"XXXXXXXX" + data[t + 8 :], source="x.hfile")
    with pytest.raises(CorruptFileError, match="block magic"):
        list(hfile.parse_hfile(b"YYYYYYYY" + data[8:], source="x.hfile").items())
    with pytest.raises(UnsupportedFeatureError, match="version 2"):
        hfile.parse_hfile(data[:-4] + struct.pack(">i", 2), source="x.hfile")
    with pytest.raises(CorruptFileError, match="not an HFile version"):
        hfile.parse_hfile(data[:-4] + struct.pack(">i", 77), source="x.hfile")


def test_bad_offsets_and_sizes(column_stats_bytes: bytes) -> None:
    data = bytearray(column_stats_bytes)
    h = hfile.parse_hfile(bytes(data))
    # the load-on-open offset (trailer field 2) pointed past the blocks
    t = len(data) - hfile.TRAILER_SIZE
    bad = bytes(data[:t]) + _trailer_with(bytes(data[t:]), load_on_open=len(data) * 2)
    with pytest.raises(CorruptFileError, match="load-on-open offset"):
        hfile.parse_hfile(bad, source="x.hfile")
    # the first data block claims more uncompressed bytes than it holds
    first = h.data_index[0].offset
    data[first + 12 : first + 16] = struct.pack(">i", 10**6)
    with pytest.raises(CorruptFileError, match="data block 0"):
        list(hfile.parse_hfile(bytes(data), source="x.hfile").items())
    # an on-disk size running past the file
    data = bytearray(column_stats_bytes)
    data[first + 8 : first + 12] = struct.pack(">i", 2**31 - 1)
    with pytest.raises(CorruptFileError, match="runs past"):
        list(hfile.parse_hfile(bytes(data), source="x.hfile").items())


def _trailer_with(trailer: bytes, *, load_on_open: int) -> bytes:
    """The trailer with field 2 (load_on_open_data_offset) replaced, re-encoded by hand."""
    length, pos = trailer[8], 9  # the shipped trailers' message length fits one varint byte
    fields = hfile._proto_fields(trailer[pos : pos + length], "t")
    fields[2] = [load_on_open]
    out = b""
    for number, values in sorted(fields.items()):
        for v in values:
            if isinstance(v, int):
                out += _varint(number << 3) + _varint(v)
            else:
                out += _varint(number << 3 | 2) + _varint(len(v)) + v
    body = trailer[:8] + _varint(len(out)) + out
    return body + b"\x00" * (len(trailer) - 4 - len(body)) + trailer[-4:]


def _varint(n: int) -> bytes:
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_flips_and_truncations(column_stats_bytes: bytes, data: st.DataObject) -> None:
    raw = bytearray(column_stats_bytes)
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    try:
        h = hfile.parse_hfile(bytes(raw), source="fuzz.hfile")
        list(h.items())
        h.to_table()
    except (CorruptFileError, UnsupportedFeatureError) as exc:
        assert "fuzz.hfile" in str(exc) or isinstance(exc, UnsupportedFeatureError)


@settings(max_examples=60, deadline=None)
@given(cells=st.dictionaries(st.text(min_size=1, max_size=30), st.binary(max_size=40), max_size=300),
       block_size=st.sampled_from([64, 300, 4096]), codec=st.sampled_from(["NONE", "GZIP"]))
def test_to_table_equals_the_cells_one_by_one(cells: dict[str, bytes], block_size: int, codec: str) -> None:
    """The columnar read (`to_table`: every block's cell starts, then Arrow views cast out) equals the cells
    parsed one at a time (`items`) and a plain dict model, over many blocks and keys/values short enough to be
    inlined in a view and long enough not to be."""
    from lsm_lab.format import hfile_write

    model = sorted((k.encode(), v) for k, v in cells.items())
    h = hfile.parse_hfile(hfile_write.write_hfile(model, codec=codec, block_size=block_size), source="m.hfile")
    table = h.to_table()
    assert table.column("key").to_pylist() == [k.decode() for k, _ in model]
    assert table.column("value").to_pylist() == [v for _, v in model]
    assert list(h.items()) == model
