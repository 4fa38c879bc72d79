"""The `files` partition of the metadata table compacted alone, early (`lsm_lab.metadata.files.compact.max.log.files`).

A snapshot plan reads the MDT's `files` partition: its base HFile and every log since.  lsm_lab compacts that
partition's file group alone once it holds 2 logs (a compaction plan naming a subset of the MDT's file groups),
so a cold plan needs at most 3 MDT GETs, while the other partitions keep upstream's schedule
(`hoodie.metadata.compact.max.delta.commits`).  Checked here: the table (and every index) still equals a dict
model after many writes, the listing from the MDT equals the folders' listing, each compaction's scope and
marker are right, the barriers that need every latest slice stay at the last full compaction, hudi-rs reads the
same rows listing from the MDT, 0 turns the early compaction off, and on the local S3 server a fresh Table object plans a snapshot with 0 LIST of the data and at
most 3 MDT GETs after 1..6 writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_metadata_index_write import check_indexes
from test_metadata_listing import traced_plan
from test_metadata_maintenance import _hudi_rs_check
from test_metadata_write import KILL_AFTER_MDT_UPDATE

import lsm_lab
from lsm_lab.interop.hudi_tables import hudi_available
from lsm_lab.services import mdt_services, mdt_write
from lsm_lab.table import mdt_listing
from lsm_lab.table.state import TableState
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import read_config

ROOT = Path(__file__).resolve().parents[1]
CITIES = ("sf", "nyc", "chennai")


def _rows(ids: Any, ts: int) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": CITIES[i % 3], "ts": ts, "fare": float(ts * 100 + i),
             "merchant": None if i % 7 == 0 else f"m${(i + ts) % 4}"} for i in ids]


def _make(path: Path, version: int, table_type: str, **props: str) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                                table_type=table_type, layout="default", table_version=version,
                                properties={"hoodie.metadata.enable": "true",
                                            "hoodie.metadata.record.index.enable": "true",
                                            "hoodie.metadata.compact.max.delta.commits": "5", **props})


def _slices(t: lsm_lab.Table) -> list[tuple[Any, ...]]:
    return sorted((s.partition, s.file_id, s.base_instant, tuple(f.path.name for f in s.files))
                  for s in t.latest_slices())


def _compactions(path: Path) -> list[tuple[str, bool]]:
    """(begin time, partial) of every completed MDT compaction on the MDT's active timeline."""
    folder = mdt_write.metadata_folder(path)
    timeline = ActiveTimeline(folder, read_config(folder))
    return [(i.begin_time, mdt_services.is_partial(timeline, i)) for i in timeline.completed(["commit", "compaction"])]


def _logs_in_latest_slice(path: Path, partition: str) -> list[int]:
    folder = mdt_write.metadata_folder(path)
    mdt = TableState(folder, read_config(folder))
    return [len(s.log_files) for s in mdt.latest_slices(partitions=[partition])]


@pytest.mark.parametrize(("version", "table_type"), [(9, "MERGE_ON_READ"), (8, "COPY_ON_WRITE"), (10, "MERGE_ON_READ")])
def test_files_compacted_alone_matches_the_model(tmp_path: Path, version: int, table_type: str) -> None:
    path = tmp_path / "t"
    t = _make(path, version, table_type)
    model: dict[str, dict[str, Any]] = {}
    writes = 18
    for k in range(writes):
        rows = _rows(range(k % 4, 40 + k, 3), k + 1)
        if k == 0:
            t.insert(rows)
            t.create_index("merchant_idx", "merchant")
        elif k % 6 == 5:
            gone = [r for r in rows[:4] if r["id"] in model]
            t.delete([{"id": r["id"], "city": r["city"]} for r in gone])
            for r in gone:
                model.pop(r["id"])
            rows = []
        else:
            t.upsert(rows)
        model.update({r["id"]: r for r in rows})
        # the files partition never holds more than 2 logs since its base; the record index keeps upstream's pace
        assert _logs_in_latest_slice(path, "files") in ([1], [2])
        u = lsm_lab.open_table(path)
        got = {r["id"]: r for r in u.read(columns=["id", "city", "ts", "fare", "merchant"]).to_pylist()}
        assert got == model
        by_mdt = sorted(str(f[1]) for f in u.data_files())
        assert by_mdt == sorted(str(f[1]) for f in lsm_lab.open_table(path, use_metadata=False).data_files())
    check_indexes(path)
    comps = _compactions(path)
    partial = [c for c, p in comps if p]
    full = [c for c, p in comps if not p]
    # upstream's schedule: every 5 deltacommits, all partitions (3 of them over 18 writes); lsm_lab's: `files`
    # alone every 2 deltacommits in between
    assert len(full) == 3 and len(partial) >= 4
    # the barriers that need every latest slice stay at the last FULL compaction, not at a later partial one
    data = TableState(path, read_config(path))
    folder = mdt_write.metadata_folder(path)
    barriers = mdt_services.archive_barriers(data, TableState(folder, read_config(folder)))
    assert barriers["latest MDT compaction"] == full[-1]
    assert mdt_services.data_archival_barrier(path, read_config(path)) == full[-1]
    assert max(partial) > full[-1]  # (a partial one followed the last full one: the barrier did not move to it)
    if version < 10 and hudi_available():  # hudi-rs lists from the MDT (its `files` slice after a partial
        _hudi_rs_check(path)               # compaction) and reads the same rows; it refuses version 10


