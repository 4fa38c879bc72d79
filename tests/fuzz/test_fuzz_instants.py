"""Delete each completed instant file of the template tables in turn, then read and write (issue 28, finding 9).

A completed instant file deleted by hand makes its instant look pending.  For
a write that means "a crashed writer": before the fix, readers silently
dropped the commit (deleted rows came back) and the next writer's rollback
deleted its data files for good.  Every case must now end in

    read    a typed error (`LostCommitError` for a write) or exactly the undamaged rows
    write   a typed error, or exactly the rows the same write gives on the undamaged table

and no data file a completed instant committed may be deleted by the write.
Non-write instants (clean, savepoint) lose nothing a reader needs: their cases
give the expected rows.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from fuzzkit import canonical, outcome

import lsm_lab
from lsm_lab.filegroup import fsview
from lsm_lab.timeline.instant import State, parse_file_name

# the write's own meta values differ from run to run (its instant time); the rows must not
CHANGING = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")
ROW = {"id": "k001", "p": "a", "ts": 9, "v": -1}


def _completed_files(path: Path) -> list[str]:
    folder = path / ".hoodie" / "timeline"
    return sorted(n for n in (p.name for p in folder.iterdir())
                  if (parsed := parse_file_name(n)) is not None and parsed[2] is State.COMPLETED)


def _data_files(path: Path) -> set[str]:
    return {p.relative_to(path).as_posix() for _, p, _ in fsview.list_data_files(path)}


def _write_then_read(path: Path) -> pa.Table:
    lsm_lab.open_table(path).upsert([ROW])
    return lsm_lab.open_table(path).read()


def _with_services(fresh: Callable[[str], Path]) -> Path:
    """The v9 template plus a completed clean, compaction, savepoint and rollback (non-write instants too)."""
    path = fresh("v9")
    t = lsm_lab.open_table(path)
    t.clean(retained=1)  # runs the template's pending clean plan
    t.compact()  # and its pending compaction plan
    t.savepoint()
    t.upsert([{"id": "k002", "p": "b", "ts": 7, "v": 7}])
    t.rollback(t.upsert([{"id": "k004", "p": "b", "ts": 8, "v": 8}]))
    return path


def test_delete_each_completed_instant(fresh: Callable[[str], Path], tmp_path: Path) -> None:
    typed = expected = 0
    services = _with_services(fresh)
    copies = iter(range(1000))
    kinds: dict[str, Callable[[], Path]] = {
        "v9": lambda: fresh("v9"), "v8": lambda: fresh("v8"),
        "v9+services": lambda: Path(shutil.copytree(services, tmp_path / f"services_{next(copies)}")),
    }
    for name, copy in kinds.items():
        clean_copy = copy()
        expected_read = canonical(lsm_lab.open_table(clean_copy).read())
        expected_write = canonical(_write_then_read(copy()), drop=CHANGING)
        instants = _completed_files(clean_copy)
        assert len(instants) >= 4
        for instant_file in instants:
            path = copy()
            committed = _data_files(path)
            (path / ".hoodie" / "timeline" / instant_file).unlink()
            what = f"{name}: deleted {instant_file}"

            def read_it(p: Path = path) -> pa.Table:
                return lsm_lab.open_table(p).read()

            def write_it(p: Path = path) -> pa.Table:
                return _write_then_read(p)

            read = outcome("deleted instant (read)", expected_read, read_it, what)
            wrote = outcome("deleted instant (write)", expected_write, write_it, what, drop=CHANGING)
            lost = sorted(committed - _data_files(path))
            assert not lost, f"{what}: the write deleted committed data files {lost}"
            typed += (read == "typed") + (wrote == "typed")
            expected += (read == "expected") + (wrote == "expected")
    assert typed, "a deleted completed write instant must be reported"
    assert expected, "a deleted clean, savepoint or rollback instant loses no row"
