"""Listing a table from its metadata table (issue 32, "Use it"): the MDT's `files` partition instead of a LIST.

Equality, three ways: reads (snapshot, time travel to every instant, incremental, CDC, lookups) and
service plans (compaction, clustering, clean) with the MDT listing == with the folder listing == a
plain dict model of the rows, on every shipped real table with an MDT and on lsm_lab tables written with
`hoodie.metadata.enable=true` through inserts, upserts, deletes, compaction, clustering, clean, a
failed write, a rollback and a restore.  While the MDT lists, the data folders are never listed
(`fsview.list_data_files_sized` of the table root is not called; on the local S3 server no LIST
request names a data partition).  A writer SIGKILLed between its MDT deltacommit and its data commit
leaves both listings reading the last commit; a data file deleted by hand is still a
`CorruptTableError` (found when the read opens it); the switches (argument, environment) list the
folders.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
from test_metadata_write import _CRASH, _failed_write, _make, _rows

import lsm_lab
from lsm_lab.errors import CorruptFileError, CorruptTableError, LsmLabError
from lsm_lab.filegroup import fsview
from lsm_lab.services import clean, clustering, compaction, mdt_write
from lsm_lab.storage import request_scope
from lsm_lab.table import mdt_listing

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {"v8_trips_8i3u1d": "uuid", "v9_txns_simple_meta": "txn_id", "v9_txns_complex_meta": "txn_id",
           "v9_nonpartitioned_rollback": "txn_id"}
KEY = "_hoodie_record_key"


def _sorted(t: pa.Table, by: str = KEY) -> pa.Table:
    drop = [c for c in t.column_names if c == "_hoodie_commit_seqno"]
    return t.drop_columns(drop).sort_by([(by, "ascending")]) if by in t.column_names else t


def _outcome(fn: Callable[[], Any]) -> Any:
    """The value, or the type and message of the typed error (both listings must fail the same way)."""
    try:
        value = fn()
    except LsmLabError as exc:
        return ("error", type(exc).__name__)
    if isinstance(value, pa.Table):
        return _sorted(value)
    return value


@contextlib.contextmanager
def _no_data_listing(path: Path) -> Iterator[list[str]]:
    """Within the block, a folder listing of the table root fails the test (the MDT's own folder may be listed)."""
    real = fsview.list_data_files_sized
    calls: list[str] = []

    def spy(base_path: Any) -> Any:
        calls.append(str(base_path))
        assert str(base_path) != str(path), "the data folders were listed although the table has an MDT"
        return real(base_path)

    with mock.patch.object(fsview, "list_data_files_sized", spy):
        yield calls


def _slices(t: lsm_lab.Table, as_of: Any = None) -> list[tuple[Any, ...]]:
    return sorted((s.partition, s.file_id, s.base_instant, tuple((f.path.name, f.size) for f in s.files))
                  for s in t.latest_slices(as_of))


def traced_plan(t: lsm_lab.Table, slices_of: Callable[[lsm_lab.Table], Any] = _slices
                ) -> tuple[Any, list[str], list[tuple[str, str]]]:
    """A snapshot plan of `t` (an S3 table) with its requests traced: (`slices_of(t)`, the keys it LISTed,
    relative to the table, and every (kind, key) request)."""
    counts = t.storage.counts
    counts.trace = []
    with request_scope(), t.pinned():
        slices = slices_of(t)
    trace, counts.trace = counts.trace, None
    root = t.storage._key("")  # type: ignore[attr-defined]
    return slices, [key[len(root):].lstrip("/") for kind, key in trace if kind == "LIST"], trace


def _plans(t: lsm_lab.Table) -> list[Any]:
    """Every service plan lsm_lab can make of the table now (dry runs), or the typed error each gives."""
    out = [_outcome(lambda: repr(clustering.plan(t))),
           _outcome(lambda: repr(clean.plan_clean(t, "KEEP_LATEST_COMMITS", 1))),
           _outcome(lambda: repr(clean.plan_clean(t, "KEEP_LATEST_FILE_VERSIONS", 1)))]
    if t.config.is_mor:
        out += [_outcome(functools.partial(_compaction_plan, t, s)) for s in ("full", "log", "hybrid")]
    return out


def _compaction_plan(t: lsm_lab.Table, strategy: str) -> str:
    return repr(compaction.plan(t, strategy=strategy))


def _travel(t: lsm_lab.Table) -> list[tuple[Any, Any]]:
    """Time travel to every completed write: by its instant time and by its completion time."""
    return [(_outcome(functools.partial(t.read, as_of=i.begin_time)), _outcome(functools.partial(t.read, as_of=i)))
            for i in t.completed_writes()]


def _both(path: Path) -> tuple[lsm_lab.Table, lsm_lab.Table]:
    a, b = lsm_lab.open_table(path), lsm_lab.open_table(path, use_metadata=False)
    assert a.lists_from_metadata() and not b.lists_from_metadata()
    return a, b


def _reads_agree(path: Path, keys: list[str]) -> pa.Table:
    """Every read, with the MDT (no data LIST) and with the folders: the same; returns the snapshot."""
    a, b = _both(path)
    with _no_data_listing(path):
        snap, slices = a.read(), _slices(a)
        incremental = _outcome(lambda: a.read_incremental(None))
        found = _outcome(lambda: a.lookup(keys))
        plans = _plans(a)
        travel = _travel(a)
    assert _sorted(snap).equals(_sorted(b.read()))
    assert slices == _slices(b)
    assert incremental == _outcome(lambda: b.read_incremental(None))
    assert found == _outcome(lambda: b.lookup(keys))
    assert plans == _plans(b)
    assert travel == _travel(b)
    return snap


# ----------------------------------------------------------------------------------------- shipped tables
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_tables_read_the_same_from_the_mdt(real_table: Callable[[str], Path], name: str) -> None:
    path = real_table(name)
    a, b = _both(path)
    uncommitted = {(f.partition, f.path.name) for f in b.uncommitted_files()}
    with _no_data_listing(path):
        listed = {(p, x.name): size for p, x, _, size in a.data_files()}
    on_disk = {(p, x.name): x.stat().st_size for p, x, _, _ in b.data_files() if (p, x.name) not in uncommitted}
    assert listed == on_disk and listed  # the MDT's sizes are the files' sizes
    assert {(f.partition, f.path.name) for f in a.uncommitted_files()} == uncommitted  # still by listing
    snap = _reads_agree(path, [])
    keys = snap.column(KEY).to_pylist()[::3] if KEY in snap.column_names else []
    _reads_agree(path, keys)


# ----------------------------------------------------------------------------------------- lsm_lab tables
def _model_table(model: dict[str, tuple[str, int, float]]) -> pa.Table:
    ids = sorted(model)
    return pa.table({"id": ids, "city": [model[i][0] for i in ids], "ts": pa.array([model[i][1] for i in ids],
                                                                                     pa.int64()),
                     "fare": [model[i][2] for i in ids]})


def _apply(model: dict[str, tuple[str, int, float]], rows: list[dict[str, Any]]) -> None:
    for r in rows:
        old = model.get(r["id"])
        if old is None or r["ts"] >= old[1]:
            model[r["id"]] = (r["city"], r["ts"], r["fare"])


@pytest.mark.parametrize(("version", "table_type", "compact_every"),
                         [(9, "MERGE_ON_READ", 3), (8, "MERGE_ON_READ", 100), (9, "COPY_ON_WRITE", 100),
                          (8, "COPY_ON_WRITE", 3)])
def test_lsm_lab_tables_read_the_same_from_the_mdt(tmp_path: Path, version: int, table_type: str,
                                                   compact_every: int) -> None:
    """MDT listing == folder listing == the dict model after every step; time travel to every instant too."""
    path = tmp_path / "t"
    t = _make(path, version, table_type, compact_every)
    model: dict[str, tuple[str, int, float]] = {}
    history: dict[str, dict[str, tuple[str, int, float]]] = {}
    saved: dict[str, tuple[str, int, float]] = {}

    def write(kind: str, rows: list[dict[str, Any]]) -> None:
        getattr(t, kind)(rows)
        _apply(model, rows)

    def delete(ids: list[int]) -> None:
        t.delete([{"id": f"id{i:03d}", "city": ("sf", "nyc", "chennai")[i % 3]} for i in ids])
        for i in ids:
            model.pop(f"id{i:03d}", None)

    def rollback() -> None:
        t.rollback()
        model.clear()
        model.update(history[lsm_lab.open_table(path, use_metadata=False).completed_writes()[-1].begin_time])

    def restore() -> None:
        t.restore(t.savepoints()[-1]["savepointedInstant"])
        model.clear()
        model.update(saved)

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("insert", lambda: write("insert", _rows(range(30), 1, 10.0))),
        ("upsert", lambda: write("upsert", _rows(range(0, 30, 4), 5, 100.0))),
        ("delete", lambda: delete([1, 7])),
        ("compact", lambda: t.compact(strategy="full") if t.config.is_mor else None),
        ("cluster", lambda: t.cluster()),
        ("upsert again", lambda: write("upsert", _rows(range(3, 45, 6), 9, 7.0))),
        ("clean", lambda: t.clean(retained=1)),
        ("failed write", lambda: _failed_write(t)),
        ("savepoint", lambda: (t.savepoint(), saved.update(model))),
        ("upsert after savepoint", lambda: write("upsert", _rows(range(0, 12, 2), 12, -1.0))),
        ("rollback latest", rollback),
        ("upsert to restore away", lambda: write("upsert", _rows(range(20, 26), 13, -2.0))),
        ("restore", restore),
        ("upsert after restore", lambda: write("upsert", _rows(range(5, 15), 20, 3.0))),
    ]
    keys = [f"id{i:03d}" for i in range(0, 45, 5)]
    for step, run in steps:
        run()
        t = lsm_lab.open_table(path)
        writes = lsm_lab.open_table(path, use_metadata=False).completed_writes()
        history[writes[-1].begin_time] = dict(model)
        if not t.lists_from_metadata():  # a rollback of an instant the MDT had compacted: dropped, built again
            assert compact_every == 3, step
            continue
        snap = _reads_agree(path, keys)
        assert snap.select(["id", "city", "ts", "fare"]).sort_by("id").equals(_model_table(model)), step
    a, _ = _both(path)
    for inst in a.completed_writes():  # time travel to every instant kept: the model as it was then
        if inst.begin_time in history:
            got = _outcome(functools.partial(a.read, as_of=inst.begin_time))
            if not isinstance(got, tuple):
                assert got.select(["id", "city", "ts", "fare"]).sort_by("id").equals(
                    _model_table(history[inst.begin_time])), inst


