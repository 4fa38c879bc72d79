"""Apache Hudi's own bloom filter of record keys: the footer's `org.apache.hudi.bloomfilter`, read and written.

Every base file Apache Hudi writes (with meta fields) carries, in its Parquet footer, a bloom filter of
its record keys, and the metadata table's `bloom_filters` partition keeps a copy per base file.  Its
bytes are a Hadoop `Writable` (`org.apache.hadoop.util.bloom.BloomFilter`, ported into Hudi as
`InternalBloomFilter` / `InternalDynamicBloomFilter`), Base64-encoded into a string
(`SimpleBloomFilter.serializeToString`, `HoodieDynamicBoundedBloomFilter.serializeToString`):

    footer  org.apache.hudi.bloomfilter   = Base64( Writable bytes )
            hoodie_bloom_filter_type_code = DYNAMIC_V0        (absent: SIMPLE)
            hoodie_min_record_key / hoodie_max_record_key

    SIMPLE     int32 -1 (version) | int32 nbHash | int8 hashType (1 = Murmur) | int32 vectorSize | bits
    DYNAMIC_V0 the same 13-byte header | int32 nr | int32 currentNbRecord | int32 rows
               | rows × (13-byte header | bits)                           (all big-endian, Java DataOutput)
    bits       ceil(vectorSize / 8) bytes; bit i is bit (i mod 8) of byte i div 8 (least significant first)

**Hashing** (`HashFunction`, `org.apache.hadoop.util.hash.MurmurHash`): a key's UTF-8 bytes are hashed
`nbHash` times with Hadoop's MurmurHash2 (32 bit), each time seeded with the previous hash (the first
with 0), and hash i sets bit `|h_i % vectorSize|` (Java's remainder: sign of the dividend).  Hadoop's
MurmurHash sign-extends the 1 to 3 tail bytes (Java bytes are signed), which matters for non-ASCII keys.
The block words of a key do not depend on the seed, so they are mixed once; the `nbHash` chained
hashes then cost one multiply and one xor per 4 bytes — vectorised over all keys of one length at
once (keys grouped by length, chunks of `CHUNK` keys), no Python loop per key (`murmur_reference`
is the per-key function the tests compare it with).

**Sizing** (`BloomFilterUtils`): bits = ceil(n · (−ln p) / ln²2), hashes = ceil(ln 2 · bits / n); the
writer's defaults (`HoodieStorageConfig`) are n = 60,000 (`hoodie.index.bloom.num_entries`),
p = 1e-9 (`hoodie.index.bloom.fpp`): 2,587,966 bits and 30 hashes, 323 KB per filter row whatever the
file holds.  DYNAMIC_V0 (`hoodie.bloom.index.filter.type`, the default) starts with one row for `nr` = n
keys and adds a row each time the current row holds `nr` keys, until rows · nr reaches
`hoodie.bloom.index.filter.dynamic.max.entries` (100,000); from then on keys go round-robin over the
rows.  A key "might be present" when every bit of it is set in *some* row.

Simplified compared with Apache Hudi: only Murmur hashing (hash type 1, what every Hudi writer uses;
a Jenkins-hashed filter of the old unversioned layout is refused as unsupported); keys are strings
(UTF-8), as Hudi's record keys.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "Hudi's footer bloom filter")
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.format.bloom import key_bytes

#: footer keys (`HoodieBloomFilterWriteSupport`)
FOOTER_KEY = "org.apache.hudi.bloomfilter"
OLD_FOOTER_KEY = "com.uber.hoodie.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
#: `BloomFilterTypeCode`
SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
TYPE_CODES = (SIMPLE, DYNAMIC_V0)
#: `org.apache.hadoop.util.hash.Hash` type ids
JENKINS_HASH = 0
MURMUR_HASH = 1
#: `HoodieStorageConfig` / `HoodieIndexConfig` options and their defaults
PROP_NUM_ENTRIES = "hoodie.index.bloom.num_entries"
PROP_FPP = "hoodie.index.bloom.fpp"
PROP_TYPE = "hoodie.bloom.index.filter.type"
PROP_MAX_ENTRIES = "hoodie.bloom.index.filter.dynamic.max.entries"
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 0.000000001
DEFAULT_MAX_ENTRIES = 100_000
DEFAULT_TYPE = DYNAMIC_V0

_HEADER = struct.Struct(">iibi")  # version, nbHash, hashType, vectorSize
_DYN = struct.Struct(">iii")  # nr, currentNbRecord, rows
_VERSION = -1
_M = np.uint32(0x5BD1E995)
_LOG2_SQUARED = math.log(2) * math.log(2)
#: keys hashed per vector pass (bounds the (keys × nbHash) position array: 30 hashes × 8 bytes × CHUNK = 15 MiB)
CHUNK = 1 << 16


# --------------------------------------------------------------------------- sizing
def bit_size(num_entries: int, fpp: float) -> int:
    """`BloomFilterUtils.getBitSize`."""
    return math.ceil(num_entries * (-math.log(fpp) / _LOG2_SQUARED))


def num_hashes(bits: int, num_entries: int) -> int:
    """`BloomFilterUtils.getNumHashes`."""
    return math.ceil(math.log(2) * bits / num_entries)


# --------------------------------------------------------------------------- hashing
def murmur_reference(data: bytes, seed: int) -> int:
    """Hadoop's `MurmurHash.hash(data, length, seed)` for one key, as a signed 32-bit int (the tests' reference)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    n = len(data)
    h = (seed ^ n) & mask
    words = n >> 2
    for i in range(words):
        k = int.from_bytes(data[4 * i: 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    left = n - 4 * words
    if left:
        def sext(b: int) -> int:
            return b - 256 if b >= 128 else b
        if left >= 3:
            h ^= (sext(data[n - 3]) << 16) & mask
        if left >= 2:
            h ^= (sext(data[n - 2]) << 8) & mask
        h ^= sext(data[n - 1]) & mask
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def positions_reference(key: str, nb_hash: int, vector_size: int) -> list[int]:
    """`HashFunction.hash(Key)` for one key: the `nb_hash` bit positions (the tests' reference)."""
    data = key.encode("utf-8")
    out, seed = [], 0
    for _ in range(nb_hash):
        seed = murmur_reference(data, seed)
        out.append(abs(int(math.fmod(seed, vector_size))))
    return out


def _positions(arr: pa.Array, nb_hash: int, vector_size: int) -> np.ndarray:
    """(len(arr), nb_hash) bit positions of every key of a large-binary array (keys grouped by length)."""
    n = len(arr)
    out = np.empty((n, nb_hash), dtype=np.int64)
    if n == 0:
        return out
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
    buf = arr.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    if (lengths == 0).any():
        raise InputError("an empty record key cannot go into a Hudi bloom filter (Hadoop's HashFunction refuses it)")
    for length in np.unique(lengths).tolist():
        idx = np.nonzero(lengths == length)[0]
        grid = data[starts[idx, None] + np.arange(length)]  # (keys, length) bytes
        nw = length >> 2
        words = np.ascontiguousarray(grid[:, : 4 * nw]).view("<u4").reshape(len(idx), nw).astype(np.uint32)
        k = words * _M
        k ^= k >> np.uint32(24)
        k *= _M
        left = length - 4 * nw
        tail = np.zeros(len(idx), dtype=np.int32)
        if left:
            signed = grid[:, 4 * nw:].view(np.int8).astype(np.int32)  # Java bytes: sign-extended
            for j in range(left):  # byte length-1 unshifted, length-2 << 8, length-3 << 16
                tail ^= signed[:, j] << np.int32(8 * (left - 1 - j))
        tail_u = tail.view(np.uint32)
        kt = np.ascontiguousarray(k.T)  # word j of every key: one contiguous row
        res = np.empty((nb_hash, len(idx)), dtype=np.uint32)
        seed = np.zeros(len(idx), dtype=np.uint32)
        start = np.uint32(length)
        size = np.uint32(vector_size)
        for i in range(nb_hash):
            h = seed ^ start
            for j in range(nw):
                h *= _M
                h ^= kt[j]
            if left:
                h ^= tail_u
                h *= _M
            h ^= h >> np.uint32(13)
            h *= _M
            h ^= h >> np.uint32(15)
            seed = h
            # |h % size| with Java's remainder = |h| % size; abs(INT_MIN) stays INT_MIN, whose uint32 is 2**31
            np.remainder(np.abs(h.view(np.int32)).view(np.uint32), size, out=res[i])
        if len(idx) == n:
            out[:] = res.T
        else:
            out[idx] = res.T
    return out


def _chunks(arr: pa.Array) -> list[pa.Array]:
    return [arr.slice(i, CHUNK) for i in range(0, len(arr), CHUNK)] if len(arr) else []


# --------------------------------------------------------------------------- the filter
@dataclass
class HudiBloomFilter:
    """A SIMPLE or DYNAMIC_V0 filter: `rows` are its bit vectors (one for SIMPLE), unpacked to one bool a bit."""

    type_code: str
    nb_hash: int
    vector_size: int
    rows: list[np.ndarray]
    hash_type: int = MURMUR_HASH
    nr: int = 0  # DYNAMIC_V0: keys per row before a new row
    current: int = 0  # DYNAMIC_V0: keys in the current row (`currentNbRecord`)
    max_entries: int = 0  # DYNAMIC_V0: bound of rows × nr (0 after decoding, as Java's readFields leaves it)
    reached_max: bool = False
    cur_index: int = 0
    keys_added: int = field(default=0, compare=False)

    @classmethod
    def create(cls, type_code: str = DEFAULT_TYPE, num_entries: int = DEFAULT_NUM_ENTRIES, fpp: float = DEFAULT_FPP,
               max_entries: int = DEFAULT_MAX_ENTRIES) -> HudiBloomFilter:
        """`BloomFilterFactory.createBloomFilter(num_entries, fpp, max_entries, type_code)` (Murmur hashing)."""
        code = type_code.upper()
        if code not in TYPE_CODES:
            raise InputError(f"bloom filter type code not recognised: {type_code!r} (SIMPLE or DYNAMIC_V0)")
        if num_entries < 1 or not 0 < fpp < 1:
            raise InputError(f"a bloom filter needs num_entries >= 1 and 0 < fpp < 1, got {num_entries}, {fpp}")
        bits = bit_size(num_entries, fpp)
        return cls(code, num_hashes(bits, num_entries), bits, [np.zeros(bits, dtype=bool)],
                   nr=num_entries if code == DYNAMIC_V0 else 0, max_entries=max_entries)

    # ------------------------------------------------------------------ adding and probing
    def _assign(self, n: int) -> np.ndarray:
        """The row each of `n` new keys goes to (`InternalDynamicBloomFilter.getActiveStandardBF`, per segment)."""
        out = np.zeros(n, dtype=np.int64)
        if self.type_code == SIMPLE:
            return out
        i = 0
        while i < n:
            if self.reached_max:
                out[i:] = (self.cur_index + np.arange(n - i)) % len(self.rows)
                self.cur_index += n - i
                self.current += n - i
                break
            if self.current >= self.nr:
                if len(self.rows) * self.nr < self.max_entries:
                    self.rows.append(np.zeros(self.vector_size, dtype=bool))
                    self.current = 0
                else:  # this key goes to row 0, the next ones round-robin from row 0
                    self.reached_max = True
                    out[i] = 0
                    self.current += 1
                    i += 1
                continue
            take = min(n - i, self.nr - self.current)
            out[i: i + take] = len(self.rows) - 1
            self.current += take
            i += take
        return out

    def add(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> None:
        """Add keys in order (the order decides a DYNAMIC_V0 filter's rows once the first is full)."""
        self._check_hash()
        arr = key_bytes(keys, "Hudi bloom filter")
        for part in _chunks(arr):
            pos = _positions(part, self.nb_hash, self.vector_size)
            rows = self._assign(len(part))
            for r in np.unique(rows).tolist():
                self.rows[r][pos[rows == r].ravel()] = True
            self.keys_added += len(part)

    def might_contain(self, keys: pa.Array | pa.ChunkedArray | Sequence[str]) -> np.ndarray:
        """One bool per key: False = certainly absent (`membershipTest`)."""
        self._check_hash()
        arr = key_bytes(keys, "Hudi bloom filter")
        out = np.zeros(len(arr), dtype=bool)
        at = 0
        for part in _chunks(arr):
            pos = _positions(part, self.nb_hash, self.vector_size)
            hit = np.zeros(len(part), dtype=bool)
            for bits in self.rows:
                hit |= bits[pos].all(axis=1)
            out[at: at + len(part)] = hit
            at += len(part)
        return out

    def _check_hash(self) -> None:
        if self.hash_type != MURMUR_HASH:
            raise UnsupportedFeatureError(f"Hudi bloom filter with hash type {self.hash_type}: only Murmur (1)")

    # ------------------------------------------------------------------ bytes
    def _row_bytes(self, bits: np.ndarray) -> bytes:
        return _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size) + \
            np.packbits(bits, bitorder="little").tobytes()

    def to_bytes(self) -> bytes:
        """The `Writable` bytes (`InternalBloomFilter.write` / `InternalDynamicBloomFilter.write`)."""
        if self.type_code == SIMPLE:
            return self._row_bytes(self.rows[0])
        head = _HEADER.pack(_VERSION, self.nb_hash, self.hash_type, self.vector_size)
        return head + _DYN.pack(self.nr, self.current, len(self.rows)) + b"".join(map(self._row_bytes, self.rows))

    def serialize_to_string(self) -> str:
        """`serializeToString`: Base64 of the bytes — the footer's value, and (as UTF-8) the MDT record's bytes."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @classmethod
    def from_bytes(cls, data: bytes, type_code: str = SIMPLE, *, path: Any = None) -> HudiBloomFilter:
        """Decode `Writable` bytes of the given type (a damaged value: `CorruptFileError` naming `path`)."""
        code = (type_code or SIMPLE).upper()
        if code not in TYPE_CODES:
            raise CorruptFileError(f"unknown Hudi bloom filter type code {type_code!r}", path=path)
        at = 0

        def header() -> tuple[int, int, int]:
            nonlocal at
            if len(data) < at + _HEADER.size:
                raise CorruptFileError("Hudi bloom filter truncated in a header", path=path)
            version, nb, hash_type, size = _HEADER.unpack_from(data, at)
            if version > 0:  # the old unversioned layout: nbHash first, Jenkins hashing
                raise UnsupportedFeatureError("Hudi bloom filter of the old unversioned (Jenkins-hashed) layout",
                                              path=path)
            if version != _VERSION or nb < 1 or size < 1:
                raise CorruptFileError(f"bad Hudi bloom filter header (version {version}, {nb} hashes, "
                                       f"{size} bits)", path=path)
            at += _HEADER.size
            return nb, hash_type, size

        def bits(size: int) -> np.ndarray:
            nonlocal at
            nbytes = (size + 7) // 8
            if len(data) < at + nbytes:
                raise CorruptFileError(f"Hudi bloom filter truncated: {size} bits need {nbytes} bytes", path=path)
            raw = np.frombuffer(data, dtype=np.uint8, count=nbytes, offset=at)
            at += nbytes
            return np.unpackbits(raw, bitorder="little")[:size].astype(bool)

        nb, hash_type, size = header()
        if code == SIMPLE:
            out = cls(SIMPLE, nb, size, [bits(size)], hash_type=hash_type)
        else:
            if len(data) < at + _DYN.size:
                raise CorruptFileError("Hudi dynamic bloom filter truncated", path=path)
            nr, current, count = _DYN.unpack_from(data, at)
            at += _DYN.size
            if count < 1 or nr < 1:
                raise CorruptFileError(f"Hudi dynamic bloom filter with {count} rows of {nr} keys", path=path)
            rows = []
            for _ in range(count):
                rnb, rhash, rsize = header()
                if (rnb, rhash, rsize) != (nb, hash_type, size):
                    raise CorruptFileError("Hudi dynamic bloom filter rows disagree with its header", path=path)
                rows.append(bits(size))
            out = cls(DYNAMIC_V0, nb, size, rows, hash_type=hash_type, nr=nr, current=current)
        if at != len(data):
            raise CorruptFileError(f"Hudi bloom filter has {len(data) - at} trailing bytes", path=path)
        return out

    @classmethod
    def from_string(cls, text: str | bytes, type_code: str = SIMPLE, *, path: Any = None) -> HudiBloomFilter:
        """`BloomFilterFactory.fromString(text, type_code)`: the Base64 text of a footer or an MDT record."""
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise CorruptFileError("Hudi bloom filter is not Base64", path=path) from None
        return cls.from_bytes(raw, type_code, path=path)


# --------------------------------------------------------------------------- footers and options
def _text(kv: Mapping[Any, Any], key: str) -> str | None:
    v = kv.get(key, kv.get(key.encode()))
    if v is None:
        return None
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def from_footer(kv: Mapping[Any, Any] | None, *, path: Any = None) -> HudiBloomFilter | None:
    """The footer's filter (`HoodieAvroParquetReader.readBloomFilter`), None when the file has none; the type
    code key absent means SIMPLE, as upstream's reader assumes."""
    if not kv:
        return None
    text = _text(kv, FOOTER_KEY) or _text(kv, OLD_FOOTER_KEY)
    if text is None:
        return None
    return HudiBloomFilter.from_string(text, _text(kv, TYPE_CODE_KEY) or SIMPLE, path=path)


@dataclass(frozen=True)
class HudiBloomOptions:
    """How a writer sizes the footer filter (`HoodieFileWriterFactory.createBloomFilter`)."""

    type_code: str = DEFAULT_TYPE
    num_entries: int = DEFAULT_NUM_ENTRIES
    fpp: float = DEFAULT_FPP
    max_entries: int = DEFAULT_MAX_ENTRIES

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> HudiBloomOptions:
        """The table's options (`InputError` naming the option when one is not a valid value)."""
        try:
            out = cls(type_code=props.get(PROP_TYPE, DEFAULT_TYPE).strip().upper() or DEFAULT_TYPE,
                      num_entries=int(props.get(PROP_NUM_ENTRIES, DEFAULT_NUM_ENTRIES)),
                      fpp=float(props.get(PROP_FPP, DEFAULT_FPP)),
                      max_entries=int(props.get(PROP_MAX_ENTRIES, DEFAULT_MAX_ENTRIES)))
        except ValueError as exc:
            raise InputError(f"bad Hudi bloom filter option: {exc}") from None
        if out.type_code not in TYPE_CODES:
            raise InputError(f"{PROP_TYPE}={out.type_code!r}: expected SIMPLE or DYNAMIC_V0")
        if out.num_entries < 1 or not 0 < out.fpp < 1:
            raise InputError(f"{PROP_NUM_ENTRIES} must be >= 1 and {PROP_FPP} within (0, 1), got "
                             f"{out.num_entries} and {out.fpp}")
        return out

    def new_filter(self) -> HudiBloomFilter:
        return HudiBloomFilter.create(self.type_code, self.num_entries, self.fpp, self.max_entries)


#: the table versions whose base files may carry upstream's filter (lsm_lab writes Hudi's formats for them)
VERSIONS = (8, 9, 10)
PROP_MDT_BLOOM = "hoodie.metadata.index.bloom.filter.enable"
PROP_PARQUET_BLOOM = "hoodie.parquet.bloom.filter.enabled"
PROP_INDEX_TYPE = "hoodie.index.type"


def options_for(props: Mapping[str, str], version: int) -> HudiBloomOptions | None:
    """Upstream's footer filter for the base files of a table with these properties, or None (not written).

    Upstream writes it on every base file (`HoodieFileWriterFactory.enableBloomFilter`:
    `hoodie.parquet.bloom.filter.enabled`, default true, or a BLOOM index type).  lsm_lab writes it on version
    8, 9 and 10 tables only when asked — the metadata table's `bloom_filters` index on
    (`hoodie.metadata.index.bloom.filter.enable=true`, whose records are these filters), the option
    `hoodie.parquet.bloom.filter.enabled=true` set on the table, or a BLOOM / GLOBAL_BLOOM `hoodie.index.type` —
    because at upstream's sizing every file would carry 323 KB of filter, and lsm_lab's lookups use its own."""
    if version not in VERSIONS:
        return None

    def on(key: str) -> bool:
        return props.get(key, "").strip().lower() == "true"

    if on(PROP_MDT_BLOOM) or on(PROP_PARQUET_BLOOM) or "BLOOM" in props.get(PROP_INDEX_TYPE, "").upper():
        return HudiBloomOptions.from_props(props)
    return None


def footer_values(bloom: HudiBloomFilter) -> dict[str, str]:
    """The footer entries upstream writes for a filter (`HoodieBloomFilterWriteSupport.finalizeMetadata`): the
    text, and the type code only for a dynamic filter."""
    out = {FOOTER_KEY: bloom.serialize_to_string()}
    if bloom.type_code == DYNAMIC_V0:
        out[TYPE_CODE_KEY] = DYNAMIC_V0
    return out


def filter_of_keys(keys: pa.Array | pa.ChunkedArray, options: HudiBloomOptions | None = None) -> HudiBloomFilter:
    """The filter a Hudi writer would put in the footer of a file holding `keys` (in that order)."""
    bloom = (options or HudiBloomOptions()).new_filter()
    arr = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    bloom.add(pc.cast(arr, pa.large_string()) if not pa.types.is_large_binary(arr.type) else arr)
    return bloom


__all__ = [
    "CHUNK",
    "DEFAULT_FPP",
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_NUM_ENTRIES",
    "DEFAULT_TYPE",
    "DYNAMIC_V0",
    "FOOTER_KEY",
    "MURMUR_HASH",
    "OLD_FOOTER_KEY",
    "PROP_FPP",
    "PROP_MAX_ENTRIES",
    "PROP_MDT_BLOOM",
    "PROP_NUM_ENTRIES",
    "PROP_PARQUET_BLOOM",
    "PROP_TYPE",
    "SIMPLE",
    "TYPE_CODES",
    "TYPE_CODE_KEY",
    "VERSIONS",
    "HudiBloomFilter",
    "HudiBloomOptions",
    "bit_size",
    "filter_of_keys",
    "footer_values",
    "from_footer",
    "murmur_reference",
    "num_hashes",
    "options_for",
    "positions_reference",
]
