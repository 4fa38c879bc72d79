"""`format("lsm_lab")`: Spark reads with filter pushdown and one partition per file slice, writes committed
once (an aborted job commits nothing), mode("overwrite"), SQL through a temporary view and catalog tables,
dead jobs' staging folders swept, and `read_table(filter=)`.

Results equal `Table.read` with the same filter; pushdown is shown by the partitions Spark plans (one per
file slice left after pruning) and, for the reader run in this process, by the data files it opens.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNull, LessThan, Not

import lsm_lab
from lsm_lab.format import parquet_read
from lsm_lab.spark import read_table, register
from lsm_lab.spark.datasource import STAGING, LsmLabDataSource, filter_tuple

pytestmark = pytest.mark.spark

CITIES = ["chennai", "delhi", "pune"]
COLS = ["id", "city", "fare", "v"]


def _table(make: Callable[..., lsm_lab.Table], layout: str = "lsm_tree", table_type: str = "MERGE_ON_READ",
           n: int = 1_200) -> lsm_lab.Table:
    """Partitioned; insert, an upsert changing `fare` and `v`, a delete (on MOR, logs in every slice)."""
    t = make(partition_by="city", ordering_field="ts", layout=layout, table_type=table_type, num_buckets=2)
    rng = np.random.default_rng(5)
    ids = np.array([f"k{i:05d}" for i in range(n)])
    city = rng.choice(CITIES, n)
    t.insert(pa.table({"id": ids, "city": city, "fare": rng.uniform(0, 100, n), "v": rng.integers(0, 10, n),
                       "ts": np.zeros(n, np.int64)}))
    up = rng.choice(n, n // 4, replace=False)
    t.upsert(pa.table({"id": ids[up], "city": city[up], "fare": np.full(len(up), 500.0),
                       "v": np.full(len(up), 20, np.int64), "ts": np.ones(len(up), np.int64)}))
    t.delete(pa.table({"id": ids[::7], "city": city[::7]}))
    return t


def _rows(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in COLS) for r in rows)


def _want(t: lsm_lab.Table, flt: Any = None) -> list[tuple[Any, ...]]:
    got = t.read(filter=flt)
    return sorted(zip(*[got.column(c).to_pylist() for c in COLS]))


@pytest.fixture(scope="module")
def lsm_spark(spark: Any) -> Any:
    register(spark)
    return spark


@pytest.mark.parametrize(("layout", "table_type"), [("lsm_tree", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE")])
def test_reads_equal_read_and_prune_slices(lsm_spark: Any, tmp_table: Callable[..., lsm_lab.Table], layout: str,
                                           table_type: str) -> None:
    t = _table(tmp_table, layout, table_type)
    df = lsm_spark.read.format("lsm_lab").load(str(t.path))
    assert _rows(df.collect()) == _want(t)
    assert df.rdd.getNumPartitions() == len(t.latest_slices())  # one input partition per file slice
    key = "k00043"
    city = t.lookup(key).column("city")[0].as_py()
    cases = [
        (f"city = '{city}' AND id = '{key}'", [("city", "=", city), ("id", "=", key)]),
        ("v >= 5 AND city <> 'delhi'", [("v", ">=", 5), ("city", "!=", "delhi")]),
        ("fare > 400", [("fare", ">", 400.0)]),                                   # float: Spark filters
        ("city IN ('pune', 'chennai') OR v = 20", [[("city", "in", ["pune", "chennai"])], [("v", "=", 20)]]),
    ]
    for where, flt in cases:
        assert _rows(df.where(where).collect()) == _want(t, flt), where
    one = df.where(f"city = '{city}' AND id = '{key}'")
    # the partition filter leaves one partition's slices, the key filter (a bucket on lsm_tree) fewer still
    in_partition = [fs for fs in t.latest_slices() if fs.partition == f"city={city}"]
    assert one.rdd.getNumPartitions() <= len(in_partition) < len(t.latest_slices())
    # accepted filters need no Spark Filter on them above the scan
    plan = one._jdf.queryExecution().executedPlan().toString()
    assert "= k00043" not in plan and f"= {city}" not in plan, plan
    sql = lsm_spark.sql  # the same through SQL, on a temporary view
    sql(f"CREATE OR REPLACE TEMPORARY VIEW trips_{layout} USING lsm_lab OPTIONS (path '{t.path}')")
    got = sql(f"SELECT {', '.join(COLS)} FROM trips_{layout} WHERE city = '{city}' AND id = '{key}'")
    assert _rows(got.collect()) == _want(t, [("city", "=", city), ("id", "=", key)])
    assert got.rdd.getNumPartitions() == one.rdd.getNumPartitions()


def test_the_reader_opens_only_the_files_of_the_slices_it_keeps(tmp_table: Callable[..., lsm_lab.Table],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader Spark runs, run here (no JVM): pushFilters keeps the partition and key filters, partitions()
    keeps the slices that can hold the key, and reading them opens only those slices' files."""
    t = _table(tmp_table)
    source = LsmLabDataSource({"path": str(t.path)})
    opened: list[str] = []
    real = parquet_read.CheckedParquetFile.__init__

    def spy(self: Any, src: Any, **options: Any) -> None:
        opened.append(Path(str(src)).name)
        real(self, src, **options)

    monkeypatch.setattr(parquet_read.CheckedParquetFile, "__init__", spy)

    def run(filters: list[Any]) -> tuple[list[Any], set[str], list[Any]]:
        opened.clear()
        reader = source.reader(source.schema())
        left = list(reader.pushFilters(filters))
        parts = reader.partitions()
        rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
        return left, set(opened), rows

    _, all_files, everything = run([])
    key = "k00043"
    city = t.lookup(key).column("city")[0].as_py()
    spark_filters = [EqualTo(("city",), city), EqualTo(("id",), key), GreaterThan(("fare",), -1.0)]
    left, needed, rows = run(spark_filters)
    assert left == [spark_filters[2]]  # the float comparison stays with Spark
    assert [r["id"] for r in rows] == [key]
    in_partition = {f.path.name for fs in t.latest_slices() if fs.partition == f"city={city}"
                    for f in ((fs.base_file,) if fs.base_file else ()) + fs.log_files}
    print(f"spark reader: {len(needed)} of {len(all_files)} data files opened ({len(everything)} rows)")
    assert needed and needed <= in_partition and len(needed) < len(all_files)


