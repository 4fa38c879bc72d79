"""Hudi's footer bloom filter (format/hudi_bloom.py): the real tables' filters decode, hold every key of their
file, re-encode to the same text, and are rebuilt bit for bit from the file's keys; the vectorised Murmur
chain equals the per-key reference; DYNAMIC_V0 grows rows as upstream's `InternalDynamicBloomFilter`."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.format import hudi_bloom as hb

TABLES = ["v6_nonpartitioned", "v6_trips_8i1u", "v8_complexkeygen_hivestyle", "v8_trips_8i3u1d",
          "v9_nonpartitioned_rollback", "v9_txns_complex_meta", "v9_txns_simple_meta", "v9_txns_simple_nometa"]


def _base_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.parquet") if ".hoodie" not in p.parts)


@pytest.mark.parametrize("name", TABLES)
def test_real_footer_blooms_hold_their_keys_and_round_trip(real_table: Callable[[str], Path], name: str) -> None:
    files = _base_files(real_table(name))
    assert files
    checked = 0
    for path in files:
        kv = pq.read_metadata(path).metadata
        bloom = hb.from_footer(kv, path=path)
        assert bloom is not None, path
        assert bloom.type_code == kv[hb.TYPE_CODE_KEY.encode()].decode() == hb.DYNAMIC_V0
        assert (bloom.nb_hash, bloom.vector_size, bloom.nr) == (30, 2_587_966, 60_000)  # upstream's defaults
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0)
        assert bloom.might_contain(keys).all(), path  # no false negative, ever
        absent = [f"absent-{uuid.UUID(int=i)}" for i in range(3000)]
        assert bloom.might_contain(absent).mean() < 0.001  # fpp 1e-9 at a few keys: none expected
        text = kv[hb.FOOTER_KEY.encode()].decode()
        assert bloom.serialize_to_string() == text  # decode → encode is the identity
        assert hb.filter_of_keys(keys).serialize_to_string() == text  # our writer = Hudi's writer, bit for bit
        checked += 1
    assert checked == len(files)


def test_reference_positions_agree_with_a_real_filter(real_table: Callable[[str], Path]) -> None:
    path = _base_files(real_table("v8_trips_8i3u1d"))[0]
    bloom = hb.from_footer(pq.read_metadata(path).metadata)
    assert bloom is not None
    for key in pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist():
        pos = hb.positions_reference(key, bloom.nb_hash, bloom.vector_size)
        assert bloom.rows[0][pos].all()


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=30),
       nb=st.integers(1, 12), size=st.integers(1, 5000))
def test_vectorised_positions_equal_the_reference(keys: list[str], nb: int, size: int) -> None:
    """Any text, any length (non-ASCII tails exercise Hadoop's sign-extended tail bytes)."""
    got = hb._positions(pa.array(keys, pa.string()).cast(pa.large_binary()), nb, size)
    want = np.array([hb.positions_reference(k, nb, size) for k in keys], dtype=np.int64)
    assert (got == want).all()


def test_murmur_reference_known_values() -> None:
    # Hadoop MurmurHash of UTF-8 bytes; the tail sign extension: b"\xff" differs from an unsigned reading
    assert hb.murmur_reference(b"", 0) == 0
    assert hb.murmur_reference(b"\xff", 0) != hb.murmur_reference(b"\x7f", 0)
    assert -(1 << 31) <= hb.murmur_reference(b"hello world", 123) < (1 << 31)


def _dynamic_model(n: int, nr: int, max_entries: int) -> tuple[list[int], int, int]:
    """Per key, as `InternalDynamicBloomFilter.add`: (row of each key, rows, currentNbRecord)."""
    rows, current, reached, cur = 1, 0, False, 0
    out = []
    for _ in range(n):
        if reached:
            r = cur % rows
            cur += 1
        elif current >= nr and rows * nr < max_entries:
            rows += 1
            current = 0
            r = rows - 1
        elif current >= nr:
            reached = True
            r = 0
        else:
            r = rows - 1
        out.append(r)
        current += 1
    return out, rows, current


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 60), nr=st.integers(1, 8), max_entries=st.integers(0, 30),
       batches=st.lists(st.integers(1, 9), min_size=1, max_size=8))
def test_dynamic_rows_follow_upstream(n: int, nr: int, max_entries: int, batches: list[int]) -> None:
    bloom = hb.HudiBloomFilter.create(hb.DYNAMIC_V0, nr, 0.01, max_entries)
    rows: list[int] = []
    done = 0
    while done < n:  # keys arrive in batches: the state carries over
        take = min(batches[len(rows) % len(batches)], n - done)
        rows.extend(bloom._assign(take).tolist())
        done += take
    want, count, current = _dynamic_model(n, nr, max_entries)
    assert rows == want
    assert (len(bloom.rows), bloom.current) == (count, current)


