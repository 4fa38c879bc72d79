"""The metadata table's `bloom_filters` partition, written (services/mdt_index.py, format/hudi_bloom.py): with
`hoodie.metadata.index.bloom.filter.enable=true` every committed base file carries upstream's footer filter and
the partition holds exactly one live record per committed base file — that very filter, holding every key of the
file — through inserts, upserts, deletes, compaction, clustering, clean, a failed write, rollback and restore,
MDT compactions included; hudi-rs still reads the table through its metadata table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from test_metadata_write import _hudi_rs_reads_through_the_mdt, _rows, _steps, model

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.format import hudi_bloom as hb
from lsm_lab.format import metadata_record as mr
from lsm_lab.format import naming
from lsm_lab.interop.hudi_tables import hudi_available
from lsm_lab.timeline.config import read_config, write_config

BLOOM_ON = {"hoodie.metadata.enable": "true", "hoodie.metadata.index.bloom.filter.enable": "true"}


def _base_files(path: Path) -> dict[tuple[str, str], Path]:
    out = {}
    for (partition, name) in model(path):
        parsed = naming.parse(name)
        if parsed is not None and parsed.kind == "base" and parsed.ext == "parquet" and parsed.content == "data":
            out[(partition, name)] = path / partition / name if partition else path / name
    return out


def check_blooms(path: Path, *, from_footer: bool = True, type_code: str = hb.DYNAMIC_V0) -> int:
    """One live record per committed base file, equal to the file's own filter, holding all its keys."""
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None and "bloom_filters" in m.partitions()
    files = _base_files(path)
    live = set(m.records("bloom_filters"))
    assert live == {mr.bloom_filter_key(p, n) for p, n in files}
    for (partition, name), file in files.items():
        bloom = m.bloom_filter(partition, name)
        assert bloom is not None, name
        rec = m.bloom_filter_record(partition, name)
        parsed = naming.parse(name)
        assert rec is not None and parsed is not None
        assert rec["type"] == type_code and rec["timestamp"] == parsed.instant
        keys = pq.read_table(file, columns=["_hoodie_record_key"]).column(0)
        assert bloom.might_contain(keys).all(), name
        footer = pq.read_metadata(file).metadata
        if from_footer:  # the record is the file's footer value, byte for byte (UTF-8 of the Base64 text)
            assert footer.get(hb.TYPE_CODE_KEY.encode()) == (b"DYNAMIC_V0" if type_code == hb.DYNAMIC_V0 else None)
            assert rec["bloom_filter"] == footer[hb.FOOTER_KEY.encode()]
        opts = hb.HudiBloomOptions.from_props(lsm_lab.open_table(path).config.props)
        assert bloom.serialize_to_string() == hb.filter_of_keys(keys, opts).serialize_to_string()
    return len(files)


@pytest.mark.parametrize(("version", "table_type"), [(8, "MERGE_ON_READ"), (9, "COPY_ON_WRITE"), (9, "MERGE_ON_READ"),
                                                   (10, "MERGE_ON_READ")])
def test_bloom_filters_follow_every_step(tmp_path: Path, version: int, table_type: str) -> None:
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", partition_by="city",
                             table_type=table_type, layout="default", table_version=version,
                             properties={**BLOOM_ON, "hoodie.metadata.compact.max.delta.commits": "3"})
    counted = 0
    for step, run in _steps(t):
        run()
        t = lsm_lab.open_table(path)
        if t.metadata_table() is None:  # a rollback of an MDT-compacted instant drops it; the next write rebuilds
            continue
        try:
            counted += check_blooms(path)
        except AssertionError as exc:
            raise AssertionError(f"after {step}: {exc}") from exc
    assert counted > 0
    props = lsm_lab.open_table(path).config.props
    assert "bloom_filters" in props["hoodie.table.metadata.partitions"].split(",")
    if hudi_available() and version != 10:  # hudi-rs 0.5 refuses version 10 tables
        _hudi_rs_reads_through_the_mdt(path)


