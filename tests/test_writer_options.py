"""What a Spark/Flink Hudi writer must be passed to write into an lsm_lab table (`interop.writer_options`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lsm_lab
from lsm_lab.cli.app import main
from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.interop.writer_options import hudi_writer_options


def test_bucket_tables_name_their_index_as_hoodie_properties_do(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key=["id", "ts"], partition_by="city",
                             ordering_field="ts", layout="lsm_tree", num_buckets=7, cdc=True)
    opts = hudi_writer_options(t.config)
    props = t.config.props
    for key in ("hoodie.index.type", "hoodie.bucket.index.num.buckets", "hoodie.index.bucket.engine",
                "hoodie.bucket.index.hash.field", "hoodie.meta.fields.mode", "hoodie.table.cdc.enabled"):
        assert opts[key] == props[key], key
    assert opts["hoodie.bucket.index.num.buckets"] == "7"
    assert opts["hoodie.datasource.write.recordkey.field"] == "id,ts"
    assert opts["hoodie.datasource.write.keygenerator.type"] == "COMPLEX"
    assert opts["hoodie.write.table.version"] == "10"
    assert opts["hoodie.datasource.write.precombine.field"] == "ts"
    assert opts["hoodie.write.record.merge.mode"] == "EVENT_TIME_ORDERING"


def test_default_layout_has_no_bucket_options(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="default", table_version=9)
    opts = hudi_writer_options(t.config)
    assert opts["hoodie.index.type"] == "SIMPLE" and "hoodie.bucket.index.num.buckets" not in opts
    assert "hoodie.datasource.write.partitionpath.field" not in opts  # not partitioned
    assert opts["hoodie.datasource.write.keygenerator.type"] == "NON_PARTITION"
    assert "hoodie.meta.fields.mode" not in opts  # version 9 has no such property


def test_crc32_bucket_tables_are_refused(tmp_path: Path) -> None:
    """Version 9 lsm_tree tables place keys by CRC-32: no Hudi writer can follow, so no options are offered."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="lsm_tree", table_version=9)
    with pytest.raises(UnsupportedFeatureError, match="upgrade it to version 10"):
        hudi_writer_options(t.config)


def test_cli_prints_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="lsm_tree", num_buckets=3)
    assert main(["show", "hudi-options", str(t.path)]) == 0
    assert "hoodie.bucket.index.num.buckets=3" in capsys.readouterr().out.splitlines()
    assert main(["show", "hudi-options", str(t.path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == hudi_writer_options(t.config)
