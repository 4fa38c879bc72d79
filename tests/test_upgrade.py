"""Upgrade and mixed formats: a version 8 table (v1 logs) switched to v2 logs and to the lsm_tree layout.

Each test answers one of RFC-103's review questions with what lsm_lab does
(docs/FORMAT.md, section "Answers to the RFC-103 review"):

- may v1 and v2 logs share a slice?                      test_v1_and_v2_logs_share_a_slice
- does switching on lsm_tree force compaction?            test_switching_on_lsm_tree_rewrites_nothing
- can one file group hold v1 and v2 slices?               test_one_file_group_holds_v1_and_v2_slices
- can an older reader read every file group while
  writers keep table_version < 9?                         test_older_readers_read_everything_below_version_9
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from localpath import local

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import UnsupportedFeatureError
from lsm_lab.filegroup import fsview
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming, parquet_footer
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available, hudi_rs_read
from lsm_lab.interop.upgrade import dump_formats, slice_formats, upgrade
from lsm_lab.timeline.metadata import encode_json

needs_hudi = pytest.mark.skipif(not hudi_available(), reason="the hudi package (hudi-rs) is not installed")
CITIES = ("a", "b")


def _rows(keys: list[int] | range, ts: int, v: float) -> list[dict[str, Any]]:
    return [{"id": f"k{i:02d}", "city": CITIES[i % 2], "ts": ts + i, "v": v} for i in keys]


def _dels(keys: list[int]) -> list[dict[str, Any]]:
    """Deletes by key (no ordering value: they always win)."""
    return [{"id": f"k{i:02d}", "city": CITIES[i % 2]} for i in keys]


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def upsert(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if r["id"] not in self.rows or r["ts"] >= self.rows[r["id"]]["ts"]:
                self.rows[r["id"]] = r

    def delete(self, rows: list[dict[str, Any]]) -> None:
        for r in rows:
            self.rows.pop(r["id"], None)

    def values(self) -> dict[str, float]:
        return {k: r["v"] for k, r in self.rows.items()}


def _values(t: lsm_lab.Table, **kw: Any) -> dict[str, float]:
    rows = t.read(**kw)
    return dict(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist()))


def _files(t: lsm_lab.Table) -> dict[str, bytes]:
    return {str(p.relative_to(local(t.path))): p.read_bytes() for _, p, _ in fsview.list_data_files(t.path)}


@pytest.fixture()
def v8_table(tmp_path: Path) -> tuple[lsm_lab.Table, Model]:
    """A version 8 MERGE_ON_READ table with v1 logs: insert, update, delete."""
    t = lsm_lab.create_table(tmp_path / "t", name="mixed", record_key="id", partition_by="city",
                             ordering_field="ts", table_version=8, layout="default")
    m = Model()
    for op, data in (("upsert", _rows(range(12), 100, 1.0)), ("upsert", _rows(range(0, 12, 3), 200, 2.0)),
                     ("delete", _dels([1, 4]))):
        getattr(t, op)(data)
        getattr(m, op)(data)
    return t, m


def test_v1_and_v2_logs_share_a_slice(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    t, m = v8_table
    switch = t.latest_completion()
    before = t.read()
    t = upgrade(t)
    assert (t.config.version, t.config.log_format_version) == (9, 2)
    rounds = [("upsert", _rows([0, 2, 5, 20], 300, 3.0)), ("delete", _dels([3, 7])),
              ("upsert", _rows([3, 6], 400, 4.0))]
    for op, data in rounds:
        getattr(t, op)(data)
        getattr(m, op)(data)
        assert _values(t) == m.values()
    mixed = [s for s in slice_formats(t) if s.mixed]
    assert mixed, dump_formats(t)
    assert all(s.base_file for s in mixed)  # v2 logs were added to the existing file groups
    new_logs = [n for _, _, n in fsview.list_data_files(t.path) if n.is_log and n.log_format == 2]
    assert new_logs and all(n.file_id in {s.file_id for s in slice_formats(t)} for n in new_logs)
    # time travel to before the switch: only the v1 logs count
    assert compare_rows(t.read(as_of=switch), before, ["id"]) == []
    for engine in ("hash", "sorted", "loser_tree"):
        assert _values(t, merge=engine) == m.values()


def test_switching_on_lsm_tree_rewrites_nothing(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    t, m = v8_table
    files = _files(t)
    t = upgrade(t, layout="lsm_tree")
    assert t.config.is_lsm and not t.config.bucket_index  # the existing groups keep their key-lookup index
    assert _files(t) == files  # no compaction forced: every file is still there, byte for byte
    assert _values(t) == m.values()
    data = _rows([0, 5, 30, 31], 500, 5.0)
    t.upsert(data)
    m.upsert(data)
    assert _values(t) == m.values()
    new = {k: v for k, v in _files(t).items() if k not in files}
    assert new
    for rel in new:
        name = naming.parse(Path(rel).name)
        assert name is not None and name.log_format != 1
        assert parquet_footer.footer(t.path / rel).get(parquet_footer.KEY_SORTED) == "true"  # new files are sorted
    for rel in files:
        if rel.endswith(".parquet"):
            assert parquet_footer.footer(t.path / rel).get(parquet_footer.KEY_SORTED) is None  # old ones never claimed it


def test_a_footer_that_lies_about_order_never_yields_wrong_rows(v8_table: tuple[lsm_lab.Table, Model],
                                                               caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """An lsm_tree slice whose v2 log claims `lsm_lab.sorted=true` but is not sorted: every merge — reads, lookups,
    clustering — falls back to hash (lsm_lab.merge.policy), says so on the `lsm_lab.merge` logger, and
    gives the model's rows."""
    t, m = v8_table
    t = upgrade(t, layout="lsm_tree")
    t.upsert(_rows([0, 2], 600, 6.0))
    m.upsert(_rows([0, 2], 600, 6.0))
    group = next(g for g in t.file_groups() if g.partition == "city=a")
    assert t.schema is not None
    full = pa.schema(list(pa.schema([pa.field(c, pa.string()) for c in
                                     ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                      "_hoodie_partition_path", "_hoodie_file_name")])) + list(t.schema))
    begin, done = "20990101000000100", "20990101000000200"
    rows = [{"_hoodie_commit_time": begin, "_hoodie_commit_seqno": f"{begin}_0_{i}", "_hoodie_record_key": f"k{k:02d}",
             "_hoodie_partition_path": "city=a", "_hoodie_file_name": "x", "id": f"k{k:02d}", "city": "a",
             "ts": 700 + k, "v": 7.0} for i, k in enumerate([8, 2, 6])]  # out of order
    name = f"{group.file_id}_0-0-0_{begin}_1.parquet"
    v2.write_data_log(t.path / "city=a" / name, pa.Table.from_pylist(rows, schema=full), instant_time=begin,
                      is_sorted=True)  # the footer lies
    folder = t.active_timeline.folder
    (folder / f"{begin}.deltacommit.requested").write_bytes(b"")
    (folder / f"{begin}.deltacommit.inflight").write_bytes(b"")
    stat = {"path": f"city=a/{name}", "fileId": group.file_id, "partitionPath": "city=a"}  # a file no commit lists is ignored
    (folder / f"{begin}_{done}.deltacommit").write_bytes(encode_json({"operationType": "UPSERT",
                                                                      "partitionToWriteStats": {"city=a": [stat]}}))
    m.upsert([{"id": r["id"], "ts": r["ts"], "v": r["v"]} for r in rows])
    for engine in (None, "sorted", "loser_tree", "heapq", "hash"):
        assert _values(t, merge=engine) == m.values(), engine
        # the streaming scan finds the lie in the slice's first round, before any batch: merged whole instead
        streamed = t.scan(merge=engine, batch_size=2).to_reader().read_all()
        assert {r["id"]: r["v"] for r in streamed.to_pylist()} == m.values(), engine

    def fell_back() -> bool:
        found = any("merging with hash instead" in r.getMessage() for r in caplog.records if r.name == "lsm_lab.merge")
        caplog.clear()
        return found

    caplog.set_level(logging.WARNING, logger="lsm_lab.merge")
    assert _values(t, merge="sorted") == m.values() and fell_back()
    keys = ["k02", "k06", "k08"]
    found = {r["id"]: r["v"] for r in t.lookup(keys).to_pylist()}
    assert found == {k: m.values()[k] for k in keys if k in m.values()}
    copy = tmp_path / "copy"
    shutil.copytree(local(t.path), copy)
    clustered = lsm_lab.open_table(copy)
    clustered.cluster(merge="sorted", options={"hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)})
    assert fell_back() and _values(clustered) == m.values()


def test_compaction_of_a_mixed_slice(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    t, m = v8_table
    t = upgrade(t, layout="lsm_tree")
    data = _rows([0, 2, 9], 800, 8.0)
    t.upsert(data)
    m.upsert(data)
    assert any(s.mixed for s in slice_formats(t))
    before_compaction = t.latest_completion()
    snapshot = t.read()
    inst = t.compact(strategy="full")
    assert inst is not None
    assert _values(t) == m.values()
    assert compare_rows(t.read(as_of=before_compaction), snapshot, ["id"]) == []
    for g in t.file_groups():
        latest = g.latest
        assert not latest.log_files
        assert latest.base_file is not None
        assert parquet_footer.footer(latest.base_file.path).get(parquet_footer.KEY_SORTED) == "true"  # sorted, v2-era


def test_one_file_group_holds_v1_and_v2_slices(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    """After a compaction the old slice (base + v1 logs) stays for time travel; the new one gets v2 logs."""
    t, m = v8_table
    t = upgrade(t)
    before = t.latest_completion()
    old = t.read()
    t.compact(strategy="full")
    data = _rows([0, 3], 900, 9.0)
    t.upsert(data)
    m.upsert(data)
    both = [g for g in t.file_groups()
            if any(any(f.name.log_format == 1 for f in s.log_files) for s in g.slices[:-1])
            and any(f.name.log_format == 2 for f in g.latest.log_files)]
    assert both, t.dump_levels()
    assert _values(t) == m.values()
    assert compare_rows(t.read(as_of=before), old, ["id"]) == []  # the v1 slice still answers time travel


@needs_hudi
def test_older_readers_read_everything_below_version_9(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    t, _ = v8_table
    assert t.config.version == 8
    assert all(n.log_format == 1 for _, _, n in fsview.list_data_files(t.path) if n.is_log)
    assert compare_rows(t.read(), hudi_rs_read(local(t.path)), ["id"]) == []
    for inst in t.completed_writes():
        assert compare_rows(t.read(as_of=inst.completion_time), hudi_rs_read(local(t.path), as_of=inst.completion_time),
                            ["id"]) == []
    t = upgrade(t)
    t.upsert(_rows([0], 999, 9.9))
    # the first v2 log needs table version 9: an older reader must refuse the table rather than misread it
    assert t.config.version == 9
    assert any(n.log_format == 2 for _, _, n in fsview.list_data_files(t.path) if n.is_log)


def test_cow_switch_to_lsm_tree_sorts_new_base_files(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "cow", name="cow", record_key="id", table_type="COPY_ON_WRITE",
                             ordering_field="ts", table_version=8, layout="default")
    m = Model()
    data = [{"id": f"k{i:02d}", "city": "a", "ts": i, "v": 1.0} for i in (5, 3, 9, 1, 7)]
    t.upsert(data)
    m.upsert(data)
    t = upgrade(t, layout="lsm_tree")
    data = [{"id": "k04", "city": "a", "ts": 50, "v": 2.0}, {"id": "k03", "city": "a", "ts": 60, "v": 2.0}]
    t.upsert(data)
    m.upsert(data)
    assert _values(t) == m.values()
    base = t.latest_slices()[0].base_file
    assert base is not None and parquet_footer.footer(base.path).get(parquet_footer.KEY_SORTED) == "true"


def test_upgrade_refusals_and_idempotence(tmp_path: Path, v8_table: tuple[lsm_lab.Table, Model]) -> None:
    t, _ = v8_table
    once = upgrade(t)
    props = dict(once.config.props)
    assert props["lsm_lab.upgraded.from.version"] == "8"
    assert props["hoodie.table.ordering.fields"] == "ts"
    assert dict(upgrade(once).config.props) == props
    six = lsm_lab.create_table(tmp_path / "six", name="six", record_key="id", table_version=6)
    with pytest.raises(UnsupportedFeatureError, match="version 8"):
        upgrade(six)
    hudi_made = tmp_path / "hudi_made"
    shutil.copytree(local(once.path), hudi_made)
    ppath = hudi_made / ".hoodie" / "hoodie.properties"
    ppath.write_text(ppath.read_text().replace("lsm_lab.created=true", "lsm_lab.created=false"))
    with pytest.raises(UnsupportedFeatureError, match="created"):
        upgrade(hudi_made)


def test_upstream_native_log_names_read_the_same(v8_table: tuple[lsm_lab.Table, Model]) -> None:
    """Hudi table version 10 names native logs `…_<v>.log.parquet` / `….deletes.parquet`: same rows."""
    t, _m = v8_table
    t = upgrade(t)
    t.upsert(_rows([0, 2], 1000, 10.0))
    t.delete(_dels([3]))
    expected = _values(t)
    renamed = 0
    for _, p, n in fsview.list_data_files(t.path):
        if n.is_log and n.log_format == 2:
            stem = p.name[: -len(".delete.parquet")] if n.is_delete else p.name[: -len(".parquet")]
            p.rename(p.with_name(stem + (".deletes.parquet" if n.is_delete else ".log.parquet")))
            renamed += 1
    assert renamed >= 2
    assert _values(t) == expected


def test_cli_upgrade_and_formats(v8_table: tuple[lsm_lab.Table, Model], capsys: pytest.CaptureFixture[str]) -> None:
    t, _ = v8_table
    assert cli_main(["interop", "formats", str(t.path)]) == 0
    assert "new logs: v1" in capsys.readouterr().out
    assert cli_main(["interop", "upgrade", str(t.path), "--layout", "lsm_tree"]) == 0
    out = capsys.readouterr().out
    assert "table version 9, new logs: v2, layout lsm_tree" in out
    assert cli_main(["show", "formats", str(t.path)]) == 0


def test_json_instants_of_an_older_table_become_avro(tmp_path: Path) -> None:
    """A table written before lsm_lab wrote Avro commit metadata: `lsm-lab upgrade --instants-only` re-encodes
    its completed instants (same content, upstream's encoding) and the table reads the same."""
    from instantfiles import read_instant

    from lsm_lab.cli import main
    from lsm_lab.timeline import config as cfg
    from lsm_lab.timeline.metadata import AVRO_MAGIC

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p", num_buckets=1,
                             properties={cfg.KEY_INSTANT_FORMAT: "json"})
    t.insert([{"id": f"k{i}", "p": "a" if i % 2 else "b", "v": i} for i in range(10)])
    t.upsert([{"id": "k1", "p": "a", "v": 100}])
    t.compact(strategy="full")
    timeline = local(t.path) / ".hoodie" / "timeline"
    done = sorted(f for f in timeline.iterdir() if f.name.count("_") == 1)
    assert done and all(f.read_bytes()[:1] == b"{" for f in done)
    before_rows, before_meta = t.read(), [read_instant(f) for f in done]
    assert main(["upgrade", str(t.path), "--instants-only"]) == 0
    assert all(f.read_bytes()[:4] == AVRO_MAGIC for f in done)
    again = lsm_lab.open_table(t.path)
    assert again.config.instant_format == "avro"
    assert again.read().sort_by("id").equals(before_rows.sort_by("id"))
    def stats(content: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:  # (Avro spells an absent field null)
        return {p: [{k: v for k, v in s.items() if v is not None} for s in lst]
                for p, lst in content["partitionToWriteStats"].items()}

    for f, meta in zip(done, before_meta, strict=True):
        after = read_instant(f)
        assert stats(after) == stats(meta)
        assert after["extraMetadata"]["schema"]  # the Avro writer schema upstream readers look for
    assert main(["upgrade", str(t.path), "--instants-only"]) == 0  # idempotent
