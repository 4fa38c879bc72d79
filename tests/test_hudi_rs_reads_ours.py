"""hudi-rs (Apache Hudi's Rust reader) reads the tables lsm_lab writes in versions 8 and 9.

The matrix: table version 8 and 9, COW and MOR, the default layout, partitioned or not, a simple or a
complex record key; after insert, upsert, delete, bulk insert, full compaction (MOR), clustering, clean,
archival, savepoint and restore, and a failed write (killed between its data files and its commit)
rolled back. After every step hudi-rs's snapshot equals lsm_lab's; at the end its time travel to the
instant time of every completed write (as a Hudi user passes it: `with_as_of_timestamp`, Spark's
`as.of.instant`), its incremental reads between consecutive commits, its read-optimized view, and its
decoding of every completed instant's metadata (`get_instant_metadata_in_json`: the Avro commit
metadata of timeline layout 2) agree.
The README's table "what hudi-rs reads of lsm_lab's tables" summarises this file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import InputError
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_incremental, hudi_rs_read
from lsm_lab.services import occ

pytestmark = pytest.mark.skipif(not hudi_available(), reason="hudi-rs is not installed (pip install -e '.[interop]')")


def _rows(ids: range | list[int], ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3], "ts": ts, "fare": fare + i} for i in ids]


class _Killed(BaseException):
    """The writer died at its commit point."""


def _failed_write_rolled_back(t: lsm_lab.Table) -> None:
    """An upsert killed after its data files and markers, before its commit; then `rollback()` removes it."""
    def die(self: occ.WriteTransaction, metadata: Any, **kw: Any) -> lsm_lab.Instant:
        self._finish()  # the heartbeat stops: a dead writer
        raise _Killed

    with mock.patch.object(occ.WriteTransaction, "commit", die), pytest.raises(_Killed):
        t.upsert(_rows(range(0, 30, 3), 30, 99.0))
    assert [i for i in t.instants() if not i.is_completed and i.is_write]  # its inflight instant is left
    assert t.rollback()  # rolled back: its files deleted, a rollback instant written


def _steps(t: lsm_lab.Table) -> list[tuple[str, Callable[[], object]]]:
    return [
        ("insert", lambda: t.insert(_rows(range(30), 1, 10.0))),
        ("upsert", lambda: t.upsert(_rows(range(0, 30, 4), 5, 100.0))),
        ("delete", lambda: t.delete([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3]} for i in (1, 7)])),
        ("bulk_insert", lambda: t.bulk_insert(_rows(range(40, 50), 2, 0.5))),
        ("compact", lambda: t.compact(strategy="full") if t.config.is_mor else None),
        ("upsert again", lambda: t.upsert(_rows(range(3, 45, 6), 9, 7.0))),
        ("cluster", lambda: t.cluster()),
        ("insert_overwrite", lambda: t.insert_overwrite(_rows(range(0, 60, 5), 15, 2.0))),
        ("clean", lambda: t.clean(retained=1)),
        ("savepoint", lambda: t.savepoint()),
        ("upsert after savepoint", lambda: t.upsert(_rows(range(0, 12, 2), 12, -1.0))),
        ("restore", lambda: t.restore(t.savepoints()[-1]["savepointedInstant"])),
        ("archive", lambda: t.archive(keep=4)),
        ("upsert after restore", lambda: t.upsert(_rows(range(5, 15), 20, 3.0))),
        ("failed write rolled back", lambda: _failed_write_rolled_back(t)),
    ]


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("shape", ["partitioned", "not partitioned", "complex key"])
def test_hudi_rs_reads_every_step(tmp_path: Path, version: int, table_type: str, shape: str) -> None:
    key = ["id", "city"] if shape == "complex key" else "id"
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key=key, ordering_field="ts",
                             partition_by=None if shape == "not partitioned" else "city", table_type=table_type,
                             layout="default", table_version=version)
    key_fields = ["id", "city"] if shape == "complex key" else ["id"]
    for what, step in _steps(t):
        step()
        assert compare_rows(t.read(), hudi_rs_read(local(t.path)), key_fields) == [], f"after {what}"
    travelled = 0
    for inst in t.completed_writes():  # time travel to every completed write the cleaner kept (its instant time)
        try:
            mine = t.read(as_of=inst.begin_time)
        except InputError as exc:  # older than what the cleaner kept: refused, never partial rows
            assert "the cleaner kept only" in str(exc)
            continue
        assert compare_rows(mine, hudi_rs_read(local(t.path), as_of=inst.begin_time), key_fields) == [], inst
        travelled += 1
    assert travelled >= 2
    kept, changed = [str(i.completion_time) for i in t.completed_writes()], 0
    for start, end in itertools.pairwise(kept):  # incremental: what each commit wrote, (start, end]
        try:
            mine = t.read_incremental(start, end)
        except InputError as exc:
            assert "the cleaner kept only" in str(exc)
            continue
        assert compare_rows(mine, hudi_rs_incremental(local(t.path), start, end), key_fields) == [], (start, end)
        changed += mine.num_rows
    assert changed > 0
    if t.config.is_mor:
        assert compare_rows(t.read_optimized(), hudi_rs_read(local(t.path), read_optimized=True), key_fields) == []
    _every_instant_decodes(t)


def _every_instant_decodes(t: lsm_lab.Table) -> None:
    import hudi

    timeline = hudi.HudiTableBuilder.from_base_uri(str(t.path)).build().get_timeline()
    theirs = [*timeline.get_completed_commits(), *timeline.get_completed_deltacommits(),
              *timeline.get_completed_replacecommits()]
    assert theirs
    for instant in theirs:
        content = json.loads(timeline.get_instant_metadata_in_json(instant))
        assert content["operationType"] and "partitionToWriteStats" in content
