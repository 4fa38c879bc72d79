"""A hash table of distinct string keys, built once and probed a batch at a time.

The hash merge (hashmerge.py) needs Hudi's lookup: one map from every log key
to its folded log record, built once, then each base record probed in O(1).
Arrow has no hash table that outlives one call (``pc.index_in`` rebuilds its
set of the value keys on every call, so probing it per base batch costs
O(batches x log keys)), so this module keeps one in NumPy arrays:

    keys ──hash_keys──▶ 64-bit hashes ──▶ slots: int32[2^b]  (open addressing, linear probing,
                                                  load factor 1/4..1/2; -1 = empty; else a key's row)
    find(batch keys) ──hash_keys──▶ home slot = top b bits of the hash ──▶ walk until an empty slot
                                    or a slot whose key has the same hash and the same bytes

Both building and probing are vectorised: every round handles all keys still
walking at once (one NumPy gather per round), and the number of rounds is the
longest probe sequence, a few dozen at this load factor, whatever the number of
keys. Insertion is exact because the keys are distinct and slots never empty:
a key lands on the first slot of its sequence that is free when it gets there,
so every slot between its home and its place is occupied when it is looked up.

**The hash** of a key is computed over its UTF-8 bytes 8 at a time (the last
word zero-padded), seeded with the byte length: ``h ^= word; h *= 2^64/phi;
h ^= h >> 29``. Keys of one width (UUIDs, ids of fixed length) are hashed from
an (n, words) grid in one pass per word; keys of mixed widths a word at a time
over the keys still long enough. Both give the same hash for the same bytes, so
a batch of mixed widths finds keys of one width and the other way round.
Equal hashes are confirmed on the key bytes (NumPy's ``S<width>`` comparison for
keys of one width, else Arrow's ``equal`` on the candidates).

**Memory**: 8 bytes of hash per key plus 8 to 16 bytes of slots per key, next
to the keys themselves (kept as the Arrow array given, not copied).

Simplified compared with Apache Hudi: Hudi's ``ExternalSpillableMap`` is a
``HashMap<String, HoodieRecord>`` that spills entries to disk past a memory
budget; this table maps keys to rows of an Arrow table and never spills.

Taught in: notebooks/06_merge_semantics.ipynb, notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lsm_lab.merge.semantics import fixed_width_keys

_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio, odd: a multiplicative hash step
_SHIFT = np.uint64(29)
# _LOW[r]: the low r bytes of a little-endian word (r = 0..7)
_LOW = np.array([(1 << (8 * r)) - 1 for r in range(8)], dtype=np.uint64)
_EIGHT = np.arange(8, dtype=np.int64)


def _flat(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        return keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    return keys


def _mix(h: np.ndarray, words: np.ndarray) -> np.ndarray:
    h ^= words
    h *= _MIX
    h ^= h >> _SHIFT
    return h


def _hash_fixed(fixed: np.ndarray) -> np.ndarray:
    """`hash_keys` of an ``S<width>`` array: all keys one width, hashed from a zero-padded (n, words) grid."""
    n, width = len(fixed), fixed.dtype.itemsize
    words_per_key = -(-width // 8)
    grid = np.zeros((n, words_per_key * 8), dtype=np.uint8)
    grid[:, :width] = np.ascontiguousarray(fixed).view(np.uint8).reshape(n, width)
    words = grid.view(np.uint64)
    h = np.full(n, width, dtype=np.uint64)
    for i in range(words_per_key):
        _mix(h, words[:, i])
    return h


def _hash_varying(keys: pa.Array) -> np.ndarray:
    """`hash_keys` of keys of mixed widths: word j of every key at least 8j + 1 bytes long, for j = 0, 1, ..."""
    n = len(keys)
    off_type = np.int64 if pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type) else np.int32
    offsets = np.frombuffer(keys.buffers()[1], dtype=off_type)[keys.offset:keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] is not None else \
        np.zeros(0, dtype=np.uint8)
    # the keys' bytes and 8 zero bytes after them, so that a word read at any key's start stays in bounds
    data = np.concatenate([data[offsets[0]:offsets[-1]], np.zeros(8, dtype=np.uint8)])
    starts = offsets[:-1] - offsets[0]
    lengths = np.diff(offsets)
    h = lengths.astype(np.uint64)
    rows = np.arange(n, dtype=np.int64)
    j = 0
    while True:
        rows = rows[lengths[rows] > 8 * j]
        if not len(rows):
            return h
        word = data[(starts[rows] + 8 * j)[:, None] + _EIGHT].view(np.uint64).ravel()
        left = lengths[rows] - 8 * j  # bytes of the key from this word on
        short = left < 8
        if short.any():
            word[short] &= _LOW[left[short]]
        h[rows] = _mix(h[rows], word)
        j += 1


def hash_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of every key (string or binary, no nulls), the same for the same bytes whatever the array."""
    flat = _flat(keys)
    if len(flat) == 0:
        return np.zeros(0, dtype=np.uint64)
    fixed = fixed_width_keys(flat)
    return _hash_fixed(fixed) if fixed is not None else _hash_varying(flat)


