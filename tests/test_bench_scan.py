"""`lsm-lab bench scan` at a tiny size: every contender (hudi-rs's read_stream included) returns every row."""

from __future__ import annotations

import pytest

from lsm_lab.bench import scan as scan_bench


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