def test_enabled_later_builds_from_the_files_keys(tmp_path: Path) -> None:
    """Base files written before the index have no footer filter: the partition is built with the filter a Hudi
    writer would have written from their keys; files written after carry it in their footer."""
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=9, table_type="COPY_ON_WRITE",
                             properties={"hoodie.metadata.enable": "true"})
    t.insert(_rows(range(12), 1, 0.0))
    old = _base_files(path)
    assert all(hb.FOOTER_KEY.encode() not in (pq.read_metadata(f).metadata or {}) for f in old.values())
    assert "bloom_filters" not in lsm_lab.open_table(path).metadata_table().partitions()  # type: ignore[union-attr]
    write_config(path, {**read_config(path).props, "hoodie.metadata.index.bloom.filter.enable": "true"}, create=False)
    t = lsm_lab.open_table(path)
    t.insert(_rows(range(100, 103), 2, 1.0))  # new keys: new files beside the old ones
    check_blooms(path, from_footer=False)
    new = set(_base_files(path)) - set(old)
    assert new and all(hb.FOOTER_KEY.encode() in pq.read_metadata(_base_files(path)[k]).metadata for k in new)


def test_without_the_option_no_footer_filter(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=9, properties={"hoodie.metadata.enable": "true"})
    t.insert(_rows(range(6), 1, 0.0))
    for f in _base_files(tmp_path / "t").values():
        assert hb.FOOTER_KEY.encode() not in (pq.read_metadata(f).metadata or {})
    assert hb.options_for({"hoodie.index.type": "GLOBAL_BLOOM"}, 8) is not None
    assert hb.options_for({"hoodie.parquet.bloom.filter.enabled": "true"}, 9) is not None
    assert hb.options_for({"hoodie.metadata.index.bloom.filter.enable": "true"}, 10) is not None
    assert hb.options_for({"hoodie.metadata.index.bloom.filter.enable": "true"}, 6) is None