class KeyMap:
    """A hash table from distinct keys (no nulls) to their positions, built once; ``find`` probes a batch."""

    def __init__(self, keys: pa.Array | pa.ChunkedArray) -> None:
        self.keys = _flat(keys)
        n = len(self.keys)
        self._fixed = fixed_width_keys(self.keys) if n else None
        self.hashes = _hash_fixed(self._fixed) if self._fixed is not None else hash_keys(self.keys)
        self.bits = max(3, int(2 * n - 1).bit_length())  # 2^bits >= 2n: load factor <= 1/2
        self._shift = np.uint64(64 - self.bits)
        self._mask = (1 << self.bits) - 1
        self.slots = np.full(1 << self.bits, -1, dtype=np.int32 if n < 2**31 - 1 else np.int64)
        pending = np.arange(n, dtype=np.int64)
        slot = self._home(self.hashes)
        while len(pending):
            free = np.flatnonzero(self.slots[slot] < 0)
            claim, where = pending[free], slot[free]
            self.slots[where] = claim  # of several keys claiming one slot, one write lands
            placed = np.zeros(len(pending), dtype=bool)
            placed[free[self.slots[where] == claim]] = True
            pending = pending[~placed]
            slot = (slot[~placed] + 1) & self._mask

    def _home(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes >> self._shift).astype(np.int64)

    @property
    def nbytes(self) -> int:
        """The table's own memory (hashes and slots; the keys are the caller's array)."""
        return int(self.hashes.nbytes + self.slots.nbytes)

    def find(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The position of each of `keys` (no nulls) in the keys the map was built from, -1 where absent."""
        probe = _flat(keys)
        n = len(probe)
        found = np.full(n, -1, dtype=np.int64)
        if n == 0 or len(self.keys) == 0:
            return found
        fixed = fixed_width_keys(probe)
        same_width = fixed is not None and self._fixed is not None and fixed.dtype == self._fixed.dtype
        hashes = _hash_fixed(fixed) if fixed is not None else hash_keys(probe)
        rows = np.arange(n, dtype=np.int64)
        slot = self._home(hashes)
        while len(rows):
            at = self.slots[slot].astype(np.int64)
            occupied = at >= 0
            cand = np.flatnonzero(occupied)
            cand = cand[self.hashes[at[cand]] == hashes[rows[cand]]]
            if len(cand):
                if same_width:
                    assert fixed is not None and self._fixed is not None
                    equal = self._fixed[at[cand]] == fixed[rows[cand]]
                else:
                    equal = np.asarray(pc.equal(self.keys.take(pa.array(at[cand])),
                                                probe.take(pa.array(rows[cand]))), dtype=bool)
                hit = cand[equal]
                found[rows[hit]] = at[hit]
                occupied[hit] = False  # found: stop walking
            rows, slot = rows[occupied], (slot[occupied] + 1) & self._mask
        return found


__all__ = ["KeyMap", "hash_keys"]
