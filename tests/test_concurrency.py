"""Optimistic concurrency (lsm_lab.services.occ): writers in parallel, conflicts decided at commit.

In-process cases hold two writers inside their file-writing phase at once
(a barrier in `write_file_group`), so the interleaving is certain: both
began before either committed.  The multi-process case lets two processes
upsert overlapping keys for many rounds (with inline compaction on) and then
checks that the table equals the landed commits applied in completion order.

Every case runs twice: on the local file system (fcntl table lock, link-based
commits) and on a real S3 server (moto), where the lock is the storage-based
lock and a commit is a create-if-absent PUT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from s3_server import shared_server

import lsm_lab
from lsm_lab.errors import ConflictError
from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import write as writer
from lsm_lab.services import occ
from lsm_lab.storage import is_local
from lsm_lab.timeline.metadata import WriteStat

MakeTable = Callable[..., lsm_lab.Table]  # the any_table fixture (local, S3 and Azure tables)


def snapshot(table: lsm_lab.Table, cols: tuple[str, ...] = ("id", "v")) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in cols) for r in table.read(columns=list(cols)).to_pylist())


def run_together(monkeypatch: pytest.MonkeyPatch, *jobs: Callable[[], Any]) -> list[Any]:
    """Run `jobs` in threads; every write waits at a barrier before writing files, so all have begun."""
    barrier = threading.Barrier(len(jobs), timeout=30)
    real = writer.write_file_group
    waited: set[int] = set()

    def gated(**kw: Any) -> list[WriteStat]:
        ident = threading.get_ident()
        if ident not in waited:
            waited.add(ident)
            barrier.wait()
        return real(**kw)

    monkeypatch.setattr(writer, "write_file_group", gated)
    results: list[Any] = [None] * len(jobs)

    def run(i: int) -> None:
        try:
            results[i] = jobs[i]()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    monkeypatch.setattr(writer, "write_file_group", real)
    return results


def test_same_file_group_one_wins_one_conflicts(any_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(num_buckets=1)
    table.upsert([{"id": "a", "v": 0}])
    other = lsm_lab.open_table(table.path)
    a, b = run_together(monkeypatch, lambda: table.upsert([{"id": "a", "v": 1}, {"id": "x", "v": 1}]),
                        lambda: other.upsert([{"id": "a", "v": 2}, {"id": "y", "v": 2}]))
    outcomes = [r for r in (a, b) if isinstance(r, lsm_lab.Instant)]
    errors = [r for r in (a, b) if isinstance(r, lsm_lab.ConflictError)]
    assert len(outcomes) == 1 and len(errors) == 1, (a, b)
    winner = outcomes[0]
    assert winner.begin_time in str(errors[0]) and "conflicts with" in str(errors[0])
    expected = [("a", 1), ("x", 1)] if winner is a else [("a", 2), ("y", 2)]
    assert snapshot(table) == expected
    # the loser left nothing behind but a rollback instant
    done = {i.begin_time for i in table.completed_writes()}
    assert all(name.instant in done for _, _, name in fsview.list_data_files(table.path))
    assert [i.action for i in table.instants() if not i.is_completed] == []
    rollbacks = [i for i in table.instants() if i.action == "rollback"]
    assert len(rollbacks) == 1
    assert table.upsert([{"id": "z", "v": 3}]).is_completed  # and the table goes on


def test_disjoint_file_groups_both_land(any_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(partition_by="p", num_buckets=1)
    table.upsert([{"id": "a", "p": "x", "v": 0}, {"id": "b", "p": "y", "v": 0}])
    other = lsm_lab.open_table(table.path)
    a, b = run_together(monkeypatch, lambda: table.upsert([{"id": "a", "p": "x", "v": 1}]),
                        lambda: other.upsert([{"id": "b", "p": "y", "v": 2}]))
    assert isinstance(a, lsm_lab.Instant) and isinstance(b, lsm_lab.Instant)
    assert snapshot(table) == [("a", 1), ("b", 2)]


def test_inserts_into_new_file_groups_never_conflict(any_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(layout="default", **{"hoodie.parquet.small.file.limit": "0"})  # no small-file packing
    table.insert([{"id": "seed", "v": 0}])
    other = lsm_lab.open_table(table.path)
    a, b = run_together(monkeypatch, lambda: table.insert([{"id": "a", "v": 1}]),
                        lambda: other.insert([{"id": "b", "v": 2}]))
    assert isinstance(a, lsm_lab.Instant) and isinstance(b, lsm_lab.Instant)
    assert snapshot(table) == [("a", 1), ("b", 2), ("seed", 0)]


def test_inserts_packed_into_one_small_file_group_conflict(any_table: MakeTable,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(layout="default")  # small-file handling on (the default): both inserts go to seed's group
    table.insert([{"id": "seed", "v": 0}])
    other = lsm_lab.open_table(table.path)
    a, b = run_together(monkeypatch, lambda: table.insert([{"id": "a", "v": 1}]),
                        lambda: other.insert([{"id": "b", "v": 2}]))
    outcomes = sorted(type(x).__name__ for x in (a, b))
    assert outcomes == ["ConflictError", "Instant"], outcomes
    loser = ("b", 2) if isinstance(b, ConflictError) else ("a", 1)
    assert snapshot(table) == sorted(r for r in [("a", 1), ("b", 2), ("seed", 0)] if r != loser)


def test_a_compaction_finishing_during_a_write_is_no_conflict(any_table: MakeTable,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(ordering_field="ts", num_buckets=1)
    for r in range(3):
        table.upsert([{"id": f"k{i}", "ts": r, "v": r} for i in range(5)])
    compactor = lsm_lab.open_table(table.path)
    compacted = threading.Event()
    real = writer.write_file_group

    def after_compaction(**kw: Any) -> list[WriteStat]:
        assert compacted.wait(30)  # the write began before the compaction was even planned
        return real(**kw)

    monkeypatch.setattr(writer, "write_file_group", after_compaction)
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(table.upsert([{"id": "k1", "ts": 9, "v": 9}])))
    thread.start()
    while not [i for i in table.instants() if not i.is_completed]:
        time.sleep(0.01)
    comp = compactor.compact(strategy="full")
    compacted.set()
    thread.join(60)
    assert isinstance(comp, lsm_lab.Instant) and comp.is_completed
    (write,) = result
    assert write.begin_time < comp.begin_time < write.completion_time
    assert snapshot(table, ("id", "v")) == [("k0", 2), ("k1", 9), ("k2", 2), ("k3", 2), ("k4", 2)]


def test_writes_wait_for_a_compaction_plan_and_land_after_it(any_table: MakeTable) -> None:
    table = any_table(ordering_field="ts", num_buckets=1)
    table.upsert([{"id": "a", "ts": 0, "v": 0}])
    table.upsert([{"id": "a", "ts": 1, "v": 1}])
    plan = table.compact(plan_only=True)
    late = table.upsert([{"id": "a", "ts": 2, "v": 2}])
    assert plan is not None and late.completion_time is not None and late.completion_time > plan.begin_time
    table.compact()
    assert snapshot(table) == [("a", 2)]


def test_concurrent_schema_evolution_keeps_both_columns(any_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    table = any_table(partition_by="p", num_buckets=1)
    table.upsert([{"id": "a", "p": "x", "v": 0}, {"id": "b", "p": "y", "v": 0}])
    other = lsm_lab.open_table(table.path)
    results = run_together(monkeypatch, lambda: table.upsert([{"id": "a", "p": "x", "v": 1, "extra": "e"}]),
                           lambda: other.upsert([{"id": "b", "p": "y", "v": 2}]))
    assert all(isinstance(r, lsm_lab.Instant) for r in results), results
    assert table.schema is not None and "extra" in table.schema.names
    got = {r["id"]: r["extra"] for r in table.read(columns=["id", "extra"]).to_pylist()}
    assert got == {"a": "e", "b": None}
    assert occ.merge_schemas(None, table.schema) == table.schema
    import pyarrow as pa

    with pytest.raises(lsm_lab.ConflictError, match="changed"):
        occ.merge_schemas(pa.schema([("v", pa.int64())]), pa.schema([("v", pa.bool_())]))


# --------------------------------------------------------------------------- two processes
WORKER = r"""
import json, sys, time
from pathlib import Path
import lsm_lab

