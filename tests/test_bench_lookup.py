"""Smoke test of the lookup benchmark at a tiny size: it builds its tables, agrees across layouts,
and writes the records the README quotes (layout, seconds, bytes_read, files_opened)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lsm_lab
from lsm_lab.bench.lookup import BenchParams, build_tables, cumulative_tradeoff, run_lookups
from lsm_lab.cli import app as cli


def test_lookup_benchmark_smoke(tmp_path: Path) -> None:
    saved = build_tables(tmp_path, BenchParams(rows=3000, logs=2, buckets=2), log=lambda *_: None)
    records = run_lookups(tmp_path, saved, lookups=4, log=lambda *_: None)
    measured = [r for r in records if r["layout"] != "ratio" and r["mode"] != "table_lookup"]
    assert {r["layout"] for r in measured} == {"lsm_tree", "default", "default_unsorted"}
    for r in measured:
        assert {"layout", "seconds", "bytes_read", "files_opened"} <= set(r)
        assert r["seconds"] > 0
    by = {(r["layout"], r["mode"], r["cache"], r["keys"]): r for r in measured}
    assert by[("lsm_tree", "lookup", "warm", "present")]["found"] == 4
    assert by[("lsm_tree", "lookup", "warm", "absent")]["found"] == 0
    assert by[("lsm_tree", "lookup", "warm", "absent")]["files_opened"] == 0  # blooms
    assert (by[("lsm_tree", "lookup", "warm", "present")]["bytes_read"]
            < by[("default_unsorted", "no_bloom", "warm", "present")]["bytes_read"])
    assert any(r["layout"] == "ratio" for r in records)
    # cold: the key index skips footers; without it every candidate footer is read; index_load counts the
    # sidecars' bytes; the shuffled copy has an index of its own
    for layout in ("lsm_tree", "default_unsorted"):
        cold, plain = by[(layout, "lookup", "cold", "present")], by[(layout, "no_index", "cold", "present")]
        assert cold["found"] == plain["found"] == by[(layout, "index_load", "cold", "present")]["found"] == 4
        assert cold["footers_skipped"] > 0 and plain["footers_skipped"] == 0
        assert cold["footers_read"] < plain["footers_read"]
        assert by[(layout, "index_load", "cold", "present")]["bytes_read"] > cold["bytes_read"]
    assert {r["mode"] for r in records if r["layout"] == "ratio"} >= {"index_load: lsm_tree/default_unsorted",
                                                                     "no_index: lsm_tree/default_unsorted"}
    # a second run reuses the tables
    assert build_tables(tmp_path, BenchParams(rows=3000, logs=2, buckets=2), log=lambda *_: None) == saved


def test_cumulative_tradeoff_smoke() -> None:
    records = cumulative_tradeoff(base_keys=5000, log_keys=500, logs=(1, 8), queries=2000)
    blooms = {r["logs"]: r for r in records if "per_file_probes" in r}
    assert blooms[8]["per_file_probes"] == 9
    assert blooms[8]["cumulative_reads_present"] == 9  # a per-slice "maybe" does not say which file
    assert blooms[8]["cumulative_keys_hashed_per_commit"] > 10 * blooms[8]["per_file_keys_hashed_per_commit"]
    assert blooms[8]["carried_fpp"] > blooms[1]["carried_fpp"]  # OR-ed forward, it fills up
    ranges = [r for r in records if r.get("range_keys") == "time_ordered"]
    assert all(r["per_file_fraction_of_files_skipped"] > r["cumulative_fraction_of_files_skipped"] for r in ranges)


def test_bench_lookup_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert cli.main(["bench", "lookup", "--rows", "2000", "--lookups", "2", "--logs", "1",
                     "--dir", str(tmp_path / "t"), "--json", str(out)]) == 0
    records = json.loads(out.read_text())
    assert any(r["layout"] == "lsm_tree" for r in records)
    assert "ratio" in capsys.readouterr().out


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_shuffled_copy_reads_the_same_rows_with_positions_in_the_logs(tmp_path: Path, layout: str) -> None:
    """The copy's logs carry no record positions (they would point at moved base rows), so reads stay right."""
    from lsm_lab.bench.lookup import shuffled_copy
    from lsm_lab.format import log_v2 as v2
    from lsm_lab.format import positions

    t = lsm_lab.create_table(tmp_path / "src", name="t", record_key="id", num_buckets=1, layout=layout,
                             table_type="MERGE_ON_READ")   # no ordering field: commit time, merged by position
    t.insert([{"id": f"k{j:04d}", "v": j} for j in range(1000)])
    t.upsert([{"id": f"k{j:04d}", "v": -j} for j in range(0, 900, 3)])
    t.delete([f"k{j:04d}" for j in range(0, 1000, 50)])
    logs = [f.path for s in t.latest_slices() for f in s.log_files]
    assert any(positions.RECORD_POSITIONS in v2.read_log_header(p) for p in logs)  # the case under test
    shuffled_copy(str(tmp_path / "src"), str(tmp_path / "dst"), seed=3)
    copy = lsm_lab.open_table(tmp_path / "dst")
    for s in copy.latest_slices():
        for f in s.log_files:
            assert positions.RECORD_POSITIONS not in v2.read_log_header(f.path)
    want = t.read(columns=["id", "v"]).sort_by("id")
    got = copy.read(columns=["id", "v"]).sort_by("id")
    assert got.num_rows == 980 and got.equals(want)
