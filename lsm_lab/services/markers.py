"""Markers: a note left *before* each data file is created, so a rollback finds every file.

    .hoodie/.temp/<instant>/<partition>/<file name>.marker.<IO type>
        IO type  CREATE  a new base file          (insert into a new file group)
                 MERGE   a new version of a base  (copy-on-write update, full compaction)
                 APPEND  a log file               (merge-on-read update, log compaction)

A writer creates the marker, then the file.  If it dies in between, the marker
names a file that may or may not exist; if it dies after, the marker names the
orphan.  Either way `rollback` deletes what the markers name (plus, as a safety
net, any data file carrying the instant in its name), and the marker folder
goes when the instant completes or is rolled back.

On an object store a process remembers the markers it created (`_created`), so
the one that completes an instant deletes its markers with one bulk DELETE and
no LIST of the folder first (`delete_markers(..., mine_only=True)`).  That is
complete when this process wrote every marker of the attempt: a table service
removes a dead earlier attempt's markers when it claims the plan, a write's
instant is new.  When it is not (a Spark runner's tasks wrote markers in other
processes), what is left is a marker folder of a completed instant, which the
next writer's sweep removes (`rollback.sweep`): garbage, never a lost file.

Markers are never written through a symbolic link out of the table: a linked
`.hoodie/.temp`, `.hoodie/.temp/<instant>` or marker raises `UnsafePathError`
(`paths.make_folders`, `paths.touch`), and `delete_markers` removes only a real
folder below a real `.hoodie/.temp`.

Simplified compared with Apache Hudi: no timeline-server-based markers (Hudi
batches marker creation through its timeline server on cloud storage); one
empty file per marker, as Hudi's DIRECT markers do.

Taught in: notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import os
import threading
from typing import cast

from lsm_lab.storage import StoragePath, TablePath, path_of, paths, walk_files

TEMP_FOLDER = ".temp"
IO_TYPES = ("CREATE", "MERGE", "APPEND")
_SUFFIX = ".marker."
#: object stores: marker folder (its URI) → the markers this process created in it (by URI)
_created: dict[str, dict[str, StoragePath]] = {}
_guard = threading.Lock()


def marker_folder(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> TablePath:
    return path_of(base_path) / ".hoodie" / TEMP_FOLDER / paths.instant_time(instant, field="marker folder")


def create_marker(base_path: str | os.PathLike[str] | StoragePath, instant: str, partition: str, file_name: str,
                  io_type: str) -> TablePath:
    """Record that `partition/file_name` is about to be written by `instant`."""
    if io_type not in IO_TYPES:
        raise ValueError(f"unknown marker IO type {io_type!r}")
    folder = marker_folder(base_path, instant)
    if partition:
        folder = folder / partition
    path = folder / f"{file_name}{_SUFFIX}{io_type}"
    if isinstance(path, StoragePath):  # noted before the PUT: a PUT that fails half way may still have written it
        with _guard:
            _created.setdefault(str(marker_folder(base_path, instant)), {})[str(path)] = path
    paths.make_folders(folder)  # never through a link out of the table (.hoodie/.temp -> elsewhere)
    return cast("TablePath", paths.touch(path))  # O_NOFOLLOW: a link as marker is refused, its target never touched (a store: a PUT)


def marked_files(base_path: str | os.PathLike[str] | StoragePath, instant: str) -> list[tuple[str, str, str]]:
    """(partition, file name, IO type) of every marker an instant left."""
    root = marker_folder(base_path, instant)
    out: list[tuple[str, str, str]] = []
    for partition, name in walk_files(root):  # one recursive LIST on an object store
        if _SUFFIX not in name:
            continue
        file_name, io_type = name.rsplit(_SUFFIX, 1)
        out.append((partition, file_name, io_type))
    return sorted(out)


def delete_markers(base_path: str | os.PathLike[str] | StoragePath, instant: str, *, mine_only: bool = False) -> None:
    """Remove the marker folder of `instant`.

    `mine_only` (object stores, the completion of an attempt this process ran): delete the markers this
    process created, with no LIST of the folder; without a record of any, list the folder as usual."""
    folder = marker_folder(base_path, instant)
    with _guard:
        mine = _created.pop(str(folder), None)
    if mine_only and mine and isinstance(folder, StoragePath):
        by_store: dict[int, list[StoragePath]] = {}
        for path in mine.values():
            by_store.setdefault(id(path.storage), []).append(path)
        for group in by_store.values():  # (one store in practice: S3 takes 1,000 keys per request)
            group[0].storage.delete_many(sorted(p.key for p in group))
        return
    # only a real folder lsm_lab made under .hoodie/.temp, never a symlink out (a store: the keys below it)
    paths.remove_tree(base_path, folder, parent=TEMP_FOLDER)