path, proc, rounds, out, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], Path(sys.argv[5])
while not go.exists():
    time.sleep(0.005)
table = lsm_lab.open_table(path)
with open(out, "w") as fh:
    for r in range(rounds):
        rows = [{"id": f"k{(proc * 5 + r * 3 + j) % 12}", "v": proc * 100000 + r * 100 + j} for j in range(5)]
        try:
            inst = table.upsert(rows)
            fh.write(json.dumps({"round": r, "ok": True, "begin": inst.begin_time,
                                 "completion": inst.completion_time, "rows": rows}) + "\n")
        except lsm_lab.ConflictError as exc:
            fh.write(json.dumps({"round": r, "ok": False, "error": str(exc), "rows": rows}) + "\n")
        fh.flush()
"""


@pytest.mark.parametrize("any_table", ["local", pytest.param("s3", marks=pytest.mark.campaign),
                                       pytest.param("azure", marks=pytest.mark.campaign)], indirect=True)
def test_two_processes_overlapping_keys(any_table: MakeTable, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    table = any_table(num_buckets=2, **{"hoodie.compact.inline": "true",
                                        "hoodie.compact.inline.max.delta.commits": "6"})
    go = tmp_path / "go"
    rounds = 25
    env = dict(os.environ, TQDM_DISABLE="1")
    if str(table.path).startswith("s3://"):  # the workers find the S3 server through the standard AWS_* variables
        env.update(shared_server().env())
    elif not is_local(table.path):  # ... and Azurite through the AZURE_* ones
        env.update(request.getfixturevalue("azure_server").env())
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(table.path), str(p), str(rounds),
                               str(tmp_path / f"out{p}.jsonl"), str(go)], env=env, stderr=subprocess.PIPE,
                              text=True) for p in range(2)]
    time.sleep(1.5)  # both processes imported lsm_lab and wait at the start line
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    results = [json.loads(line) for p in range(2) for line in (tmp_path / f"out{p}.jsonl").read_text().splitlines()]
    assert len(results) == 2 * rounds
    landed = sorted((r for r in results if r["ok"]), key=lambda r: r["completion"])
    failed = [r for r in results if not r["ok"]]
    assert landed and all("conflicts with" in r["error"] for r in failed)
    model: dict[str, int] = {}
    for r in landed:  # commit-time ordering: applying whole commits in completion order
        for row in r["rows"]:
            model[row["id"]] = row["v"]
    assert snapshot(table) == sorted(model.items())
    # every landed commit is on the timeline exactly as reported; no failed one left anything behind
    writes = {i.begin_time: i.completion_time for i in table.completed_writes() if i.action == "deltacommit"}
    assert {r["begin"]: r["completion"] for r in landed} == writes
    assert not [i for i in table.instants() if not i.is_completed]
    known = set(table.completion_map())
    assert all(name.instant in known for _, _, name in fsview.list_data_files(table.path))
    assert any(i.action == "compaction" for i in table.instants())
