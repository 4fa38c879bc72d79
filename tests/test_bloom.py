"""The bloom filter: its hash is the documented one, it never forgets a key, its false-positive
rate is near the design value, and a damaged serialisation is detected, never trusted."""

from __future__ import annotations

import base64
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import CorruptFileError, InputError
from lsm_lab.format.bloom import BloomFilter, key_hashes, optimal_size, union_all

M64 = (1 << 64) - 1


def reference_hashes(key: str) -> tuple[int, int]:
    """The hash exactly as bloom.py's docstring (and docs/FORMAT.md) define it, one key at a time."""
    raw = key.encode("utf-8")
    n = len(raw)
    raw += b"\0" * (-n % 8)
    h = (n * 0x9E3779B185EBCA87 + 0x27D4EB2F165667C5) & M64
    for j in range(0, len(raw), 8):
        w = int.from_bytes(raw[j : j + 8], "little")
        x = h ^ ((w * 0xC2B2AE3D27D4EB4F) & M64)
        h = ((((x << 31) | (x >> 33)) & M64) * 0x9E3779B185EBCA87) & M64

    def fmix(x: int) -> int:
        x ^= x >> 33
        x = (x * 0xFF51AFD7ED558CCD) & M64
        x ^= x >> 33
        x = (x * 0xC4CEB9FE1A85EC53) & M64
        return x ^ (x >> 33)

    return fmix(h), fmix(h ^ 0x165667B19E3779F9) | 1


ODD_KEYS = ["", "a", "abcdefg", "abcdefgh", "abcdefgh\x00", "abcdefghi", "é" * 30, "\U0001f600", "x" * 1000,
            "id:7,name:x", "5f0c6c9e-2b4f-4d8e-9d3a-0c1f2e3d4b5a"]


def test_vectorised_hash_equals_the_documented_definition() -> None:
    h1, h2 = key_hashes(ODD_KEYS)
    assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [reference_hashes(k) for k in ODD_KEYS]


@pytest.mark.parametrize("form", ["string", "large_string", "sliced", "chunked", "list"])
def test_hash_ignores_the_arrow_form(form: str) -> None:
    keys = ODD_KEYS * 3
    if form == "string":
        arr = pa.array(keys, pa.string())
    elif form == "large_string":
        arr = pa.array(keys, pa.large_string())
    elif form == "sliced":
        arr = pa.array(["pad"] * 5 + keys + ["tail"], pa.string()).slice(5, len(keys))
    elif form == "chunked":
        arr = pa.chunked_array([keys[:7], keys[7:]], pa.string())
    else:
        arr = keys
    h1, h2 = key_hashes(arr)
    assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [reference_hashes(k) for k in keys]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=200), st.sampled_from([0.5, 0.1, 0.01, 0.0001]))
def test_no_false_negatives(keys: list[str], fpp: float) -> None:
    bloom = BloomFilter.build(keys, fpp)
    assert bloom.might_contain(keys).all()
    assert all(k in bloom for k in keys)
    again = BloomFilter.from_base64(bloom.to_base64())
    assert again == bloom and again.might_contain(keys).all()


@pytest.mark.parametrize("fpp", [0.01, 0.05])
def test_false_positive_rate_near_design(fpp: float) -> None:
    rng = np.random.default_rng(1)
    present = [f"key-{i:016x}" for i in rng.integers(0, 1 << 62, 50_000)]
    absent = [f"other-{i:016x}" for i in rng.integers(0, 1 << 62, 100_000)]
    bloom = BloomFilter.build(present, fpp)
    rate = float(bloom.might_contain(absent).mean())
    assert fpp * 0.6 < rate < fpp * 1.5, rate
    assert abs(bloom.expected_fpp - fpp) < fpp * 0.5
    assert 0.4 < bloom.fill_ratio < 0.6  # an optimally sized filter is about half full


def test_sizing() -> None:
    m, k = optimal_size(1_000_000, 0.01)
    assert m % 64 == 0 and abs(m / 1_000_000 - 9.585) < 0.01 and k == 7
    assert optimal_size(0, 0.01)[0] == 64  # never an empty bit array
    with pytest.raises(InputError):
        optimal_size(10, 1.5)
    with pytest.raises(InputError):
        BloomFilter.build(["a"], 0.01, num_probes=40)
    with pytest.raises(InputError):
        key_hashes(pa.array([1, 2]))
    with pytest.raises(InputError):
        key_hashes(pa.array(["a", None]))


