"""The timeline: instant file names, transitions, atomic creates, the clock, and real v6/v8 timelines."""

from __future__ import annotations

import datetime as dt
import itertools
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from localpath import local

from lsm_lab.errors import CorruptFileError, TimelineError
from lsm_lab.timeline import clock
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.active import ActiveTimeline, atomic_create
from lsm_lab.timeline.instant import (
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    Instant,
    State,
    file_name_for,
    normalize_time,
    parse_file_name,
)
from lsm_lab.timeline.metadata import (
    WriteStat,
    commit_metadata,
    decode_instant_content,
    encode_json,
    iter_write_stats,
    summarize,
)

T = "20260102030405678"
C = "20260102030406789"


# --------------------------------------------------------------------------- names
@pytest.mark.parametrize(
    ("action", "state", "completion", "layout", "name"),
    [
        (DELTA_COMMIT, State.REQUESTED, None, 2, f"{T}.deltacommit.requested"),
        (DELTA_COMMIT, State.INFLIGHT, None, 2, f"{T}.deltacommit.inflight"),
        (DELTA_COMMIT, State.COMPLETED, C, 2, f"{T}_{C}.deltacommit"),
        (COMMIT, State.REQUESTED, None, 2, f"{T}.commit.requested"),
        (COMMIT, State.INFLIGHT, None, 2, f"{T}.inflight"),
        (COMMIT, State.COMPLETED, C, 2, f"{T}_{C}.commit"),
        (COMPACTION, State.REQUESTED, None, 2, f"{T}.compaction.requested"),
        (COMPACTION, State.COMPLETED, C, 2, f"{T}_{C}.commit"),  # a finished compaction is a commit
        ("clustering", State.COMPLETED, C, 2, f"{T}_{C}.replacecommit"),
        (DELTA_COMMIT, State.COMPLETED, C, 1, f"{T}.deltacommit"),  # table version 6: no completion time
        (COMMIT, State.INFLIGHT, None, 1, f"{T}.inflight"),
    ],
)
def test_file_names(action: str, state: State, completion: str | None, layout: int, name: str) -> None:
    assert file_name_for(T, action, state, completion, timeline_layout=layout) == name
    parsed = parse_file_name(name)
    assert parsed is not None
    begin, parsed_action, parsed_state, parsed_completion = parsed
    assert (begin, parsed_state) == (T, state)
    assert parsed_completion == (completion if state is State.COMPLETED and layout == 2 else None)
    if action not in (COMPACTION, "clustering") or state is not State.COMPLETED:
        assert parsed_action == action


def test_completed_name_needs_completion_time() -> None:
    with pytest.raises(TimelineError):
        file_name_for(T, DELTA_COMMIT, State.COMPLETED, None, timeline_layout=2)


@pytest.mark.parametrize("name", [
    "hoodie.properties", ".aux", "history", "._20260102030405678.deltacommit.requested",
    f".{T}.deltacommit.requested.abc123.tmp", f"{T}.deltacommit.requested.tmp", f"{T}.unknownaction",
    f"{T[:10]}.commit", f"{T}_{C}.commit.crc", f"{T}.deltacommit.completed", ".lsm_lab_clock",
])
def test_not_timeline_files(name: str) -> None:
    assert parse_file_name(name) is None


def test_legacy_14_digit_times() -> None:
    assert parse_file_name("20240418173551.commit") == ("20240418173551", COMMIT, State.COMPLETED, None)
    assert normalize_time("20240418173551") == "20240418173551000"
    assert normalize_time(T) == T
    a = Instant.make("20240418173551", COMMIT, State.COMPLETED)
    b = Instant.make("20240418173551001", COMMIT, State.COMPLETED)
    assert a < b


