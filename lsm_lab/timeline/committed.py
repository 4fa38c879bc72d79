"""Committed files: which data files the completed write instants say they wrote.

Every completed write instant lists the files it wrote in its commit metadata
(`partitionToWriteStats[p][i].path`).  The file-system view is built from a
folder listing, so a committed file that has disappeared — deleted by hand, lost
by the storage — would simply not be seen, and a read would silently return
the rows without it (a lost delete log brings deleted rows back).  The view
therefore compares the listing it already has with this map, and a file that
belongs to a slice being read but is missing is a `CorruptTableError` naming
the instant and the file (`layout.fsview.build_file_groups`, `committed=`).

    completed instants ──► metadata (cached: instant files never change) ──► {(partition, file name): instant}
                                                                                 │
    folder listing ────────────────────────────────────────────────────────────► fsview: missing → error

Only the *latest* slice of each file group (the one a snapshot read, a write or
a compaction uses) must be complete: older slices lose files to the cleaner by
design.

Simplified compared with Apache Hudi: Hudi checks neither; lsm_lab derives the
committed files from the commit metadata, whether the listing it compares them with
comes from the folders or from the metadata table (table/mdt_listing.py).

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from lsm_lab.storage import paths
from lsm_lab.timeline.instant import Instant
from lsm_lab.timeline.metadata import iter_write_stats

_cache: dict[tuple[str, str, str, tuple[int, int]], tuple[tuple[str, str, int], ...]] = {}
_guard = threading.Lock()
_MAX = 200_000


def files_of(metadata: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(partition, file name) of every file a commit metadata dict lists (paths already guarded)."""
    return tuple((p, n) for p, n, _ in _entries(metadata) if n)


def _size(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else -1


def _entries(metadata: dict[str, Any]) -> tuple[tuple[str, str, int], ...]:
    """(partition, file name, committed size or -1) of every data and CDC file a commit lists."""
    out = []
    if not isinstance(metadata.get("partitionToWriteStats"), dict):  # every commit lsm_lab writes has the map
        out.append(("", "", -1))
    for stat in iter_write_stats(metadata):
        path = stat.get("path")
        if isinstance(path, str) and path:
            out.append((*paths.data_file(path, field="partitionToWriteStats.path"), _size(stat.get("fileSizeInBytes"))))
        else:  # a write stat naming no file: damaged metadata in a table lsm_lab wrote (the view decides)
            out.append((str(stat.get("partitionPath") or ""), "", -1))
        cdc = stat.get("cdcStats")
        if isinstance(cdc, dict):
            for rel, size in cdc.items():
                if isinstance(rel, str) and rel:
                    out.append((*paths.data_file(rel, field="partitionToWriteStats.cdcStats"), _size(size)))
    return tuple(out)


def _stamp(folder: Path | None, inst: Instant) -> tuple[int, int]:
    """(size, mtime) of an active instant file: a file changed by hand is read again (archived files never change)."""
    if folder is None or inst.file_name.startswith("archived:"):
        return (0, 0)
    try:
        st = os.stat(folder / inst.file_name)
    except OSError:
        return (-1, -1)
    return (st.st_size, st.st_mtime_ns)


def committed_files(table_key: str, writes: Iterable[Instant],
                    metadata_of: Callable[[Instant], dict[str, Any]], *,
                    timeline_folder: Path | None = None,
                    sizes: dict[tuple[str, str], int] | None = None) -> dict[tuple[str, str], str]:
    """(partition, file name) → begin time of the completed write that lists it (a later instant wins).

    CDC logs (`cdcStats`) are listed too.  `sizes`, when given, receives each file's committed
    size (`fileSizeInBytes`, the latest listing instant's), where the commit recorded one."""
    out: dict[tuple[str, str], str] = {}
    for inst in writes:
        key = (table_key, inst.begin_time, inst.file_name, _stamp(timeline_folder, inst))
        with _guard:
            hit = _cache.get(key)
        if hit is None:
            hit = _entries(metadata_of(inst))
            with _guard:
                if len(_cache) > _MAX:
                    _cache.clear()
                _cache[key] = hit
        for partition, name, size in hit:
            out[(partition, name)] = inst.begin_time
            if sizes is not None:
                if size >= 0:
                    sizes[(partition, name)] = size
                else:
                    sizes.pop((partition, name), None)
    return out


__all__ = ["committed_files", "files_of"]
