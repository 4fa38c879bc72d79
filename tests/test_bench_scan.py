"""`lsm-lab bench scan` at a tiny size (every contender, hudi-rs's read_stream included, returns every row),
and what its first batch must not wait for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import lsm_lab
from lsm_lab.bench import scan as scan_bench
from lsm_lab.lab.datagen import TripsGenerator


@pytest.mark.slow
def test_bench_scan_runs_every_contender_on_the_same_rows() -> None:
    pytest.importorskip("hudi")
    result = scan_bench.run(rows=3_000, repeats=1, batch_size=1_000, log=lambda _: None)
    c = result["contenders"]
    assert set(c) == {*scan_bench.CONTENDERS, *scan_bench.V8_CONTENDERS}
    # run() itself raises when the counts differ; the count is the table's, not a constant
    assert {c[n]["rows"] for n in c if n != "plan"} == {3_000}
    assert result["table_v8"]["slices_with_logs"] == result["table"]["slices_with_logs"] > 0
    for name in ("scan", "scan_v8", "hudi_rs_v8"):
        assert 0 < c[name]["first_batch_seconds"] <= c[name]["seconds"]
    text = scan_bench.report(result)
    assert "lsm_lab scan / hudi-rs read_stream" in text and "scan / read: peak RSS" in text


def test_a_streamed_lsm_tree_scan_does_not_import_pandas(tmp_path: Path) -> None:
    """pyarrow imports pandas the first time it converts a Python value (lsm_lab/arrowlit.py): a streamed
    scan of an lsm_tree MOR table builds its constant columns from buffers, so its first batch never waits
    for that import (a fresh process; the table itself is written by this one)."""
    gen = TripsGenerator(3)
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=2)
    t.insert(gen.inserts(2_000))
    t.upsert(gen.updates(300))
    rows = f"sum(b.num_rows for b in lsm_lab.open_table({str(tmp_path / 't')!r}).scan(batch_size=100).to_reader())"
    assert _rows_and_pandas(rows) == [str(t.read().num_rows), "False"]


def test_a_snapshot_read_of_a_default_mor_table_does_not_import_pandas(tmp_path: Path) -> None:
    """The same for `read()` of a default-layout MOR table with updates (merged by position) and deletes: a
    whole-process read (`python -c "...open_table(T).read()"`, bench startup's comparison with Paimon) does not
    pay pandas' import (~0.25 s) for a table it never turns into a frame."""
    t = _mor_table(tmp_path / "t", seed=4, inserts=3_000, updates=400, deletes=50)
    assert any(fs.log_files for fs in t.latest_slices())
    assert _rows_and_pandas(f"lsm_lab.open_table({str(tmp_path / 't')!r}).read().num_rows") == \
        [str(t.read().num_rows), "False"]


def test_a_snapshot_read_loads_no_write_service_nor_merge_engine(tmp_path: Path) -> None:
    """A whole-process `read()` of a default-layout MOR table with updates and deletes (its logs laid over the
    base in memory, by position) imports none of the write services (`lsm_lab.services`: commit, compaction,
    clustering, rollback, ...), not the writers (`filegroup.write`, `stream_write`, `compat`), none of the merge
    engines (`lsm_lab.merge.sorted`, `loser_tree`, `hashmerge`, `heap`) and no v1 log or HFile reader (the table
    has native logs and no metadata table): each is imported where a write, an engine's merge, a v1 log or a
    metadata table needs it."""
    t = _mor_table(tmp_path / "t", seed=5, inserts=2_000, updates=300, deletes=40)
    unused = ("lsm_lab.merge.sorted", "lsm_lab.merge.loser_tree", "lsm_lab.merge.hashmerge", "lsm_lab.merge.heap",
              "lsm_lab.filegroup.write", "lsm_lab.filegroup.stream_write", "lsm_lab.filegroup.compat",
              "lsm_lab.format.log_v1", "lsm_lab.format.hfile")
    code = (f"import sys, lsm_lab\nn = lsm_lab.open_table({str(tmp_path / 't')!r}).read().num_rows\n"
            f"print(n, sorted(m for m in sys.modules if m.startswith('lsm_lab.services') or m in {unused!r}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(lsm_lab.__file__).parents[1])})
    assert out.stdout.split(maxsplit=1) == [str(t.read().num_rows), "[]\n"]
    # the names the package re-exports still resolve, on first use
    from lsm_lab.merge import LoserTree, trace_merge
    assert LoserTree.__module__ == "lsm_lab.merge.loser_tree" and callable(trace_merge)


def _mor_table(path: Path, *, seed: int, inserts: int, updates: int, deletes: int) -> lsm_lab.Table:
    """A default-layout MOR trips table with updates and deletes in its logs (merged by position on read)."""
    gen = TripsGenerator(seed)
    t = lsm_lab.create_table(path, name="t", record_key="uuid", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ")
    rows = gen.inserts(inserts)
    t.insert(rows)
    t.upsert(gen.updates(updates))
    t.delete(rows.slice(0, deletes).select(["uuid", "city"]))
    return t


def _rows_and_pandas(rows: str) -> list[str]:
    """In a fresh process: the row count the expression `rows` gives, and whether pandas got imported."""
    code = f"import sys, lsm_lab\nn = {rows}\nprint(n, 'pandas' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(Path(lsm_lab.__file__).parents[1])})
    return out.stdout.split()