def test_instants_sort_by_completion_then_begin() -> None:
    early_begin_late_end = Instant.make("20260101000000001", DELTA_COMMIT, State.COMPLETED, "20260101000000009")
    late_begin_early_end = Instant.make("20260101000000002", DELTA_COMMIT, State.COMPLETED, "20260101000000005")
    pending = Instant.make("20260101000000007", DELTA_COMMIT, State.INFLIGHT)
    assert sorted([early_begin_late_end, pending, late_begin_early_end]) == [
        late_begin_early_end, pending, early_begin_late_end]
    assert "→ 20260101000000009" in str(early_begin_late_end) and "[completed]" in str(early_begin_late_end)


# --------------------------------------------------------------------------- atomic create
def test_atomic_create_never_overwrites(tmp_path: Path) -> None:
    target = tmp_path / "x.deltacommit.requested"
    atomic_create(target, b"first")
    with pytest.raises(TimelineError, match="already exists"):
        atomic_create(target, b"second")
    assert target.read_bytes() == b"first"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temp file left behind


# --------------------------------------------------------------------------- transitions
def _timeline(tmp_path: Path, version: int = 9) -> ActiveTimeline:
    props = cfg.build_props(name="t", record_key=("id",), partition_by=(), ordering_field=None,
                            table_type="MERGE_ON_READ", layout="lsm_tree", version=version, hive_style=False,
                            num_buckets=1)
    config = cfg.write_config(tmp_path, props, create=True)
    return ActiveTimeline(tmp_path, config)


