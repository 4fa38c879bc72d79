"""Footers as an index: what a data file's Parquet footer says, decoded once and cached.

    data file (immutable)                         FileInfo (cached by path, size, mtime)
    ┌───────────────────────────┐                 ┌──────────────────────────────────────────┐
    │ row group 0 … row group n │                 │ min_key, max_key  (hoodie_min/max_record_key)
    │ footer:                   │  read once ──►  │ is_sorted         (lsm_lab.sorted)
    │   key-value metadata      │                 │ bloom()           (lsm_lab.bloom, decoded lazily,
    │   row-group statistics    │                 │                    CRC-checked; None if absent/bad)
    │   column-chunk sizes      │                 │ key_stats(col)    per row group (min, max, nulls)
    └───────────────────────────┘                 │ chunk_bytes(rg)   per column, when asked
                                                  │ constant_text(rg) text columns of one value, when asked
                                                  └──────────────────────────────────────────┘

Files are never modified after they are written (a new version is a new
file), so a footer can be cached for the life of a process; the cache key
includes size and modification time so that a replaced file is never served
stale.  `FooterCache` is an LRU bounded by the bytes it holds (blooms dominate:
about 1.2 bytes per key at 1% false positives).

Simplified compared with Apache Hudi: Hudi caches footers inside its readers
and, with the metadata table, serves blooms and column ranges from there;
lsm_lab caches footers in memory per process, and reads a footer only when its
file's entry in the key index (format/keyindex.py) cannot rule the file out.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsm_lab.errors import CorruptFileError
from lsm_lab.format import parquet_footer
from lsm_lab.format.bloom import BloomFilter, decode_verdict
from lsm_lab.storage import TablePath, file_stamp
from lsm_lab.table.stats import LookupStats

_FOOTER_TAIL = 8  # 4-byte footer length + "PAR1"


@dataclass
class FileInfo:
    """What a file's footer says, for pruning: key range, bloom, row-group statistics and sizes."""

    path: str
    metadata: pq.FileMetaData
    footer_bytes: int
    columns: tuple[str, ...]
    min_key: str | None
    max_key: str | None
    is_sorted: bool
    bloom_text: str | None
    rg_rows: list[int]
    text_types: dict[str, pa.DataType] = field(default_factory=dict)  # top-level columns read as Arrow strings
    rg_stats: dict[str, list[tuple[str | None, str | None, int | None]]] = field(default_factory=dict)
    _chunk_bytes: dict[int, dict[str, int]] = field(default_factory=dict)
    _constants: dict[int, dict[str, str]] = field(default_factory=dict)
    _bloom: BloomFilter | None = None
    _leaf: dict[str, int] | None = None  # leaf column index by dotted path, built when first asked
    bloom_status: str = "unchecked"
    source: Any = None  # what to open the file with: a local path or a `StoragePath` (object stores)
    size: int | None = None  # the file's size in bytes, when known (spares a HEAD on an object store)

    @property
    def num_row_groups(self) -> int:
        return len(self.rg_rows)

    def bloom(self) -> BloomFilter | None:
        """The decoded, CRC-checked filter, or None (missing or corrupt: then nothing is pruned)."""
        if self.bloom_status == "unchecked":
            self._bloom, self.bloom_status = decode_verdict(self.bloom_text)
            self.bloom_text = None  # the decoded form (or the verdict) replaces the text
        return self._bloom

    def chunk_bytes(self, row_group: int) -> dict[str, int]:
        """Compressed bytes of each top-level column's chunks in one row group (computed when first asked:
        a lookup reads one or two row groups of a file, and the loop over every chunk of every row group
        was a tenth of a cold lookup's time)."""
        sizes = self._chunk_bytes.get(row_group)
        if sizes is None:
            md = self.metadata
            rg = md.row_group(row_group)
            sizes = {}
            for c in range(md.num_columns):
                top = md.schema.column(c).path.split(".")[0]
                sizes[top] = sizes.get(top, 0) + rg.column(c).total_compressed_size
            self._chunk_bytes[row_group] = sizes
        return sizes

    def constant_text(self, row_group: int, columns: Sequence[str]) -> dict[str, str]:
        """Those of `columns` that hold one text value in every row of `row_group`, with that value.

        The footer proves it (`parquet_footer.constant_text`, for a column read as an Arrow string); a
        lookup fills such a column for its found rows instead of decoding it: decoding a column chunk
        has a fixed cost (~0.1 ms for a small dictionary-encoded one) that was a fifth of a cold lookup.
        """
        found = self._constants.get(row_group)
        if found is None:
            found = parquet_footer.constant_text(self.metadata, self.text_types, [row_group])
            self._constants[row_group] = found
        return {c: found[c] for c in columns if c in found}

    def _leaves(self) -> dict[str, int]:
        if self._leaf is None:
            schema = self.metadata.schema
            self._leaf = {schema.column(i).path: i for i in range(self.metadata.num_columns)}
        return self._leaf

    def key_stats(self, column: str) -> list[tuple[str | None, str | None, int | None]]:
        """Per row group: (min, max, null count) of `column`; None where the writer left no statistics."""
        cached = self.rg_stats.get(column)
        if cached is not None:
            return cached
        out: list[tuple[str | None, str | None, int | None]] = []
        md = self.metadata
        leaf = self._leaves().get(column)
        # a UTF-8 string column's raw statistics are its values' bytes: decoding them here costs a third
        # of pyarrow's typed `min`/`max` (a 25-row-group footer: ~25 µs against ~80 µs)
        text = leaf is not None and parquet_footer.is_text_leaf(md.schema.column(leaf))
        for i in range(md.num_row_groups):
            if leaf is None:
                out.append((None, None, None))
                continue
            st = md.row_group(i).column(leaf).statistics
            if st is None:
                out.append((None, None, None))
                continue
            nulls = st.null_count if st.has_null_count else None
            if not st.has_min_max:
                out.append((None, None, nulls))
            elif text:
                out.append((_utf8(st.min_raw), _utf8(st.max_raw), nulls))
            elif isinstance(st.min, str) and isinstance(st.max, str):
                out.append((st.min, st.max, nulls))
            else:
                out.append((None, None, nulls))
        self.rg_stats[column] = out
        return out

    def cost(self) -> int:
        return self.footer_bytes + (len(self.bloom_text) if self.bloom_text else 0) + (
            len(self._bloom.bits) if self._bloom is not None else 0)


