"""Rollback, markers, heartbeats, savepoint and restore (lsm_lab.services.{rollback,markers,heartbeat,savepoint}).

A dead writer's leftovers are removed by the next writer (or `lsm-lab
rollback`), a live writer's never are; markers name every file before it
exists; restore puts the table back to a savepoint in one recorded instant,
and a restore killed half way is finished before anything else happens.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from localpath import local

import lsm_lab
from lsm_lab.cli.app import main
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import write as writer
from lsm_lab.format import naming
from lsm_lab.services import heartbeat, markers, rollback
from lsm_lab.timeline.instant import State
from lsm_lab.timeline.metadata import WriteStat

MakeTable = Callable[..., lsm_lab.Table]  # the tmp_table fixture


def snapshot(table: lsm_lab.Table, **kw: Any) -> list[tuple[str, int]]:
    return sorted((r["id"], r["v"]) for r in table.read(columns=["id", "v"], **kw).to_pylist())


def data_files(table: lsm_lab.Table) -> set[str]:
    return {p.name for _, p, _ in fsview.list_data_files(table.path)}


def fake_dead_write(table: lsm_lab.Table, rows: int = 3) -> tuple[str, Path]:
    """An inflight deltacommit with one data file and its marker, and no live heartbeat: a killed writer."""
    requested = table.active_timeline.request("deltacommit", {"operationType": "UPSERT"})
    inflight = table.active_timeline.start(requested)
    (fs,) = table.latest_slices()
    name = naming.log_file_name(fs.file_id, "0-0-0", inflight.begin_time, 1)
    markers.create_marker(table.path, inflight.begin_time, "", name, "APPEND")
    path = local(table.path / name)
    path.write_bytes(b"half a parquet file")
    return inflight.begin_time, path


def test_markers_name_every_file_before_it_exists(tmp_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_table(num_buckets=2)
    table.upsert([{"id": f"k{i}", "v": i} for i in range(6)])
    seen: list[set[str]] = []
    real = writer.write_file_group

    def spy(**kw: Any) -> list[WriteStat]:
        listed = {name for _, name, _ in markers.marked_files(table.path, kw["instant"])}
        stats = real(**kw)
        written = {Path(s.path).name for s in stats}
        assert written <= listed  # the marker came first
        seen.append(written)
        return stats

    monkeypatch.setattr(writer, "write_file_group", spy)
    done = table.upsert([{"id": f"k{i}", "v": -i} for i in range(6)])
    assert seen and all(seen)
    assert not markers.marker_folder(table.path, done.begin_time).exists()  # gone once completed
    io_types: set[str] = set()

    def note_io_types(**kw: Any) -> list[WriteStat]:
        io_types.update(t for *_, t in markers.marked_files(table.path, kw["instant"]))
        return real(**kw)

    monkeypatch.setattr(writer, "write_file_group", note_io_types)
    table.delete([{"id": "k1"}])
    assert io_types == {"APPEND"}


def test_next_writer_rolls_back_a_dead_write(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    table.upsert([{"id": "a", "v": 1}])
    dead, leftover = fake_dead_write(table)
    assert snapshot(table) == [("a", 1)]  # readers ignore it already
    table.upsert([{"id": "b", "v": 2}])
    assert not leftover.exists()
    assert not markers.marker_folder(table.path, dead).exists()
    rollbacks = [i for i in table.instants() if i.action == "rollback"]
    assert len(rollbacks) == 1
    meta = table.instant_metadata(rollbacks[0])
    assert meta["commitsRollback"] == [dead] and meta["totalFilesDeleted"] == 1
    assert meta["partitionMetadata"][""]["successDeleteFiles"] == [leftover.name]
    assert all(i.begin_time != dead for i in table.instants())
    assert snapshot(table) == [("a", 1), ("b", 2)]


def test_rollback_cli_and_live_writers(tmp_table: MakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_table(num_buckets=1)
    table.upsert([{"id": "a", "v": 1}])
    dead, leftover = fake_dead_write(table)
    hb_path = heartbeat.heartbeat_path(table.path, dead)
    hb_path.parent.mkdir(parents=True, exist_ok=True)
    hb_path.touch()
    # another process holds the heartbeat: the write is alive and must be left alone
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"fh = open({str(hb_path)!r}, 'a+'); fcntl.flock(fh.fileno(), fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert heartbeat.is_alive(table.path, dead)
        assert main(["rollback", str(table.path)]) == 0
        assert "nothing to roll back" in capsys.readouterr().out
        assert leftover.exists()
        table.upsert([{"id": "b", "v": 2}])  # another writer goes ahead without touching it
        assert leftover.exists()
        assert main(["rollback", str(table.path), "--instant", dead]) == 2
        assert "live process" in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert not heartbeat.is_alive(table.path, dead)
    assert main(["rollback", str(table.path)]) == 0
    assert f"rolled back {dead}" in capsys.readouterr().out
    assert not leftover.exists()


def test_rollback_latest_completed_write_only(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    first = table.upsert([{"id": "a", "v": 1}])
    second = table.upsert([{"id": "a", "v": 2}, {"id": "b", "v": 2}])
    with pytest.raises(lsm_lab.InputError, match="only the latest"):
        table.rollback(first)
    (done,) = table.rollback(second)
    assert done.action == "rollback"
    assert snapshot(table) == [("a", 1)]
    assert all((parsed := naming.parse(n)) is not None and parsed.instant != second.begin_time
               for n in data_files(table))
    table.upsert([{"id": "c", "v": 3}])
    assert snapshot(table) == [("a", 1), ("c", 3)]


def test_heartbeat_is_exclusive_and_dies_with_its_owner(tmp_path: Path) -> None:
    hb = heartbeat.Heartbeat(tmp_path, "20260101000000000").start()
    assert heartbeat.is_alive(tmp_path, "20260101000000000")
    with pytest.raises(lsm_lab.ConflictError):
        heartbeat.Heartbeat(tmp_path, "20260101000000000").start()
    hb.stop()
    assert not heartbeat.is_alive(tmp_path, "20260101000000000")
    assert not heartbeat.heartbeat_path(tmp_path, "20260101000000000").exists()
    # a process killed while holding it: the kernel releases the lock
    proc = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from lsm_lab.services.heartbeat import Heartbeat\n"
        f"Heartbeat({str(tmp_path)!r}, '20260101000000001').start()\n"
        "print('up', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    assert heartbeat.is_alive(tmp_path, "20260101000000001")
    proc.kill()
    proc.wait()
    assert not heartbeat.is_alive(tmp_path, "20260101000000001")


# --------------------------------------------------------------------------- savepoint / restore
def test_savepoint_and_restore(tmp_table: MakeTable) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=2)
    table.upsert([{"id": f"k{i}", "ts": 0, "v": i} for i in range(8)])
    pinned = table.upsert([{"id": "k1", "ts": 1, "v": 100}])
    expected = snapshot(table)
    sp = table.savepoint(comment="known good")
    with pytest.raises(lsm_lab.InputError, match="already savepointed"):
        table.savepoint(pinned)
    table.upsert([{"id": f"k{i}", "ts": 2, "v": -i} for i in range(8)])
    table.compact(strategy="full")
    table.delete([{"id": "k2", "ts": 3}])
    later_sp = table.savepoint()
    plan = table.compact(plan_only=True)  # a pending plan: rolled back as well
    assert plan is None or plan.state is State.REQUESTED
    files_before = data_files(table)
    done = table.restore(pinned)
    assert done.action == "restore" and done.is_completed
    assert snapshot(table) == expected
    meta = table.instant_metadata(done)
    assert meta["savepointToRestoreTimestamp"] == pinned.begin_time
    assert len(meta["instantsToRollback"]) >= 3
    assert [s["instant"] for s in table.savepoints()] == [sp.begin_time]  # the later savepoint went too
    assert later_sp.begin_time not in {i.begin_time for i in table.instants()}
    assert data_files(table) < files_before
    assert table.completed_writes()[-1].begin_time == pinned.begin_time
    table.upsert([{"id": "new", "ts": 5, "v": 5}])  # accepts new writes
    assert ("new", 5) in snapshot(table)
    with pytest.raises(lsm_lab.InputError, match="not a savepoint"):
        table.restore("20200101000000000")
    table.delete_savepoint(pinned)
    assert table.savepoints() == []


def test_restore_refuses_while_a_writer_is_alive(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    first = table.upsert([{"id": "a", "v": 1}])
    table.savepoint()
    table.upsert([{"id": "a", "v": 2}])
    req = table.active_timeline.request("deltacommit", {})
    table.active_timeline.start(req)
    with heartbeat.Heartbeat(table.path, req.begin_time):
        with pytest.raises(lsm_lab.ConflictError, match="live process"):
            table.restore(first)
    table.restore(first)  # the writer is gone: its pending instant is rolled back as part of the restore
    assert snapshot(table) == [("a", 1)]


def test_a_restore_killed_half_way_is_finished_by_the_next_writer(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    first = table.upsert([{"id": "a", "v": 1}])
    table.savepoint()
    second = table.upsert([{"id": "a", "v": 2}])
    third = table.upsert([{"id": "b", "v": 3}])
    timeline = table.active_timeline
    plan = {"savepointToRestoreTimestamp": first.begin_time, "savepointsToDelete": [], "version": 1,
            "instantsToRollback": [{"commitTime": third.begin_time, "action": "deltacommit"},
                                   {"commitTime": second.begin_time, "action": "deltacommit"}]}
    inflight = timeline.start(timeline.request("restore", plan))
    rollback._erase(table.path, timeline, third.begin_time, "deltacommit")  # died after the first rollback
    assert snapshot(table) == [("a", 1)]  # readers honour the pending restore: the state after it, never a mix
    table.upsert([{"id": "c", "v": 4}])
    assert timeline.find(inflight.begin_time).is_completed
    assert snapshot(table) == [("a", 1), ("c", 4)]


def test_savepoint_cli(tmp_table: MakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_table(num_buckets=1)
    first = table.upsert([{"id": "a", "v": 1}])
    path = str(table.path)
    assert main(["savepoint", path, "--comment", "v1"]) == 0
    assert f"pins instant {first.begin_time}" in capsys.readouterr().out
    assert main(["savepoint", path, "--list"]) == 0
    assert first.begin_time in capsys.readouterr().out
    table.upsert([{"id": "a", "v": 2}])
    assert main(["restore", path, first.begin_time]) == 0
    assert "1 instant(s) rolled back" in capsys.readouterr().out
    assert snapshot(table) == [("a", 1)]
    assert main(["savepoint", path, "--delete", first.begin_time]) == 0
    assert main(["savepoint", path, "--list"]) == 0
    assert "(no savepoints)" in capsys.readouterr().out


def test_rolling_back_a_write_drops_the_plans_that_read_it(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    table.upsert([{"id": "a", "v": 1}])
    last = table.upsert([{"id": "a", "v": 2}])
    plan = table.compact(plan_only=True)
    assert plan is not None
    table.rollback(last)
    assert plan.begin_time not in {i.begin_time for i in table.instants()}
    assert snapshot(table) == [("a", 1)]
    assert table.compact() is None  # only a base file is left: nothing to compact, nothing broken


def test_rollback_of_a_completed_overwrite_cli_and_savepoints(tmp_table: MakeTable,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """`lsm-lab rollback PATH --instant t` of the latest write when it is a replacecommit; a savepointed one is
    refused (as upstream's `validateSavepointRollbacks`), and so is one that is no longer the latest."""
    table = tmp_table(num_buckets=1, partition_by="p")
    table.upsert([{"id": "a", "p": "x", "v": 1}, {"id": "b", "p": "y", "v": 2}])
    over = table.insert_overwrite_table([{"id": "c", "p": "x", "v": 3}])
    assert snapshot(table) == [("c", 3)]
    assert main(["rollback", str(table.path), "--instant", over.begin_time]) == 0
    assert over.begin_time in capsys.readouterr().out
    assert snapshot(lsm_lab.open_table(table.path)) == [("a", 1), ("b", 2)]
    table = lsm_lab.open_table(table.path)
    over = table.insert_overwrite([{"id": "d", "p": "y", "v": 4}])
    table.savepoint(over)
    with pytest.raises(lsm_lab.InputError, match="savepointed"):
        table.rollback(over)
    table.delete_savepoint(over)
    table.upsert([{"id": "e", "p": "x", "v": 5}])
    with pytest.raises(lsm_lab.InputError, match="only the latest"):
        table.rollback(over)
    assert snapshot(table) == [("a", 1), ("d", 4), ("e", 5)]
    # the cleaner deleted the replaced groups' files: rolling back would leave the table unreadable
    over = table.insert_overwrite_table([{"id": "f", "p": "x", "v": 6}])
    assert table.clean(retained=1) is not None
    with pytest.raises(lsm_lab.InputError, match="no longer whole"):
        table.rollback(over)
    assert snapshot(table) == [("f", 6)]


def test_the_upgrade_replacecommit_is_never_rolled_back(tmp_path: Path) -> None:
    """The upgrade to version 10 is a replacecommit too, but `hoodie.properties` says version 10 from it on:
    rolling it back would bring back files of the older dialect, so it is refused."""
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", table_version=9, num_buckets=2)
    table.upsert([{"id": f"k{i}", "v": i} for i in range(6)])
    table = table.upgrade()
    latest = table.completed_writes()[-1]
    assert latest.action == "replacecommit" and table.config.version == 10
    with pytest.raises(lsm_lab.InputError, match="upgrade to table version 10"):
        table.rollback(latest)
    assert snapshot(table) == [(f"k{i}", i) for i in range(6)]
