"""`lsm-lab bench metadata` at a small size: the figures are consistent and the CLI writes them as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsm_lab.bench import metadata as bench
from lsm_lab.cli import app as cli


def test_classify() -> None:
    assert bench.classify("b/t/.hoodie/metadata/files/x.hfile", "b/t") == "mdt"
    assert bench.classify("b/t/.hoodie/timeline/1.commit", "b/t") == "timeline"
    assert bench.classify("b/t/part=1", "b/t") == "data"
    assert bench.classify("b/t", "b/t") == "data"  # a LIST of the table root lists the data


def test_bench_metadata_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.json"
    assert cli.main(["bench", "metadata", "--partitions", "3", "--groups", "4", "--commits", "2", "--repeats", "1",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    r = json.loads(out.read_text())["listing"]
    assert r["data_files"] == r["slices"] * 3 and r["file_groups"] == 12  # a base and two logs per group
    listing, mdt = r["listing"], r["metadata"]
    assert listing["by_part"]["data"]["LIST"] >= 1 and not listing["from_metadata"]
    assert mdt["by_part"]["data"] == {"LIST": 0, "GET": 0, "HEAD": 0} and mdt["from_metadata"]
    # a GET per MDT log (one per write: bulk insert + 2 upserts); a cold process also reads the MDT's
    # hoodie.properties and its base HFile (the initialisation's)
    cold = r["metadata cold"]
    assert mdt["mdt_logs"] == cold["mdt_logs"] == 3 and mdt["by_part"]["mdt"]["GET"] == 3
    assert cold["by_part"]["mdt"]["GET"] == 5 and cold["by_part"]["data"]["LIST"] == 0
    assert mdt["requests"]["LIST"] == mdt["by_part"]["timeline"]["LIST"] + mdt["by_part"]["mdt"]["LIST"]
    assert "metadata vs listing: 0 data LIST" in printed