def test_dynamic_filter_grows_and_keeps_every_key() -> None:
    keys = [f"k{i:05d}" for i in range(2500)]
    bloom = hb.HudiBloomFilter.create(hb.DYNAMIC_V0, 1000, 0.001, 2000)
    bloom.add(pa.array(keys))
    assert len(bloom.rows) == 2 and bloom.current == 1500  # two rows, then round robin
    assert bloom.might_contain(keys).all()
    again = hb.HudiBloomFilter.from_string(bloom.serialize_to_string(), hb.DYNAMIC_V0)
    assert again.might_contain(keys).all()
    assert again.to_bytes() == bloom.to_bytes()
    absent = [f"x{i}" for i in range(5000)]
    assert again.might_contain(absent).mean() < 0.05


def test_simple_filter_round_trip_and_no_type_code() -> None:
    bloom = hb.HudiBloomFilter.create(hb.SIMPLE, 500, 0.01)
    keys = [str(uuid.UUID(int=i)) for i in range(400)]
    bloom.add(keys)
    footer = hb.footer_values(bloom)
    assert set(footer) == {hb.FOOTER_KEY}  # upstream writes the type code only for dynamic filters
    back = hb.from_footer(footer)
    assert back is not None and back.type_code == hb.SIMPLE and back.might_contain(keys).all()
    raw = base64.b64decode(footer[hb.FOOTER_KEY])
    assert raw[:4] == b"\xff\xff\xff\xff" and raw[8] == hb.MURMUR_HASH  # Writable header: version -1, Murmur


def test_damaged_filters_are_typed_errors() -> None:
    bloom = hb.HudiBloomFilter.create(hb.DYNAMIC_V0, 100, 0.01)
    bloom.add(["a", "b"])
    raw = bloom.to_bytes()
    with pytest.raises(CorruptFileError, match="f.parquet"):
        hb.HudiBloomFilter.from_string("not base64!", hb.DYNAMIC_V0, path="f.parquet")
    with pytest.raises(CorruptFileError):
        hb.HudiBloomFilter.from_bytes(raw[:-3], hb.DYNAMIC_V0)
    with pytest.raises(CorruptFileError):
        hb.HudiBloomFilter.from_bytes(raw + b"\0", hb.DYNAMIC_V0)
    with pytest.raises(CorruptFileError):
        hb.HudiBloomFilter.from_bytes(raw, "BLOCKED")
    with pytest.raises(UnsupportedFeatureError):
        hb.HudiBloomFilter.from_bytes(b"\x00\x00\x00\x05" + raw[4:], hb.SIMPLE)
    with pytest.raises(InputError):
        bloom.add([""])
    with pytest.raises(InputError):
        hb.HudiBloomFilter.create("BLOOMY")
    with pytest.raises(InputError):
        hb.HudiBloomOptions.from_props({hb.PROP_NUM_ENTRIES: "many"})
    with pytest.raises(InputError, match="hoodie.bloom.index.filter.type"):
        hb.HudiBloomOptions.from_props({hb.PROP_TYPE: "CUCKOO"})
    with pytest.raises(InputError, match="hoodie.index.bloom.fpp"):
        hb.HudiBloomOptions.from_props({hb.PROP_FPP: "2"})


def test_streamed_writer_footer_equals_the_filter_of_all_keys(tmp_path: Path) -> None:
    """A file written batch by batch (as compaction streams) gets the filter of all its keys in write order —
    with options small enough that DYNAMIC_V0 grows rows across batches."""
    from lsm_lab.format import parquet_write
    opts = hb.HudiBloomOptions(num_entries=100, fpp=0.01, max_entries=250)
    keys = [f"key-{i:04d}" for i in range(700)]
    path = tmp_path / "f.parquet"
    writer = parquet_write.ParquetFileWriter(path, pa.schema([("_hoodie_record_key", pa.string())]), hudi_bloom=opts)
    for start in range(0, 700, 130):
        writer.write(pa.table({"_hoodie_record_key": keys[start: start + 130]}))
    writer.close()
    kv = pq.read_metadata(path).metadata
    got = hb.from_footer(kv)
    assert got is not None and len(got.rows) == 3 and got.current == 700 - 200
    assert kv[hb.FOOTER_KEY.encode()].decode() == hb.filter_of_keys(pa.array(keys), opts).serialize_to_string()
    assert kv[b"hoodie_min_record_key"] == b"key-0000" and kv[b"hoodie_max_record_key"] == b"key-0699"
    plain = tmp_path / "g.parquet"
    parquet_write.write_parquet(plain, pa.table({"_hoodie_record_key": keys}))
    assert hb.FOOTER_KEY.encode() not in pq.read_metadata(plain).metadata  # not asked: not written
