"""Time travel as Hudi users know it: `as_of=T` is an instant time, the visible set is {completed, begin <= T}.

Spark's `as.of.instant` (apache/hudi PR #3360) and hudi-rs's `with_as_of_timestamp` read every
completed write whose instant (begin) time is <= T — a *set*, not a prefix of the completion
order: a write that began before T may complete after one that began later.  These tests:

- a mirror (a dict model) of tables where two writers complete out of begin order (OCC, disjoint
  file groups): at every interesting T, `read(as_of=T)` equals the model's {completed, begin <= T}
  and `read(as_of=CompletionTime(T))` the completion prefix; on a version 8 table hudi-rs agrees;
- upstream's slice cut (fsview rule 8): a log begun before T that completed after a compaction
  begun after T belongs to that compaction's slice and is not seen at T (hudi-rs neither);
- the guards of `TimelineUtils.validateTimestampAsOf`: a pending commit begun at or before T
  (PR #9280) and a T older than the cleaner's `earliestCommitToRetain` (PR #9666) are refused;
- `lookup`, `read_optimized`, `file_slices`/`dump_levels` and the CLI's `--as-of` /
  `--as-of-completion` use the same times; a log whose completion time equals a base instant
  joins that base's slice (upstream's `HoodieFileGroup.getBaseInstantTime`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from localpath import local

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import RetentionError, TimeTravelError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import write as writer
from lsm_lab.format import naming
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_read
from lsm_lab.services import occ
from lsm_lab.timeline.instant import normalize_time

MakeTable = Callable[..., lsm_lab.Table]


def rows(table: lsm_lab.Table, **kw: Any) -> dict[str, int]:
    return {r["id"]: r["v"] for r in table.read(columns=["id", "v"], **kw).to_pylist()}


def _later(t: str, ms: int) -> str:
    return f"{int(normalize_time(t)) + ms:017d}"


class Crash(BaseException):
    """A writer killed between its data files and its commit."""


@contextmanager
def crashing_commits() -> Iterator[None]:
    """Every write in the block dies at its commit point: data files, markers and the inflight instant stay."""
    real = occ.WriteTransaction.commit

    def crash(self: occ.WriteTransaction, metadata: Any, **kw: Any) -> lsm_lab.Instant:
        self._finish()  # the heartbeat stops: a dead writer, which the next writer (or rollback()) rolls back
        raise Crash

    occ.WriteTransaction.commit = crash  # type: ignore[method-assign]
    try:
        yield
    finally:
        occ.WriteTransaction.commit = real  # type: ignore[method-assign]


def out_of_order(table: lsm_lab.Table, first: list[dict[str, Any]], second: list[dict[str, Any]],
                 monkeypatch: pytest.MonkeyPatch) -> tuple[lsm_lab.Instant, lsm_lab.Instant]:
    """Write `first` and `second` concurrently so that `first` begins first and completes last."""
    second_done = threading.Event()
    real = writer.write_file_group
    holder: dict[str, int] = {}

    def gated(**kw: Any) -> Any:
        if threading.get_ident() == holder.get("first"):  # the first writer waits for the second to complete
            assert second_done.wait(30)
        return real(**kw)

    monkeypatch.setattr(writer, "write_file_group", gated)
    result: list[Any] = []

    def run_first() -> None:
        holder["first"] = threading.get_ident()
        try:
            result.append(table.upsert(first))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            result.append(exc)

    thread = threading.Thread(target=run_first)
    thread.start()
    while not [i for i in table.instants() if not i.is_completed]:
        time.sleep(0.005)
    b = lsm_lab.open_table(table.path).upsert(second)
    second_done.set()
    thread.join(60)
    monkeypatch.setattr(writer, "write_file_group", real)
    (a,) = result
    assert isinstance(a, lsm_lab.Instant), a
    assert a.begin_time < b.begin_time and str(b.completion_time) < str(a.completion_time)
    return a, b


TABLES = [
    pytest.param({"table_version": 10}, id="v10-mor-lsm_tree"),
    pytest.param({"table_version": 8, "layout": "default"}, id="v8-mor-default"),
    pytest.param({"table_version": 8, "layout": "default", "table_type": "COPY_ON_WRITE"}, id="v8-cow-default"),
]


@pytest.mark.parametrize("options", TABLES)
def test_visible_set_is_completed_and_begun_by_t(tmp_table: MakeTable, monkeypatch: pytest.MonkeyPatch,
                                                 options: dict[str, Any]) -> None:
    """The mirror: a dict per write; the snapshot at T applies {completed, begin <= T} in completion order."""
    t = tmp_table(partition_by="p", num_buckets=1, **options)
    history: list[tuple[lsm_lab.Instant, dict[str, int]]] = []

    def write(batch: list[dict[str, Any]]) -> None:
        history.append((t.upsert(batch), {str(r["id"]): int(r["v"]) for r in batch}))

    write([{"id": "x1", "p": "x", "v": 0}, {"id": "y1", "p": "y", "v": 0}])
    a_rows: list[dict[str, Any]] = [{"id": "x1", "p": "x", "v": 1}, {"id": "x2", "p": "x", "v": 1}]  # partition x
    b_rows: list[dict[str, Any]] = [{"id": "y1", "p": "y", "v": 2}, {"id": "y2", "p": "y", "v": 2}]  # y: no conflict
    a, b = out_of_order(t, a_rows, b_rows, monkeypatch)
    history += [(b, {r["id"]: r["v"] for r in b_rows}), (a, {r["id"]: r["v"] for r in a_rows})]  # completion order
    write([{"id": "x1", "p": "x", "v": 3}, {"id": "y2", "p": "y", "v": 3}])

    def model(at: str, by_completion: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for inst, batch in history:  # completion order: the later write of a key wins
            if normalize_time(str(inst.completion_time) if by_completion else inst.begin_time) <= at:
                out.update(batch)
        return out

    times = sorted({x for inst, _ in history for x in (inst.begin_time, str(inst.completion_time))})
    times = sorted({*times, *(_later(x, -1) for x in times), *(_later(x, 1) for x in times)})
    sets: set[tuple[str, ...]] = set()
    for at in times:
        assert rows(t, as_of=at) == model(at, by_completion=False), f"as of instant time {at}"
        assert rows(t, as_of=lsm_lab.CompletionTime(at)) == model(at, by_completion=True), f"as of completion {at}"
        sets.add(tuple(sorted(i.begin_time for i, _ in history if normalize_time(i.begin_time) <= at)))
    # between a's and b's begin times the visible set holds a (completed last) but not b: no completion prefix
    assert rows(t, as_of=a.begin_time) == {"x1": 1, "x2": 1, "y1": 0}
    assert rows(t, as_of=lsm_lab.CompletionTime(str(b.completion_time))) == {"x1": 0, "y1": 2, "y2": 2}
    assert rows(t, as_of=b) == rows(t, as_of=lsm_lab.CompletionTime(str(b.completion_time)))  # an Instant: completion
    assert len(sets) == len(history) + 1  # every prefix of the begin order, and the empty one
    if options["table_version"] == 8 and hudi_available():
        for at in times:
            assert compare_rows(t.read(as_of=at), hudi_rs_read(local(t.path), as_of=at), ["id"]) == [], at


def test_log_of_a_write_completed_after_a_later_compaction(tmp_table: MakeTable,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A write W begun before T completes after a compaction C begun after T: W's log belongs to C's slice
    (by its completion time), and time travel to T reads the slice before C without it — as Spark and
    hudi-rs (fsview rule 8)."""
    t = tmp_table(ordering_field="ts", num_buckets=1, table_version=8, layout="default")
    for r in range(3):
        t.upsert([{"id": f"k{i}", "ts": r, "v": r} for i in range(3)])
    compacted = threading.Event()
    real = writer.write_file_group

    def after_compaction(**kw: Any) -> Any:
        assert compacted.wait(30)
        return real(**kw)

    monkeypatch.setattr(writer, "write_file_group", after_compaction)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(t.upsert([{"id": "k1", "ts": 9, "v": 9}])))
    thread.start()
    while not [i for i in t.instants() if not i.is_completed]:
        time.sleep(0.005)
    comp = lsm_lab.open_table(t.path).compact(strategy="full")
    compacted.set()
    thread.join(60)
    monkeypatch.setattr(writer, "write_file_group", real)
    (w,) = result
    assert comp is not None and w.begin_time < comp.begin_time < str(w.completion_time)
    assert rows(t, as_of=w.begin_time) == {"k0": 2, "k1": 2, "k2": 2}  # W's log sits in C's slice
    assert rows(t, as_of=comp.begin_time) == {"k0": 2, "k1": 9, "k2": 2}
    assert rows(t, as_of=lsm_lab.CompletionTime(str(w.completion_time))) == rows(t)
    if hudi_available():
        for at in (w.begin_time, comp.begin_time, str(w.completion_time)):
            assert compare_rows(t.read(as_of=at), hudi_rs_read(local(t.path), as_of=at), ["id"]) == [], at


