"""`lsm_lab.polars.scan_table`: a polars LazyFrame whose projection, predicate and limit reach `Table.scan`.

Results equal `Table.read` with the same filter (COW and MOR, lsm_tree and default layouts,
partitioned); a partition filter and a key filter open only the files of the slice that holds
the key (counted by spying on the one class every data file is opened through); a log that moves
a row out of the filter never lets its base version through (checked against a dict model).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

pl = pytest.importorskip("polars")

import lsm_lab  # noqa: E402
from lsm_lab import LsmLabError  # noqa: E402
from lsm_lab.format import parquet_read  # noqa: E402
from lsm_lab.polars import pushed_filter, scan_table  # noqa: E402

CITIES = ["chennai", "delhi", "pune"]


def _table(make: Callable[..., lsm_lab.Table], layout: str, table_type: str, n: int = 3_000) -> lsm_lab.Table:
    """Partitioned; an insert, an upsert changing `fare` and `v`, a delete: on MOR, logs in every slice."""
    t = make(partition_by="city", ordering_field="ts", layout=layout, table_type=table_type, num_buckets=2)
    rng = np.random.default_rng(3)
    ids = np.array([f"k{i:05d}" for i in range(n)])
    city = rng.choice(CITIES, n)
    t.insert(pa.table({"id": ids, "city": city, "fare": rng.uniform(0, 100, n),
                       "v": rng.integers(0, 10, n), "ts": np.zeros(n, np.int64)}))
    up = rng.choice(n, n // 4, replace=False)
    t.upsert(pa.table({"id": ids[up], "city": city[up], "fare": np.full(len(up), 500.0),
                       "v": np.full(len(up), 20, np.int64), "ts": np.ones(len(up), np.int64)}))
    gone = np.arange(0, n, 7)
    t.delete(pa.table({"id": ids[gone], "city": city[gone]}))
    return t


def _rows(frame: Any, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted(frame.select(cols).rows())


def _arrow_rows(table: pa.Table, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted(zip(*[table.column(c).to_pylist() for c in cols]))


def _opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the data files opened from now on (every data file is opened through CheckedParquetFile)."""
    names: list[str] = []
    real = parquet_read.CheckedParquetFile.__init__

    def spy(self: Any, source: Any, **options: Any) -> None:
        names.append(str(source))
        real(self, source, **options)

    monkeypatch.setattr(parquet_read.CheckedParquetFile, "__init__", spy)
    return names


@pytest.mark.parametrize(("layout", "table_type"), [("lsm_tree", "MERGE_ON_READ"), ("default", "MERGE_ON_READ"),
                                                    ("lsm_tree", "COPY_ON_WRITE"), ("default", "COPY_ON_WRITE")])
def test_lazy_queries_equal_read(tmp_table: Callable[..., lsm_lab.Table], layout: str, table_type: str) -> None:
    t = _table(tmp_table, layout, table_type)
    lf = scan_table(t.path)
    cols = ["id", "city", "fare", "v"]
    assert _rows(lf.collect(), cols) == _arrow_rows(t.read(), cols)
    cases = [  # (polars predicate, the same as an lsm_lab filter)
        ((pl.col("city") == "pune") & (pl.col("id") == "k00042"), [("city", "=", "pune"), ("id", "=", "k00042")]),
        (pl.col("id").is_in(["k00001", "k00002", "k00003"]) & (pl.col("v") >= 5),
         [("id", "in", ["k00001", "k00002", "k00003"]), ("v", ">=", 5)]),
        (pl.col("fare") > 400.0, [("fare", ">", 400.0)]),                          # float: polars filters
        ((pl.col("city") != "delhi") & (pl.col("v") < 3), [("city", "!=", "delhi"), ("v", "<", 3)]),
        ((pl.col("city") == "pune") | (pl.col("v") == 20), [[("city", "=", "pune")], [("v", "=", 20)]]),  # OR
    ]
    for predicate, flt in cases:
        got = lf.filter(predicate).select(cols).collect()
        assert _rows(got, cols) == _arrow_rows(t.read(filter=flt), cols), predicate
    assert lf.head(5).collect().height == 5
    assert lf.filter(pl.col("city") == "delhi").select("id").head(7).collect().height == 7
    assert lf.select(pl.len()).collect().item() == t.read().num_rows


