"""`LookupStats`: what a lookup or a key-pruned read did, counted by the reader.

    slices ─┬─ pruned by bucket                        (lsm_tree: the key hashes elsewhere)
            ├─ read in full (fallback)                 (v1 logs, no usable key column)
            └─ files ─┬─ pruned by key range           (key index, else footer hoodie_min/max_record_key)
                      ├─ pruned by bloom               (key index, else footer lsm_lab.bloom)
                      └─ opened ── row groups read ─┬─ binary search (sorted file)
                                                    └─ scan (hash / mask over the key chunk)

`files_indexed` counts files the key index (format/keyindex.py) knew; of
those, `footers_skipped` were ruled out by its range or bloom without reading
their footer.  `bytes_read` is footer bytes read from disk (cache misses) plus the compressed
size of every column chunk read, taken from the footer's column-chunk metadata:
the bytes a reader fetches from storage, not the decoded size.

Simplified compared with Apache Hudi: Hudi reports index lookups through Spark
metrics and accumulators; lsm_lab counts in one plain dataclass per call.

Taught in: notebooks/08_point_lookups.ipynb
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class LookupStats:
    """What a lookup (or a pruned read) did; pass one in to accumulate over calls."""

    slices: int = 0
    slices_pruned_bucket: int = 0
    slices_pruned_record_index: int = 0  # ruled out by the metadata table's record index (table/mdt_use.py)
    slices_fallback: int = 0
    files: int = 0
    files_pruned_range: int = 0
    files_pruned_bloom: int = 0
    files_without_bloom: int = 0
    files_indexed: int = 0
    footers_skipped: int = 0
    index_sidecars: int = 0
    index_sidecars_damaged: int = 0
    index_bytes: int = 0
    footers_read: int = 0
    footer_bytes: int = 0
    files_opened: int = 0
    row_groups: int = 0
    row_groups_read: int = 0
    binary_searches: int = 0
    scans: int = 0
    data_bytes: int = 0
    rows_matched: int = 0
    trace: list[str] | None = None

    @property
    def bytes_read(self) -> int:
        """Footer bytes read from disk plus compressed column-chunk bytes read (plus key index sidecar bytes
        when the caller counted their loading)."""
        return self.footer_bytes + self.data_bytes + self.index_bytes

    def note(self, text: str) -> None:
        if self.trace is not None:
            self.trace.append(text)

    def as_dict(self) -> dict[str, int]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "trace"}
        out["bytes_read"] = self.bytes_read
        return out

    def add(self, other: LookupStats) -> None:
        for f in fields(self):
            if f.name != "trace":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def summary(self) -> str:
        return (f"{self.files_opened} of {self.files} files opened "
                f"({self.files_pruned_range} skipped by key range, {self.files_pruned_bloom} by bloom, "
                f"{self.slices_pruned_bucket} slices by bucket), {self.row_groups_read} of {self.row_groups} "
                f"row groups read ({self.binary_searches} binary searches, {self.scans} scans), "
                f"{self.bytes_read / 1e6:.2f} MB read ({self.footers_read} footers)")

    def index_summary(self) -> str:
        """Whether the key index kept with the timeline was used (format/keyindex.py)."""
        if not self.index_sidecars and not self.files_indexed:
            return ("key index: not used (no sidecar for this snapshot's files: a table written before the index, "
                    "a real Hudi table, or an index turned off); every candidate footer was read")
        damaged = f", {self.index_sidecars_damaged} damaged sidecar(s) ignored" if self.index_sidecars_damaged else ""
        return (f"key index: {self.index_sidecars} sidecar(s), {self.files_indexed} of {self.files} files indexed, "
                f"{self.footers_skipped} footers skipped{damaged}")


__all__ = ["LookupStats"]