def test_filter_translation() -> None:
    schema = pa.schema([("city", pa.string()), ("v", pa.int32()), ("fare", pa.float64()), ("ok", pa.bool_())])
    assert filter_tuple(EqualTo(("city",), "pune"), schema) == ("city", "=", "pune")
    assert filter_tuple(Not(EqualTo(("v",), 3)), schema) == ("v", "!=", 3)
    assert filter_tuple(LessThan(("v",), 3), schema) == ("v", "<", 3)
    assert filter_tuple(In(("city",), ("a", "b")), schema) == ("city", "in", ["a", "b"])
    assert filter_tuple(EqualTo(("ok",), True), schema) == ("ok", "=", True)
    for kept_by_spark in (GreaterThan(("fare",), 1.0), IsNull(("v",)), Not(In(("v",), (1,))), In(("v",), (1, None)),
                          EqualTo(("v",), "3"), EqualTo(("nope",), 1), EqualTo(("a", "b"), 1)):
        assert filter_tuple(kept_by_spark, schema) is None, kept_by_spark


def test_a_log_that_moves_a_row_out_of_the_filter_hides_its_base_version(
        lsm_spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """MOR: base v = 10 matches `v >= 5`; a log sets v = 1.  The pushed filter (no Spark Filter on v) is applied
    after the merge, in `format("lsm_lab")` and in `read_table(filter=)`; checked against a dict model."""
    t = tmp_table(ordering_field="ts", num_buckets=1)
    model = {f"k{i}": 10 for i in range(20)}
    t.insert(pa.table({"id": list(model), "v": list(model.values()), "ts": [0] * 20}))
    moved = {"k3": 1, "k7": 1, "k11": 6}
    t.upsert(pa.table({"id": list(moved), "v": list(moved.values()), "ts": [1] * 3}))
    model.update(moved)
    assert all(fs.log_files for fs in t.latest_slices())
    want = sorted((k, v) for k, v in model.items() if v >= 5)
    df = lsm_spark.read.format("lsm_lab").load(str(t.path)).where("v >= 5")
    assert sorted((r["id"], r["v"]) for r in df.collect()) == want
    rt = read_table(t.path, lsm_spark, filter=[("v", ">=", 5)], columns=["id", "v"])
    assert sorted((r["id"], r["v"]) for r in rt.collect()) == want
    plan = rt._jdf.queryExecution().executedPlan().toString()
    assert "Filter" not in plan, plan  # read_table(filter=) needs no Filter above MapInArrow


def test_read_table_filter_prunes_slices(lsm_spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = _table(tmp_table)
    flt = [("city", "=", "pune"), ("v", ">=", 5)]
    df = read_table(t.path, lsm_spark, filter=flt)
    assert _rows(df.collect()) == _want(t, flt)
    assert df.rdd.getNumPartitions() == len([fs for fs in t.latest_slices() if fs.partition == "city=pune"])


def test_writes_commit_once_and_an_aborted_job_commits_nothing(lsm_spark: Any,
                                                               tmp_table: Callable[..., lsm_lab.Table]) -> None:
    t = _table(tmp_table, n=300)
    before = len(t.completed_writes())
    rows = [(f"k{i:05d}", "pune", 1000.0 + i, 99, 5) for i in range(0, 40, 3)] + [("new1", "delhi", 1.0, 1, 5)]
    frame = lsm_spark.createDataFrame(rows, "id string, city string, fare double, v long, ts long").repartition(3)
    expected = t.read()
    local = lsm_lab.create_table(Path(str(t.path)).parent / "model", name="t", record_key="id", partition_by="city",
                                 ordering_field="ts", num_buckets=2)
    local.insert(expected.select(["id", "city", "fare", "v", "ts"]))
    local.upsert(pa.table({"id": [r[0] for r in rows], "city": [r[1] for r in rows], "fare": [r[2] for r in rows],
                           "v": [r[3] for r in rows], "ts": [r[4] for r in rows]}))
    frame.write.format("lsm_lab").option("operation", "upsert").mode("append").save(str(t.path))
    assert len(t.completed_writes()) == before + 1  # three write tasks, one commit
    assert _want(t) == _want(local)
    assert not (Path(str(t.path)) / ".hoodie" / STAGING).exists()

    # a task fails on every attempt: abort() drops what the others staged; the table reads its last commit
    from pyspark.sql import functions as F

    snapshot = _want(t)
    boom = frame.withColumn("v", F.when(F.col("id") == "new1", F.raise_error("injected")).otherwise(F.col("v")))
    with pytest.raises(Exception, match="injected"):
        boom.write.format("lsm_lab").option("operation", "upsert").mode("append").save(str(t.path))
    assert len(t.completed_writes()) == before + 1 and _want(t) == snapshot
    assert not (Path(str(t.path)) / ".hoodie" / STAGING).exists()

    # SQL: INSERT INTO a temporary view (the meta columns are left out), then a filtered SELECT
    lsm_spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW w USING lsm_lab OPTIONS (path '{t.path}')")
    lsm_spark.sql("INSERT INTO w (id, city, fare, v, ts) SELECT 'sql1' AS id, 'pune' AS city, 2.5 AS fare, "
                  "7L AS v, 9L AS ts")
    assert [tuple(r) for r in lsm_spark.sql("SELECT id, v FROM w WHERE id = 'sql1'").collect()] == [("sql1", 7)]
    assert len(t.completed_writes()) == before + 2

    # mode("overwrite"): the rows replace the table (insert_overwrite_table, one replacecommit), as Hudi's
    # datasource leaves it; the old rows stay readable by time travel
    kept = t.read()
    frame.write.format("lsm_lab").mode("overwrite").save(str(t.path))
    t = lsm_lab.open_table(t.path)
    assert len(t.completed_writes()) == before + 3
    last = t.completed_writes()[-1]
    assert last.action == "replacecommit" and t.instant_metadata(last)["operationType"] == "INSERT_OVERWRITE_TABLE"
    assert _rows(t.read().to_pylist()) == _rows(frame.collect())
    assert _rows(t.read(as_of=t.completed_writes()[-2]).to_pylist()) == _rows(kept.to_pylist())
    # option operation insert_overwrite with mode("append"): only the partitions the rows go to are replaced
    frame.where("city = 'delhi'").write.format("lsm_lab").option("operation", "insert_overwrite") \
        .mode("append").save(str(t.path))
    assert _rows(t.read().to_pylist()) == _rows(frame.collect())
    with pytest.raises(Exception, match="append"):
        frame.write.format("lsm_lab").option("operation", "delete").mode("overwrite").save(str(t.path))
    assert not (Path(str(t.path)) / ".hoodie" / STAGING).exists()


def _data_files(t: lsm_lab.Table) -> list[Path]:
    return sorted(p for p in Path(str(t.path)).rglob("*.parquet") if ".hoodie" not in p.parts)


def _unread(files: list[Path]) -> None:
    """Access time back to the modification time: with `relatime` (and `strictatime`) the next read of
    the file, by any process, moves it forward."""
    for p in files:
        st = p.stat()
        os.utime(p, ns=(st.st_mtime_ns, st.st_mtime_ns))


def _read_since(files: list[Path]) -> set[str]:
    return {p.name for p in files if p.stat().st_atime_ns > p.stat().st_mtime_ns}


def test_sql_with_a_partition_and_a_key_filter_opens_only_the_files_it_needs(
        lsm_spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """The issue's figure for Spark SQL, counted across processes (driver, planning and task workers): the
    files whose access time moved.  A full scan moves every data file's; the filtered query only files of
    the key's partition, fewer than a full scan."""
    t = _table(tmp_table)
    files = _data_files(t)
    key = "k00043"
    city = t.lookup(key).column("city")[0].as_py()
    lsm_spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW opened USING lsm_lab OPTIONS (path '{t.path}')")
    _unread(files)
    probe = files[0]
    probe.read_bytes()
    if probe.stat().st_atime_ns <= probe.stat().st_mtime_ns:
        pytest.skip("this file system does not record access times (noatime)")
    _unread(files)
    assert lsm_spark.sql("SELECT count(*) FROM opened").collect()[0][0] == t.read().num_rows
    everything = _read_since(files)
    live = {f.path.name for fs in t.latest_slices() for f in ((fs.base_file,) if fs.base_file else ()) + fs.log_files}
    assert everything >= live - {p.name for p in files if p.stat().st_size == 0}
    _unread(files)
    rows = lsm_spark.sql(f"SELECT id FROM opened WHERE city = '{city}' AND id = '{key}'").collect()
    assert [r["id"] for r in rows] == [key]
    needed = _read_since(files)
    in_partition = {p.name for p in files if p.parent.name == f"city={city}"}
    print(f"spark sql: {len(needed)} of {len(everything)} data files opened")
    assert needed and needed <= in_partition and len(needed) < len(everything)


def test_options_time_travel_and_typed_errors(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """The source Spark runs, run here: as_of / as_of_completion / columns, and user mistakes as InputError."""
    t = tmp_table(ordering_field="ts")
    first = t.insert(pa.table({"id": ["a", "b"], "v": [1, 2], "ts": [0, 0]}))
    t.upsert(pa.table({"id": ["a"], "v": [9], "ts": [1]}))

    def rows(**options: str) -> list[tuple[Any, ...]]:
        source = LsmLabDataSource({"path": str(t.path), **options})
        reader = source.reader(source.schema())
        return sorted((r["id"], r["v"]) for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist())

    assert rows() == [("a", 9), ("b", 2)]
    assert rows(as_of=first.begin_time) == [("a", 1), ("b", 2)]
    assert rows(as_of_completion=str(first.completion_time)) == [("a", 1), ("b", 2)]
    assert [f.name for f in LsmLabDataSource({"path": str(t.path), "columns": "id,v"}).schema().fields] == ["id", "v"]
    for bad in ({}, {"path": str(t.path), "columns": "id,nope"}, {"path": str(t.path), "as_of": "1", "as_of_completion": "1"},
                {"path": str(t.path), "operation": "merge"}):
        with pytest.raises(lsm_lab.InputError):
            source = LsmLabDataSource(bad)
            source.schema() if "operation" not in bad else source.writer(source.schema(), False)
    with pytest.raises(lsm_lab.InputError, match="append"):
        LsmLabDataSource({"path": str(t.path), "operation": "delete"}).writer(None, True)
    assert LsmLabDataSource({"path": str(t.path)}).writer(None, True).opts.operation == "insert_overwrite_table"
    with pytest.raises(lsm_lab.InputError, match="LOCATION"):  # a catalog table whose schema carries no path
        LsmLabDataSource({}).reader(None)


def test_sql_catalog_tables(lsm_spark: Any, tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """CREATE TABLE ... USING lsm_lab LOCATION / OPTIONS (path): PySpark (4.3) hands the reader and writer of
    a catalog table no option, so the path travels in the schema the catalog keeps (datasource.py, "SQL
    tables"); SELECT with a pushed filter, INSERT INTO, INSERT OVERWRITE all reach the table."""
    t = tmp_table(ordering_field="ts", partition_by="city")
    t.insert(pa.table({"id": ["a", "b"], "city": ["pune", "delhi"], "v": [1, 2], "ts": [0, 0]}))
    lsm_spark.sql("DROP TABLE IF EXISTS cat_loc")
    lsm_spark.sql("DROP TABLE IF EXISTS cat_opt")
    lsm_spark.sql(f"CREATE TABLE cat_loc USING lsm_lab LOCATION '{t.path}'")
    lsm_spark.sql(f"CREATE TABLE cat_opt USING lsm_lab OPTIONS (path '{t.path}')")
    try:
        lsm_spark.sql("INSERT INTO cat_loc (id, city, v, ts) SELECT 'c', 'pune', 3L, 1L")
        assert sorted(tuple(r) for r in lsm_spark.sql("SELECT id, v FROM cat_opt").collect()) == \
            [("a", 1), ("b", 2), ("c", 3)]
        assert [tuple(r) for r in lsm_spark.sql("SELECT id FROM cat_loc WHERE city = 'delhi'").collect()] == [("b",)]
        lsm_spark.sql("INSERT OVERWRITE cat_opt SELECT NULL, NULL, NULL, NULL, NULL, 'z', 'pune', 9L, 2L")
        assert [tuple(r) for r in lsm_spark.sql("SELECT id, v FROM cat_loc").collect()] == [("z", 9)]
        assert t.completed_writes()[-1].action == "replacecommit"
        assert sorted(t.read().column("id").to_pylist()) == ["z"]
    finally:
        lsm_spark.sql("DROP TABLE IF EXISTS cat_loc")
        lsm_spark.sql("DROP TABLE IF EXISTS cat_opt")
    assert (Path(str(t.path)) / ".hoodie").is_dir()  # DROP TABLE of an external table leaves the data


def test_a_dead_jobs_staging_is_swept_but_never_a_live_ones(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    """services/staging.py: a job whose beat is older than lsm_lab.staging.max.age.s is dead; its folder goes
    at the next table write or Spark write job; a live job's (a fresh beat) stays, and so does the job's own."""
    import time

    from lsm_lab.services import staging

    t = tmp_table(ordering_field="ts")
    t.insert(pa.table({"id": ["a"], "v": [1], "ts": [0]}))
    root = t.path
    top = Path(str(root)) / ".hoodie" / STAGING
    for job in ("dead", "live", "old-no-beat"):
        staging.beat(root, job)
        (top / job / "part-0-0-x.arrow").write_bytes(b"rows")
    (top / "old-no-beat" / staging.BEAT).unlink()
    long_ago = time.time() - 2 * staging.DEFAULT_MAX_AGE
    os.utime(top / "old-no-beat" / "part-0-0-x.arrow", (long_ago, long_ago))
    (top / "dead" / staging.BEAT).write_text(str(int(long_ago * 1000)))
    t.upsert(pa.table({"id": ["b"], "v": [2], "ts": [0]}))  # the next writer cleans up after dead writers
    assert sorted(p.name for p in top.iterdir()) == ["live"]
    # a Spark job starting sweeps too, keeps its own, and commits the rows it staged
    (top / "live" / staging.BEAT).write_text(str(int(long_ago * 1000)))
    w = LsmLabDataSource({"path": str(root), "operation": "upsert"}).writer(None, False)
    assert sorted(p.name for p in top.iterdir()) == [w.job]
    staged = w.write(iter([pa.record_batch({"id": ["c"], "v": [3], "ts": [1]})]))
    w.commit([staged])
    assert not top.exists() and sorted(t.read().column("id").to_pylist()) == ["a", "b", "c"]
    # a job whose staged rows were swept away (it looked dead) commits nothing and says why
    w = LsmLabDataSource({"path": str(root), "operation": "upsert"}).writer(None, False)
    staged = w.write(iter([pa.record_batch({"id": ["d"], "v": [4], "ts": [1]})]))
    staging.remove(root, w.job)
    with pytest.raises(lsm_lab.InputError, match="staged are gone"):
        w.commit([staged])
    assert sorted(t.read().column("id").to_pylist()) == ["a", "b", "c"]


# --------------------------------------------------------------------------- CREATE TABLE with a column list
def _sql_rows(spark: Any, query: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.sql(query).collect())


def test_sql_create_table_with_columns_creates_the_table(lsm_spark: Any, tmp_path: Path) -> None:
    """CREATE TABLE t (columns) USING lsm_lab OPTIONS (path, primaryKey, preCombineField) PARTITIONED BY: the
    driver's catalog hook (spark/catalog.py) creates the table; INSERT INTO / SELECT / INSERT OVERWRITE (whole
    table, dynamic: the rows' partitions, static through the option `partition`) follow a dict model; a static
    PARTITION clause is Spark's refusal;
    a second CREATE TABLE on the path with other columns raises a SchemaError at its first use."""
    path = tmp_path / "trips"
    q = lsm_spark.sql
    for name in ("ct_trips", "ct_bad", "ct_same"):
        q(f"DROP TABLE IF EXISTS {name}")
    q(f"CREATE TABLE ct_trips (id STRING, city STRING, fare DOUBLE, ts BIGINT) USING lsm_lab "
      f"OPTIONS (path '{path}', primaryKey 'id', preCombineField 'ts') PARTITIONED BY (city)")
    try:
        t = lsm_lab.open_table(path)
        assert (t.config.record_key, t.config.partition_by, t.config.ordering_field) == (("id",), ("city",), "ts")
        assert t.schema is not None and t.schema.names == ["id", "city", "fare", "ts"]
        assert q("SELECT * FROM ct_trips").collect() == []
        # the catalog keeps the declared order (and no partition column: the Python table reports none)
        assert [r["col_name"] for r in q("DESCRIBE ct_trips").collect()][:4] == ["id", "city", "fare", "ts"]
        model: dict[str, tuple[str, float, int]] = {}

        def insert(rows: list[tuple[str, str, float, int]], how: str = "INSERT INTO ct_trips (id, city, fare, ts)",
                   ) -> None:
            values = ", ".join(f"('{i}', '{c}', {f}, {s})" for i, c, f, s in rows)
            q(f"{how} VALUES {values}")

        def check() -> None:
            assert _sql_rows(lsm_spark, "SELECT id, city, fare, ts FROM ct_trips") == \
                sorted((k, *v) for k, v in model.items())

        first = [("a", "pune", 1.0, 0), ("b", "delhi", 2.0, 0), ("c", "pune", 3.0, 0)]
        insert(first, "INSERT INTO ct_trips")  # positional: the declared order
        model.update({i: (c, f, s) for i, c, f, s in first})
        check()
        later = [("a", "pune", 10.0, 1), ("d", "chennai", 4.0, 0), ("b", "delhi", 99.0, -1)]  # b: older ts loses
        insert(later)
        for i, c, f, s in later:
            if i not in model or s >= model[i][2]:
                model[i] = (c, f, s)
        check()
        assert _sql_rows(lsm_spark, "SELECT id FROM ct_trips WHERE city = 'pune'") == [("a",), ("c",)]
        # dynamic overwrite, per statement: only pune is replaced
        q("INSERT OVERWRITE ct_trips WITH ('overwrite_mode' = 'dynamic') SELECT 'e', 'pune', 5.0, 2L")
        model = {k: v for k, v in model.items() if v[0] != "pune"} | {"e": ("pune", 5.0, 2)}
        check()
        last = t.completed_writes()[-1]
        assert last.action == "replacecommit" and t.instant_metadata(last)["operationType"] == "INSERT_OVERWRITE"
        # a static overwrite through the option `partition`: an empty SELECT empties chennai
        q("INSERT OVERWRITE ct_trips WITH ('partition' = 'city=chennai') SELECT * FROM ct_trips WHERE false")
        model = {k: v for k, v in model.items() if v[0] != "chennai"}
        check()
        # a static PARTITION clause never reaches lsm_lab: the Python table reports no partition column
        with pytest.raises(Exception, match="NON_PARTITION_COLUMN"):
            q("INSERT OVERWRITE ct_trips PARTITION (city = 'pune') SELECT 'f', 6.0, 3L")
        check()
        # INSERT OVERWRITE (static, no PARTITION clause): the whole table
        q("INSERT OVERWRITE ct_trips SELECT 'g', 'delhi', 7.0, 3L")
        model = {"g": ("delhi", 7.0, 3)}
        check()
        assert t.instant_metadata(t.completed_writes()[-1])["operationType"] == "INSERT_OVERWRITE_TABLE"

        # the same path with other columns: refused, with a typed error at the first use (a listener cannot fail
        # the CREATE statement); with the same columns: the table is attached, nothing created
        q(f"CREATE TABLE ct_bad (id STRING, fare STRING) USING lsm_lab LOCATION '{path}' "
          "TBLPROPERTIES (primaryKey 'id')")
        with pytest.raises(Exception, match="SchemaError") as bad:
            q("SELECT * FROM ct_bad").collect()
        assert "other columns" in str(bad.value) and "fare: declared string, the table has double" in str(bad.value)
        writes = len(t.completed_writes())
        q(f"CREATE TABLE ct_same (id STRING, city STRING, fare DOUBLE, ts BIGINT) USING lsm_lab "
          f"LOCATION '{path}' TBLPROPERTIES (primaryKey 'id') PARTITIONED BY (city)")
        assert _sql_rows(lsm_spark, "SELECT id, fare FROM ct_same") == [("g", 7.0)]
        assert len(t.completed_writes()) == writes
    finally:
        for name in ("ct_trips", "ct_bad", "ct_same"):
            q(f"DROP TABLE IF EXISTS {name}")
    assert lsm_lab.open_table(path).read().num_rows == 1  # DROP TABLE of a table at a path leaves the data


def test_sql_table_spec_and_its_typed_errors(tmp_path: Path) -> None:
    """spark/catalog.py without a JVM: Hudi's SQL option names, the table `CREATE TABLE` creates, and the
    mistakes it refuses (no key, a key that is no column, options that disagree, a path with other columns)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from lsm_lab.spark.catalog import SqlTable, ensure_table, lsm_options

    assert lsm_options({"primaryKey": "id", "preCombineField": "ts", "type": "cow", "Path": "/x"}) == \
        {"record_key": "id", "ordering_field": "ts", "table_type": "COPY_ON_WRITE", "path": "/x"}
    with pytest.raises(lsm_lab.InputError, match="disagree"):
        lsm_options({"primaryKey": "id", "record_key": "uuid"})
    cols = StructType([StructField("id", StringType()), StructField("city", StringType()),
                       StructField("v", LongType())])
    spec = SqlTable.of("t", cols, {"path": f"file:{tmp_path / 'a'}", "primaryKey": "id", "type": "mor"}, ["city"])
    assert spec.path == str(tmp_path / "a") and spec.partition_by == ("city",)
    ensure_table(spec)
    t = lsm_lab.open_table(tmp_path / "a")
    assert t.config.table_type == "MERGE_ON_READ" and t.schema is not None and t.schema.names == ["id", "city", "v"]
    ensure_table(spec)  # the same columns again: accepted
    with pytest.raises(lsm_lab.SchemaError, match="v: declared string, the table has bigint"):
        ensure_table(SqlTable.of("t", StructType([StructField("id", StringType()), StructField("city", StringType()),
                                                  StructField("v", StringType())]),
                                 {"path": str(tmp_path / "a"), "primaryKey": "id"}, ["city"]))
    with pytest.raises(lsm_lab.SchemaError, match="record key"):
        ensure_table(SqlTable.of("t", cols, {"path": str(tmp_path / "a"), "primaryKey": "v"}, ["city"]))
    with pytest.raises(lsm_lab.InputError, match="needs a record key"):
        ensure_table(SqlTable.of("t", cols, {"path": str(tmp_path / "b")}))
    with pytest.raises(lsm_lab.SchemaError, match="record key 'uuid' is not among the columns"):
        ensure_table(SqlTable.of("t", cols, {"path": str(tmp_path / "b"), "primaryKey": "uuid"}))
    with pytest.raises(lsm_lab.InputError, match="disagree"):
        SqlTable.of("t", cols, {"path": str(tmp_path / "b"), "primaryKey": "id", "partition_by": "v"}, ["city"])
    with pytest.raises(lsm_lab.InputError, match="no path"):
        SqlTable.of("t", cols, {"primaryKey": "id"})
    assert not (tmp_path / "b").exists()
    # what the catalog keeps: the path and options in the first column's metadata — or the refusal, which the
    # reader and writer raise with its own class
    from lsm_lab.spark.catalog import catalog_schema
    from lsm_lab.spark.datasource import SourceOptions

    kept = SourceOptions.of({}, catalog_schema(spec))
    assert (kept.path, kept.create["record_key"], kept.create["partition_by"]) == (str(tmp_path / "a"), "id", "city")
    for error in (lsm_lab.SchemaError("other columns"), lsm_lab.InputError("needs a record key")):
        with pytest.raises(type(error), match=str(error)):
            SourceOptions.of({}, catalog_schema(spec, error))
        with pytest.raises(type(error)):
            LsmLabDataSource({}).writer(catalog_schema(spec, error), False)
