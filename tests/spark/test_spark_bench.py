"""The Spark compaction benchmark: records, target summary, plot (tiny sizes; the real run is in the README)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from lsm_lab.bench import compaction as bench
from lsm_lab.spark.jobs import TaskClock

FIELDS = {"engine", "merge", "rows", "k", "seconds", "peak_rss_mib", "rows_per_s"}


def fake(merge: str, k: int, seconds: float, peak: float | None, delta: float | None) -> dict[str, Any]:
    return {"engine": "spark", "merge": merge, "rows": 1000, "k": k, "seconds": seconds, "peak_rss_mib": peak,
            "start_rss_mib": None if peak is None else 100.0, "peak_delta_mib": delta, "rows_out": 1000,
            "rows_ok": True, "rows_per_s": 1000 / seconds, "jvm_peak_mib": 900.0}


def test_summary_table_and_plot(tmp_path: Path) -> None:
    records = [fake("sorted", 1, 2.0, 150.0, 50.0), fake("hash", 1, 5.0, 400.0, 300.0), fake("window", 1, 9.0, None, None),
               fake("sorted", 4, 2.5, 160.0, 60.0), fake("hash", 4, 4.0, 300.0, 200.0)]
    lines = bench.summarize_targets(records)
    assert lines[0] == "k=1: time sorted/hash = 0.40 (target <= 0.5) OK"
    assert lines[1].startswith("k=1: peak RSS per task sorted/hash = 0.38 (target <= 0.5) OK")
    assert "k=1: time sorted/window = 0.22" in lines
    assert "window" in bench.format_table(records)
    png = bench.plot(records, tmp_path / "fig.png")
    assert png.stat().st_size > 1000


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux /proc files")
def test_task_clock_reports_each_tasks_own_peak_in_a_reused_worker() -> None:
    import numpy as np

    first = TaskClock(0)
    block = np.ones(64 * 2**20 // 8)  # 64 MiB, touched
    assert block.sum() > 0
    del block
    r1 = first.report(1)
    second = TaskClock(1)  # the same process: a reused worker's next task
    r2 = second.report(1)
    assert r1.peak_scope == r2.peak_scope == "task"
    assert r1.peak_rss_mib >= r1.start_rss_mib + 60  # the first task's 64 MiB
    assert r2.peak_rss_mib < r2.start_rss_mib + 30  # not carried into the second task's figure
    assert r1.cpu_seconds > 0 and r2.seconds >= 0


def test_targets_are_checked_on_medians_over_repeats() -> None:
    records = [fake("sorted", 1, 2.0, 150.0, 50.0), fake("hash", 1, 5.0, 200.0, 100.0),
               fake("sorted", 1, 9.0, 900.0, 50.0), fake("hash", 1, 3.0, 300.0, 200.0),
               fake("sorted", 1, 3.0, 140.0, 40.0), fake("hash", 1, 4.0, 250.0, 150.0)]
    by = bench.medians(records, 1)
    assert by["sorted"] == {"runs": 3, "seconds": 3.0, "peak_rss_mib": 150.0, "peak_delta_mib": 50.0}
    assert by["hash"]["seconds"] == 4.0 and by["hash"]["peak_rss_mib"] == 250.0
    lines = bench.summarize_targets(records)
    assert lines[0] == "k=1: time sorted/hash = 0.75 (target <= 0.5) MISSED (medians of 3 and 3 runs)"
    assert lines[1].startswith("k=1: peak RSS per task sorted/hash = 0.60 (target <= 0.5) MISSED")


@pytest.mark.spark
@pytest.mark.campaign  # (make campaign) about 40 s of Spark jobs; chapter 10 runs the same bench in make test
def test_tiny_run_gives_records(spark: Any, tmp_path: Path) -> None:
    records = bench.run_bench(3000, [1], contenders=["sorted", "window"], spark=spark, data_dir=tmp_path,
                              progress=False)
    assert [r["merge"] for r in records] == ["sorted", "window"]
    for r in records:
        assert set(r) >= FIELDS and "error" not in r, r
        assert r["rows_ok"] and r["log_rows"] > 0
    assert records[0]["peak_rss_mib"] > 0 and records[0]["tasks"] == bench.FILE_GROUPS
    assert records[1]["peak_rss_mib"] is None  # the window job runs no Python worker
    assert records[0]["digest"] == records[1]["digest"]  # the same rows, merged by lsm_lab and by Spark SQL


def test_tables_are_built_with_arrow_and_cached(tmp_path: Path) -> None:
    from lsm_lab.api import open_table

    path, log_rows, cached = bench.cached_table(tmp_path, 4_000, 3, 0.3, file_groups=2, seed=1)
    assert not cached and log_rows == 3 * 400
    table = open_table(path)
    slices = table.latest_slices()
    assert len(slices) == 2 and all(len(fs.log_files) == 3 for fs in slices)    # k logs per file group
    rows = table.read(columns=list(bench.USER_COLUMNS))
    assert rows.num_rows == 4_000 and rows.column("key").to_pylist() != []
    stamp = (path / "bench_table.json").stat().st_mtime_ns
    again, again_logs, cached = bench.cached_table(tmp_path, 4_000, 3, 0.3, file_groups=2, seed=1)
    assert cached and again == path and again_logs == log_rows and (path / "bench_table.json").stat().st_mtime_ns == stamp
    assert not list((tmp_path / "tables").glob(".*building"))
    assert bench.digest(rows) == bench.digest(rows.take(list(range(rows.num_rows))[::-1]))   # order does not matter
    assert bench.digest(rows) != bench.digest(rows.slice(1))


def test_a_task_forgets_the_key_facts_earlier_tasks_kept(tmp_path: Path) -> None:
    """A reused worker's next task does not carry the blooms of files earlier tasks wrote (the driver
    commits them from the footers; kept, they grew every later task's starting RSS)."""
    import pyarrow as pa

    from lsm_lab.format import parquet_write, written_facts

    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, pa.table({"_hoodie_record_key": [f"k{i:06d}" for i in range(50_000)]}))
    facts = written_facts.written_key_facts(path)
    assert facts is not None and len(facts[3] or b"") > 50_000  # kept for a commit in this process
    parquet_write.write_parquet(tmp_path / "g.parquet", pa.table({"_hoodie_record_key": ["a", "b"]}))
    TaskClock(0)  # the next task of a reused worker
    assert written_facts.written_key_facts(tmp_path / "g.parquet") is None
    assert written_facts._WRITTEN_BYTES[0] == 0
