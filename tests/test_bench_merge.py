"""A tiny smoke run of the merge benchmark: every contender in its own process, row counts checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.bench.merge import CONTENDERS, format_table, main, make_runs, run_bench, summarize_targets


def test_make_runs_writes_sorted_overlapping_runs(tmp_path: Path) -> None:
    ds = make_runs(tmp_path, 4000, 4, 0.3)
    assert len(ds.paths) == 4 and ds.distinct_keys == 2800 and 3900 <= ds.rows <= 4000
    seen: set[str] = set()
    total = 0
    for p in ds.paths:
        keys = pq.read_table(p).column("key").to_pylist()
        assert keys == sorted(set(keys)) and all(len(k) == 21 for k in keys)
        seen.update(keys)
        total += len(keys)
    assert len(seen) == ds.distinct_keys and total == ds.rows
    assert make_runs(tmp_path, 4000, 4, 0.3) == ds  # cached


def test_every_contender_runs_and_agrees_on_the_row_count(tmp_path: Path) -> None:
    records = run_bench(3000, [3], 0.3, per_record_cap=2000, data_dir=str(tmp_path))
    assert [r["contender"] for r in records] == list(CONTENDERS)
    assert all("error" not in r and r["rows_ok"] for r in records), records
    by = {r["contender"]: r for r in records}
    assert by["io_floor"]["vs_io_floor"] == 1.0
    assert "sample" in by["heapq"]["note"] and by["heapq"]["rows_in"] < by["sorted"]["rows_in"]
    assert by["loser_tree"]["comparisons_per_record"] <= by["loser_tree"]["ceil_log2_k"] == 2
    assert by["heapq"]["comparisons_per_record"] > 0
    table = format_table(records)
    assert "sorted" in table and "duckdb" in table
    assert any("sorted / io_floor" in line for line in summarize_targets(records))


def test_script_entry_point_writes_json(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    code = main(["--rows", "1500", "--k", "2", "--contenders", "io_floor", "sorted", "--data-dir", str(tmp_path),
                 "--json", str(out)])
    assert code == 0
    records = json.loads(out.read_text())
    assert [r["contender"] for r in records] == ["io_floor", "sorted"]
    assert "vs floor" in capsys.readouterr().out


def test_merged_output_is_sorted(tmp_path: Path) -> None:
    from lsm_lab.merge.files import merge_parquet_files

    ds = make_runs(tmp_path, 3000, 5, 0.5)
    out = tmp_path / "m.parquet"
    merge_parquet_files(out, ds.paths, key="key", ordering="ts", batch_size=128)
    keys = pq.read_table(out).column("key")
    assert len(keys) == ds.distinct_keys
    assert pc.all(pc.less(keys.slice(0, len(keys) - 1), keys.slice(1))).as_py()


def test_contenders_write_identical_rows(tmp_path: Path) -> None:
    """Not only the counts: DuckDB, pyarrow and every engine keep the same row for every key."""
    from lsm_lab.bench.merge import RUNNERS

    ds = make_runs(tmp_path, 3000, 4, 0.4)
    tables = {}
    for name in ("duckdb", "pyarrow", "sorted", "hash", "loser_tree", "heapq"):
        out = tmp_path / f"{name}.parquet"
        RUNNERS[name](ds.paths, str(out))
        tables[name] = pq.read_table(out).sort_by("key").to_pydict()  # DuckDB marks columns NOT NULL
    reference = tables.pop("duckdb")
    assert len(reference["key"]) == ds.distinct_keys
    for name, table in tables.items():
        assert table == reference, name


def test_bench_merge_subcommand(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from lsm_lab.cli.app import main as command_main

    code = command_main(["bench", "merge", "--rows", "1200", "--k", "2", "--contenders", "io_floor",
                         "--data-dir", str(tmp_path)])
    assert code == 0 and "io_floor" in capsys.readouterr().out


def test_repeats_alternate_the_contenders_and_keep_medians(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Load from other processes must fall on every contender alike: a, b, a, b, not a, a, b, b."""
    import lsm_lab.bench.merge as bench

    calls: list[str] = []
    seconds = {"io_floor": iter([3.0, 1.0, 2.0]), "sorted": iter([9.0, 1.5, 1.0])}

    def fake(contender: str, ds: bench.Dataset, out_dir: Path, **_: object) -> dict[str, Any]:
        calls.append(contender)
        rows = ds.rows if contender == "io_floor" else ds.distinct_keys
        return {"contender": contender, "seconds": next(seconds[contender]), "cpu_seconds": 1.0,
                "peak_rss_bytes": 1 << 20, "rows_out": rows}

    monkeypatch.setattr(bench, "run_contender", fake)
    records = bench.run_bench(2000, [2], 0.3, contenders=["io_floor", "sorted"], repeat=3, data_dir=str(tmp_path))
    assert calls == ["io_floor", "sorted"] * 3
    by = {r["contender"]: r for r in records}
    assert by["io_floor"]["seconds"] == 2.0 and by["sorted"]["seconds"] == 1.5  # medians
    assert by["sorted"]["vs_io_floor"] == 0.75
    assert any("CPU seconds 1.00x" in line for line in bench.summarize_targets(records))
