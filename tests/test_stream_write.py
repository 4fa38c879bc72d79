"""Streamed writes (filegroup/stream_write.py): any Arrow stream, written in chunks as one commit.

The main property: writing a stream in chunks of `buffer_rows` rows leaves the same table (the
same dict of records) and the same write report as writing the whole input as one in-memory
batch — with keys repeated inside chunks and across them, for insert, upsert, bulk_insert and
delete, COPY_ON_WRITE and MERGE_ON_READ, the lsm_tree and default layouts, with and without an
ordering field; and both agree with a plain dict model.  On lsm_tree tables every data file
stays sorted with no key twice, and a compaction of the several files one streamed write puts
in a file group gives the same rows.
"""

from __future__ import annotations

import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.errors import InputError, SchemaError
from lsm_lab.filegroup import spill as spill_module
from lsm_lab.filegroup import stream_write
from lsm_lab.filegroup.spill import SPILL_PREFIX, owner_alive, spill_prefix, sweep_spill_folders
from lsm_lab.merge import records
from lsm_lab.services.commit import describe_write

ROOT = Path(__file__).resolve().parents[1]
Row = tuple[int, str, int]  # key number, partition, ordering value

ROWS = st.lists(st.tuples(st.integers(0, 25), st.sampled_from(["a", "b"]), st.integers(0, 4)), max_size=60)
"""(key number, partition, ordering value) rows: few keys, so that keys repeat inside and across chunks"""


def _table(rows: list[Row], tag: str, ordering: bool) -> pa.Table:
    cols: dict[str, Any] = {"id": [f"k{k:02d}" for k, _, _ in rows], "p": [p for _, p, _ in rows]}
    if ordering:
        cols["ts"] = pa.array([o for _, _, o in rows], pa.int64())
    cols["v"] = [f"{tag}{i}" for i in range(len(rows))]
    return pa.table(cols)


def _stream(table: pa.Table, batch: int) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=batch))


def _state(t: lsm_lab.Table) -> dict[tuple[str, str], tuple[Any, ...]]:
    if t.schema is None:  # nothing written yet
        return {}
    cols = [c for c in ("ts", "v") if c in t.schema.names]
    return {(r["p"], r["id"]): tuple(r[c] for c in cols) for r in t.read(columns=["id", "p", *cols]).to_pylist()}


def _model(live: dict[tuple[str, str], tuple[Any, ...]], table: pa.Table, op: str,
           ordering: bool) -> dict[tuple[str, str], tuple[Any, ...]]:
    """Rows applied one after the other: the greatest ordering value wins, a tie goes to the later row."""
    out = dict(live)
    for r in table.to_pylist():
        key = (r["p"], r["id"])
        old = out.get(key)
        wins = old is None or not ordering or r["ts"] >= old[0]
        if op == "delete":
            if old is not None and wins:
                del out[key]
        elif wins:
            out[key] = (r["ts"], r["v"]) if ordering else (r["v"],)
    return out


def _check_sorted_files(t: lsm_lab.Table) -> None:
    """lsm_tree: every data file of every latest slice sorted by key, no key twice."""
    for g in t.file_groups():
        for f in g.latest.files:
            if f.name.content == "cdc":
                continue
            table = pq.read_table(f.path)
            col = "_hoodie_record_key" if "_hoodie_record_key" in table.column_names else table.column_names[0]
            assert records.is_strictly_sorted(table.column(col)), f.relative


def _create(path: Path, layout: str, table_type: str, ordering: bool) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="t", record_key="id", partition_by="p", layout=layout,
                                table_type=table_type, num_buckets=2, ordering_field="ts" if ordering else None)


def _report(t: lsm_lab.Table, instant: lsm_lab.Instant) -> str:
    return describe_write(t.instant_metadata(instant))