def test_a_pending_commit_at_or_before_t_is_refused(tmp_table: MakeTable) -> None:
    t = tmp_table(num_buckets=1)
    first = t.upsert([{"id": "a", "v": 1}])
    with crashing_commits(), pytest.raises(Crash):
        t.upsert([{"id": "a", "v": 2}])
    (pending,) = [i for i in t.instants() if not i.is_completed]
    assert rows(t) == {"a": 1}  # the latest snapshot: the dead write is invisible
    assert rows(t, as_of=first.begin_time) == {"a": 1}  # before the pending commit: fine
    for at in (pending.begin_time, _later(pending.begin_time, 5)):
        with pytest.raises(TimeTravelError, match="must be earlier than the first incomplete commit") as err:
            t.read(as_of=at)
        assert err.value.pending == pending.begin_time and isinstance(err.value, lsm_lab.InputError)
        for call in (lambda at=at: t.lookup(["a"], as_of=at), lambda at=at: t.read_optimized(as_of=at),
                     lambda at=at: t.dump_levels(as_of=at), lambda at=at: t.file_slices(as_of=at)):
            with pytest.raises(TimeTravelError):
                call()
    # a completion time reads the table as it was: a pending commit never belongs to it
    assert rows(t, as_of=lsm_lab.CompletionTime(_later(pending.begin_time, 5))) == {"a": 1}
    t.rollback()  # the dead write is rolled back: time travel works again
    assert rows(t, as_of=_later(pending.begin_time, 5)) == {"a": 1}


