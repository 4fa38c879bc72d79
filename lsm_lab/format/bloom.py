"""A bloom filter of record keys, in NumPy, small enough to live in a Parquet footer.

A bloom filter answers "might this file hold key k?" with *no* false negatives
and a tunable rate of false positives.  lsm_lab writes one per data file (base
files, data logs and delete logs alike) so that a point lookup can skip every
file that certainly lacks the key without touching its data pages:

    key "5f0c…"  ──hash──►  h1, h2  ──►  bit positions  g_i = (h1 + i·h2) mod m,  i = 0..k-1
                                              │
    bits   0 1 0 0 1 1 0 1 0 0 0 1 … (m bits) ◄┘   all k bits set → "maybe";  any bit 0 → "no"

**Sizing.** For `n` keys and a target false-positive rate `p`, the filter has
``m = ceil(-n·ln p / ln²2)`` bits rounded up to a multiple of 64 and
``k = round(m/n · ln 2)`` hash functions (1..16); at p = 1% that is 9.6 bits
and 7 probes per key, about 1.2 bytes per key before base64.

**The hash** (`key_hashes`), fixed forever because filters are stored on disk.
All arithmetic is on unsigned 64-bit integers modulo 2**64:

    bytes  = UTF-8 of the key, zero-padded to a multiple of 8, read as
             little-endian words w_0 … w_{W-1}   (W = ceil(len/8))
    h      = len · P1 + SEED
    for each word:   h = rotl(h xor (w_j · P2), 31) · P1
    h1     = fmix64(h)            (MurmurHash3's finaliser)
    h2     = fmix64(h xor P3) | 1 (odd, so the probe sequence never sticks)

with the xxHash64 primes P1 = 0x9E3779B185EBCA87, P2 = 0xC2B2AE3D27D4EB4F,
P3 = 0x165667B19E3779F9 and SEED = 0x27D4EB2F165667C5.  The key's length
enters the start state, so zero padding is unambiguous.  The loop runs once
per *word position* over all keys at once (keys sorted by word count so that
the active keys are a prefix; each word is gathered straight from Arrow's data
buffer and its bytes past the key's end masked to zero), so hashing a million
36-byte keys costs five vector passes (per chunk of 16,384 keys, small enough
for the CPU cache) rather than a million Python calls.  The k bit positions of
a key are then computed probe after probe (probe i = probe i-1 + h2, wrapping
like the formula) and set in a byte-per-bit array that `finish` packs.

**On disk** (footer key ``lsm_lab.bloom``, see docs/FORMAT.md): base64 of

    offset  size  field
    0       4     magic  b"LSMB"
    4       1     version (1)
    5       1     hash id (1 = the hash above)
    6       1     k, number of probes
    7       1     reserved (0)
    8       8     m, number of bits, uint64 little-endian (multiple of 64)
    16      8     n, keys inserted, uint64 little-endian
    24      4     CRC-32 (zlib) of the bit array, uint32 little-endian
    28      m/8   bit array; bit g is bit (g mod 8) of byte g div 8

The CRC makes a damaged filter detectable: a reader that cannot decode or
verify the value treats the file as "no filter" and reads it, so corruption
costs time, never a missed key.

Simplified compared with Apache Hudi: Hudi stores a Java-serialised Hadoop
bloom filter (Murmur hash) under ``org.apache.hudi.bloomfilter`` with a type
code (``SIMPLE`` or ``DYNAMIC_V0``, which grows by chaining filters); lsm_lab
uses its own documented format under its own key (Hudi readers will not find
or misread it), sized once when the file is written, since files are
immutable: for its exact key count, or for an upper bound of it when the
file is streamed (`BloomBuilder`, used by compaction; see format/parquet_write.py).

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa

from lsm_lab.errors import CorruptFileError, InputError

MAGIC = b"LSMB"
VERSION = 1
HASH_ID = 1
HEADER = struct.Struct("<4sBBBBQQI")  # magic, version, hash id, k, reserved, m, n, crc32
DEFAULT_FPP = 0.01
MAX_PROBES = 16

P1 = np.uint64(0x9E3779B185EBCA87)
P2 = np.uint64(0xC2B2AE3D27D4EB4F)
P3 = np.uint64(0x165667B19E3779F9)
SEED = np.uint64(0x27D4EB2F165667C5)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_SCALAR_KEYS = 4  # up to this many keys, `contains_hashes` probes with Python ints (same positions)
_MASK64 = (1 << 64) - 1
_CHUNK = 1 << 14  # keys hashed per vector pass: bounds temporary memory, and 128 KiB arrays stay in the CPU cache
_SET_CHUNK = 8_192  # keys whose k bit positions are computed at once (8·k bytes each: stays in the CPU cache)


# --------------------------------------------------------------------------- hashing
def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(33))
    x = x * _M1
    x = x ^ (x >> np.uint64(33))
    x = x * _M2
    return cast("np.ndarray", x ^ (x >> np.uint64(33)))


def key_bytes(keys: pa.Array | pa.ChunkedArray | Sequence[str], what: str = "bloom filter") -> pa.Array:
    """Record keys (strings or bytes, no null) as one `large_binary` array, the form the hashes read;
    `InputError` naming `what` otherwise.  Shared with Hudi's own filter (format/hudi_bloom.py)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(list(keys), pa.string())
    if keys.null_count:
        raise InputError(f"cannot add or probe {keys.null_count} null key(s) in a {what}")
    t = keys.type
    if (pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t)
            or pa.types.is_string_view(t) or pa.types.is_binary_view(t)):
        return keys.cast(pa.large_binary())
    raise InputError(f"{what} keys must be strings, not {t}")