def test_threshold_zero_is_upstream_only(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ", **{mdt_write.PROP_FILES_COMPACT_LOGS: "0"})
    t.insert(_rows(range(30), 1))
    for k in range(2, 8):
        t.upsert(_rows(range(k, 30, 4), k))
    comps = _compactions(path)
    assert [p for _, p in comps] == [False]  # one full compaction after 5 deltacommits, none of `files` alone
    assert _logs_in_latest_slice(path, "files") == [2]  # the 6th and 7th writes' logs


def test_threshold_one_keeps_a_single_log(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ", **{mdt_write.PROP_FILES_COMPACT_LOGS: "1"})
    t.insert(_rows(range(30), 1))
    for k in range(2, 6):
        t.upsert(_rows(range(k, 30, 4), k))
        assert _logs_in_latest_slice(path, "files") == [1]
    assert _logs_in_latest_slice(path, "record_index") != [1] * len(_logs_in_latest_slice(path, "record_index"))


_KILL_AFTER_MDT = KILL_AFTER_MDT_UPDATE + textwrap.dedent("""
    lsm_lab.open_table(sys.argv[1]).upsert([{"id": "id003", "city": "sf", "ts": 50, "fare": -9.0, "merchant": "x"}])
""")

_KILL_IN_COMPACTION = textwrap.dedent("""
    import os, signal, sys
    import lsm_lab
    from lsm_lab.services import mdt_write
    real = mdt_write.commit_metadata
    def die(*a, **kw):
        if kw.get("operation") == "compact":   # the `files` base file is written, its commit not
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **kw)
    mdt_write.commit_metadata = die
    lsm_lab.open_table(sys.argv[1]).upsert([{"id": "id004", "city": "nyc", "ts": 50, "fare": -9.0, "merchant": "x"}])
""")


def _killed(script: str, path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]


def test_no_early_compaction_while_a_data_instant_with_an_mdt_deltacommit_is_pending(tmp_path: Path) -> None:
    """The rule upstream's compaction keeps holds for the early one too: a pending data instant whose MDT
    deltacommit exists (a writer SIGKILLed between the two) blocks it until that instant is rolled back."""
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ", **{mdt_write.PROP_FILES_COMPACT_LOGS: "3"})
    t.insert(_rows(range(30), 1))
    t.upsert(_rows(range(0, 30, 2), 2))
    before = t.read().sort_by("id")
    _killed(_KILL_AFTER_MDT, path)
    assert _compactions(path) == []
    assert _logs_in_latest_slice(path, "files") == [3]  # due by count: 3 logs since the base
    folder = mdt_write.metadata_folder(path)
    assert mdt_write.compact_if_due(path, read_config(path), ActiveTimeline(folder, read_config(folder))) is None
    assert _compactions(path) == []
    t = lsm_lab.open_table(path)
    assert t.read().sort_by("id").equals(before)  # the table reads its last commit
    t.upsert(_rows(range(1, 30, 5), 4))  # rolls the dead write back (in both tables) first
    t.upsert(_rows(range(2, 30, 5), 5))
    t.upsert(_rows(range(3, 30, 5), 6))  # 3 valid logs again: now it compacts
    assert [p for _, p in _compactions(path)] == [True]


def test_sigkill_in_a_files_compaction(tmp_path: Path) -> None:
    """Killed with the new `files` base file written and its compaction not committed: readers still read the
    last commit from the old slice, and the next write undoes the half-made compaction and compacts again."""
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1))
    t.create_index("merchant_idx", "merchant")
    t.upsert(_rows(range(0, 30, 2), 2))
    before = t.read().sort_by("id")
    _killed(_KILL_IN_COMPACTION, path)
    t = lsm_lab.open_table(path)
    m = t.metadata_table()
    assert m is not None and [i.action for i in m.mdt.instants() if not i.is_completed] == ["compaction"]
    assert t.read().sort_by("id").equals(before)
    assert _slices(t) == _slices(lsm_lab.open_table(path, use_metadata=False))
    t.upsert(_rows(range(5, 30, 7), 3))
    assert [p for _, p in _compactions(path)] == [True]
    assert _logs_in_latest_slice(path, "files") == [1]
    check_indexes(path)


@pytest.mark.parametrize("version", [9, 10])
def test_cold_plan_at_most_three_mdt_gets_on_s3(s3_table: Any, version: int) -> None:
    t = s3_table(name="trips", record_key="id", ordering_field="ts", partition_by="city", layout="default",
                 table_type="MERGE_ON_READ", table_version=version, properties={"hoodie.metadata.enable": "true"})
    for k in range(6):
        rows = _rows(range(k, 30, 2), k + 1)
        if k == 0:
            t.insert(rows)
        else:
            t.upsert(rows)
        mdt_listing.forget()  # a cold process: nothing of the MDT kept
        slices, lists, trace = traced_plan(lsm_lab.open_table(t.path), _slices)
        assert not [key for key in lists if not key.startswith(".hoodie")], lists  # no LIST of the data
        mdt_gets = [key for kind, key in trace if kind == "GET" and "/.hoodie/metadata/" in key
                    and "/.hoodie/metadata/.hoodie/" not in key]  # beyond the MDT's timeline
        assert 1 <= len(mdt_gets) <= 3, (k, mdt_gets)
        assert slices == _slices(lsm_lab.open_table(t.path, use_metadata=False))