def test_a_pending_compaction_does_not_block_time_travel(tmp_table: MakeTable) -> None:
    t = tmp_table(num_buckets=1)
    t.upsert([{"id": "a", "v": 1}])
    t.upsert([{"id": "a", "v": 2}])
    plan = t.compact(plan_only=True)
    assert plan is not None and not plan.is_completed
    assert rows(t, as_of=_later(plan.begin_time, 1)) == {"a": 2}  # upstream skips compactions and clusterings


def test_time_travel_older_than_the_cleaner_kept_is_refused(tmp_table: MakeTable) -> None:
    t = tmp_table(num_buckets=1, table_type="COPY_ON_WRITE", layout="default")
    writes = [t.upsert([{"id": "a", "v": v}]) for v in range(4)]
    assert rows(t, as_of=writes[0].begin_time) == {"a": 0}
    assert t.clean(retained=1) is not None
    with pytest.raises(RetentionError, match="the cleaner kept only"):
        t.read(as_of=writes[0].begin_time)
    with pytest.raises(RetentionError):
        t.lookup(["a"], as_of=writes[0].begin_time)
    assert rows(t, as_of=writes[-1].begin_time) == {"a": 3}
    assert rows(t) == {"a": 3}


def test_cli_as_of_and_as_of_completion(tmp_table: MakeTable, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    t = tmp_table(partition_by="p", num_buckets=1)
    t.upsert([{"id": "x1", "p": "x", "v": 0}, {"id": "y1", "p": "y", "v": 0}])
    a, b = out_of_order(t, [{"id": "x1", "p": "x", "v": 1}], [{"id": "y1", "p": "y", "v": 2}], monkeypatch)
    capsys.readouterr()
    assert cli_main(["read", str(t.path), "--as-of", a.begin_time, "--json", "--columns", "id,v"]) == 0
    by_instant = capsys.readouterr().out
    assert cli_main(["read", str(t.path), "--as-of-completion", str(b.completion_time), "--json",
                     "--columns", "id,v"]) == 0
    by_completion = capsys.readouterr().out
    assert {r["id"]: r["v"] for r in json.loads(by_instant)} == {"x1": 1, "y1": 0}  # a began by then; b had not
    assert {r["id"]: r["v"] for r in json.loads(by_completion)} == {"x1": 0, "y1": 2}  # b had completed; a had not
    with pytest.raises(SystemExit):  # one or the other
        cli_main(["read", str(t.path), "--as-of", a.begin_time, "--as-of-completion", a.begin_time])
    for what in ("fsview", "levels"):
        assert cli_main(["show", what, str(t.path), "--as-of-completion", str(b.completion_time)]) == 0
    capsys.readouterr()
    assert cli_main(["lookup", str(t.path), "x1", "--as-of", a.begin_time, "--json"]) == 0
    assert [r["v"] for r in json.loads(capsys.readouterr().out)] == [1]


def test_a_log_completed_at_a_base_instant_joins_that_slice(tmp_path: Path) -> None:
    """Upstream's HoodieFileGroup.getBaseInstantTime: the greatest base instant <= the log's completion time."""
    fid = "00000000-0000-0000-0000-000000000000-0"
    b1, log_begin, b2 = "20260101000000100", "20260101000000150", "20260101000000200"
    names = [f"{fid}_0-0-0_{b1}.parquet", f"{fid}_0-0-0_{b2}.parquet", f"{fid}_0-0-0_{log_begin}_1.parquet"]
    files = [("", tmp_path / n, naming.parse(n), 10) for n in names]
    completion = {b1: "20260101000000110", log_begin: b2, b2: "20260101000000250"}  # the log completes at b2
    (group,) = fsview.build_file_groups(tmp_path, completion, read_time=None, files=files)
    assert [s.base_instant for s in group.slices] == [b1, b2]
    assert [f.instant for f in group.slices[1].log_files] == [log_begin] and not group.slices[0].log_files