def test_sigkill_between_the_mdt_deltacommit_and_the_data_commit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    before = _sorted(t.read())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CRASH, str(path)], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    a, b = _both(path)
    pending = [i for i in a.instants() if not i.is_completed]
    assert pending and any(i.begin_time == pending[0].begin_time and i.is_completed
                           for i in a.metadata_table().mdt.instants())  # type: ignore[union-attr]
    with _no_data_listing(path):  # the dead writer left its markers: no listing needed to judge it
        got = _sorted(a.read())
    assert got.equals(before) and _sorted(b.read()).equals(before)
    dead = pending[0].begin_time  # its files: seen by a listing of the folders only
    assert [n for _, _, n, _ in a.folder_files() if n.instant == dead]
    assert not [n for _, _, n, _ in a.data_files() if n.instant == dead]
    assert _slices(a) == _slices(b)


def test_a_file_deleted_by_hand_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    t.upsert(_rows(range(0, 30, 3), 2, 1.0))
    a, _ = _both(path)
    victim = next(x for _, x, name, _ in a.data_files() if name.is_log)
    victim.unlink()
    for use in (True, False):
        with pytest.raises(CorruptTableError, match="missing from the table folder") as err:
            lsm_lab.open_table(path, use_metadata=use).read()
        assert victim.name in str(err.value)