def _utf8(raw: Any) -> str | None:
    """Raw statistics bytes as text; None (no pruning) when they are not valid UTF-8."""
    if not isinstance(raw, bytes):
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _file_info(path: TablePath, size: int | None = None) -> FileInfo:
    md, kv = parquet_footer.read_footer(path, size)  # (the size spares an object store's HEAD; unused locally)
    try:
        schema = md.schema.to_arrow_schema()
    except (OSError, ValueError, pa.ArrowException) as exc:  # ValueError: a column name that is not UTF-8
        raise CorruptFileError(f"cannot read the Parquet footer: {exc}", path=path) from None
    info = FileInfo(
        path=str(path), metadata=md, footer_bytes=md.serialized_size + _FOOTER_TAIL,
        columns=tuple(schema.names), min_key=kv.get(parquet_footer.KEY_MIN), max_key=kv.get(parquet_footer.KEY_MAX),
        is_sorted=parquet_footer.is_sorted_footer(kv), bloom_text=kv.get(parquet_footer.KEY_BLOOM),
        rg_rows=[md.row_group(r).num_rows for r in range(md.num_row_groups)],
        text_types={f.name: f.type for f in schema if f.type in (pa.string(), pa.large_string())},
        source=path, size=size,
    )
    _check_key_range(info)
    return info


def _check_key_range(info: FileInfo) -> None:
    """The footer's key range (`hoodie_min/max_record_key`) must agree with the key column's statistics.

    Both prune lookups, and both are written from the same keys (by lsm_lab and by Hudi); one flipped
    bit in either would hide keys from lookups without a word, while a read (which prunes by neither)
    still returns them.  Checked when every row group has min/max statistics of the key."""
    if info.min_key is None or info.max_key is None or parquet_footer.RECORD_KEY not in info.columns:
        return
    stats = info.key_stats(parquet_footer.RECORD_KEY)
    if not stats or any(lo is None or hi is None for lo, hi, _ in stats):
        return
    lo = min(lo for lo, _, _ in stats if lo is not None)
    hi = max(hi for _, hi, _ in stats if hi is not None)
    if (lo, hi) != (info.min_key, info.max_key):
        raise CorruptFileError(f"the footer's key range {info.min_key!r}..{info.max_key!r} disagrees with the key "
                               f"column's statistics {lo!r}..{hi!r}", path=info.path)


class FooterCache:
    """An LRU of decoded footers of immutable data files, bounded by their in-memory size."""

    def __init__(self, max_bytes: int = 512 << 20) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, int, int], FileInfo] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: TablePath, stats: LookupStats | None = None, size: int | None = None) -> FileInfo:
        """The footer of `path`; `size` (from a listing) spares the HEAD of an object-store file, whose
        name is never reused for other bytes."""
        try:
            size, stamp = file_stamp(path, size)  # a local file: one stat; a store with a size: no request
        except FileNotFoundError:
            raise CorruptFileError("data file vanished while being read (cleaned concurrently?)", path=path) from None
        key = (str(path), size, stamp)
        with self._lock:
            info = self._items.get(key)
            if info is not None:
                self._items.move_to_end(key)
                return info
        info = _file_info(path, size)
        if stats is not None:
            stats.footers_read += 1
            stats.footer_bytes += info.footer_bytes
        with self._lock:
            self._items[key] = info
            self._shrink()
        return info

    def has(self, path: TablePath, size: int | None = None) -> bool:
        """Whether the footer of `path` is cached (asks a local file's stat; an object with a size: nothing)."""
        try:
            size, stamp = file_stamp(path, size)
        except FileNotFoundError:
            return False
        with self._lock:
            return (str(path), size, stamp) in self._items

    def _shrink(self) -> None:
        total = sum(i.cost() for i in self._items.values())
        while self._items and total > self.max_bytes and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            total -= old.cost()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


FOOTERS = FooterCache()


def clear_footer_cache() -> None:
    """Forget every cached footer (benchmarks use it to measure cold lookups)."""
    FOOTERS.clear()


__all__ = ["FOOTERS", "FileInfo", "FooterCache", "clear_footer_cache"]