@pytest.mark.parametrize("layout,table_type", [("lsm_tree", "MERGE_ON_READ"), ("lsm_tree", "COPY_ON_WRITE"),
                                               ("default", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE")])
@pytest.mark.parametrize("op", ["insert", "upsert", "bulk_insert", "delete"])
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=ROWS, given_rows=ROWS.filter(lambda rows: len(rows) >= 6), ordering=st.booleans(),
       buffer=st.integers(1, 5), batch=st.integers(1, 7))
def test_stream_equals_one_batch(tmp_path_factory: pytest.TempPathFactory, layout: str, table_type: str, op: str,
                                 before: list[Row], given_rows: list[Row], ordering: bool, buffer: int,
                                 batch: int) -> None:
    root = tmp_path_factory.mktemp("s")
    first = _table(before, "b", ordering)
    data = _table(given_rows, "n", ordering)
    if op == "delete":
        data = data.drop_columns(["v"])
    one, streamed = _create(root / "one", layout, table_type, ordering), _create(root / "str", layout, table_type,
                                                                               ordering)
    live: dict[tuple[str, str], tuple[Any, ...]] = {}
    if first.num_rows:
        one.upsert(first)
        streamed.upsert(first)
        live = _model(live, first, "upsert", ordering)
    a = getattr(one, op)(data)
    b = getattr(streamed, op)(_stream(data, batch), buffer_rows=buffer)
    assert _state(streamed) == _state(one) == _model(live, data, op, ordering)
    assert _report(streamed, b) == _report(one, a)
    if layout == "lsm_tree":
        _check_sorted_files(streamed)
    if table_type == "MERGE_ON_READ" and data.num_rows > buffer:  # several files per group: compaction merges them
        expected = _state(streamed)
        streamed.compact("full")
        assert _state(streamed) == expected
        if layout == "lsm_tree":
            _check_sorted_files(streamed)


def test_key_ranges_put_several_files_in_one_group(tmp_path: Path) -> None:
    """A bucket group's share larger than the buffer: a base and logs of one instant, disjoint key ranges."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, ordering_field="ts")
    rows = pa.table({"id": [f"k{i % 500:04d}" for i in range(2000)], "ts": [i % 7 for i in range(2000)],
                     "v": list(range(2000))})
    instant = t.bulk_insert(_stream(rows, 100), buffer_rows=150)
    (group,) = t.file_groups()
    assert group.latest.base_file is not None and len(group.latest.log_files) >= 2
    assert {f.instant for f in group.latest.files} == {instant.begin_time}
    _check_sorted_files(t)
    model = _model({}, rows.append_column("p", pa.array([""] * 2000)), "upsert", True)
    assert {r["id"]: (r["ts"], r["v"]) for r in t.read().to_pylist()} == {k: v for (_, k), v in model.items()}
    assert _report(t, instant).startswith("bulk_insert: 2,000 rows in → 500 inserted, 0 updated; 1,500 rows")


def _gen(table: pa.Table, size: int) -> Iterator[pa.RecordBatch]:
    yield from table.to_batches(max_chunksize=size)


def test_stream_kinds(tmp_path: Path) -> None:
    """A generator of batches, a list of tables, a polars DataFrame and LazyFrame, a DuckDB relation."""
    polars = pytest.importorskip("polars")
    duckdb = pytest.importorskip("duckdb")
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default")
    rows = pa.table({"id": [f"k{i:03d}" for i in range(300)], "v": list(range(300))})
    t.insert(_gen(rows.slice(0, 100), 7), buffer_rows=10)
    t.upsert([rows.slice(100, 50), rows.slice(150, 50)], buffer_rows=10)
    t.upsert(polars.from_arrow(rows.slice(200, 50)), buffer_rows=10)
    t.upsert(polars.from_arrow(rows.slice(250, 25)).lazy(), buffer_rows=10)
    con = duckdb.connect()
    con.register("tail_rows", rows.slice(275))
    t.upsert(con.sql("select * from tail_rows"), buffer_rows=10)
    assert sorted(t.read(columns=["id", "v"]).to_pylist(), key=lambda r: r["id"]) == rows.to_pylist()
    assert len(t.timeline()) == 5  # one commit per stream
    datafusion = pytest.importorskip("datafusion")
    ctx = datafusion.SessionContext()
    frame = ctx.from_arrow(pa.table({"id": ["k000", "z"], "v": [-1, -2]}))
    t.upsert(frame, buffer_rows=1)
    assert {r["id"]: r["v"] for r in t.read().to_pylist()}["k000"] == -1


def test_bad_streams_are_typed_errors_and_roll_back(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a"], "ts": [1], "v": ["x"]}))
    with pytest.raises(InputError, match="item 1 of the stream is a int; expected pyarrow RecordBatches"):
        t.upsert(iter([pa.table({"id": ["b"], "ts": [1], "v": ["y"]}), 5]), buffer_rows=1)
    with pytest.raises(InputError, match="buffer_rows must be a positive integer"):
        t.upsert(iter([pa.table({"id": ["b"], "ts": [1], "v": ["y"]})]), buffer_rows=0)

    def bad() -> Iterator[pa.Table]:  # the third chunk changes a column's type in a way no rule allows (string →
        # list): the write fails and rolls back
        yield pa.table({"id": ["b"], "ts": [2], "v": ["y"]})
        yield pa.table({"id": ["c"], "ts": [2], "v": ["z"]})
        yield pa.table({"id": ["d"], "ts": [2], "v": [[3, 5]]})

    with pytest.raises(SchemaError):
        t.upsert(bad(), buffer_rows=1)
    t = lsm_lab.open_table(t.path)
    assert [r["id"] for r in t.read().to_pylist()] == ["a"]
    assert t.uncommitted_files() == []
    t.upsert(iter([pa.table({"id": ["b"], "ts": [2], "v": ["y"]}), pa.table({"id": ["c"], "ts": [2], "v": ["z"]})]),
             buffer_rows=1)
    assert sorted(r["id"] for r in t.read().to_pylist()) == ["a", "b", "c"]


def test_new_column_in_a_later_chunk(tmp_path: Path) -> None:
    """A chunk may add a nullable column (the per-chunk schema check): earlier chunks' rows get nulls."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1)
    t.upsert(iter([pa.table({"id": ["a", "b"], "v": [1, 2]}), pa.table({"id": ["c", "a"], "v": [3, 4], "w": ["x", "y"]})]),
             buffer_rows=2)
    got = {r["id"]: (r["v"], r["w"]) for r in t.read().to_pylist()}
    assert got == {"a": (4, "y"), "b": (2, None), "c": (3, "x")}


def test_chunks_and_buffer_property() -> None:
    batches = [pa.record_batch({"x": pa.array(range(n), pa.int64())}) for n in (3, 0, 5, 4)]
    sizes = [c.num_rows for c in stream_write.chunks(iter(batches), 4)]
    assert sizes == [4, 4, 4] and sum(sizes) == 12
    assert [c.num_rows for c in stream_write.chunks(pa.RecordBatchReader.from_batches(
        batches[0].schema, []), 4)] == [0]
    assert stream_write.buffer_rows_of({stream_write.BUFFER_PROPERTY: "7"}, None) == 7
    assert stream_write.buffer_rows_of({}, None) == stream_write.DEFAULT_BUFFER_ROWS
    with pytest.raises(InputError, match="lsm_lab.write.buffer.rows"):
        stream_write.buffer_rows_of({stream_write.BUFFER_PROPERTY: "lots"}, None)
    assert stream_write.is_stream(iter([])) and not stream_write.is_stream(pa.table({"x": [1]}))
    assert not stream_write.is_stream([{"x": 1}]) and stream_write.is_stream(list(itertools.repeat(batches[0], 2)))


@pytest.mark.parametrize("suffix", ["parquet", "csv", "jsonl"])
def test_cli_write_streams_a_file(tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`lsm-lab write --buffer-rows N`: the file read batch by batch, one commit, the same report as one batch."""
    from lsm_lab.cli.app import main

    rows = pa.table({"id": [f"k{i % 40:03d}" for i in range(120)], "v": list(range(120))})
    path = tmp_path / f"in.{suffix}"
    if suffix == "parquet":
        pq.write_table(rows, path, row_group_size=25)
    elif suffix == "csv":
        import pyarrow.csv as pcsv

        pcsv.write_csv(rows, path)
    else:
        path.write_text("".join(f'{{"id": "{r["id"]}", "v": {r["v"]}}}\n' for r in rows.to_pylist()))
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=2)
    assert main(["write", str(t.path), str(path), "--buffer-rows", "30"]) == 0
    out = capsys.readouterr().out
    assert "upsert: 120 rows in → 40 inserted, 0 updated; 80 rows repeated a key" in out
    assert {r["id"]: r["v"] for r in lsm_lab.open_table(t.path).read().to_pylist()} == {
        f"k{i:03d}": 80 + i for i in range(40)}
    assert main(["write", str(t.path), str(tmp_path / "missing.parquet")]) == 2


@pytest.mark.slow  # whole processes, as the other bench runs
def test_bench_write_stream_small() -> None:
    """The benchmark's plumbing at a tiny size: both contenders write every row and report the same."""
    from lsm_lab.bench import write_stream

    result = write_stream.run(rows=3_000, buffer_rows=1_000, log=lambda _: None)
    assert result["report"] == "insert: 3,000 rows in → 3,000 inserted, 0 updated"
    assert set(result["contenders"]) == {"floor", "table", "stream"}
    assert all(c["peak_rss_bytes"] > 0 for c in result["contenders"].values())
    assert "stream / table: peak RSS" in write_stream.report(result)


# --------------------------------------------------------------------------- spill folders of killed writers
_SPILLING_CHILD = textwrap.dedent("""
    import sys, tempfile, time
    from pathlib import Path
    import pyarrow as pa
    import lsm_lab

    t = lsm_lab.open_table(sys.argv[1])
    spill = Path(tempfile.gettempdir())  # the child's TMPDIR: the test's spill folder

    def stream():
        for i in range(1000):
            if i == 3:  # the write's first two chunks were taken before its spill folder was made
                assert any(spill.glob("lsm_lab-stream-*")), list(spill.iterdir())
                print("ready", flush=True)
                time.sleep(120)  # killed here, the spill folder on disk
            yield pa.record_batch({"id": [f"c{i:04d}"], "p": ["a"], "v": [i]})

    t.upsert(stream(), buffer_rows=1)
""")


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="a streamed write's owner is judged from /proc")
def test_a_killed_writers_spill_folder_is_swept_by_the_next_streamed_write(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A streamed writer SIGKILLed while its chunks are spilled leaves its spill folder; the next streamed write in
    the same spill folder removes it, and leaves alone a live process's folder (this test's, named by the same
    helper), a folder of the old random-only name, and what a symlink of a spill folder's name points to."""
    spill = tmp_path / "spill"
    spill.mkdir()
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p")
    env = {**os.environ, "TMPDIR": str(spill), "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _SPILLING_CHILD, str(t.path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        line = proc.stdout.readline() if ready else ""
        assert line.strip() == "ready", f"child did not get ready: {line!r} {proc.stderr.read()[-2000:] if proc.poll() is not None else ''}"
        dead = [p.name for p in spill.iterdir()]
        assert len(dead) == 1 and dead[0].startswith(f"lsm_lab-stream-{proc.pid}-"), dead
        assert any((spill / dead[0]).iterdir())  # its chunks are spilled
        assert owner_alive(dead[0]) is True  # not yet killed
    finally:
        proc.kill()  # SIGKILL
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert owner_alive(dead[0]) is False
    live = Path(tempfile.mkdtemp(prefix=spill_prefix(), dir=spill))  # this process's: alive
    (live / "0.arrow").write_bytes(b"x")
    legacy = spill / "lsm_lab-stream-ab12cd34"  # the old name: no owner to judge
    legacy.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not a spill")
    link = spill / f"{dead[0]}x"  # a symlink named as a dead owner's folder: never followed
    link.symlink_to(outside, target_is_directory=True)

    monkeypatch.setattr(tempfile, "tempdir", str(spill))  # this process's streamed writes spill there too
    t = lsm_lab.open_table(t.path)
    t.upsert(_stream(pa.table({"id": ["k1", "k2", "k3"], "p": ["a", "a", "a"], "v": [1, 2, 3]}), 1), buffer_rows=1)
    assert sorted(p.name for p in spill.iterdir()) == sorted([live.name, legacy.name, link.name])
    assert (live / "0.arrow").exists() and (outside / "keep.txt").read_text() == "not a spill"
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {"k1": 1, "k2": 2, "k3": 3}  # the killed write: none


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="start times come from /proc")
def test_spill_owner_is_judged_by_pid_and_start_time(tmp_path: Path) -> None:
    """A folder of this pid with another start time is a dead owner's (the pid was reused); one of another pid
    namespace is not ours to judge; a sweep that cannot remove a folder logs it and goes on."""
    prefix = spill_prefix()
    pid, start, ns = (int(x) for x in prefix[len(SPILL_PREFIX):].rstrip("-").split("-"))
    assert pid == os.getpid() and start > 0
    assert owner_alive(f"{prefix}abc") is True
    reused = tmp_path / f"{SPILL_PREFIX}{pid}-{start + 1}-{ns}-abc"
    other_ns = tmp_path / f"{SPILL_PREFIX}{pid}-{start + 1}-{ns + 1}-abc"
    for p in (reused, other_ns):
        p.mkdir()
        (p / "0.arrow").write_bytes(b"x")
    assert owner_alive(reused.name) is False
    assert owner_alive(other_ns.name) is None
    assert sweep_spill_folders(tmp_path) == [reused]
    assert sorted(p.name for p in tmp_path.iterdir()) == [other_ns.name]
    assert sweep_spill_folders(tmp_path / "missing") == []  # an unreadable parent: nothing, no error


def test_a_failing_sweep_does_not_fail_the_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    dead = spill / f"{SPILL_PREFIX}999999999-1-0-abc"  # no such pid (above any pid_max)
    dead.mkdir()
    monkeypatch.setattr(spill_module, "owner_alive", lambda name: False if name == dead.name else None)

    real = shutil.rmtree

    def refuse(path: Any, *a: Any, **kw: Any) -> None:
        if Path(path) == dead:
            raise PermissionError(13, "Permission denied", str(path))
        real(path, *a, **kw)

    monkeypatch.setattr(shutil, "rmtree", refuse)
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.upsert(_stream(pa.table({"id": ["a", "b"], "v": [1, 2]}), 1), buffer_rows=1)
    assert t.read().num_rows == 2 and dead.exists()