def _hash_chunk(arr: pa.Array) -> np.ndarray:
    """The hash state of every key of `arr` (large binary) before the finalisers (`_finish`)."""
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    lengths = np.diff(offsets)
    nwords = (lengths + 7) // 8
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    # 8 zero bytes of slack, then a view holding the little-endian word that starts at *every* byte
    # offset, so word j of key i is at[offsets[i] - first + 8j] (bytes past the key are masked off)
    first = int(offsets[0]) if n else 0
    if n and int(lengths[0]) > 0 and (lengths == lengths[0]).all():  # one length (ids, UUIDs): a padded grid
        return _hash_equal_lengths(data[first : int(offsets[-1])], n, int(lengths[0]))
    data = np.concatenate([data[first : int(offsets[-1]) if n else 0], np.zeros(8, np.uint8)])
    at = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    # keys with more words first: at word position j the active keys are a prefix
    order = np.argsort(-nwords, kind="stable")
    active_after = n - np.cumsum(np.bincount(nwords, minlength=1))  # [j] = keys with more than j words
    sorted_len = lengths[order]
    starts = offsets[:-1][order] - first
    h = sorted_len.astype(np.uint64) * P1 + SEED
    for j in range(int(nwords.max()) if n else 0):
        cnt = int(active_after[j])
        w = at[starts[:cnt] + 8 * j].astype(np.uint64)
        rem = sorted_len[:cnt] - 8 * j
        shift = (np.minimum(rem, 8) * 8).astype(np.uint64)  # bits of this word that belong to the key
        w &= np.where(shift >= 64, _ALL, (np.uint64(1) << np.minimum(shift, np.uint64(63))) - np.uint64(1))
        h[:cnt] = _rotl(h[:cnt] ^ (w * P2), 31) * P1
    state = np.empty(n, dtype=np.uint64)
    state[order] = h
    return state


