"""Every plan from the metadata table's `files` partition (issue 32, "Use it"): no LIST of a data folder.

On the local S3 server, a table with an MDT runs each operation with the request trace on, and no LIST
request may name the table root or a partition folder (LISTs of `.hoodie/` — the timeline, markers,
heartbeats, the MDT's own folders — are the timeline's, not the data's):

    snapshot · time travel · incremental · CDC · upsert tagging (SIMPLE and RECORD_INDEX) · insert_overwrite ·
    compaction (full) · log compaction · clustering · clean · rollback of a failed write · rollback of the
    latest completed write

Each result is checked against a plain dict model of the rows (id → fare), so a plan that lists
nothing but misses a file fails too.  A rollback of a completed write killed after hiding it resumes
from the files its plan names (`RollbackRequests`), which is what lets it skip the listing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import lsm_lab
from lsm_lab.services import mdt_write
from lsm_lab.storage import request_scope


class _Killed(Exception):
    pass


def _rows(ids: Any, ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": ts, "fare": fare + i} for i in ids]


@contextmanager
def _data_lists(t: lsm_lab.Table) -> Iterator[list[str]]:
    """The LIST requests of the block that name a data folder (the table root or a partition)."""
    counts = t.storage.counts
    counts.trace = []
    got: list[str] = []
    try:
        with request_scope():
            yield got
    finally:
        trace, counts.trace = counts.trace or [], None
        root = t.storage._key("")  # type: ignore[attr-defined]
        got.extend(k[len(root):].lstrip("/") or "<root>" for kind, k in trace
                   if kind == "LIST" and not k[len(root):].lstrip("/").startswith(".hoodie"))


def _model_of(t: lsm_lab.Table, **kw: Any) -> dict[str, float]:
    got = t.read(columns=["id", "fare"], **kw)
    return dict(zip(got.column("id").to_pylist(), got.column("fare").to_pylist(), strict=True))


def _apply(model: dict[str, float], rows: list[dict[str, Any]]) -> None:
    model.update({r["id"]: r["fare"] for r in rows})


@pytest.mark.parametrize("table_type,index_type", [("MERGE_ON_READ", "SIMPLE"), ("COPY_ON_WRITE", "RECORD_INDEX")])
def test_every_plan_lists_no_data_folder_on_s3(s3_table: Callable[..., lsm_lab.Table], table_type: str,
                                                index_type: str) -> None:
    props = {"hoodie.metadata.enable": "true", "hoodie.index.type": index_type,
             "hoodie.metadata.compact.max.delta.commits": "100"}
    t = s3_table(name="trips", record_key="id", ordering_field="ts", partition_by="city", layout="default",
                 table_type=table_type, table_version=9, properties=props)
    model: dict[str, float] = {}
    first = _rows(range(30), 1, 0.0)
    t.insert(first)
    _apply(model, first)
    t = lsm_lab.open_table(t.path)
    assert t.lists_from_metadata()
    lists: dict[str, list[str]] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        got: list[str] = []
        try:
            with _data_lists(t) as got:
                return fn()
        finally:
            lists[name] = got

    for n, ts in ((2, 2), (3, 3)):
        rows = _rows(range(0, 30, n), ts, 10.0 * ts)
        step(f"upsert {ts}", functools.partial(t.upsert, rows))
        _apply(model, rows)
    assert step("snapshot", lambda: _model_of(t)) == model
    writes = t.completed_writes()
    assert step("time travel", lambda: _model_of(t, as_of=writes[0])) == {r["id"]: r["fare"] for r in first}
    by_folders = lsm_lab.open_table(t.path, use_metadata=False)
    for name, read, key in (("incremental", "read_incremental", "id"), ("cdc", "read_cdc", "record_key")):
        got = step(name, functools.partial(getattr(t, read), writes[1].begin_time, columns=["id", "fare"]))
        want = getattr(by_folders, read)(writes[1].begin_time, columns=["id", "fare"])
        assert got.num_rows > 0 and got.sort_by(key).equals(want.sort_by(key))
    if table_type == "MERGE_ON_READ":
        step("log compaction", lambda: t.compact(strategy="log"))
        step("compaction", lambda: t.compact(strategy="full"))
    step("clustering", lambda: t.cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": str(10**9)}))
    assert _model_of(t) == model
    over = _rows(range(0, 30, 4), 9, -1.0)  # every partition gets rows: each one is replaced
    step("insert_overwrite", lambda: t.insert_overwrite(over))
    model = {r["id"]: r["fare"] for r in over}
    assert step("snapshot after overwrite", lambda: _model_of(t)) == model
    step("clean", lambda: t.clean(retained=1))
    real = mdt_write.update

    def die(*a: Any, **kw: Any) -> Any:
        real(*a, **kw)
        raise _Killed

    with mock.patch.object(mdt_write, "update", die), pytest.raises(_Killed):  # (its own abort rolls it back)
        step("a failed write", lambda: t.upsert(_rows(range(0, 30, 5), 20, 555.0)))
    step("rollback of a failed write", lambda: t.rollback())
    assert _model_of(t) == model
    last = _rows(range(0, 30, 7), 21, 777.0)
    done = step("upsert 21", lambda: t.upsert(last))
    step("rollback of the latest write", lambda: t.rollback(done))
    assert step("snapshot at the end", lambda: _model_of(t)) == model
    assert {k: v for k, v in lists.items() if v} == {}


def test_a_rollback_killed_after_hiding_the_write_resumes_from_its_plan(tmp_path: Path) -> None:
    """The rollback of a completed write names its files in its plan (`RollbackRequests`); killed after the
    write was hidden and before its files went, the next rollback deletes exactly those (no listing needed)."""
    from lsm_lab.filegroup import fsview
    from lsm_lab.services import rollback as rb
    from lsm_lab.timeline.instant import ROLLBACK, State

    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", ordering_field="ts", partition_by="city",
                             layout="default", table_type="COPY_ON_WRITE", table_version=9,
                             properties={"hoodie.metadata.enable": "true"})
    t.insert(_rows(range(12), 1, 0.0))
    model = {r["id"]: r["fare"] for r in _rows(range(12), 1, 0.0)}
    done = t.upsert(_rows(range(0, 12, 2), 2, 50.0))
    written = {p.name for _, p, n in fsview.list_data_files(t.path) if n.instant == done.begin_time}
    assert written
    with mock.patch.object(rb, "delete_instant_files", side_effect=_Killed), pytest.raises(_Killed):
        t.rollback(done)
    u = lsm_lab.open_table(t.path)
    pending = [i for i in u.instants() if i.action == ROLLBACK and not i.is_completed]
    plan = u.active_timeline.read_content(pending[0], State.REQUESTED)
    named = {f.rsplit("/", 1)[-1] for r in plan["RollbackRequests"] for f in r["filesToBeDeleted"]}
    assert named == written
    assert _model_of(u) == model  # hidden from readers by the pending rollback's plan
    u.rollback()  # resumes it
    assert not [p for _, p, n in fsview.list_data_files(t.path) if n.instant == done.begin_time]
    assert _model_of(lsm_lab.open_table(t.path)) == model