def test_time_travel_and_schema(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = tmp_table(ordering_field="ts")
    first = t.insert(pa.table({"id": ["a", "b"], "v": [1, 2], "ts": [0, 0]}))
    t.upsert(pa.table({"id": ["a"], "v": [9], "ts": [1]}))
    then = scan_table(t.path, as_of=first).select("id", "v").collect()
    assert sorted(then.rows()) == [("a", 1), ("b", 2)]
    assert sorted(scan_table(t.path).select("id", "v").collect().rows()) == [("a", 9), ("b", 2)]
    assert scan_table(t.path).collect_schema()["v"] == pl.Int64


def test_partition_and_key_filter_open_only_the_slice_that_holds_the_key(
        tmp_table: Callable[..., lsm_lab.Table], monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's figure: a polars lazy query with a partition filter and a key filter reads only the
    slices it needs — here the files of the one slice holding the key, out of every file a full read opens."""
    t = _table(tmp_table, "lsm_tree", "MERGE_ON_READ")
    key = "k00043"
    row = t.lookup(key)
    city = row.column("city")[0].as_py()
    slices = t.latest_slices()
    opened = _opened(monkeypatch)
    lf = scan_table(t.path)
    everything = lf.collect()
    all_opened = set(opened)
    opened.clear()
    got = lf.filter((pl.col("city") == city) & (pl.col("id") == key)).select("id", "fare").collect()
    assert got.rows() == [(key, row.column("fare")[0].as_py())]
    needed = set(opened)
    in_partition = {f.path.name for fs in slices if fs.partition == f"city={city}"
                    for f in ((fs.base_file,) if fs.base_file else ()) + fs.log_files}
    in_one_slice = max(1 + len(fs.log_files) for fs in slices)
    print(f"polars: {len(needed)} of {len(all_opened)} data files opened ({everything.height} rows in the table)")
    assert needed and {Path(n).name for n in needed} <= in_partition
    assert len(needed) <= in_one_slice < len(all_opened)


def test_a_log_that_moves_a_row_out_of_the_filter_hides_its_base_version(
        tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """MOR: base v = 10 (matches v >= 5, and statistics say the base can match); the log sets v = 1.
    The pushed filter is applied after the merge: the row is not returned.  Checked against a dict model."""
    for layout in ("lsm_tree", "default"):
        t = tmp_table(ordering_field="ts", layout=layout, num_buckets=1)
        model = {f"k{i}": 10 for i in range(20)}
        t.insert(pa.table({"id": list(model), "v": list(model.values()), "ts": [0] * 20}))
        moved = {"k3": 1, "k7": 1, "k11": 6}
        t.upsert(pa.table({"id": list(moved), "v": list(moved.values()), "ts": [1] * 3}))
        model.update(moved)
        assert any(fs.log_files for fs in t.latest_slices())
        want = sorted((k, v) for k, v in model.items() if v >= 5)
        got = scan_table(t.path).filter(pl.col("v") >= 5).select("id", "v").collect()
        assert sorted(got.rows()) == want
        assert ("k3", 10) not in got.rows() and ("k3", 1) not in got.rows()


def test_predicate_translation() -> None:
    schema = pa.schema([("city", pa.string()), ("v", pa.int64()), ("fare", pa.float64()), ("ok", pa.bool_()),
                        ("day", pa.date32())])
    expr = ((pl.col("city") == "pune") & (pl.col("v") > 3) & (pl.lit(5) >= pl.col("v")) & pl.col("city").is_in(["a", "b"])
            & (pl.col("fare") > 1.0) & (pl.col("fare") == 2.5) & (pl.col("ok") == True)  # noqa: E712
            & pl.col("v").is_null())
    assert pushed_filter(expr, schema) == [("city", "=", "pune"), ("v", ">", 3), ("v", "<=", 5),
                                           ("city", "in", ["a", "b"]), ("fare", "=", 2.5), ("ok", "=", True)]
    assert pushed_filter((pl.col("city") == "a") | (pl.col("v") == 1), schema) == []  # OR: left to polars
    assert pushed_filter(pl.col("v") == "x", schema) == []                               # type mismatch
    assert pushed_filter(pl.col("city").str.starts_with("p"), schema) == []
    assert pushed_filter(pl.col("v").is_in([1, None]), schema) == []                     # null in the list


def test_unknown_column_is_a_typed_error(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = tmp_table()
    t.insert(pa.table({"id": ["a"], "v": [1]}))
    with pytest.raises(Exception) as info:
        scan_table(t.path).select(pl.col("nope")).collect()
    assert "nope" in str(info.value)
    with pytest.raises(LsmLabError):
        scan_table(t.path, as_of="not a time")


def test_a_limit_above_a_filter_does_not_abort_the_process_at_exit(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """polars keeps reading ahead from the source after `head(n)` is met above a filter; a thread still in
    lsm_lab's streaming merge when Python finalises aborted the process ("FATAL: exception not rethrown")
    before `scan_table` told its sources to stop at exit."""
    import os
    import subprocess
    import sys

    t = _table(tmp_table, "lsm_tree", "MERGE_ON_READ", n=20_000)
    code = ("import polars as pl\nfrom lsm_lab.polars import scan_table\n"
            f"lazy = scan_table({str(t.path)!r})\n"
            "print(lazy.filter(pl.col('city') == 'pune').head(5).collect().height)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(lsm_lab.__file__).parents[1])}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert (done.returncode, done.stdout.strip()) == (0, "5"), done.stderr[-2000:]
        assert "FATAL" not in done.stderr


def test_batch_size_and_row_limit_reach_the_scan(tmp_table: Callable[..., lsm_lab.Table],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The source polars calls: frames of at most `batch_size` rows, and `n_rows` stops the scan early
    (fewer files opened than a full read)."""
    from lsm_lab.polars import _batches

    t = _table(tmp_table, "lsm_tree", "MERGE_ON_READ")
    schema = t.read_context(None).full_schema
    frames = list(_batches(t, None, schema, ["id", "v"], None, None, 100))
    assert max(f.height for f in frames) <= 100 and sum(f.height for f in frames) == t.read().num_rows
    opened = _opened(monkeypatch)
    list(_batches(t, None, schema, ["id"], None, None, 500))
    everything = len(set(opened))
    opened.clear()
    first = list(_batches(t, None, schema, ["id"], None, 10, 500))
    assert sum(f.height for f in first) == 10
    assert 0 < len(set(opened)) < everything