def _hash_equal_lengths(data: np.ndarray, n: int, width: int) -> np.ndarray:
    """`_hash_chunk` of `n` keys of `width` bytes each (3x faster: no gathers, no masks, no reordering)."""
    words = -(-width // 8)
    grid = np.zeros((n, words * 8), dtype=np.uint8)  # each key zero-padded to whole words
    grid[:, :width] = data.reshape(n, width)
    w = grid.view("<u8")
    h = np.full(n, width, dtype=np.uint64) * P1 + SEED  # arrays wrap silently (scalars would warn)
    for j in range(words):  # a loop over the key's words, not the keys
        h = _rotl(h ^ (w[:, j].astype(np.uint64) * P2), 31) * P1
    return h


def _finish(state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h1, h2) from the hash states: both finalisers of the module docstring."""
    return _fmix64(state), _fmix64(state ^ P3) | np.uint64(1)


def key_states(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
    """Every key's 64-bit hash state ``h`` before the finalisers: h1 and h2 both derive from it.

    A writer that sizes its filter only when it closes keeps these (8 bytes a key) instead of
    (h1, h2) (16 bytes a key) and finishes them batch by batch in `BloomBuilder.add_states`."""
    arr = key_bytes(keys)
    if len(arr) <= _CHUNK:
        return _hash_chunk(arr)
    return np.concatenate([_hash_chunk(arr.slice(i, _CHUNK)) for i in range(0, len(arr), _CHUNK)])


def _fmix64_int(x: int) -> int:
    x ^= x >> 33
    x = (x * int(_M1)) & _MASK64
    x ^= x >> 33
    x = (x * int(_M2)) & _MASK64
    return x ^ (x >> 33)


def _scalar_hashes(keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`key_hashes` of a few keys with Python ints: the same two hashes as the vector path (a Hypothesis
    test compares them), without NumPy's and Arrow's fixed cost per call (~70 µs, a point lookup's key)."""
    p1, p2 = int(P1), int(P2)
    h1, h2 = [], []
    for key in keys:
        data = key.encode("utf-8")
        h = (len(data) * p1 + int(SEED)) & _MASK64
        for j in range(0, len(data), 8):  # the key's words, zero-padded, little-endian
            w = int.from_bytes(data[j : j + 8], "little")
            x = h ^ ((w * p2) & _MASK64)
            h = ((((x << 31) | (x >> 33)) & _MASK64) * p1) & _MASK64
        h1.append(_fmix64_int(h))
        h2.append(_fmix64_int(h ^ int(P3)) | 1)
    return np.array(h1, dtype=np.uint64), np.array(h2, dtype=np.uint64)


def key_hashes(keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The two 64-bit hashes (h1, h2) of every key's UTF-8 bytes (see the module docstring).

    Up to `_SCALAR_KEYS` keys given as Python strings are hashed with Python ints (`_scalar_hashes`)."""
    if (isinstance(keys, (list, tuple)) and len(keys) <= _SCALAR_KEYS
            and all(isinstance(k, str) for k in keys)):
        return _scalar_hashes(keys)
    arr = key_bytes(keys)
    if len(arr) <= _CHUNK:
        return _finish(_hash_chunk(arr))
    parts = [_finish(_hash_chunk(arr.slice(i, _CHUNK))) for i in range(0, len(arr), _CHUNK)]  # finished in the cache
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


# --------------------------------------------------------------------------- the filter
def optimal_size(num_keys: int, fpp: float = DEFAULT_FPP) -> tuple[int, int]:
    """(m bits, k probes) for `num_keys` keys at false-positive rate `fpp`."""
    if not 0.0 < fpp < 1.0:
        raise InputError(f"bloom filter false-positive rate must be in (0, 1), got {fpp}")
    n = max(int(num_keys), 1)
    bits = math.ceil(-n * math.log(fpp) / (math.log(2) ** 2))
    m = max(64, -(-bits // 64) * 64)
    k = min(MAX_PROBES, max(1, round(m / n * math.log(2))))
    return m, k


@dataclass(frozen=True)
class BloomFilter:
    """An immutable bloom filter: `num_bits` bits (packed little-endian in `bits`), `num_probes` probes."""

    num_bits: int
    num_probes: int
    num_keys: int
    bits: bytes

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, keys: pa.Array | pa.ChunkedArray | Sequence[str], fpp: float = DEFAULT_FPP,
              *, num_bits: int | None = None, num_probes: int | None = None) -> BloomFilter:
        """A filter holding `keys`, sized for their count at `fpp` (or with an explicit size)."""
        h1, h2 = key_hashes(keys)
        n = len(h1)
        m, k = optimal_size(n, fpp)
        if num_bits is not None:
            m = max(64, -(-int(num_bits) // 64) * 64)
        if num_probes is not None:
            k = int(num_probes)
        builder = BloomBuilder(m, k)
        builder.add_hashes(h1, h2)
        return builder.finish()

    # ------------------------------------------------------------------ probe
    def contains_hashes(self, h1: np.ndarray, h2: np.ndarray) -> np.ndarray:
        """Membership for pre-computed hashes (boolean array, True = maybe present)."""
        if len(h1) == 0:
            return np.zeros(0, dtype=bool)
        if len(h1) <= _SCALAR_KEYS:  # a point lookup's few keys: Python ints beat NumPy's cost per call
            return np.array([self.contains_hash(a, b) for a, b in zip(h1.tolist(), h2.tolist())], dtype=bool)
        pos = _positions(h1, h2, self.num_bits, self.num_probes)
        packed = np.frombuffer(self.bits, dtype=np.uint8)
        bit = (packed[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & np.uint8(1)
        return np.asarray(bit.all(axis=1), dtype=bool)

    def contains_hash(self, h1: int, h2: int) -> bool:
        """Membership of one key by its two hashes as Python ints (the positions `_positions` computes)."""
        m, bits = self.num_bits, self.bits
        for i in range(self.num_probes):
            p = ((h1 + i * h2) & _MASK64) % m
            if not bits[p >> 3] >> (p & 7) & 1:
                return False
        return True

    def might_contain(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
        """For every key: False = certainly absent, True = maybe present."""
        return self.contains_hashes(*key_hashes(keys))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        return bool(self.might_contain([key])[0])

    # ------------------------------------------------------------------ facts
    @property
    def fill_ratio(self) -> float:
        """Fraction of bits set."""
        ones = int(np.unpackbits(np.frombuffer(self.bits, dtype=np.uint8)).sum())
        return ones / self.num_bits

    @property
    def expected_fpp(self) -> float:
        """The false-positive rate expected from the fill: fill_ratio ** k."""
        return self.fill_ratio ** self.num_probes

    def union(self, other: BloomFilter) -> BloomFilter:
        """Bitwise OR of two filters of the same shape (what a cumulative filter costs nothing to build as)."""
        if (self.num_bits, self.num_probes) != (other.num_bits, other.num_probes):
            raise InputError("only bloom filters of the same size and probe count can be united")
        a = np.frombuffer(self.bits, dtype=np.uint8)
        b = np.frombuffer(other.bits, dtype=np.uint8)
        return BloomFilter(self.num_bits, self.num_probes, self.num_keys + other.num_keys, (a | b).tobytes())

    def describe(self) -> str:
        return (f"BloomFilter(m={self.num_bits} bits ({self.num_bits // 8} bytes), k={self.num_probes}, "
                f"n={self.num_keys}, fill={self.fill_ratio:.3f}, expected fpp={self.expected_fpp:.4f})")

    # ------------------------------------------------------------------ bytes
    def to_bytes(self) -> bytes:
        crc = zlib.crc32(self.bits) & 0xFFFFFFFF
        return HEADER.pack(MAGIC, VERSION, HASH_ID, self.num_probes, 0, self.num_bits, self.num_keys, crc) + self.bits

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_bytes(cls, raw: bytes) -> BloomFilter:
        """Decode and verify; `CorruptFileError` for anything that is not an intact version-1 filter."""
        if len(raw) < HEADER.size:
            raise CorruptFileError(f"bloom filter is {len(raw)} bytes, shorter than its {HEADER.size}-byte header")
        magic, version, hash_id, k, _reserved, m, n, crc = HEADER.unpack_from(raw)
        if magic != MAGIC:
            raise CorruptFileError(f"bloom filter has magic {magic!r}, expected {MAGIC!r}")
        if version != VERSION or hash_id != HASH_ID:
            raise CorruptFileError(f"bloom filter version {version} / hash {hash_id} is not supported (1 / 1)")
        if m == 0 or m % 64 or not 1 <= k <= MAX_PROBES:
            raise CorruptFileError(f"bloom filter has an impossible shape (m={m}, k={k})")
        bits = raw[HEADER.size :]
        if len(bits) != m // 8:
            raise CorruptFileError(f"bloom filter holds {len(bits)} bytes of bits, its header says {m // 8}")
        if zlib.crc32(bits) & 0xFFFFFFFF != crc:
            raise CorruptFileError("bloom filter bits do not match their CRC-32")
        return cls(int(m), int(k), int(n), bytes(bits))

    @classmethod
    def from_base64(cls, text: str) -> BloomFilter:
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
            raise CorruptFileError(f"bloom filter is not valid base64: {exc}") from None
        return cls.from_bytes(raw)


def decode_verdict(stored: bytes | str | None) -> tuple[BloomFilter | None, str]:
    """A stored filter (raw bytes, or base64 text as in a footer) decoded and verified.

    Returns (filter, "ok"), (None, "missing") or (None, "corrupt (<why>)"): a reader that
    gets no filter reads the file, so a damaged filter costs time, never a missed key."""
    if stored is None:
        return None, "missing"
    try:
        found = BloomFilter.from_base64(stored) if isinstance(stored, str) else BloomFilter.from_bytes(stored)
    except CorruptFileError as exc:
        return None, f"corrupt ({exc.message})"
    return found, "ok"


class BloomBuilder:
    """A filter of a fixed shape filled batch by batch (a streaming writer's filter).

    `for_keys(n, fpp)` sizes it for at most `n` keys; a filter sized for more
    keys than it ends up holding has fewer false positives than `fpp`, never more.
    Memory: one byte per bit while building (m/8 bytes once finished).
    """

    def __init__(self, num_bits: int, num_probes: int) -> None:
        if not 1 <= num_probes <= MAX_PROBES:
            raise InputError(f"bloom filter probes must be in 1..{MAX_PROBES}, got {num_probes}")
        self.num_bits = max(64, -(-int(num_bits) // 64) * 64)
        self.num_probes = int(num_probes)
        self.num_keys = 0
        self._flags = np.zeros(self.num_bits, dtype=bool)

    @classmethod
    def for_keys(cls, num_keys: int, fpp: float = DEFAULT_FPP) -> BloomBuilder:
        return cls(*optimal_size(num_keys, fpp))

    def add(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> None:
        self.add_hashes(*key_hashes(keys))

    def add_states(self, states: np.ndarray) -> None:
        """Add keys given by their `key_states` (finished chunk by chunk: no (h1, h2) of every key at once)."""
        for s in range(0, len(states), _SET_CHUNK):
            self.add_hashes(*_finish(states[s : s + _SET_CHUNK]))

    def add_hashes(self, h1: np.ndarray, h2: np.ndarray) -> None:
        h1 = np.asarray(h1, dtype=np.uint64)
        h2 = np.asarray(h2, dtype=np.uint64)
        buf = np.empty((self.num_probes, min(len(h1), _SET_CHUNK)), dtype=np.uint64)
        for s in range(0, len(h1), _SET_CHUNK):
            n = len(h1[s : s + _SET_CHUNK])
            out = buf if n == buf.shape[1] else np.empty((self.num_probes, n), dtype=np.uint64)
            _positions(h1[s : s + n], h2[s : s + n], self.num_bits, self.num_probes, out=out)
            self._flags.put(out.reshape(-1).view(np.int64), True)  # < m < 2**63: the same value as a native index
        self.num_keys += len(h1)

    def finish(self) -> BloomFilter:
        return BloomFilter(self.num_bits, self.num_probes, self.num_keys,
                           np.packbits(self._flags, bitorder="little").tobytes())


def _positions(h1: np.ndarray, h2: np.ndarray, m: int, k: int, *, out: np.ndarray | None = None) -> np.ndarray:
    """Bit positions, shape (len(h1), k): (h1 + i·h2) mod 2**64 mod m.

    Computed probe by probe in `out` (uint64, shape (k, len(h1)), allocated
    when None; the result is its transposed view): probe i is probe i-1 plus
    h2, which wraps modulo 2**64 exactly as h1 + i·h2 does, then one modulo
    over the whole buffer.  Each step runs over a contiguous row, and a caller
    that reuses `out` for chunks of a few thousand keys stays in the CPU cache
    (the broadcast expression allocated three (n, k) arrays per call).
    """
    if out is None:
        out = np.empty((k, len(h1)), dtype=np.uint64)
    out[0] = h1
    for i in range(1, k):  # a loop over the k probes, not the keys
        np.add(out[i - 1], h2, out=out[i])
    np.remainder(out, np.uint64(m), out=out)
    return out.T


def union_all(filters: Iterable[BloomFilter]) -> BloomFilter:
    """OR of several same-shaped filters."""
    it = iter(filters)
    try:
        acc = next(it)
    except StopIteration:
        raise InputError("union_all needs at least one bloom filter") from None
    for f in it:
        acc = acc.union(f)
    return acc


__all__ = ["DEFAULT_FPP", "BloomBuilder", "BloomFilter", "decode_verdict", "key_bytes", "key_hashes", "key_states",
           "optimal_size", "union_all"]
