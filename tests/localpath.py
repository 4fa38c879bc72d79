"""The tests' one narrowing of a table root: a table created under `tmp_path` lives on local disk.

`Table.path` is a `TablePath` (a `pathlib.Path` for a local table, a `StoragePath` on an object store);
tests that open, stat or list a local table's files with the standard library narrow it here, so mypy
checks the rest of the test and a table that is unexpectedly remote fails with a clear message.
"""

from __future__ import annotations

from pathlib import Path

from lsm_lab.storage import TablePath


def local(path: TablePath | str) -> Path:
    """`path` as a `pathlib.Path` (a local table's root or file); fails the test for an object-store path."""
    if isinstance(path, str):
        return Path(path)
    assert isinstance(path, Path), f"expected a local path, got {path!r}"
    return path