def test_switches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "t"
    t = _make(path, 8, "COPY_ON_WRITE")
    assert not t.lists_from_metadata()  # no MDT before the first write
    t.insert(_rows(range(6), 1, 0.0))
    assert t.lists_from_metadata()  # declared by the first write (hoodie.properties read again)
    assert lsm_lab.open_table(path).lists_from_metadata()
    assert not lsm_lab.open_table(path, use_metadata=False).lists_from_metadata()
    monkeypatch.setenv(mdt_listing.ENV_SWITCH, "0")
    assert not lsm_lab.open_table(path).lists_from_metadata()
    assert lsm_lab.open_table(path, use_metadata=True).lists_from_metadata()  # the argument wins
    with pytest.raises(lsm_lab.InputError, match="use_metadata"):
        lsm_lab.open_table(path, use_metadata="yes")  # type: ignore[arg-type]
    monkeypatch.delenv(mdt_listing.ENV_SWITCH)
    mdt_write.drop(path)  # declared in a stale config, but gone: list the folders
    with mock.patch.object(mdt_listing, "declared", return_value=["files"]):
        assert lsm_lab.open_table(path).data_files() == lsm_lab.open_table(path, use_metadata=False).data_files()


# ----------------------------------------------------------------------------------------- object store
@pytest.mark.parametrize("version", [9, 10])
def test_no_list_of_the_data_on_the_s3_server(s3_table: Any, version: int) -> None:
    """Requests of a snapshot plan in a fresh Table object: a cold process (nothing of the MDT kept) sends 0 LIST
    of the data and, beyond the timeline, a GET of the MDT's base HFile and one per MDT log — not its
    hoodie.properties (`mdt_listing.derived_config`); a warm one only the logs."""
    t = s3_table(name="trips", record_key="id", ordering_field="ts", partition_by="city", layout="default",
                 table_type="MERGE_ON_READ", table_version=version, properties={"hoodie.metadata.enable": "true"})
    t.insert(_rows(range(30), 1, 0.0))
    t.upsert(_rows(range(0, 30, 3), 2, 1.0))
    runs = {}
    for use, forget in ((True, True), (True, False), (False, False)):
        if forget:
            mdt_listing.forget()
        runs[(use, forget)] = traced_plan(lsm_lab.open_table(t.path, use_metadata=use))
    cold, warm, listing = runs[(True, True)], runs[(True, False)], runs[(False, False)]
    assert cold[0] == warm[0] == listing[0]
    for r in (cold, warm):
        assert not [k for k in r[1] if not k.startswith(".hoodie")]  # no LIST of the table or a partition
    assert [k for k in listing[1] if not k.startswith(".hoodie")]  # (the listing does list them)

    def mdt_gets(r: Any) -> list[str]:
        return sorted(k.rsplit("/", 1)[-1] for kind, k in r[2] if kind == "GET" and "/.hoodie/metadata/" in k)

    logs = [n for n in mdt_gets(cold) if ".log." in n]
    assert len(logs) == 2  # a log per deltacommit (insert, upsert)
    assert all(n.endswith(".log.hfile") for n in logs) == (version == 10)  # native HFile logs on version 10
    assert mdt_gets(cold) == sorted([*logs, "files-0000-0_0-0-0_00000000000000000.hfile"])  # no hoodie.properties
    assert mdt_gets(warm) == logs  # the process keeps the MDT's config and base file
    # an MDT whose timeline is not where upstream's fixed properties put it: its hoodie.properties is read after all
    mdt_listing.forget()
    wrong = {**mdt_listing.metadata_table_props(t.config), "hoodie.timeline.path": "elsewhere"}
    with mock.patch.object(mdt_listing, "metadata_table_props", return_value=wrong):
        u = lsm_lab.open_table(t.path)
        counts = u.storage.counts
        counts.trace = []
        with request_scope(), u.pinned():
            assert _slices(u) == cold[0]
        trace, counts.trace = counts.trace, None
    assert "hoodie.properties" in mdt_gets((None, None, trace))


