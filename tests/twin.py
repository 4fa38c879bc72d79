"""The twin-table sequence: every write kind and service, run on a local table and on a remote one.

The local table is checked against a dict model elsewhere (test_table_model.py), so a remote table that
gives the same rows after every step is right. Instant times differ between the two tables, so rows are
compared without the meta columns that hold them. Used by test_s3_tables.py and test_azure_tables.py.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lsm_lab

# what the twin_tables fixtures give: (local table, remote table, what the sequence saw on each)
Twins = tuple[lsm_lab.Table, lsm_lab.Table, dict[str, Any], dict[str, Any]]

INSTANT_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def rows(table: pa.Table, drop: tuple[str, ...] = INSTANT_COLUMNS) -> list[tuple[str, ...]]:
    """Rows as sorted tuples of strings, without the columns that name instants (they differ per table)."""
    cols = [c for c in table.column_names if c not in drop]
    return sorted(tuple(str(r[c]) for c in cols) for r in table.select(cols).to_pylist())


def batch(i: int, n: int = 30) -> list[dict[str, Any]]:
    return [{"id": f"k{(i * 7 + j) % 50:02d}", "city": ("a", "b", "c")[j % 3], "ts": i, "v": i * 1000 + j}
            for j in range(n)]


def run_sequence(table: lsm_lab.Table) -> dict[str, Any]:
    """Writes, deletes and every service; returns what was observed along the way."""
    seen: dict[str, Any] = {"instants": []}
    for i in range(4):
        seen["instants"].append(table.upsert(batch(i)))
    table.delete([{"id": "k03", "city": "a"}, {"id": "k10", "city": "b"}])
    seen["after_delete"] = rows(table.read())
    table.compact(strategy="log")
    seen["after_log_compaction"] = rows(table.read())
    table.upsert(batch(5))
    table.compact(strategy="full")
    seen["after_full_compaction"] = rows(table.read())
    seen["ro"] = rows(table.read_optimized())
    sp = table.savepoint(seen["instants"][-1])
    assert sp.is_completed
    table.upsert(batch(6))
    table.upsert(batch(7))
    failed = table.upsert(batch(8))
    table.rollback(failed)  # rolls back the latest completed write
    seen["after_rollback"] = rows(table.read())
    table.restore(seen["instants"][-1])
    seen["after_restore"] = rows(table.read())
    table.upsert(batch(9))
    table.compact(strategy="full")
    seen["time_travel"] = [rows(table.read(as_of=i)) for i in table.completed_writes()]
    seen["incremental"] = rows(table.read_incremental(table.completed_writes()[-3].completion_time))
    table.delete_savepoint(seen["instants"][-1])
    table.clean(retained=1)
    seen["after_clean"] = rows(table.read())
    return seen


TWIN_OPTIONS: dict[str, Any] = dict(name="twin", record_key="id", partition_by="city", ordering_field="ts",
                                   num_buckets=2, **{"hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6"})

STEPS = ("after_delete", "after_log_compaction", "after_full_compaction", "ro", "after_rollback", "after_restore",
         "after_clean", "time_travel", "incremental")


def cli_round_trip(uri: str, options: dict[str, str], endpoint_key: str, endpoint_path: str, tmp_path: Path,
                   capsys: pytest.CaptureFixture[str]) -> None:
    """Every kind of CLI command on a remote table with `--storage-option`s; then a dead endpoint (named by
    `endpoint_key`, with `endpoint_path` after host:port) must give one error line and exit code 2."""
    from lsm_lab.cli.app import main

    opts = [x for k, v in options.items() for x in ("--storage-option", f"{k}={v}")]
    src = tmp_path / "in.csv"
    src.write_text("id,city,v\na,x,1\nb,y,2\nc,x,3\n")
    assert main(["create", uri, "--name", "t", "--key", "id", "--partition-by", "city", *opts]) == 0
    assert main(["write", uri, str(src), "--op", "upsert", *opts]) == 0
    assert main(["write", uri, str(src), "--op", "upsert", *opts]) == 0  # logs on the bases: MOR reads footers
    assert main(["compact", uri, *opts]) == 0
    capsys.readouterr()
    assert main(["read", uri, "--json", *opts]) == 0
    out = capsys.readouterr().out
    assert '"a"' in out and '"c"' in out
    assert main(["show", "timeline", uri, *opts]) == 0
    assert "deltacommit" in capsys.readouterr().out
    assert main(["show", "footers", uri, *opts]) == 0
    assert main(["show", "blooms", uri, *opts]) == 0
    assert "bloom" in capsys.readouterr().out
    assert main(["lookup", uri, "b", "--json", *opts]) == 0
    assert '"b"' in capsys.readouterr().out
    assert main(["clean", uri, *opts]) == 0
    with socket.socket() as sock:  # a port nobody listens on: one error line, no traceback
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}{endpoint_path}"
    assert main(["read", uri, "--storage-option", f"{endpoint_key}={dead}", "--storage-option", "max_retries=0",
                 "--storage-option", "connect_timeout=1"]) == 2
    assert capsys.readouterr().err.startswith("error:")


def make_twins(local_root: Path, remote_uri: str, options: dict[str, str]) -> Twins:
    """(local table, remote table, what the sequence saw on each): the same writes and services on both."""
    from lsm_lab.storage import StoragePath
    from lsm_lab.storage.objectstore import ObjectStorage

    local = lsm_lab.create_table(local_root, **TWIN_OPTIONS)
    remote = lsm_lab.create_table(remote_uri, storage_options=options, **TWIN_OPTIONS)
    assert isinstance(remote.path, StoragePath) and isinstance(remote.storage, ObjectStorage)
    return local, remote, run_sequence(local), run_sequence(remote)


def assert_twins_agree(local: lsm_lab.Table, remote: lsm_lab.Table, seen_local: dict[str, Any],
                       seen_remote: dict[str, Any]) -> None:
    """Every step of the sequence, the final snapshot and the timeline are the same on both tables."""
    for step in STEPS:
        assert seen_remote[step] == seen_local[step], step
        assert seen_remote[step], step
    assert rows(remote.read()) == rows(local.read())
    actions = [(i.action, i.state.value) for i in remote.instants()]
    assert actions == [(i.action, i.state.value) for i in local.instants()]
    assert {"compaction", "clean", "rollback", "restore"} <= {a for a, _ in actions}


def assert_reads_agree(local: lsm_lab.Table, remote: lsm_lab.Table, *, incremental_from: int = -1) -> None:
    """Time travel, an incremental read (from the `incremental_from`-th completed write), a lookup and a
    filtered read give the same rows on the object store as on the local twin."""
    lw, rw = local.completed_writes(), remote.completed_writes()
    assert len(lw) == len(rw) and len(rw) >= 3
    assert rows(remote.read(as_of=rw[-1])) == rows(local.read(as_of=lw[-1]))  # (older ones: run_sequence)
    assert rows(remote.read_incremental(rw[incremental_from].completion_time)) == \
        rows(local.read_incremental(lw[incremental_from].completion_time))
    keys = ["k01", "k02", "k20", "missing"]
    assert rows(remote.lookup(keys)) == rows(local.lookup(keys))
    assert rows(remote.read(filter=[("city", "=", "b")])) == rows(local.read(filter=[("city", "=", "b")]))
