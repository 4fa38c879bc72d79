"""A restore is one atomic change for readers; a write whose completed file was deleted is never rolled back.

Finding 7 of issue 28: a restore killed half way showed readers a state that
was neither before nor after.  Here the restore is "killed" (an exception
raised, once) before each of its steps in turn — every timeline file created
or removed, every data file, marker folder and heartbeat deleted — and a
fresh reader must see exactly the state before or after; the next writer
then finishes the restore.

Finding 9: deleting a completed instant file made the commit vanish for
readers and the next writer's rollback deleted its data files.  Readers and
writers now raise `LostCommitError`; a genuinely crashed writer (markers
present) is still rolled back automatically, and so is a killed rollback of a
completed instant.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import LostCommitError
from lsm_lab.filegroup import fsview
from lsm_lab.services import heartbeat, markers, rollback
from lsm_lab.storage import TablePath
from lsm_lab.timeline import active
from lsm_lab.timeline.instant import RESTORE, ROLLBACK

MakeTable = Callable[..., lsm_lab.Table]  # the tmp_table fixture


def rows(table: lsm_lab.Table, **kw: Any) -> list[tuple[str, str, int]]:
    return sorted((r["id"], r["p"], r["v"]) for r in table.read(columns=["id", "p", "v"], **kw).to_pylist())


def data_files(path: TablePath) -> set[str]:
    root = local(path)
    return {p.relative_to(root).as_posix() for _, p, _ in fsview.list_data_files(root)}


class Crash(Exception):
    """A simulated kill (raised once, before the step it replaces)."""


def _build(path: Path) -> tuple[lsm_lab.Table, str]:
    """A table with a savepoint and, after it, upserts, a delete, a compaction, a pending plan and a dead write."""
    t = lsm_lab.create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts", num_buckets=2)
    t.insert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(12)])
    pinned = t.upsert([{"id": "k1", "p": "b", "ts": 2, "v": 100}])
    t.savepoint()
    t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 3, "v": -i} for i in range(0, 12, 3)])
    t.delete([{"id": "k4", "p": "a", "ts": 4}])
    t.compact(strategy="full")
    t.upsert([{"id": "k5", "p": "b", "ts": 5, "v": 555}, {"id": "new", "p": "a", "ts": 5, "v": 9}])
    t.delete([{"id": "k7", "p": "b", "ts": 6}])
    t.compact(strategy="full", plan_only=True)
    return t, pinned.begin_time


def _arm(monkeypatch: pytest.MonkeyPatch, crash_at: int, action: str = RESTORE) -> dict[str, int]:
    """Count the steps of a restore (or, `action` ROLLBACK, of a rollback of a completed instant) from its
    requested plan on; raise `Crash` before step `crash_at`."""
    state = {"armed": 0, "step": 0}

    def step() -> None:
        if not state["armed"]:
            return
        state["step"] += 1
        if state["step"] == crash_at:
            state["armed"] = 0  # once: the lock and heartbeat release normally, as a kill releases them
            raise Crash(f"killed before step {crash_at}")

    real_create, real_unlink = active.ActiveTimeline._create, pathlib.Path.unlink
    real_markers, real_clear = markers.delete_markers, heartbeat.clear

    def create(self: active.ActiveTimeline, begin: str, kind: str, *a: Any, **kw: Any) -> Any:
        step()
        done = real_create(self, begin, kind, *a, **kw)
        if kind == action and not state["step"]:
            state["armed"] = 1  # the plan is on the timeline: from here on a kill is "during the restore"
        return done

    def unlink(self: Path, *a: Any, **kw: Any) -> None:
        step()
        real_unlink(self, *a, **kw)

    def delete_markers(*a: Any) -> None:
        step()
        real_markers(*a)

    def clear(*a: Any) -> None:
        step()
        real_clear(*a)

    runner = "_run_restore" if action == RESTORE else "rollback_completed"
    real_run = getattr(rollback, runner)

    def run(*a: Any, **kw: Any) -> Any:
        try:
            return real_run(*a, **kw)
        finally:
            state["armed"] = 0  # the restore instant completed: steps after it are not the restore's

    monkeypatch.setattr(active.ActiveTimeline, "_create", create)
    monkeypatch.setattr(pathlib.Path, "unlink", unlink)
    monkeypatch.setattr(markers, "delete_markers", delete_markers)  # the modules rollback calls through
    monkeypatch.setattr(heartbeat, "clear", clear)
    monkeypatch.setattr(rollback, runner, run)
    return state


def test_a_restore_killed_at_any_step_is_before_or_after_for_readers(tmp_path: Path) -> None:
    template, pinned = _build(tmp_path / "template")
    before = rows(template)
    keys = ["k1", "k4", "k5", "k7", "new"]
    before_lookup = sorted(template.lookup(keys).to_pylist(), key=lambda r: r["id"])
    # the "after" state: the same table, restored without a kill
    done_path = tmp_path / "done"
    shutil.copytree(local(template.path), done_path)
    lsm_lab.open_table(done_path).restore(pinned)
    after = rows(lsm_lab.open_table(done_path))
    after_lookup = sorted(lsm_lab.open_table(done_path).lookup(keys).to_pylist(), key=lambda r: r["id"])
    assert before != after
    seen = {"before": 0, "after": 0}
    crash_at = 1
    while True:
        path = tmp_path / f"kill{crash_at}"
        shutil.copytree(local(template.path), path)
        with pytest.MonkeyPatch.context() as mp:
            state = _arm(mp, crash_at)
            try:
                lsm_lab.open_table(path).restore(pinned)
            except Crash:
                pass
            killed = state["step"] >= crash_at
        if not killed:
            break  # the restore ran to its end before step `crash_at`: every step was tried
        table = lsm_lab.open_table(path)
        got = rows(table)
        assert got in (before, after), f"killed before step {crash_at}: a state that is neither before nor after"
        seen["before" if got == before else "after"] += 1
        looked = sorted(table.lookup(keys).to_pylist(), key=lambda r: r["id"])
        assert looked == (before_lookup if got == before else after_lookup)
        # the next writer finishes the restore first
        table.upsert([{"id": "z", "p": "a", "ts": 9, "v": 1}])
        assert rows(table) == sorted([*after, ("z", "a", 1)])
        assert not [i for i in table.instants() if not i.is_completed and i.action == RESTORE]
        crash_at += 1
    assert crash_at > 10 and seen["after"] == crash_at - 1  # the plan is the commit point: always "after"


def test_a_restore_killed_half_way_is_finished_by_the_next_writer_and_hidden_meanwhile(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    first = table.upsert([{"id": "a", "v": 1}])
    table.savepoint()
    second = table.upsert([{"id": "a", "v": 2}])
    third = table.upsert([{"id": "b", "v": 3}])
    timeline = table.active_timeline
    plan = {"savepointToRestoreTimestamp": first.begin_time, "savepointsToDelete": [], "version": 1,
            "instantsToRollback": [{"commitTime": third.begin_time, "action": "deltacommit"},
                                   {"commitTime": second.begin_time, "action": "deltacommit"}]}
    req = timeline.request("restore", plan)
    assert [(r["id"], r["v"]) for r in table.read().to_pylist()] == [("a", 1)]  # the plan alone hides them
    inflight = timeline.start(req)
    rollback._erase(table.path, timeline, third.begin_time, "deltacommit")  # died after the first rollback
    assert [(r["id"], r["v"]) for r in table.read().to_pylist()] == [("a", 1)]
    assert [(r["id"], r["v"]) for r in table.read(as_of=third.completion_time).to_pylist()] == [("a", 1)]
    table.upsert([{"id": "c", "v": 4}])
    assert timeline.find(inflight.begin_time).is_completed
    assert sorted((r["id"], r["v"]) for r in table.read().to_pylist()) == [("a", 1), ("c", 4)]


# --------------------------------------------------------------------------- finding 9: a deleted completed file
def _delete_completed(path: TablePath, begin: str) -> None:
    folder = local(path) / ".hoodie" / "timeline"
    (name,) = [n for n in os.listdir(folder) if n.startswith(f"{begin}_")]
    (folder / name).unlink()


def test_a_deleted_completed_file_is_reported_not_rolled_back(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    first = table.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    gone = table.delete([{"id": "k1"}])
    table.upsert([{"id": "k2", "v": 20}])
    files = data_files(table.path)
    _delete_completed(table.path, gone.begin_time)
    reopened = lsm_lab.open_table(table.path)
    with pytest.raises(LostCommitError, match=gone.begin_time) as err:
        reopened.read()
    assert err.value.instant == gone.begin_time and "lsm-lab rollback" in str(err.value)
    with pytest.raises(LostCommitError, match=gone.begin_time):
        reopened.upsert([{"id": "k3", "v": 30}])
    with pytest.raises(LostCommitError):
        reopened.compact(strategy="full")
    with pytest.raises(LostCommitError):
        reopened.rollback()  # "roll back the failed writes" does not count it among them
    assert data_files(table.path) == files  # nothing deleted
    assert len(reopened.read(as_of=first.completion_time)) == 4  # a snapshot from before it is not affected
    reopened.rollback(gone.begin_time)  # the explicit rollback the error names is the way out
    assert sorted((r["id"], r["v"]) for r in reopened.read().to_pylist()) == [
        ("k0", 0), ("k1", 1), ("k2", 20), ("k3", 3)]


def test_the_next_write_never_deletes_the_files_of_a_commit_whose_completed_file_is_gone(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    table.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    gone = table.upsert([{"id": "k1", "v": 10}])
    _delete_completed(table.path, gone.begin_time)
    files = data_files(table.path)
    with pytest.raises(LostCommitError, match=gone.begin_time):
        lsm_lab.open_table(table.path).upsert([{"id": "k3", "v": 30}])
    assert data_files(table.path) == files


def test_a_crashed_writer_is_still_rolled_back(tmp_table: MakeTable) -> None:
    """Markers present: a crash, not a lost commit — rolled back automatically as before."""
    table = tmp_table(num_buckets=1)
    table.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    gone = table.delete([{"id": "k1"}])
    _delete_completed(table.path, gone.begin_time)
    for rel in data_files(table.path):  # put back what a writer killed before its commit point leaves
        if gone.begin_time in rel:
            markers.create_marker(table.path, gone.begin_time, "", rel, "APPEND")
    assert sorted(r["id"] for r in table.read().to_pylist()) == ["k0", "k1", "k2", "k3"]
    table.upsert([{"id": "k9", "v": 9}])
    assert not [f for f in data_files(table.path) if gone.begin_time in f]


def test_a_killed_rollback_of_a_completed_write_is_still_finished(tmp_table: MakeTable,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`rollback_completed` removes the completed file first: its pending rollback exempts the instant."""
    table = tmp_table(num_buckets=1)
    table.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    last = table.delete([{"id": "k1"}])

    def die(*a: Any, **kw: Any) -> None:
        raise Crash("killed after the completed file went")

    monkeypatch.setattr(rollback, "delete_instant_files", die)
    with pytest.raises(Crash):
        table.rollback(last)
    monkeypatch.undo()
    assert sorted(r["id"] for r in table.read().to_pylist()) == ["k0", "k1", "k2", "k3"]  # "after" already
    table.upsert([{"id": "k9", "v": 9}])
    assert not [f for f in data_files(table.path) if last.begin_time in f]
    assert sorted(r["id"] for r in table.read().to_pylist()) == ["k0", "k1", "k2", "k3", "k9"]


