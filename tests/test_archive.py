"""The LSM timeline archive (lsm_lab.timeline.archive, lsm_lab.services.archiver).

Archived instants leave the active timeline but keep working: their files
still resolve, time travel and incremental reads cross the archive, and
`timeline(archived=True)` lists them.  On disk: level-0 Parquet files
`<min>_<max>_<level>.parquet` with the format page's schema, `manifest_<N>`
and `_version_`; ten files on a level become one file on the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow.parquet as pq
import pytest

import lsm_lab
from lsm_lab.cli.app import main
from lsm_lab.services import heartbeat
from lsm_lab.timeline import archive as lsm_timeline
from lsm_lab.timeline.instant import State
from lsm_lab.timeline.metadata import decode_instant_content

MakeTable = Callable[..., lsm_lab.Table]  # the tmp_table fixture
Snapshot = list[tuple[str, int]]  # (id, v) of every row, sorted


def snapshot(table: lsm_lab.Table, **kw: Any) -> Snapshot:
    return sorted((r["id"], r["v"]) for r in table.read(columns=["id", "v"], **kw).to_pylist())


def grow(table: lsm_lab.Table, rounds: int, start: int = 0) -> list[tuple[lsm_lab.Instant, Snapshot]]:
    out: list[tuple[lsm_lab.Instant, Snapshot]] = []
    for r in range(start, start + rounds):
        inst = table.upsert([{"id": f"k{r % 7}", "v": r}, {"id": f"n{r}", "v": r}])
        out.append((inst, snapshot(table)))
    return out


def test_archive_moves_instants_into_parquet_levels(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=2)
    history = grow(table, 8)
    first_files = {p.name for fs in table.latest_slices() for p in [f.path for f in fs.files]}
    done = table.archive(keep=3)
    assert [i.begin_time for i in done] == [i.begin_time for i, _ in history[:5]]
    folder = table.archived_timeline.folder
    assert folder == table.path / ".hoodie" / "timeline" / "history"
    assert (folder / "_version_").read_text() == "1"
    manifest = json.loads((folder / "manifest_1").read_text())
    (entry,) = manifest["files"]
    assert entry["fileName"] == f"{done[0].begin_time}_{done[-1].begin_time}_0.parquet"
    assert entry["fileLen"] == (folder / entry["fileName"]).stat().st_size
    rows = pq.read_table(folder / entry["fileName"])
    assert rows.schema.names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    assert rows.column("action").to_pylist() == ["deltacommit"] * 5
    assert decode_instant_content(rows.column("metadata")[0].as_py())["operationType"] == "UPSERT"
    # gone from the active timeline, still known to readers
    active = {i.begin_time for i in table.instants()}
    assert not active & {i.begin_time for i in done}
    assert [i.begin_time for i in table.completed_writes()] == [i.begin_time for i, _ in history]
    assert set(table.completion_map()) == {i.begin_time for i, _ in history}
    assert first_files <= {f.path.name for fs in table.latest_slices() for f in fs.files}
    assert snapshot(table) == history[-1][1]
    for inst, expected in history:  # time travel into the archive
        assert snapshot(table, as_of=inst) == expected
    inc = table.read_incremental(history[1][0], history[4][0], columns=["id", "v"])
    assert sorted(inc.column("v").to_pylist()) == [2, 2, 3, 3, 4, 4]
    tl = table.timeline(archived=True)
    assert list(tl.archived) == [True] * 5 + [False] * 3
    assert list(tl.operation[:5]) == ["UPSERT"] * 5
    assert list(table.timeline().begin_time) == [i.begin_time for i, _ in history[5:]]
    assert table.archived_timeline.read_plan(done[0].begin_time) is None  # upstream archives no plan of a deltacommit


def _level(name: str) -> int:
    """The level of an archive file, from its name."""
    parsed = lsm_timeline.parse_file_name(name)
    assert parsed is not None, name
    return parsed[2]


def test_levels_compact_after_ten_files(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    history = grow(table, 2)
    for r in range(11):
        history += grow(table, 1, start=100 + r)
        table.archive(keep=2)
    names = table.archived_timeline.files()
    levels = sorted(_level(n) for n in names)
    assert levels == [0, 1]  # runs 1-10 became one level-1 file, run 11 is level 0
    folder = table.archived_timeline.folder
    on_disk = {p.name for p in folder.iterdir() if p.suffix == ".parquet"}
    assert on_disk == set(names)  # the ten compacted files are gone
    assert len([p for p in folder.iterdir() if p.name.startswith("manifest_")]) <= 3
    assert len(table.archived_instants()) == len(history) - 2
    for inst, expected in history:
        assert snapshot(table, as_of=inst) == expected


def test_barriers_pending_instant_savepoint_and_clean(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1)
    history = grow(table, 6)
    table.savepoint(history[2][0])
    assert [i.begin_time for i in table.archive(keep=1)] == [i.begin_time for i, _ in history[:2]]
    table.delete_savepoint(history[2][0])
    # a pending instant: nothing that completed after it began may go
    begin = table.active_timeline.new_instant_time()
    with heartbeat.Heartbeat(table.path, begin):  # a live writer
        req = table.active_timeline.request("deltacommit", {}, begin_time=begin)
        table.active_timeline.start(req)
        history += grow(table, 2, start=50)
        archived = table.archive(keep=1)
        assert archived and all(i.completion_time is not None and i.completion_time < req.begin_time for i in archived)
        assert table.active_timeline.find(req.begin_time).state is State.INFLIGHT
    table.rollback(req.begin_time)
    # the cleaner's earliest retained instant
    table.compact(strategy="full")
    grow(table, 3, start=60)
    cleaned = table.clean(retained=2)
    assert cleaned is not None
    earliest = table.active_timeline.read_content(cleaned, State.REQUESTED)["earliestInstantToRetain"]["timestamp"]
    table.archive(keep=1)
    assert all(i.begin_time < earliest for i in table.archived_instants())


def test_crash_between_archive_and_active_cleanup_is_harmless(tmp_table: MakeTable,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.services import archiver

    table = tmp_table(num_buckets=1)
    history = grow(table, 5)

    def crash(*a: Any, **kw: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(archiver, "remove_timeline_files", crash)
    with pytest.raises(KeyboardInterrupt):
        table.archive(keep=2)
    monkeypatch.undo()
    assert len(table.archived_instants()) == 3 and len(table.active_timeline.completed()) == 5
    assert [i.begin_time for i in table.completed_writes()] == [i.begin_time for i, _ in history]  # no doubles
    assert snapshot(table) == history[-1][1]
    table.archive(keep=2)  # finishes the job
    assert len(table.active_timeline.completed()) == 2 and len(table.archived_instants()) == 3
    assert table.archived_timeline.current_version() == 1  # nothing archived twice


def test_automatic_archival(tmp_table: MakeTable) -> None:
    table = tmp_table(num_buckets=1, **{"hoodie.archive.automatic": "true", "hoodie.keep.min.commits": "2",
                                        "hoodie.keep.max.commits": "4"})
    history = grow(table, 4)
    assert table.archived_instants() == []
    history += grow(table, 1, start=10)
    assert len(table.active_timeline.completed()) == 2 and len(table.archived_instants()) == 3
    assert snapshot(table) == history[-1][1]
    assert table.schema is not None and "v" in table.schema.names


def test_show_timeline_archived_cli(tmp_table: MakeTable, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_table(num_buckets=1)
    history = grow(table, 4)
    assert main(["archive", str(table.path), "--keep", "1"]) == 0
    assert "archived 3 instant(s)" in capsys.readouterr().out
    assert main(["show", "timeline", str(table.path), "--archived", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["begin_time"] for r in rows] == [i.begin_time for i, _ in history]
    assert [r["archived"] for r in rows] == [True, True, True, False]
    assert main(["show", "timeline", str(table.path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 1
    assert main(["archive", str(table.path), "--keep", "0"]) == 2