def test_transitions(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    assert tl.folder == tmp_path / ".hoodie" / "timeline"
    req = tl.request(DELTA_COMMIT, {"operationType": "UPSERT"})
    assert req.state is State.REQUESTED and len(req.begin_time) == 17
    assert tl.pending() == [req] and tl.completed() == []
    assert tl.read_content(req) == {}  # upstream's `<t>.deltacommit.requested` is empty: so is ours (Avro tables)
    inflight = tl.start(req)
    assert inflight.state is State.INFLIGHT
    assert tl.instants() == [inflight]
    done = tl.complete(inflight, {"partitionToWriteStats": {}, "operationType": "UPSERT"})
    assert done.state is State.COMPLETED and done.completion_time is not None and done.completion_time > done.begin_time
    assert sorted(os.listdir(local(tl.folder))) == [
        f"{req.begin_time}.deltacommit.inflight",
        f"{req.begin_time}.deltacommit.requested",
        f"{req.begin_time}_{done.completion_time}.deltacommit",
    ]
    assert tl.instants() == [done] and tl.completed() == [done] and tl.pending() == []
    assert tl.find(req.begin_time) == done
    assert tl.read_content(done)["operationType"] == "UPSERT"
    assert tl.read_content(done, State.REQUESTED) == {}
    assert tl.completed([COMMIT]) == [] and tl.completed([DELTA_COMMIT]) == [done]


def test_illegal_transitions(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    req = tl.request(COMMIT)
    with pytest.raises(TimelineError, match="not inflight"):
        tl.complete(req, {})
    inflight = tl.start(req)
    assert (tl.folder / f"{req.begin_time}.inflight").is_file()  # a commit's inflight is just <t>.inflight
    with pytest.raises(TimelineError, match="not requested"):
        tl.start(inflight)
    with pytest.raises(TimelineError, match="already exists"):
        tl.start(req)  # a second writer cannot create the same state twice
    with pytest.raises(TimelineError, match="already exists"):
        tl.request(COMMIT, begin_time=req.begin_time)
    done = tl.complete(inflight, {})
    with pytest.raises(TimelineError, match="roll it back"):
        tl.remove_pending(done)
    with pytest.raises(TimelineError, match="no instant"):
        tl.find("20000101000000000")


def test_remove_pending(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    keep = tl.complete(tl.start(tl.request(DELTA_COMMIT)), {})
    dead = tl.start(tl.request(DELTA_COMMIT))
    tl.remove_pending(dead)
    assert tl.instants() == [keep]


def test_compaction_action_restored(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    plan = tl.request(COMPACTION, {"operations": []})
    assert tl.pending()[0].action == COMPACTION
    done = tl.complete(tl.start(plan), {"compacted": True})
    assert done.file_name.endswith(".commit")
    assert [(i.action, i.state) for i in tl.instants()] == [(COMPACTION, State.COMPLETED)]


def test_version_6_flat_layout(tmp_path: Path) -> None:
    props = cfg.build_props(name="t", record_key=("id",), partition_by=(), ordering_field=None,
                            table_type="COPY_ON_WRITE", layout="default", version=6, hive_style=False,
                            num_buckets=1)
    tl = ActiveTimeline(tmp_path, cfg.write_config(tmp_path, props, create=True))
    assert tl.folder == tmp_path / ".hoodie"
    done = tl.complete(tl.start(tl.request(COMMIT)), {"operationType": "INSERT"})
    assert done.completion_time == done.begin_time
    assert (tmp_path / ".hoodie" / f"{done.begin_time}.commit").is_file()
    assert tl.instants() == [Instant.make(done.begin_time, COMMIT, State.COMPLETED, done.begin_time,
                                          f"{done.begin_time}.commit")]


def test_missing_and_corrupt_instant_files(tmp_path: Path) -> None:
    tl = _timeline(tmp_path)
    done = tl.complete(tl.start(tl.request(DELTA_COMMIT)), {"a": 1})
    (tl.folder / done.file_name).write_bytes(b"{not json")
    with pytest.raises(CorruptFileError, match="neither Avro nor JSON"):
        tl.read_content(done)
    (tl.folder / done.file_name).write_bytes(b"Obj\x01garbage")
    with pytest.raises(CorruptFileError, match="Avro"):
        tl.read_content(done)
    (tl.folder / done.file_name).write_bytes(b"[1, 2]")
    with pytest.raises(CorruptFileError, match="not an object"):
        tl.read_content(done)
    (tl.folder / done.file_name).unlink()
    with pytest.raises(TimelineError, match="missing"):
        tl.read_content(done)


# --------------------------------------------------------------------------- metadata
def test_commit_metadata_and_summary() -> None:
    stats = [
        WriteStat("p1", "f1", "p1/a.parquet", numWrites=10, numInserts=7, numUpdateWrites=3, totalWriteBytes=100),
        WriteStat("p1", "f2", "p1/b.parquet", numWrites=5, numInserts=5, totalWriteBytes=50),
        WriteStat("p2", "f3", "p2/c.parquet", numDeletes=4, totalWriteBytes=20),
    ]
    meta = commit_metadata(stats, operation="upsert", extra={"k": "v"})
    assert meta["operationType"] == "UPSERT" and meta["extraMetadata"] == {"k": "v"}
    assert sorted(meta["partitionToWriteStats"]) == ["p1", "p2"]
    assert decode_instant_content(encode_json(meta)) == meta
    assert summarize(meta) == {"partitions": 2, "files": 3, "records_written": 15, "records_inserted": 12,
                               "records_updated": 3, "records_deleted": 4, "bytes_written": 170}
    assert {s["partitionPath"] for s in iter_write_stats({"partitionToWriteStats": {"x": [{"fileId": "f"}]}})} == {"x"}
    assert decode_instant_content(b"") == {} and decode_instant_content(b"  \n") == {}


# --------------------------------------------------------------------------- clock
def test_format_and_parse_time() -> None:
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, 678_999, tzinfo=dt.UTC)
    assert clock.format_time(moment) == T
    assert clock.parse_time(T) == moment.replace(microsecond=678_000)
    assert clock.parse_time("20260102030405") == moment.replace(microsecond=0)
    for bad in ("2026", "2026010203040567x", "yesterday", ""):
        with pytest.raises(TimelineError, match="not an instant time"):
            clock.parse_time(bad)


def test_clock_strictly_increasing(tmp_path: Path) -> None:
    times = [clock.next_instant_time(tmp_path) for _ in range(300)]  # many per millisecond
    assert all(len(t) == 17 and t.isdigit() for t in times)
    assert all(a < b for a, b in itertools.pairwise(times))


def test_clock_never_goes_below_a_time_handed_out(tmp_path: Path) -> None:
    future = "29991231235959998"
    (tmp_path / clock.CLOCK_FILE).write_text(future)
    assert clock.next_instant_time(tmp_path) == "29991231235959999"
    assert clock.next_instant_time(tmp_path) == "30000101000000000"


def _times_in_process(folder: str, n: int) -> list[str]:
    return [clock.next_instant_time(folder) for _ in range(n)]


def test_clock_strictly_increasing_across_processes(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")  # separate processes: only the clock file and its lock are shared
    with ctx.Pool(4) as pool:
        results = pool.starmap(_times_in_process, [(str(tmp_path), 150)] * 4)
    for times in results:
        assert all(a < b for a, b in itertools.pairwise(times))
    every = [t for times in results for t in times]
    assert len(set(every)) == len(every) == 600
    assert clock.next_instant_time(tmp_path) > max(every)


# --------------------------------------------------------------------------- real Hudi timelines
def _open_timeline(path: Path) -> ActiveTimeline:
    return ActiveTimeline(path, cfg.read_config(path))


def test_real_v6_flat_timeline(real_table: Callable[[str], Path]) -> None:
    path = real_table("v6_trips_8i1u")
    tl = _open_timeline(path)
    assert tl.folder == path / ".hoodie"
    instants = tl.instants()
    assert [(i.begin_time, i.action, i.state) for i in instants] == [
        ("20250331030642808", DELTA_COMMIT, State.COMPLETED),
        ("20250331030645735", DELTA_COMMIT, State.COMPLETED),
    ]
    assert all(i.completion_time == i.begin_time for i in instants)  # v6: ordered by begin time
    first = tl.read_content(instants[0])  # JSON HoodieCommitMetadata
    assert first["operationType"] == "UPSERT"
    assert summarize(first)["records_inserted"] == 8 and summarize(first)["partitions"] == 3
    assert summarize(tl.read_content(instants[1]))["records_updated"] == 1


def test_real_v6_commits(real_table: Callable[[str], Path]) -> None:
    tl = _open_timeline(real_table("v6_simplekeygen_nonhivestyle"))
    assert [(i.begin_time, i.action) for i in tl.completed()] == [
        ("20240418172802262", COMMIT), ("20240418172804498", COMMIT)]
    assert tl.pending() == []


def test_real_v8_timeline(real_table: Callable[[str], Path]) -> None:
    path = real_table("v8_trips_8i3u1d")
    tl = _open_timeline(path)
    assert tl.folder == path / ".hoodie" / "timeline"
    instants = tl.instants()
    assert len(instants) == 8 and all(i.is_completed for i in instants)
    assert [i.action for i in instants].count(DELTA_COMMIT) == 6
    compaction = tl.find("20251220210129235")
    assert compaction.action == COMPACTION and compaction.completion_time == "20251220210129883"
    assert compaction.file_name == "20251220210129235_20251220210129883.commit"
    assert [i.completion_time for i in instants] == sorted(i.completion_time for i in instants if i.completion_time is not None)
    assert tl.find("20251220210117766").action == "indexing"
    # Avro object container files decode to the same dict shape as lsm_lab's JSON
    meta = tl.read_content(instants[0])
    assert meta["operationType"] == "UPSERT"
    assert summarize(meta)["records_inserted"] == 8
    deletes = [summarize(tl.read_content(i))["records_deleted"] for i in instants if i.action == DELTA_COMMIT]
    assert sum(deletes) == 2
    requested = tl.read_content(compaction, State.REQUESTED)
    assert requested  # the compaction plan (Avro)
