"""`Table.scan`: the streaming read (table/stream.py) — same rows as `read`, batch by batch, to every engine.

Also the MOR filter rule (statistics skip a slice only when no data file of it can
hold a matching row version), checked against a plain dict model, and the README's
warning: a Parquet reader pointed at the table folder returns wrong rows.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab import InputError
from lsm_lab.table import stream

KEY = "_hoodie_record_key"
CITIES = ["chennai", "delhi", "pune"]


def _sql(rel: Any) -> list[tuple[Any, ...]]:
    assert rel is not None
    return list(rel.fetchall())


def _by_key(t: pa.Table) -> pa.Table:
    return t.sort_by(KEY) if KEY in t.column_names else t.sort_by("id")


def _mor(make: Callable[..., lsm_lab.Table], layout: str = "lsm_tree", n: int = 6_000) -> lsm_lab.Table:
    """A partitioned MOR table with an insert, an upsert changing `fare` and a delete: logs in every slice."""
    t = make(partition_by="city", ordering_field="ts", layout=layout, num_buckets=2)
    rng = np.random.default_rng(7)
    ids = np.array([f"k{i:06d}" for i in range(n)])
    city = rng.choice(CITIES, n)
    t.insert(pa.table({"id": ids, "city": city, "fare": rng.uniform(0, 100, n), "ts": np.zeros(n, np.int64)}))
    up = rng.choice(n, n // 4, replace=False)
    t.upsert(pa.table({"id": ids[up], "city": city[up], "fare": np.full(len(up), 500.0),
                       "ts": np.ones(len(up), np.int64)}))
    gone = np.arange(0, n, 9)
    t.delete(pa.table({"id": ids[gone], "city": city[gone]}))
    return t


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_scan_equals_read(tmp_table: Callable[..., lsm_lab.Table], layout: str) -> None:
    t = _mor(tmp_table, layout)
    want = t.read()
    scan = t.scan(batch_size=500)
    assert scan.schema == want.schema
    batches = list(scan.to_reader())
    assert batches and all(0 < b.num_rows <= 500 for b in batches)
    assert _by_key(pa.Table.from_batches(batches, scan.schema)).equals(_by_key(want))
    assert scan.to_table().equals(want)  # the in-memory path is read() itself
    for cols, flt in [(["fare", "id"], [("fare", ">", 99.0)]), (None, pc.field("city") == "pune"),
                      (["id"], pc.field("fare") < 5), ([], [("city", "=", "delhi")])]:
        got = t.scan(columns=cols, filter=flt, batch_size=700).to_reader().read_all()
        exp = t.read(columns=cols, filter=flt)
        assert got.num_rows == exp.num_rows and got.schema == exp.schema
        if cols != []:
            assert got.sort_by("id").equals(exp.sort_by("id"))


def test_lsm_tree_slices_stream_inside_the_slice(tmp_table: Callable[..., lsm_lab.Table],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """On an lsm_tree table every slice (base + sorted logs) goes through the streaming merge, never whole."""
    t = _mor(tmp_table)
    want = t.read()

    def whole(*_: Any) -> pa.Table:
        raise AssertionError("a sorted slice was merged in memory")

    monkeypatch.setattr(stream, "_in_memory", whole)
    scan = t.scan(batch_size=256)
    assert all(stream.streams(scan.plan, fs) for fs in scan.plan.slices)
    assert all(len(fs.log_files) for fs in scan.plan.slices)  # logs in every slice: a real merge
    got = scan.to_reader().read_all()
    assert _by_key(got).equals(_by_key(want))
    first = next(iter(t.scan(batch_size=64).to_reader()))
    assert first.num_rows <= 64


def test_time_travel_and_arguments(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = tmp_table(ordering_field="ts")
    first = t.upsert(pa.table({"id": ["a", "b"], "v": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": ["a", "c"], "v": [3, 4], "ts": [2, 2]}))
    for as_of in [first.begin_time, lsm_lab.CompletionTime(first.completion_time or first.begin_time), None]:
        assert t.scan(as_of=as_of).to_reader().read_all().sort_by(KEY).equals(t.read(as_of=as_of).sort_by(KEY))
    assert t.scan(as_of=first.begin_time, columns=["v"]).to_table().column("v").to_pylist() == [1, 2]
    for bad in [0, -3, 1.5, True, "10"]:
        with pytest.raises(InputError, match="batch_size"):
            t.scan(batch_size=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown filter column"):
        t.scan(filter=[("nope", "=", 1)])
    with pytest.raises(InputError, match="engine|merge"):
        t.scan(merge="nope")


def test_stream_stops_early(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """Reading only the first batch does not read the rest (the generator is closed, threads stop)."""
    t = _mor(tmp_table)
    reader = t.scan(batch_size=100).to_reader()
    assert reader.read_next_batch().num_rows <= 100
    assert any(th.name == "lsm_lab-scan" for th in threading.enumerate())  # the next slice is merged ahead
    reader.close()
    del reader
    gc.collect()
    deadline = time.monotonic() + 10
    while any(th.name == "lsm_lab-scan" for th in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(th.name == "lsm_lab-scan" for th in threading.enumerate())


def test_slices_merged_ahead_keep_their_order_and_their_errors(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """Slices are merged on threads, one ahead, but handed out in plan order, each in key order; a file
    that breaks in a later slice raises a typed error when the reader gets there, never a hang."""
    t = _mor(tmp_table)
    scan = t.scan(batch_size=300)
    slices = scan.plan.slices
    assert len(slices) >= 3
    batches = list(scan.to_reader())
    where = [(b.column("_hoodie_partition_path")[0].as_py(), b.column("_hoodie_file_name")[0].as_py().split("_")[0])
             for b in batches]
    order = [(fs.partition, fs.file_id) for fs in slices]
    seen = list(dict.fromkeys(where))
    assert seen == [o for o in order if o in seen]  # each slice's batches together, slices in plan order
    for name in dict.fromkeys(w for w in where):
        keys = [k for b, w in zip(batches, where) if w == name for k in b.column(KEY).to_pylist()]
        assert keys == sorted(keys)
    last = slices[-1]
    victim = Path(str(last.log_files[0].path))
    victim.write_bytes(victim.read_bytes()[:-40])  # a torn footer in the last slice
    with pytest.raises(lsm_lab.LsmLabError, match=victim.name):
        for _ in t.scan(batch_size=300).to_reader():
            pass


def test_a_default_layout_scan_holds_one_whole_slice_at_a_time(tmp_table: Callable[..., lsm_lab.Table],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Slices merged in memory are not read ahead: the next one starts only after the reader has had every
    batch of the one before (the issue's "for the default layout, at most one slice in memory")."""
    t = _mor(tmp_table, "default")
    scan = t.scan(batch_size=200)
    slices = list(scan.plan.slices)
    assert len(slices) >= 3 and not any(stream.streams(scan.plan, fs) for fs in slices)
    got: list[pa.RecordBatch] = []
    started: list[int] = []  # batches the reader had when each slice's merge began
    real = stream._in_memory

    def watched(plan: Any, fs: Any) -> pa.Table:
        started.append(len(got))
        return real(plan, fs)

    monkeypatch.setattr(stream, "_in_memory", watched)
    for batch in scan.to_reader():
        got.append(batch)
    assert len(started) == len(slices)
    sizes = [-(-real(scan.plan, fs).num_rows // 200) for fs in slices]  # at least this many batches each
    for j in range(1, len(slices)):
        assert started[j] >= sum(sizes[:j]), (j, started, sizes)
    assert _by_key(pa.Table.from_batches(got, scan.schema)).equals(_by_key(t.read()))


@pytest.mark.parametrize(("batch", "files", "rows"), [(65_536, 2, 65_536), (65_536, 3, 65_536), (65_536, 11, 17_873),
                                                      (65_536, 200, 4_096), (1_000, 50, 1_000), (100, 3, 100)])
def test_source_rows_share_a_budget(batch: int, files: int, rows: int) -> None:
    """A streamed slice of many logs reads fewer rows per file at a time: about SOURCE_BATCHES batches in all."""
    assert stream.source_rows(batch, files) == rows


# --------------------------------------------------------------------------- engines
def test_engines_read_the_scan(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    import duckdb
    import polars as pl

    t = _mor(tmp_table)
    want = _by_key(t.read()).to_pandas()
    n, total = len(want), float(want["fare"].sum())
    scan = t.scan(batch_size=1_000)
    # pandas
    assert scan.to_pandas().sort_values(KEY).reset_index(drop=True).equals(want)
    # polars: the stream protocol, a reader, to_polars
    for frame in (pl.DataFrame(scan), pl.from_arrow(scan.to_reader()), scan.to_polars()):
        assert isinstance(frame, pl.DataFrame)
        assert frame.sort(KEY).to_pandas().equals(want)
    # DuckDB: from_arrow, a Python variable named in SQL, to_duckdb
    assert duckdb.from_arrow(scan).aggregate("count(*)").fetchall() == [(n,)]
    lsm_scan = t.scan(columns=["fare"])  # noqa: F841 - DuckDB finds the variable by name
    assert _sql(duckdb.sql("select count(*), sum(fare) from lsm_scan"))[0][0] == n
    con = duckdb.connect()
    rel = t.scan(filter=[("fare", ">", 400.0)]).to_duckdb(con, name="trips")
    assert rel.aggregate("count(*)").fetchall() == [(int((want["fare"] > 400).sum()),)]
    t.scan().to_duckdb(con, name="all_trips")
    assert _sql(con.sql("select sum(fare) from all_trips"))[0][0] == pytest.approx(total)
    # pyarrow
    assert pa.table(scan).num_rows == n
    assert pa.RecordBatchReader.from_stream(scan).read_all().num_rows == n


def test_datafusion_reads_the_scan(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    import datafusion

    t = _mor(tmp_table)
    ctx = datafusion.SessionContext()
    frame = ctx.from_arrow(t.scan())
    assert frame.count() == t.read().num_rows
    ctx.register_record_batches("trips", [t.scan().to_table().to_batches()])
    (got,) = ctx.sql("select count(*) as n from trips").to_pylist()
    assert got["n"] == t.read().num_rows


def test_a_parquet_reader_on_the_folder_returns_wrong_rows(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """The README's warning: logs, delete logs and older file versions are plain Parquet files too."""
    import duckdb
    import polars as pl

    t = _mor(tmp_table)
    right = t.read().num_rows
    assert isinstance(t.path, Path)
    files = [str(p) for p in t.path.rglob("*.parquet") if ".hoodie" not in p.parts]
    naive = ds.dataset(files, format="parquet").count_rows()
    assert naive != right, (naive, right)
    assert pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore").select(pl.len()).collect().item() \
        == naive
    assert _sql(duckdb.sql(f"select count(*) from read_parquet({files!r}, union_by_name=true)")) == [(naive,)]


# --------------------------------------------------------------------------- filters on MOR
def test_statistics_never_skip_a_slice_a_log_changes(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """A base file whose fares are all < 100 is not skipped for `fare > 400` when its slice's log holds 500s;
    a filter no file can match skips every slice."""
    t = _mor(tmp_table)
    scan = t.scan(filter=[("fare", ">", 400.0)])
    assert scan.plan.skipped == 0
    assert scan.to_reader().read_all().num_rows == t.read(filter=[("fare", ">", 400.0)]).num_rows > 0
    none = t.scan(filter=[("fare", ">", 1_000.0)])
    assert none.plan.skipped == len(t.latest_slices()) and none.to_table().num_rows == 0
    assert none.to_reader().read_all().num_rows == 0


_ops = st.lists(st.tuples(st.sampled_from(["upsert", "delete"]),
                          st.lists(st.tuples(st.integers(0, 30), st.integers(0, 9)), min_size=1, max_size=12)),
                min_size=1, max_size=5)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops, threshold=st.integers(1, 9), layout=st.sampled_from(["lsm_tree", "default"]),
       compact=st.booleans())
def test_filtered_scan_matches_a_dict_model(tmp_table: Callable[..., lsm_lab.Table], ops: list[Any],
                                            threshold: int, layout: str, compact: bool) -> None:
    """Random upserts and deletes that move rows in and out of `v >= threshold` (the first write's rows all
    have v = 0, so its base files alone would be skipped by statistics): the filtered scan (stream and
    table, tuple and expression filters) equals the model's filtered rows."""
    t = tmp_table(ordering_field="ts", layout=layout, num_buckets=2)
    model: dict[str, int] = {}
    for ts, (kind, rows) in enumerate([("upsert", [(k, 0) for k in range(0, 31, 2)]), *ops], start=1):
        last = {f"k{k:02d}": v for k, v in rows}
        if kind == "upsert":
            t.upsert(pa.table({"id": list(last), "v": pa.array(list(last.values()), pa.int64()),
                               "ts": pa.array([ts] * len(last), pa.int64())}))
            model.update(last)
        else:
            t.delete(list(last))
            for k in last:
                model.pop(k, None)
    if compact and layout == "lsm_tree" and model:
        t.compact()
    want = sorted((k, v) for k, v in model.items() if v >= threshold)
    for flt in ([("v", ">=", threshold)], pc.field("v") >= threshold):
        scan = t.scan(filter=flt, columns=["id", "v"], batch_size=3)
        for got in (scan.to_reader().read_all(), scan.to_table()):
            assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == want


# --------------------------------------------------------------------------- the command line
def test_cli_filter_and_streamed_output(tmp_table: Callable[..., lsm_lab.Table], tmp_path: Any,
                                        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from lsm_lab.cli.app import main

    t = _mor(tmp_table)
    flt = [("fare", ">", 50.0), ("city", "=", "chennai")]
    want = t.read(filter=flt)
    text = "fare > 50 and city = 'chennai'"
    for name, load in [("o.parquet", pq.read_table), ("o.csv", pcsv.read_csv),
                       ("o.jsonl", lambda p: pa.Table.from_pylist([json.loads(x) for x in p.read_text().splitlines()]))]:
        assert main(["read", str(t.path), "--filter", text, "--out", str(tmp_path / name)]) == 0
        got = load(tmp_path / name)
        assert got.num_rows == want.num_rows
        assert sorted(got.column("id").to_pylist()) == sorted(want.column("id").to_pylist())
    capsys.readouterr()
    # --limit N reads only the batches it prints: the stream is left after the first
    seen: list[int] = []
    real = stream.Scan.batches

    def counting(self: stream.Scan) -> Any:
        for b in real(self):
            seen.append(b.num_rows)
            yield b

    monkeypatch.setattr(stream.Scan, "batches", counting)
    assert main(["read", str(t.path), "--limit", "3", "--columns", "id,fare"]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == 4 and "(3 rows" in err and seen == [3]
    assert main(["read", str(t.path), "--limit", "0", "--filter", text, "--columns", "id"]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) == want.num_rows + 1 and f"({want.num_rows} rows)" in err
    for bad, why in [("fare > 50 or city = 'x'", "'or'"), ("__import__('os')", "expected an operator"),
                     ("fare >", "expected a value"), ("nope = 1", "unknown filter column"),
                     ("city > 5", "cannot apply the filter")]:
        assert main(["read", str(t.path), "--filter", bad]) == 2
        assert why in capsys.readouterr().err
    assert main(["read", str(t.path), "--filter", "fare > 1", "--cdc", "--start", "0"]) == 2
    assert "--filter applies to snapshot" in capsys.readouterr().err
    assert main(["read", str(t.path), "--filter", "fare > 1", "--read-optimized"]) == 0  # base files, filtered


def test_read_optimized_and_incremental_scans(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = tmp_table(ordering_field="ts")
    first = t.upsert(pa.table({"id": ["a", "b"], "v": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": ["a", "c"], "v": [3, 4], "ts": [2, 2]}))
    ro = t.scan_optimized(batch_size=1)
    assert _by_key(ro.to_reader().read_all()).equals(_by_key(t.read_optimized()))
    start = lsm_lab.CompletionTime(first.completion_time or first.begin_time)
    inc = t.scan_incremental(start, columns=["id", "v"], batch_size=1)
    got = inc.to_reader().read_all()
    assert got.sort_by("id").equals(t.read_incremental(start, columns=["id", "v"]).sort_by("id"))
    assert sorted(got.column("id").to_pylist()) == ["a", "c"]
    assert t.scan_optimized(columns=[]).to_table().num_rows == t.read_optimized().num_rows
