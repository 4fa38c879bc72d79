"""`lsm-lab bench cdc` at a tiny size: its figures are consistent with each other and with the workload
(no timed assertions: only bytes, counts and the order the logging modes' content implies)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lsm_lab.bench import cdc as bench
from lsm_lab.cli import app as cli
from lsm_lab.errors import InputError


def expected_changes(rows: int, seed: int) -> dict[str, int]:
    """Changes per op of the workload, counted from its batches: every insert key, every distinct
    updated key, every distinct deleted key (all exist and none was deleted before)."""
    steps = {name: batch for name, _, batch in bench.workload(rows, seed)}

    def distinct(t: pa.Table) -> int:
        return len(pa.compute.unique(t.column("uuid")))

    return {"i": steps["insert"].num_rows + steps["upsert (new keys)"].num_rows,
            "u": distinct(steps["upsert (updates)"]), "d": distinct(steps["delete"])}


def test_bench_cdc_figures_are_consistent() -> None:
    lines: list[str] = []
    result = bench.run(rows=400, repeats=2, seed=3, log=lines.append)
    t = result["tables"]
    assert set(t) == set(bench.TABLES) and any("round 2" in line for line in lines)
    assert result["agree"], "the modes and inference disagree on (op, key) of the changes"
    want = expected_changes(400, 3)
    for name in bench.TABLES:
        assert t[name]["by_op"] == want, name
        assert t[name]["changes"] == sum(want.values())
        assert t[name]["data_bytes"] > t[name]["cdc_bytes"] >= 0
        assert set(t[name]["write_seconds"]) == set(bench.WRITES)
    assert t[bench.BASELINE]["cdc_bytes"] == 0                          # no CDC logs without cdc=True
    assert t[bench.BASELINE]["inferred_rows"] == sum(want.values())     # so every change is inferred
    assert all(t[m]["inferred_rows"] == 0 for m in bench.MODES)         # and none with them
    sizes = [t[m]["cdc_bytes"] for m in bench.MODES]
    assert 0 < sizes[0] < sizes[1] < sizes[2], dict(zip(bench.MODES, sizes, strict=True))
    text = bench.report(result)
    assert all(name in text for name in bench.TABLES) and "WARNING" not in text


def test_bench_cdc_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cdc.json"
    assert cli.main(["bench", "cdc", "--rows", "150", "--repeats", "1", "--json", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert saved["rows"] == 150 and saved["tables"]["DATA_BEFORE_AFTER"]["cdc_bytes"] > 0
    assert "OP_KEY_ONLY" in capsys.readouterr().out


def test_bench_cdc_rejects_bad_sizes() -> None:
    with pytest.raises(InputError, match="rows"):
        bench.run(rows=0)