def test_empty_filter_says_no() -> None:
    bloom = BloomFilter.build([], 0.01)
    assert not bloom.might_contain(["a", ""]).any()


def test_layout_of_the_serialisation() -> None:
    bloom = BloomFilter.build(["a", "b"], 0.01)
    raw = bloom.to_bytes()
    assert raw[:4] == b"LSMB" and raw[4] == 1 and raw[5] == 1 and raw[6] == bloom.num_probes
    assert int.from_bytes(raw[8:16], "little") == bloom.num_bits
    assert int.from_bytes(raw[16:24], "little") == 2
    assert len(raw) == 28 + bloom.num_bits // 8


def _damaged(text: str, how: str) -> str:
    raw = bytearray(base64.b64decode(text))
    if how == "flip_bit":
        raw[40] ^= 0x10
    elif how == "magic":
        raw[0:4] = b"XXXX"
    elif how == "version":
        raw[4] = 9
    elif how == "truncate":
        raw = raw[:-5]
    elif how == "short":
        raw = raw[:10]
    elif how == "shape":
        raw[8:16] = (65).to_bytes(8, "little")
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.parametrize("how", ["flip_bit", "magic", "version", "truncate", "short", "shape"])
def test_damage_is_detected(how: str) -> None:
    text = BloomFilter.build([f"k{i}" for i in range(200)], 0.01).to_base64()
    with pytest.raises(CorruptFileError):
        BloomFilter.from_base64(_damaged(text, how))


@pytest.mark.parametrize("text", ["not base64 at all!", "", "éé", "QUJD"])
def test_garbage_is_detected(text: str) -> None:
    with pytest.raises(CorruptFileError):
        BloomFilter.from_base64(text)


def test_union_is_the_or_and_fills_up() -> None:
    a = BloomFilter.build([f"a{i}" for i in range(1000)], 0.01)
    b = BloomFilter.build([f"b{i}" for i in range(1000)], 0.01, num_bits=a.num_bits, num_probes=a.num_probes)
    u = union_all([a, b])
    assert u.might_contain([f"a{i}" for i in range(1000)] + [f"b{i}" for i in range(1000)]).all()
    assert u.expected_fpp > a.expected_fpp * 3  # twice the keys in the same bits: the rate climbs
    with pytest.raises(InputError):
        a.union(BloomFilter.build(["x"], 0.01))
    assert math.isclose(u.fill_ratio, 1 - (1 - a.fill_ratio) * (1 - b.fill_ratio), rel_tol=0.05)


def test_hashing_in_chunks_matches_the_reference() -> None:
    from lsm_lab.format import bloom

    n = bloom._CHUNK + 1000  # crosses a chunk boundary: each chunk is a slice of one Arrow buffer
    keys = pa.array([f"key-{i}" for i in range(n)], pa.string())
    h1, h2 = key_hashes(keys)
    for i in (0, 1, bloom._CHUNK - 1, bloom._CHUNK, n - 1):
        assert (int(h1[i]), int(h2[i])) == reference_hashes(f"key-{i}")


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=40), st.lists(st.binary(min_size=40, max_size=40), min_size=1, max_size=50),
       st.integers(min_value=0, max_value=3))
def test_keys_of_one_length_hash_as_the_reference(width: int, raw: list[bytes], skip: int) -> None:
    """The equal-length fast path (a padded grid of words) gives the documented hash, sliced arrays too."""
    keys = [bytes(b % 0x7F or 1 for b in r[:width]).decode("ascii") for r in raw]
    arr = pa.array(["pad"] * skip + keys, pa.string()).slice(skip)
    h1, h2 = key_hashes(arr)
    assert [(int(a), int(b)) for a, b in zip(h1, h2)] == [reference_hashes(k) for k in keys]


def reference_bits(keys: list[str], m: int, k: int) -> bytes:
    """The bit array as the module docstring defines it, one key and one probe at a time (Python integers)."""
    out = bytearray(m // 8)
    for key in keys:
        h1, h2 = reference_hashes(key)
        for i in range(k):
            g = ((h1 + i * h2) & M64) % m
            out[g // 8] |= 1 << (g % 8)
    return bytes(out)


U64 = st.integers(min_value=0, max_value=M64)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(U64, U64), min_size=1, max_size=40),
       st.one_of(st.integers(min_value=1, max_value=1 << 20), st.integers(min_value=1, max_value=(1 << 57))),
       st.integers(min_value=1, max_value=16))
