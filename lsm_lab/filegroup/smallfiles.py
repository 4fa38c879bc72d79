"""Small-file handling: new keys fill the small file groups of a partition before new ones are opened.

Without it, every insert into a key-lookup table opens new file groups, and a
table written in small batches ends up with many tiny files.  Like Hudi's
upsert partitioner, a writer first looks for *small* file groups in each
partition it writes, and sends new keys there, up to the size a file may grow
to; only what is left opens new file groups, `insert.split.size` records each:

    partition city=chennai, latest slices       base size      room (max file size - size) / record size
      fg-1  base only                           119 MiB        (not small: >= small.file.limit 100 MiB)
      fg-2  base only                             2 MiB        118 MiB / 100 B  -> takes up to ~1.2M new keys
      fg-3  base + logs (MERGE_ON_READ)           1 MiB        not a candidate: it has logs
    new keys: 2M  ->  ~1.2M into fg-2, 0.8M into a new file group

    hoodie.parquet.small.file.limit                  104857600   a base file below this takes inserts (<= 0: off)
    hoodie.parquet.max.file.size                     125829120   ... until it would reach this size
    hoodie.copyonwrite.insert.split.size             500000      records per new file group
    hoodie.copyonwrite.record.size.estimate          1024        bytes per record when no file tells
    hoodie.merge.small.file.group.candidates.limit   1           MERGE_ON_READ: small file groups per partition

A file group that takes inserts gets a new base file: in COPY_ON_WRITE that
is the usual merge; in MERGE_ON_READ only slices *without logs* are
candidates, and the writer rewrites the base with the new keys (and any
updates of the same batch) through a merge — a **sorted create**: the new
base is one sorted run again, never a log that holds inserts next to an old
base.  Each file group's write stat counts its `numInserts`, so the timeline
shows which file groups took new keys.  With the bucket index a key's file
group is its bucket's, so none of this applies.

Simplified compared with Apache Hudi: the average record size comes from the
candidate files themselves (bytes / rows) rather than from earlier commits'
write stats; candidates are ordered smallest first.  A Spark write (spark/write.py) plans
with `candidates` and `quotas` on the driver and hands each small slice a range of the
new keys' ranks, so it packs exactly as a local write does.

Taught in: notebooks/11_clustering.ipynb
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from lsm_lab.errors import InputError
from lsm_lab.filegroup.fsview import FileGroup, FileSlice
from lsm_lab.format import parquet_footer

KEY_SMALL_FILE_LIMIT = "hoodie.parquet.small.file.limit"
KEY_MAX_FILE_SIZE = "hoodie.parquet.max.file.size"
KEY_INSERT_SPLIT = "hoodie.copyonwrite.insert.split.size"
KEY_RECORD_SIZE = "hoodie.copyonwrite.record.size.estimate"
KEY_MOR_CANDIDATES = "hoodie.merge.small.file.group.candidates.limit"


@dataclass(frozen=True)
class SmallFileConfig:
    """Hudi's small-file settings, with Hudi's defaults."""

    small_file_bytes: int = 100 * 1024 * 1024
    max_file_bytes: int = 120 * 1024 * 1024
    insert_split_size: int = 500_000
    record_size_estimate: int = 1024
    mor_candidates: int = 1

    @property
    def enabled(self) -> bool:
        return self.small_file_bytes > 0

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> SmallFileConfig:
        def num(key: str, default: int, minimum: int | None) -> int:
            raw = props.get(key)
            if raw is None or str(raw).strip() == "":
                return default
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise InputError(f"{key}={raw!r} is not a whole number") from None
            if minimum is not None and value < minimum:
                raise InputError(f"{key} must be at least {minimum} (got {raw})")
            return value

        return cls(small_file_bytes=num(KEY_SMALL_FILE_LIMIT, cls.small_file_bytes, None),
                   max_file_bytes=num(KEY_MAX_FILE_SIZE, cls.max_file_bytes, 1),
                   insert_split_size=num(KEY_INSERT_SPLIT, cls.insert_split_size, 1),
                   record_size_estimate=num(KEY_RECORD_SIZE, cls.record_size_estimate, 1),
                   mor_candidates=num(KEY_MOR_CANDIDATES, cls.mor_candidates, 0))


def is_candidate(fs: FileSlice, conf: SmallFileConfig, *, is_mor: bool) -> bool:
    """Whether a latest slice may take inserts: a small base file (and, in MERGE_ON_READ, no logs)."""
    if not conf.enabled or fs.base_file is None or fs.base_file.name.ext != "parquet":
        return False
    if is_mor and fs.log_files:
        return False
    return fs.base_file.size < conf.small_file_bytes


def candidates(groups: list[FileGroup], conf: SmallFileConfig, *, is_mor: bool) -> list[FileSlice]:
    """The partition's small latest slices, smallest first (MERGE_ON_READ: at most `mor_candidates`)."""
    found = sorted((g.latest for g in groups if is_candidate(g.latest, conf, is_mor=is_mor)),
                   key=lambda s: (s.size_bytes, s.file_id))
    return found[:conf.mor_candidates] if is_mor else found


def room(fs: FileSlice, conf: SmallFileConfig) -> int:
    """How many more records the slice's base file can take before reaching the maximum file size."""
    assert fs.base_file is not None
    size = fs.base_file.size
    meta, _ = parquet_footer.read_footer(fs.base_file.path)
    per_record = size / meta.num_rows if meta.num_rows else conf.record_size_estimate
    return max(0, int((conf.max_file_bytes - size) // max(1.0, per_record)))


def quotas(new_keys: int, small: list[FileSlice], conf: SmallFileConfig) -> list[tuple[FileSlice, int]]:
    """Bin-pack a count of new keys into the small slices, in order: [(slice, keys it takes)], none empty.

    The plan alone, for a writer that does not hold the rows (a Spark driver)."""
    taken: list[tuple[FileSlice, int]] = []
    left = new_keys
    for fs in small:
        if left <= 0:
            break
        n = min(room(fs, conf), left)
        if n > 0:
            taken.append((fs, n))
            left -= n
    return taken


def assign(fresh: pa.Table, small: list[FileSlice], conf: SmallFileConfig
           ) -> tuple[list[tuple[FileSlice, pa.Table]], pa.Table]:
    """Bin-pack new-key rows into the small slices: ([(slice, rows it takes)], the rows left over)."""
    taken: list[tuple[FileSlice, pa.Table]] = []
    start = 0
    for fs, n in quotas(fresh.num_rows, small, conf):
        taken.append((fs, fresh.slice(start, n)))
        start += n
    return taken, fresh.slice(start)


__all__ = ["SmallFileConfig", "assign", "candidates", "is_candidate", "quotas", "room"]
