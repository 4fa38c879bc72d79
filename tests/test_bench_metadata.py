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
    # a GET per log of the `files` partition since its last compaction (one per write: bulk insert + 2 upserts; lsm_lab
    # compacts `files` alone once it holds 2, so 1 is left); a cold process also reads the partition's base HFile,
    # not the MDT's hoodie.properties (derived from the data table's: mdt_listing.derived_config)
    cold = r["metadata cold"]
    assert mdt["mdt_logs"] == cold["mdt_logs"] == 1 and mdt["by_part"]["mdt"]["GET"] == 1
    assert cold["by_part"]["mdt"]["GET"] == 2 and cold["by_part"]["data"]["LIST"] == 0
    assert mdt["requests"]["LIST"] == mdt["by_part"]["timeline"]["LIST"] + mdt["by_part"]["mdt"]["LIST"]
    assert "metadata vs listing: 0 data LIST" in printed


def test_bench_metadata_index_sections_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "i.json"
    assert cli.main(["bench", "metadata", "--sections", "record_index,column_stats", "--keys", "3000", "--share",
                     "0.01", "--files", "12", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    r = json.loads(out.read_text())
    assert set(r) == {"record_index", "column_stats"}
    ri = r["record_index"]
    assert ri["keys"] == 3000 and ri["upsert_keys"] == 30
    assert not ri["simple"]["mdt_compacted_during_upsert"] and not ri["record_index"]["mdt_compacted_during_upsert"]
    lk = ri["record_index"]["lookup"]
    # every key asked is sought in its shard (30 keys over 10 shards of ~300 cells: fewer than 1/4 of the cells)
    assert lk["keys"] == 30 and lk["shards_merged"] == 0 and lk["values_decoded"] == 30
    assert lk["blocks_per_key"] <= 2 and ri["record_index"]["lookup_one_key"]["shards_sought"] == 1
    assert ri["upsert_ratio_simple_over_record_index"] > 0
    cs = r["column_stats"]
    assert cs["slices"] == 12 and cs["rows"] == 20  # one file's range of `value`
    assert cs["slices_opened_with_stats"] == 1 < cs["slices_opened_without"] == 12
    assert cs["files_read_with_stats"] <= cs["files_read_without"]
    assert "RECORD_INDEX" in printed and "with column stats" in printed


def test_bench_metadata_unknown_section() -> None:
    from lsm_lab.errors import InputError

    with pytest.raises(InputError, match="nope"):
        bench.run(sections=["nope"])