# --------------------------------------------------------------------------- a real SIGKILL during restore
def _slow_child(action: str, pause: float) -> str:
    """A child process's script: `table.<action>(instant)` on the table named by its arguments, every file
    deletion slowed by `pause` seconds so that a kill lands inside the action; "ready" printed before it. The
    services a restore or rollback uses are imported before "ready" (the table layer imports them on first
    use), so that the kill's delay falls on the action, not on module loading."""
    return f"""
import pathlib, sys, time
import lsm_lab
import lsm_lab.services.clustering, lsm_lab.services.rollback, lsm_lab.services.savepoint, lsm_lab.services.upgrade
real = pathlib.Path.unlink
def slow(self, *a, **kw):
    time.sleep({pause})
    real(self, *a, **kw)
pathlib.Path.unlink = slow
table = lsm_lab.open_table(sys.argv[1])
print("ready", flush=True)
table.{action}(sys.argv[2])
print("done", flush=True)
"""


CHILD = _slow_child("restore", 0.02)


def _killed_copy(template: lsm_lab.Table, path: Path, child: str, instant: str, delay: float) -> lsm_lab.Table:
    """A copy of `template` at `path`, a process running `child` on it (it prints "ready" before its action on
    `instant`), SIGKILLed `delay` seconds after that: the table as the next process finds it."""
    import signal
    import subprocess
    import sys
    import time

    shutil.copytree(local(template.path), path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", child, str(path), instant], stdout=subprocess.PIPE, env=env,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return lsm_lab.open_table(path)


@pytest.mark.slow
def test_a_restore_killed_by_sigkill_is_before_or_after_for_readers(tmp_path: Path) -> None:
    import random

    template, pinned = _build(tmp_path / "template")
    before = rows(template)
    done_path = tmp_path / "done"
    shutil.copytree(local(template.path), done_path)
    lsm_lab.open_table(done_path).restore(pinned)
    after = rows(lsm_lab.open_table(done_path))
    rng = random.Random(28)
    seen = {"before": 0, "after": 0, "finished": 0}
    for round_ in range(8):
        table = _killed_copy(template, tmp_path / f"kill{round_}", CHILD, pinned, rng.uniform(0.0, 0.6))
        got = rows(table)
        assert got in (before, after), f"round {round_}: a state that is neither before nor after"
        restores = [i for i in table.instants() if i.action == RESTORE]
        seen["finished" if restores and restores[-1].is_completed else "before" if got == before else "after"] += 1
        table.upsert([{"id": "z", "p": "a", "ts": 9, "v": 1}])  # the next writer finishes a killed restore
        expected = sorted([*(after if restores else before), ("z", "a", 1)])
        assert rows(table) == expected
    assert seen["after"] >= 1, seen  # at least one kill landed inside the restore


def test_a_rollback_killed_right_after_its_plan_is_finished_not_dropped(tmp_table: MakeTable,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers hide the instant from the rollback plan on, so the next writer must finish the rollback:
    dropping the plan would bring the instant back after readers saw it gone."""
    table = tmp_table(num_buckets=1)
    table.insert([{"id": f"k{i}", "v": i} for i in range(4)])
    last = table.delete([{"id": "k1"}])

    def die(*a: Any, **kw: Any) -> None:
        raise Crash("killed right after the rollback plan was written")

    monkeypatch.setattr(rollback, "remove_timeline_files", die)
    with pytest.raises(Crash):
        table.rollback(last)
    monkeypatch.undo()
    assert table.active_timeline.find(last.begin_time).is_completed  # still there on disk ...
    assert sorted(r["id"] for r in table.read().to_pylist()) == ["k0", "k1", "k2", "k3"]  # ... gone for readers
    table.upsert([{"id": "k9", "v": 9}])
    assert sorted(r["id"] for r in table.read().to_pylist()) == ["k0", "k1", "k2", "k3", "k9"]
    assert all(i.begin_time != last.begin_time for i in table.instants())
    (rb,) = [i for i in table.instants() if i.action == "rollback"]
    assert rb.is_completed and table.instant_metadata(rb)["commitsRollback"] == [last.begin_time]


def test_v1_logs_named_for_a_pending_compaction_are_not_a_lost_commit(tmp_table: MakeTable) -> None:
    """Table version 6 names a log written during a pending compaction c for c: c has "files" and no
    markers, yet it never ran — not a lost commit."""
    table = tmp_table(num_buckets=1, table_version=6, layout="default", ordering_field="ts")
    table.insert([{"id": f"k{i}", "ts": 1, "v": i} for i in range(4)])
    table.upsert([{"id": "k1", "ts": 2, "v": 10}])
    plan = table.compact(plan_only=True)
    assert plan is not None and not plan.is_completed
    table.upsert([{"id": "k2", "ts": 3, "v": 20}])
    assert any(plan.begin_time in f for f in data_files(table.path))  # a v1 log named for the plan
    assert sorted((r["id"], r["v"]) for r in table.read().to_pylist()) == [("k0", 0), ("k1", 10), ("k2", 20), ("k3", 3)]
    table.upsert([{"id": "k3", "ts": 4, "v": 30}])
    table.compact()
    assert sorted((r["id"], r["v"]) for r in table.read().to_pylist()) == [("k0", 0), ("k1", 10), ("k2", 20), ("k3", 30)]


# --------------------------------------------------------------------------- rollback of a completed replacecommit
def _overwritten(path: Path) -> tuple[lsm_lab.Table, str]:
    """A bucket table whose latest write is an insert_overwrite of partition a (a completed replacecommit)."""
    t = lsm_lab.create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts", num_buckets=2)
    t.insert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(12)])
    t.upsert([{"id": "k1", "p": "b", "ts": 2, "v": 100}, {"id": "k2", "p": "a", "ts": 2, "v": 200}])
    done = t.insert_overwrite([{"id": "n1", "p": "a", "ts": 3, "v": 7}, {"id": "k4", "p": "a", "ts": 3, "v": 44}])
    assert done.action == "replacecommit"
    return t, done.begin_time


def test_a_rollback_of_an_overwrite_killed_at_any_step_is_before_or_after_for_readers(tmp_path: Path) -> None:
    """`Table.rollback` of a completed replacecommit, "killed" before each of its steps in turn: a fresh
    reader sees the table with the overwrite or without it (from the rollback's plan on: without), and the
    next writer finishes the rollback — the replaced file groups are live again."""
    template, overwrite = _overwritten(tmp_path / "template")
    before = rows(template)
    keys = ["k2", "k4", "n1", "k1"]
    before_lookup = sorted(template.lookup(keys).to_pylist(), key=lambda r: r["id"])
    done_path = tmp_path / "done"
    shutil.copytree(local(template.path), done_path)
    lsm_lab.open_table(done_path).rollback(overwrite)
    after = rows(lsm_lab.open_table(done_path))
    after_lookup = sorted(lsm_lab.open_table(done_path).lookup(keys).to_pylist(), key=lambda r: r["id"])
    assert ("k2", "a", 200) in after and ("n1", "a", 7) not in after and ("n1", "a", 7) in before
    seen = {"before": 0, "after": 0}
    crash_at = 1
    while True:
        path = tmp_path / f"kill{crash_at}"
        shutil.copytree(local(template.path), path)
        with pytest.MonkeyPatch.context() as mp:
            state = _arm(mp, crash_at, ROLLBACK)
            try:
                lsm_lab.open_table(path).rollback(overwrite)
            except Crash:
                pass
            killed = state["step"] >= crash_at
        if not killed:
            break
        table = lsm_lab.open_table(path)
        got = rows(table)
        assert got in (before, after), f"killed before step {crash_at}: a state that is neither before nor after"
        seen["before" if got == before else "after"] += 1
        looked = sorted(table.lookup(keys).to_pylist(), key=lambda r: r["id"])
        assert looked == (before_lookup if got == before else after_lookup)
        table.upsert([{"id": "z", "p": "a", "ts": 9, "v": 1}])  # the next writer finishes the rollback
        assert rows(table) == sorted([*after, ("z", "a", 1)])
        assert all(i.begin_time != overwrite for i in table.instants())
        assert not [f for f in data_files(table.path) if overwrite in f]
        crash_at += 1
    assert crash_at > 5 and seen["after"] == crash_at - 1  # the plan is the commit point: always "after"


ROLLBACK_CHILD = _slow_child("rollback", 0.05)


def test_a_rollback_of_an_overwrite_killed_by_sigkill_is_before_or_after_for_readers(tmp_path: Path) -> None:
    """The same with a real SIGKILL of a process rolling the overwrite back, at a random moment."""
    import random

    template, overwrite = _overwritten(tmp_path / "template")
    before = rows(template)
    done_path = tmp_path / "done"
    shutil.copytree(local(template.path), done_path)
    lsm_lab.open_table(done_path).rollback(overwrite)
    after = rows(lsm_lab.open_table(done_path))
    rng = random.Random(31)
    for round_ in range(4):
        table = _killed_copy(template, tmp_path / f"kill{round_}", ROLLBACK_CHILD, overwrite, rng.uniform(0.0, 0.4))
        got = rows(table)
        assert got in (before, after), f"round {round_}: a state that is neither before nor after"
        table.upsert([{"id": "z", "p": "a", "ts": 9, "v": 1}])  # finishes a killed rollback, if one began
        begun = any(i.action == ROLLBACK for i in table.instants())
        assert rows(table) == sorted([*(after if begun else before), ("z", "a", 1)])