def test_listing_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=8, table_type="MERGE_ON_READ", properties=BLOOM_ON)
    t.insert(_rows(range(9), 1, 0.0))
    t.upsert(_rows(range(0, 9, 2), 2, 1.0))  # log files: no new record
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    listing = m.bloom_filters().to_pylist()
    files = _base_files(path)
    assert {(r["partition"], r["file_name"]) for r in listing} == set(files)
    assert all(r["type"] == hb.DYNAMIC_V0 and (r["rows"], r["bits"], r["hashes"]) == (1, 2_587_966, 30)
               for r in listing)
    assert m.bloom_filter("nowhere", "x.parquet") is None
    assert cli_main(["show", "metadata", str(path), "--partition", "bloom_filters", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert sorted((r["partition"], r["file_name"]) for r in rows) == sorted(files)


def test_sigkill_loop_keeps_the_bloom_filters_right(tmp_path: Path) -> None:
    """tests/test_crash.py's harness on a version-9 table with the bloom filter index: writes, compactions,
    clusterings, cleans and archivals killed at random; after every kill, besides the harness's own check, each
    committed base file has its live record (= its footer filter), and other live records belong only to files
    a pending clean already deleted."""
    from test_metadata_write import load_harness

    from lsm_lab.services.clean import files_in_plan
    from lsm_lab.timeline.instant import CLEAN, State
    harness = load_harness()

    def create(path: Any, layout: str = "lsm_tree") -> None:
        lsm_lab.create_table(path, name="crash", record_key="id", partition_by="p", ordering_field="ts",
                             layout="default", table_version=9,
                             properties={"hoodie.compaction.hybrid.log.file.num.threshold": "2",
                                         "hoodie.metadata.compact.max.delta.commits": "4", **BLOOM_ON})

    checked: list[int] = []
    check_files = harness._check_files

    def check(table: Any) -> None:
        check_files(table)
        path = Path(table.path)
        m = lsm_lab.open_table(path).metadata_table()
        if m is None or "bloom_filters" not in m.partitions():  # killed inside the MDT's initialisation
            return
        files = _base_files(path)
        cleaning = {Path(f).name for i in table.instants() if i.action == CLEAN and not i.is_completed
                    for f in files_in_plan(table.active_timeline.read_content(i, State.REQUESTED))}
        live = set(m.records("bloom_filters"))
        want = {mr.bloom_filter_key(p, n): (p, n) for p, n in files}
        assert set(want) <= live
        extra = live - set(want)
        assert len(extra) <= len(cleaning)
        for key, (p, n) in want.items():
            rec = m.bloom_filter_record(p, n)
            assert rec is not None
            assert rec["bloom_filter"] == pq.read_metadata(files[(p, n)]).metadata[hb.FOOTER_KEY.encode()], key
        checked.append(len(files))

    from unittest import mock
    with mock.patch.object(harness, "create", create), mock.patch.object(harness, "_check_files", check):
        stats = harness.run(6, workdir=tmp_path, seed=11, max_delay=2.0, verbose=False, layout="default")
    assert stats["kills"] == 6 and len(checked) >= 6 and max(checked) > 0


def test_a_footer_value_that_does_not_decode_is_rebuilt_from_the_keys(tmp_path: Path) -> None:
    import types

    import pyarrow as pa

    from lsm_lab.format import parquet_write
    from lsm_lab.services import mdt_index
    keys = pa.array([f"k{i}" for i in range(50)])
    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, pa.table({"_hoodie_record_key": keys}),
                                metadata={hb.FOOTER_KEY: "not base64!", hb.TYPE_CODE_KEY: hb.DYNAMIC_V0})
    config: Any = types.SimpleNamespace(props={})
    got = mdt_index.file_bloom_filter(path, config)
    assert got.serialize_to_string() == hb.filter_of_keys(keys).serialize_to_string()


def test_simple_filters_and_the_table_s_sizing(tmp_path: Path) -> None:
    """`hoodie.bloom.index.filter.type=SIMPLE` and a smaller `hoodie.index.bloom.num_entries`: footers without a type
    code (upstream writes it only for dynamic filters), records typed SIMPLE, sized as asked."""
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="trips", record_key="id", partition_by="city", layout="default",
                             table_version=9, table_type="COPY_ON_WRITE",
                             properties={**BLOOM_ON, hb.PROP_TYPE: "SIMPLE", hb.PROP_NUM_ENTRIES: "1000",
                                         hb.PROP_FPP: "0.001"})
    t.insert(_rows(range(20), 1, 0.0))
    t.upsert(_rows(range(0, 20, 3), 2, 1.0))
    assert check_blooms(path, type_code=hb.SIMPLE) > 0
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    assert {(r["type"], r["rows"], r["bits"], r["hashes"]) for r in m.bloom_filters().to_pylist()} == \
        {(hb.SIMPLE, 1, hb.bit_size(1000, 0.001), hb.num_hashes(hb.bit_size(1000, 0.001), 1000))}


def test_on_an_object_store(s3_table: Any) -> None:
    """The same on the S3 server: every base file's record decodes to a filter holding the file's keys."""
    from lsm_lab.filegroup import fsview
    from lsm_lab.format.parquet_read import open_parquet
    t = s3_table(name="trips", record_key="id", ordering_field="ts", partition_by="city", layout="default",
                 table_type="MERGE_ON_READ", table_version=8, properties=BLOOM_ON)
    t.insert(_rows(range(20), 1, 0.0))
    t.upsert(_rows(range(0, 20, 3), 2, 1.0))
    t.compact(strategy="full")
    t.clean(retained=1)
    t = lsm_lab.open_table(t.path)
    m = t.metadata_table()
    assert m is not None
    bases = [(p, path) for p, path, name, _ in fsview.list_data_files_sized(t.path) if name.kind == "base"]
    assert bases and set(m.records("bloom_filters")) == {mr.bloom_filter_key(p, path.name) for p, path in bases}
    for p, path in bases:
        bloom = m.bloom_filter(p, path.name)
        assert bloom is not None
        assert bloom.might_contain(open_parquet(path).read(columns=["_hoodie_record_key"]).column(0)).all()