def test_cli_read_with_and_without_the_mdt(real_table: Callable[[str], Path], capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.cli.app import main as cli_main

    path = real_table("v9_txns_simple_meta")
    with _no_data_listing(path):
        assert cli_main(["read", str(path), "--columns", "txn_id,amount"]) == 0
    with_mdt = capsys.readouterr().out
    calls: list[str] = []
    real = fsview.list_data_files_sized
    def spy(p: Any) -> Any:
        calls.append(str(p))
        return real(p)

    monkeypatch.setattr(fsview, "list_data_files_sized", spy)
    assert cli_main(["read", str(path), "--columns", "txn_id,amount", "--no-metadata"]) == 0
    assert capsys.readouterr().out == with_mdt and "txn_id" in with_mdt
    assert str(path) in calls  # --no-metadata listed the folders


def test_a_damaged_mdt_file_is_an_error_not_a_silent_fallback(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _make(path, 9, "COPY_ON_WRITE")
    t.insert(_rows(range(6), 1, 0.0))
    base = next((path / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    base.write_bytes(base.read_bytes()[:40])
    with pytest.raises(CorruptFileError):
        lsm_lab.open_table(path).read()
    assert lsm_lab.open_table(path, use_metadata=False).read().num_rows == 6  # the switch reads by listing


def test_a_scheduled_compaction_needs_no_listing(tmp_path: Path) -> None:
    """A requested plan has written nothing: the lost-commit check lists no folder for it."""
    path = tmp_path / "t"
    t = _make(path, 9, "MERGE_ON_READ")
    t.insert(_rows(range(30), 1, 10.0))
    t.upsert(_rows(range(0, 30, 3), 2, 1.0))
    assert t.compact(strategy="full", plan_only=True) is not None
    a, b = _both(path)
    assert [i for i in a.instants() if not i.is_completed]  # the requested compaction
    with _no_data_listing(path):
        got = _sorted(a.read())
    assert got.equals(_sorted(b.read()))
