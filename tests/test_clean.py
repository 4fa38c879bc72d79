"""Cleaning (lsm_lab.services.clean): what each policy deletes, and what it must never delete.

The invariant under test: after a clean, every read the policy promises —
the latest snapshot, time travel to each retained instant, every savepoint —
returns exactly what it returned before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import lsm_lab
from lsm_lab.filegroup import fsview
from lsm_lab.services import clean as cleaner
from lsm_lab.services import heartbeat
from lsm_lab.timeline.instant import State

MakeTable = Callable[..., lsm_lab.Table]  # the tmp_table fixture
Snapshot = list[tuple[str, int, int]]  # (id, ts, v) of every row, sorted


def snapshot(table: lsm_lab.Table, **kw: Any) -> Snapshot:
    return sorted((r["id"], r["ts"], r["v"]) for r in table.read(columns=["id", "ts", "v"], **kw).to_pylist())


def files(table: lsm_lab.Table) -> set[str]:
    return {p.name for _, p, _ in fsview.list_data_files(table.path)}


def history_table(tmp_table: MakeTable, rounds: int = 6,
                  **kw: Any) -> tuple[lsm_lab.Table, list[tuple[lsm_lab.Instant, Snapshot]]]:
    """A table with a compaction after every second write; returns it and [(instant, snapshot)]."""
    table = tmp_table(ordering_field="ts", num_buckets=2, **kw)
    history: list[tuple[lsm_lab.Instant, Snapshot]] = []
    for r in range(rounds):
        inst = table.upsert([{"id": f"k{i}", "ts": r, "v": r * 10 + i} for i in range(r % 3, 16, 2)])
        history.append((inst, snapshot(table)))
        if r % 2 == 1:
            comp = table.compact(strategy="full")
            assert comp is not None
            history.append((comp, snapshot(table)))
    return table, history


def test_keep_latest_commits_keeps_time_travel_to_retained_instants(tmp_table: MakeTable) -> None:
    table, history = history_table(tmp_table)
    before = files(table)
    done = table.clean(policy="KEEP_LATEST_COMMITS", retained=3)
    assert done is not None and done.action == "clean"
    deleted = before - files(table)
    assert deleted, "old slices should have gone"
    meta = table.instant_metadata(done)
    assert meta["totalFilesDeleted"] == len(deleted)
    plan = table.active_timeline.read_content(done, State.REQUESTED)
    assert plan["policy"] == "KEEP_LATEST_COMMITS" and plan["version"] == 2
    retained = table.completed_writes()[-3:]
    assert plan["earliestInstantToRetain"]["timestamp"] == retained[0].begin_time
    by_instant = {inst.begin_time: snap for inst, snap in history}
    for inst in retained:  # time travel to every retained instant still works
        assert snapshot(table, as_of=inst) == by_instant[inst.begin_time]
    assert snapshot(table) == history[-1][1]
    assert table.clean(policy="KEEP_LATEST_COMMITS", retained=3) is None  # nothing more to do


def test_nothing_to_clean_with_few_commits(tmp_table: MakeTable) -> None:
    table, _ = history_table(tmp_table, rounds=2)
    assert table.clean(retained=10) is None
    assert not [i for i in table.instants() if i.action == "clean"]


def test_keep_latest_file_versions(tmp_table: MakeTable) -> None:
    table, history = history_table(tmp_table, rounds=8)
    table.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=2)
    for group in table.file_groups():
        assert len(group.slices) <= 2
    assert snapshot(table) == history[-1][1]
    previous = table.completed_writes()
    # the previous slice of every group is still complete: travel to just before the last compaction
    last_comp = [i for i in previous if i.action == "compaction"][-1]
    assert last_comp.completion_time is not None
    before_comp = [i for i in previous
                   if i.completion_time is not None and i.completion_time < last_comp.completion_time][-1]
    expected = {i.begin_time: s for i, s in history}[before_comp.begin_time]
    assert snapshot(table, as_of=before_comp) == expected


def test_policy_from_properties_and_errors(tmp_table: MakeTable) -> None:
    table, history = history_table(tmp_table, rounds=6, **{
        "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.cleaner.fileversions.retained": "1"})
    done = table.clean()
    assert done is not None
    assert table.active_timeline.read_content(done, State.REQUESTED)["policy"] == "KEEP_LATEST_FILE_VERSIONS"
    assert all(len(g.slices) == 1 for g in table.file_groups())
    assert snapshot(table) == history[-1][1]
    with pytest.raises(lsm_lab.InputError, match="policy"):
        table.clean(policy="KEEP_EVERYTHING")
    with pytest.raises(lsm_lab.InputError, match="at least 1"):
        table.clean(retained=0)


def test_savepoint_files_survive_cleaning(tmp_table: MakeTable) -> None:
    table, history = history_table(tmp_table, rounds=2)
    pinned_instant, pinned = history[-1]
    sp = table.savepoint(pinned_instant, comment="before the big change")
    for r in range(2, 8):
        table.upsert([{"id": f"k{i}", "ts": r, "v": -r} for i in range(0, 16, 3)])
        table.compact(strategy="full")
    table.clean(retained=1)
    table.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert snapshot(table, as_of=pinned_instant) == pinned
    listed = table.savepoints()[0]
    assert listed["instant"] == sp.begin_time and listed["savepointedInstant"] == pinned_instant.begin_time
    assert all((table.path / p / n).exists() for p, names in listed["files"].items() for n in names)
    table.restore(pinned_instant)
    assert snapshot(table) == pinned


def test_log_compaction_replaced_logs_are_cleaned_only_when_no_retained_read_needs_them(tmp_table: MakeTable) -> None:
    table = tmp_table(ordering_field="ts", num_buckets=1)
    for r in range(4):
        table.upsert([{"id": f"k{i}", "ts": r, "v": r} for i in range(r, 8)])
    replaced = {f.path.name for fs in table.latest_slices() for f in fs.log_files}
    before_lc = table.completed_writes()[-1]
    expected_before = snapshot(table)
    table.compact(strategy="log")
    table.upsert([{"id": "z", "ts": 9, "v": 9}])
    table.clean(retained=3)  # keeps the snapshot just before the log compaction
    assert replaced <= files(table)
    assert snapshot(table, as_of=before_lc) == expected_before
    table.upsert([{"id": "y", "ts": 9, "v": 9}])
    table.clean(retained=2)  # the pre-log-compaction snapshot is no longer retained
    assert not (replaced & files(table))
    assert {r[0] for r in snapshot(table)} >= {"y", "z", "k7"}


def test_pending_clean_left_by_a_dead_cleaner_is_finished(tmp_table: MakeTable) -> None:
    table, history = history_table(tmp_table)
    plan = cleaner.plan_clean(table, cleaner.KEEP_LATEST_COMMITS, 2)
    doomed = cleaner.files_in_plan(plan)
    assert doomed
    req = table.active_timeline.request("clean", plan)
    table.active_timeline.start(req)
    (table.path / doomed[0]).unlink()  # the dead cleaner got as far as one file
    assert not heartbeat.is_alive(table.path, req.begin_time)
    done = table.clean(retained=2)
    assert table.active_timeline.find(req.begin_time).is_completed
    assert done is not None
    assert not any((table.path / d).exists() for d in doomed)
    assert snapshot(table) == history[-1][1]


def test_clean_cli(tmp_table: MakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main

    table, _ = history_table(tmp_table)
    assert main(["clean", str(table.path), "--retained", "2"]) == 0
    assert "file(s) deleted" in capsys.readouterr().out
    assert main(["clean", str(table.path), "--retained", "2"]) == 0
    assert "nothing to clean" in capsys.readouterr().out


def test_time_travel_before_the_retention_is_refused_not_partial(tmp_path: Path) -> None:
    import pytest as _pytest

    import lsm_lab

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", table_type="COPY_ON_WRITE")
    first = t.upsert([{"id": f"k{i}", "v": 0} for i in range(10)])
    for r in range(1, 5):
        t.upsert([{"id": f"k{r}", "v": r}])
    assert t.read(as_of=first.completion_time).num_rows == 10  # before cleaning: fine
    assert t.clean(policy="KEEP_LATEST_COMMITS", retained=2) is not None
    with _pytest.raises(lsm_lab.InputError, match="cleaner"):
        t.read(as_of=first.completion_time)
    latest = t.completed_writes()[-1]
    assert t.read(as_of=latest.completion_time).num_rows == 10