def test_bit_positions_are_the_documented_formula(pairs: list[tuple[int, int]], m64: int, k: int) -> None:
    """`_positions` (in place, wrapping uint64 arithmetic) is (h1 + i·h2) mod 2**64 mod m for any 64-bit hashes."""
    from lsm_lab.format import bloom

    m = m64 * 64
    h1 = np.array([a for a, _ in pairs], dtype=np.uint64)
    h2 = np.array([b | 1 for _, b in pairs], dtype=np.uint64)
    want = [[((a + i * (b | 1)) & M64) % m for i in range(k)] for a, b in pairs]
    assert bloom._positions(h1, h2, m, k).tolist() == want
    buf = np.full((k, len(pairs) + 3), 7, dtype=np.uint64)  # a reused buffer, probe-major, wider than needed
    assert bloom._positions(h1, h2, m, k, out=buf[:, : len(pairs)]).tolist() == want


@pytest.mark.parametrize("by", ["keys", "states"])
@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=60), st.integers(min_value=1, max_value=64),
       st.integers(min_value=1, max_value=16), st.integers(min_value=1, max_value=7))
def test_filter_bits_are_the_documented_ones(by: str, keys: list[str], m64: int, k: int, chunk: int) -> None:
    """The bytes on disk: bit g of the array set for every probe of every key, also when keys are added in
    several calls and positions are computed in chunks smaller than a call; `states`: a writer that keeps
    `key_states` (8 bytes a key) and adds them at close builds the same bits."""
    from lsm_lab.format import bloom

    m = m64 * 64
    old = bloom._SET_CHUNK
    bloom._SET_CHUNK = chunk
    try:
        builder = bloom.BloomBuilder(m, k)
        half = len(keys) // 2
        for part in (keys[:half], keys[half:]):
            if part:
                if by == "keys":
                    builder.add(part)
                else:
                    builder.add_states(bloom.key_states(part))
        built = builder.finish()
    finally:
        bloom._SET_CHUNK = old
    assert built.bits == reference_bits(keys, m, k)
    assert built.num_keys == len(keys)


def test_filter_of_many_keys_is_the_documented_one() -> None:
    """More keys than one chunk of positions (the default chunking), against the one-key-at-a-time reference."""
    from lsm_lab.format import bloom

    keys = [f"{i:021x}" for i in range(bloom._SET_CHUNK * 2 + 77)]
    built = BloomFilter.build(keys, 0.01)
    assert built.bits == reference_bits(keys, built.num_bits, built.num_probes)


def test_streaming_writer_bloom_is_the_one_of_its_keys(tmp_path: Path) -> None:
    """`ParquetFileWriter` sizing its filter at close (from the kept hash states, many batches of keys of
    mixed lengths) stores the filter `BloomFilter.build` makes of the same keys."""
    from lsm_lab.format import bloom, parquet_footer, parquet_write

    keys = [f"k{i:x}" for i in range(bloom._CHUNK + bloom._SET_CHUNK + 123)]
    out = parquet_write.ParquetFileWriter(tmp_path / "f.parquet", pa.schema([("_hoodie_record_key", pa.string())]),
                                       is_sorted=False)
    for s in range(0, len(keys), 10_000):  # batches longer than one chunk of positions
        out.write(pa.table({"_hoodie_record_key": keys[s : s + 10_000]}))
    out.close()
    stored = BloomFilter.from_base64(parquet_footer.footer(tmp_path / "f.parquet")[parquet_footer.KEY_BLOOM])
    assert stored == BloomFilter.build(keys, parquet_write.BLOOM_FPP)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.text(max_size=40), min_size=1, max_size=4))
def test_scalar_key_hashes_equal_the_vector_ones(keys: list[str]) -> None:
    """A few keys given as strings are hashed with Python ints: the same (h1, h2) as the NumPy path,
    for every length (the last word's zero padding, empty keys) and for text outside ASCII."""
    from lsm_lab.format import bloom as bloom_module

    scalar = bloom_module.key_hashes(keys)
    vector = bloom_module.key_hashes(pa.array(keys, pa.string()))
    assert scalar[0].dtype == vector[0].dtype == np.uint64
    assert scalar[0].tolist() == vector[0].tolist() and scalar[1].tolist() == vector[1].tolist()
    f = BloomFilter.build(keys, 0.01)
    assert all(f.contains_hash(int(a), int(b)) for a, b in zip(*scalar))  # no false negative, one key at a time
