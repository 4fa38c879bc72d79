"""`lsm-lab bench scale` at tiny sizes: the report's shape, the operations' row counts, and exponents fitted
from the measured points (no timed assertions)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from lsm_lab.bench import scale
from lsm_lab.cli import app
from lsm_lab.errors import InputError


def test_fit_exponent_recovers_known_slopes() -> None:
    ns = [1e3, 4e3, 16e3]
    assert scale.fit_exponent(ns, [3 * n for n in ns]) == pytest.approx(1.0)
    assert scale.fit_exponent(ns, [0.5 * n ** 1.5 for n in ns]) == pytest.approx(1.5)
    assert scale.fit_exponent(ns, [7.0, 7.0, 7.0]) == pytest.approx(0.0)
    assert scale.fit_exponent([1e3], [2.0]) is None  # one size: no slope
    assert scale.fit_exponent([1e3, 1e3], [2.0, 3.0]) is None


@pytest.mark.slow  # eight operations, each a whole process
def test_bench_scale_reports_every_operation_at_every_size(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scale.json"
    code = app.main(["bench", "scale", "--rows", "300", "1200", "--dir", str(tmp_path), "--json", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["rows"] == [300, 1200] and result["repeats"] == 1
    points = result["points"]
    assert [(p["rows"], p["op"]) for p in points] == [(n, op) for n in (300, 1200) for op in scale.OPS]
    for p in points:
        assert p["seconds"] > 0 and p["peak_rss_bytes"] > 2**20
        # the child's own CPU and page faults around the call: some CPU, at most what two threads per core give
        assert 0 < p["user_seconds"] + p["sys_seconds"] <= 2 * (os.cpu_count() or 1) * p["seconds"] + 0.05
        assert p["page_faults"] >= 1  # the call's result is fresh memory
        if p["op"] in ("bulk_insert", "read"):
            assert p["out_rows"] == p["rows"]  # the bulk insert wrote N rows; the snapshot read returned N
        elif p["op"] == "upsert":
            assert p["out_rows"] == p["rows"] // 10
        else:
            assert p["out_rows"] >= 1  # file slices the full compaction rewrote
    for op in scale.OPS:  # the exponent is the slope through the two measured points
        small, big = (next(p for p in points if p["op"] == op and p["rows"] == n) for n in (300, 1200))
        want = math.log(big["seconds"] / small["seconds"]) / math.log(4)
        assert result["exponents"][op]["time"] == pytest.approx(want, abs=1e-3)
        want_rss = math.log(big["peak_rss_bytes"] / small["peak_rss_bytes"]) / math.log(4)
        assert result["exponents"][op]["rss"] == pytest.approx(want_rss, abs=1e-3)
        want_user = math.log(big["user_seconds"] / small["user_seconds"]) / math.log(4)
        assert result["exponents"][op]["user"] == pytest.approx(want_user, abs=1e-3)
        assert f"{op:<12} time e = {result['exponents'][op]['time']:.2f}" in text
        step, = result["exponents"][op]["steps"]  # two sizes: one step, the same slope
        assert (step["from"], step["to"], step["time"]) == (300, 1200, result["exponents"][op]["time"])
    assert not list(tmp_path.glob("lsm_lab_bench_scale_*"))  # the work folder is removed


def test_bench_scale_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    result = {"rows": [100, 400], "points": [{"rows": n, "op": op, "seconds": n / 100, "peak_rss_bytes": 2**27 + n}
                                             for n in (100, 400) for op in scale.OPS],
              "exponents": {op: {"time": 1.0, "rss": 0.0} for op in scale.OPS}}
    scale.plot(result, tmp_path / "scale.png")
    assert (tmp_path / "scale.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_scale_refuses_bad_sizes() -> None:
    with pytest.raises(InputError, match="--rows"):
        scale.run(rows=[5])
    with pytest.raises(InputError, match="--repeats"):
        scale.run(rows=[100], repeats=0)
