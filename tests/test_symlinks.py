"""Symbolic links planted in a local table: no write, create, truncate or delete of lsm_lab may follow one out.

Each test plants a link at one folder or file lsm_lab writes (heartbeats,
markers, key-index sidecars, the timeline, `.hoodie`, partition folders, the
lock and clock files), pointing at a folder or file beside the table whose
bytes are known; runs the operation that writes or deletes there; and asserts
that everything outside the table is byte for byte unchanged and that the
operation refused with `UnsafePathError` (a `CorruptTableError`).  A link that
stays inside the table is harmless and allowed; reads follow links
(lsm_lab/storage/paths.py, "Symbolic links planted in a local table").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from localpath import local
from spies import fingerprint

import lsm_lab
from lsm_lab.errors import CorruptTableError, LsmLabError, UnsafePathError
from lsm_lab.services import clean, heartbeat, markers
from lsm_lab.storage import paths
from lsm_lab.timeline import config

NO_SMALL_FILES: dict[str, Any] = {"hoodie.parquet.small.file.limit": "0"}  # every write opens new file groups


def _rows(i: int, n: int = 8, part: str | None = None) -> list[dict[str, Any]]:
    return [{"id": f"k{j:02d}", "p": part or ("a" if j % 2 else "b"), "ts": i, "v": 10 * i + j} for j in range(n)]



@pytest.fixture()
def outside(tmp_path: Path) -> Path:
    """A folder beside the tables, holding files of known content (and nothing may change in it)."""
    o = tmp_path / "outside"
    (o / "sub").mkdir(parents=True)
    (o / "victim.txt").write_text("must survive\n")
    (o / "sub" / "data.bin").write_bytes(b"\x00\x01 must survive")
    return o


def _table(tmp_path: Path, **kw: Any) -> lsm_lab.Table:
    kw = {"partition_by": "p", "ordering_field": "ts", "num_buckets": 1, **kw}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", **kw)
    t.insert(_rows(1))
    return t


def _relink(folder: Path, target: Path) -> None:
    """Replace the folder `folder` of the table with a link to `target` (moving nothing out of the table)."""
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder)
    os.symlink(target, folder)


def _refused(outside: Path, op: Callable[[], object]) -> UnsafePathError:
    before = fingerprint(outside)
    with pytest.raises(UnsafePathError) as info:
        op()
    assert fingerprint(outside) == before, "a file outside the table changed"
    assert isinstance(info.value, CorruptTableError)
    return info.value


# --------------------------------------------------------------------------- heartbeats
@pytest.mark.parametrize("service", ["compact", "clean"])
def test_heartbeat_link_of_a_pending_plan_is_not_truncated(tmp_path: Path, outside: Path, service: str) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(2, 4))
    t.compact(strategy="full")
    t.upsert(_rows(3, 4))
    if service == "compact":
        pending = t.compact(strategy="full", plan_only=True)
        assert pending is not None
        begin = pending.begin_time
    else:
        plan = clean.plan_clean(t, clean.KEEP_LATEST_COMMITS, 1)
        begin = t.active_timeline.request("clean", plan).begin_time
    beat = local(heartbeat.heartbeat_path(t.path, begin))
    beat.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside / "victim.txt", beat)  # the plan's heartbeat is a link to a file outside
    table = lsm_lab.open_table(t.path)
    err = _refused(outside, (lambda: table.compact(strategy="full")) if service == "compact"
                   else (lambda: table.clean(retained=1)))
    assert err.path == str(beat)
    assert (outside / "victim.txt").read_text() == "must survive\n"


def test_heartbeat_folder_link_refuses_every_write(tmp_path: Path, outside: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(tmp_path)
    monkeypatch.setattr(heartbeat.Heartbeat, "stop", lambda self: None)  # keep what a heartbeat wrote, to see it
    _relink(local(t.path) / ".hoodie" / heartbeat.HEARTBEAT_FOLDER, outside / "sub")
    err = _refused(outside, lambda: t.upsert(_rows(2)))
    assert err.path == str(t.path / ".hoodie" / heartbeat.HEARTBEAT_FOLDER)
    assert "symbolic link" in str(err)


def test_heartbeat_start_opens_no_link(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    beat = local(heartbeat.heartbeat_path(t.path, "20991231235959001"))
    os.symlink(outside / "victim.txt", beat)
    _refused(outside, lambda: heartbeat.Heartbeat(t.path, "20991231235959001").start())
    heartbeat.clear(t.path, "20991231235959001")  # a dead heartbeat that is a link: the link goes, not its target
    assert not os.path.lexists(beat) and (outside / "victim.txt").exists()


# --------------------------------------------------------------------------- markers
def test_marker_folder_link_refuses_the_write(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    _relink(local(t.path) / ".hoodie" / markers.TEMP_FOLDER, outside / "sub")
    _refused(outside, lambda: t.upsert(_rows(2)))
    assert not list((outside / "sub").rglob("*.marker.*"))


def test_marker_folder_of_a_pending_compaction_is_a_link(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(2, 4))
    pending = t.compact(strategy="full", plan_only=True)
    assert pending is not None
    folder = local(markers.marker_folder(t.path, pending.begin_time))
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside / "sub", folder)
    _refused(outside, lambda: lsm_lab.open_table(t.path).compact(strategy="full"))


def test_clustering_writes_no_marker_through_a_link(tmp_path: Path, outside: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", ordering_field="ts",
                             num_buckets=2, **NO_SMALL_FILES)
    for i in range(4):
        t.upsert([{"id": f"k{(i * 3 + j) % 10}", "p": "a" if j % 2 else "b", "ts": i, "v": i} for j in range(5)])
    _relink(local(t.path) / ".hoodie" / markers.TEMP_FOLDER, outside / "sub")
    _refused(outside, lambda: t.cluster())


# --------------------------------------------------------------------------- key-index sidecars
def test_key_index_folder_link_gets_no_sidecar(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    _relink(local(t.path) / ".hoodie" / ".key_index", outside / "sub")
    _refused(outside, lambda: t.upsert(_rows(2)))
    assert not list((outside / "sub").glob("*.keyindex"))


def _sidecars_moved_out(t: lsm_lab.Table, outside: Path) -> Path:
    """Move `.hoodie/.key_index` out of the table and leave a link to it (its sidecars now live outside)."""
    folder = local(t.path) / ".hoodie" / ".key_index"
    moved = outside / "key_index"
    shutil.move(str(folder), str(moved))
    os.symlink(moved, folder)
    assert list(moved.glob("*.keyindex"))
    return moved


def test_clean_deletes_no_sidecar_through_a_link(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    t.upsert(_rows(2))
    t.compact(strategy="full")
    t.upsert(_rows(3))
    t.compact(strategy="full")
    _sidecars_moved_out(t, outside)
    (outside / "key_index" / "20000101000000000.keyindex").write_bytes(b"an old sidecar no data file has")
    _refused(outside, lambda: t.clean(retained=1))


def test_restore_and_rollback_delete_no_sidecar_through_a_link(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    t.savepoint()
    t.upsert(_rows(2))
    _sidecars_moved_out(t, outside)
    _refused(outside, lambda: t.restore(t.savepoints()[0]["instant"]))


# --------------------------------------------------------------------------- timeline, .hoodie, properties
def test_timeline_folder_link_gets_no_instant(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    timeline = local(t.path) / ".hoodie" / "timeline"
    shutil.copytree(timeline, outside / "timeline")
    _relink(timeline, outside / "timeline")
    _refused(outside, lambda: lsm_lab.open_table(t.path).upsert(_rows(2)))


def test_hoodie_folder_link_is_refused(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    moved = outside / "hoodie"
    shutil.move(str(t.path / ".hoodie"), str(moved))
    os.symlink(moved, local(t.path) / ".hoodie")
    err = _refused(outside, lambda: lsm_lab.open_table(t.path))  # the timeline folder is chosen at open
    assert err.path == str(t.path / ".hoodie")
    _refused(outside, lambda: config.write_config(t.path, dict(t.config.props), create=False))  # properties


@pytest.mark.parametrize("name", [".lsm_lab.lock", ".lsm_lab_clock.lock"])
def test_lock_file_links_create_nothing_outside(tmp_path: Path, outside: Path, name: str) -> None:
    t = _table(tmp_path)
    lock = local(t.path) / ".hoodie" / name
    lock.unlink()
    os.symlink(outside / "created_by_lsm_lab", lock)  # a dangling link: `a+` would create its target
    _refused(outside, lambda: t.upsert(_rows(2)))
    assert not (outside / "created_by_lsm_lab").exists()


# --------------------------------------------------------------------------- partition folders
def test_new_partition_folder_link_gets_no_data_file(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    os.symlink(outside / "sub", local(t.path) / "p=c")  # the folder a write of partition c would create
    _refused(outside, lambda: t.insert(_rows(2, 4, part="c")))
    assert sorted(p.name for p in (outside / "sub").iterdir()) == ["data.bin"]


def test_existing_partition_folder_link_gets_no_log(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    moved = outside / "p=a"
    shutil.move(str(t.path / "p=a"), str(moved))
    os.symlink(moved, local(t.path) / "p=a")
    _refused(outside, lambda: lsm_lab.open_table(t.path).upsert(_rows(2)))


_KILLED_WRITER = """
import os, sys
import lsm_lab
from lsm_lab.timeline import active
active.ActiveTimeline.complete = lambda self, *a, **k: os._exit(9)  # killed just before the commit point
lsm_lab.open_table(sys.argv[1]).upsert([{"id": "k01", "p": "a", "ts": 2, "v": 2}])
"""


def test_rollback_deletes_no_data_file_through_a_partition_link(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lsm_lab.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(t.path)], env=env, check=False)
    assert done.returncode == 9
    table = lsm_lab.open_table(t.path)
    (pending,) = table.active_timeline.pending()
    moved = outside / "p=a"
    shutil.move(str(t.path / "p=a"), str(moved))
    os.symlink(moved, local(t.path) / "p=a")
    assert [p for p in moved.iterdir() if pending.begin_time in p.name], "the killed write left its log there"
    _refused(outside, lambda: lsm_lab.open_table(t.path).rollback())


# --------------------------------------------------------------------------- links that stay inside
def test_links_inside_the_table_are_followed(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    real = local(t.path) / ".hoodie" / "temp_real"
    real.mkdir()
    _relink(local(t.path) / ".hoodie" / markers.TEMP_FOLDER, real)  # a link that stays inside the table
    before = fingerprint(outside)
    t.upsert(_rows(2))
    assert t.read().num_rows == 8 and fingerprint(outside) == before


def test_a_table_root_that_is_a_link_is_fine(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    link = tmp_path / "alias"
    os.symlink(local(t.path), link)
    table = lsm_lab.open_table(link)
    table.upsert(_rows(2))
    table.compact(strategy="full")
    table.clean(retained=1)
    assert table.read().num_rows == 8


def test_the_guard_itself(tmp_path: Path, outside: Path) -> None:
    t = _table(tmp_path)
    assert paths.table_root(local(t.path) / "p=a" / "x.parquet") == local(t.path)
    assert paths.table_root(local(t.path) / ".hoodie" / "metadata" / ".hoodie" / "x") == local(t.path)
    assert paths.table_root(outside / "victim.txt") is None
    assert paths.checked(outside / "victim.txt") == outside / "victim.txt"  # not in a table: nothing to check
    os.symlink(outside, local(t.path) / "p=z")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        paths.make_folders(t.path / "p=z" / "deeper")
    with pytest.raises(UnsafePathError):
        paths.unlink(t.path / "p=z" / "victim.txt")
    with pytest.raises(LsmLabError):
        paths.touch(t.path / "p=z")  # a link as final name
    assert (outside / "victim.txt").read_text() == "must survive\n" and not (outside / "deeper").exists()


def test_local_storage_writes_and_deletes_no_key_through_a_link(tmp_path: Path, outside: Path) -> None:
    from lsm_lab.storage import LocalStorage

    root = tmp_path / "store"
    root.mkdir()
    os.symlink(outside / "sub", root / "linked")
    store = LocalStorage(root)
    before = fingerprint(outside)
    info = store.head("linked/data.bin")  # reads follow the link
    assert info is not None
    for op in (lambda: store.write("linked/new", b"x"), lambda: store.create("linked/new/deeper", b"x"),
               lambda: store.replace("linked/data.bin", b"x", expected=info), lambda: store.delete("linked/data.bin")):
        with pytest.raises(UnsafePathError):
            op()
    assert fingerprint(outside) == before
    store.write("plain/x", b"fine")
    assert store.read("plain/x") == b"fine"
