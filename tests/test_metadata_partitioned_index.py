"""A partitioned record index (upstream 1.1, issue 32): read, used by lookups, reads and one upsert, then removed.

Upstream 1.1's partition-scoped record index (`hoodie.metadata.record.level.index.enable`, the index
definition's `isPartitioned` option, `hoodie.index.type=RECORD_LEVEL_INDEX`) keeps a key once per data
partition, sharded among its partition's own MDT file groups `record-index-<partition>-NNNN-0`.  The
test lays one out in an lsm_lab table whose keys repeat across partitions (lsm_lab's MDT writer and its
own HFiles, the cells sharded as upstream does), then checks against a plain dict model of
(partition, key) → file group:

* `MetadataTable.record_index` returns one row per partition holding a key, equal to the model;
* `lookup` and `read(filter=[(_hoodie_record_key, in, …)])` equal their unindexed forms and skip slices;
* an upsert with `RECORD_LEVEL_INDEX` tags from it (no file's keys read) and lands each row in its own
  partition's file group; lsm_lab does not write the partitioned layout, so that write removes it, and a
  second upsert (tagged by reading keys) still matches the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lsm_lab
from lsm_lab.filegroup import write as fg_write
from lsm_lab.format import naming
from lsm_lab.services import mdt_index as mi
from lsm_lab.services import mdt_write
from lsm_lab.table.lookup import LookupStats
from lsm_lab.timeline.active import ActiveTimeline
from lsm_lab.timeline.config import read_config

KEY, PART = "_hoodie_record_key", "_hoodie_partition_path"


def _rows(ids: Any, city: str, ts: int, fare: float) -> list[dict[str, Any]]:
    return [{"id": f"id{i:03d}", "city": city, "ts": ts, "fare": fare + i} for i in ids]


def _model(t: lsm_lab.Table) -> dict[tuple[str, str], float]:
    got = t.read(columns=["id", "city", "fare"])
    return {(c, k): f for k, c, f in zip(*(got.column(n).to_pylist() for n in ("id", "city", "fare")), strict=True)}


def _locations(t: lsm_lab.Table) -> dict[tuple[str, str], str]:
    got = t.read(columns=[KEY, PART, "_hoodie_file_name"])
    out = {}
    for k, p, name in zip(*(got.column(n).to_pylist() for n in (KEY, PART, "_hoodie_file_name")), strict=True):
        parsed = naming.parse(name)
        assert parsed is not None
        out[(p, k)] = parsed.file_id
    return out


class _Spec:
    """A `PartitionSpec` of the partitioned layout: one file-id list (each partition's groups in sequence)."""

    name = mi.RECORD_INDEX

    def __init__(self, fids: list[str]) -> None:
        self.fids = fids
        self.groups = len(fids)

    def file_id(self, i: int) -> str:
        return self.fids[i]


def _lay_out_partitioned_index(path: Path, groups: int = 2) -> None:
    """The table's record index as upstream 1.1's partitioned one, from the committed rows."""
    t = lsm_lab.open_table(path)
    config = read_config(path)
    got = t.read(columns=[KEY, PART, "_hoodie_file_name"])
    per_group: dict[str, dict[str, bytes]] = {}
    fids: list[str] = []
    for p in sorted(set(got.column(PART).to_pylist())):
        fids += [f"record-index-{p}-{i:04d}-0" for i in range(groups)]
    for k, p, name in zip(*(got.column(n).to_pylist() for n in (KEY, PART, "_hoodie_file_name")), strict=True):
        parsed = naming.parse(name)
        assert parsed is not None
        fid = f"record-index-{p}-{mi.file_group_index(k, groups):04d}-0"
        per_group.setdefault(fid, {})[k] = mi.record_index_value(p, parsed.file_id,
                                                                 mi.instant_millis(parsed.instant, config))
    folder = mdt_write.metadata_folder(path)
    timeline = ActiveTimeline(folder, read_config(folder))
    mdt_write._write_initial(path, timeline, _Spec(fids), mdt_write._next_init_instant(timeline),  # type: ignore[arg-type]
                             per_group)
    mi.define_index(path, mi.RECORD_INDEX, mi.index_definition(mi.RECORD_INDEX, mi.RECORD_INDEX, "", [], 9,
                                                               options={"isPartitioned": "true"}, version="V1"),
                    replace=True)
    mdt_write._point_at_index_defs(path)
    mdt_write._declare(path, mi.RECORD_INDEX)


@pytest.fixture()
def table(tmp_path: Path) -> lsm_lab.Table:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", ordering_field="ts", partition_by="city",
                             layout="default", table_type="COPY_ON_WRITE", table_version=9,
                             properties={"hoodie.metadata.enable": "true", "hoodie.index.type": "RECORD_LEVEL_INDEX",
                                         "hoodie.parquet.small.file.limit": "0"})  # a file group per insert
    t.insert(_rows(range(12), "sf", 1, 0.0) + _rows(range(6), "nyc", 1, 100.0))  # id000..id005 in both
    t.insert(_rows(range(12, 20), "nyc", 2, 200.0))
    _lay_out_partitioned_index(Path(str(t.path)))
    return lsm_lab.open_table(t.path)


def test_read_lookup_and_one_upsert_through_a_partitioned_record_index(table: lsm_lab.Table,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    t = table
    where = _locations(t)
    model = _model(t)
    m = t.metadata_table()
    assert m is not None and m.record_index_partitioned()
    keys = [*sorted({k for _, k in where}), "id999"]
    loc = m.record_index(keys)
    got = {(p, k): f for k, p, f in zip(*(loc.column(n).to_pylist() for n in ("record_key", "partition", "file_id")),
                                       strict=True)}
    assert got == where and loc.num_rows == len(where)  # id000..id005: one row per partition

    few = ["id003", "id015"]
    stats = LookupStats()
    a = t.lookup(few, columns=["id", "city", "fare"], stats=stats).sort_by([("city", "ascending"), ("id", "ascending")])
    b = t.lookup(few, columns=["id", "city", "fare"], indexes=False).sort_by([("city", "ascending"), ("id", "ascending")])
    assert a.equals(b) and a.num_rows == 3
    stats = LookupStats()
    assert t.lookup(["id015"], stats=stats).column("fare").to_pylist() == [215.0]
    assert stats.slices_pruned_record_index == len(t.latest_slices()) - 1 > 0  # nyc's second file group alone
    flt = [(KEY, "in", few)]
    assert t.read(filter=flt, columns=["id", "city", "fare"]).sort_by("fare").equals(
        t.read(filter=flt, columns=["id", "city", "fare"], indexes=False).sort_by("fare"))

    def no_key_reads(*a: Any, **kw: Any) -> Any:
        raise AssertionError("tagging read the file groups' keys instead of the record index")

    batch = _rows([1, 4], "nyc", 5, 900.0) + _rows([4], "sf", 5, 800.0) + _rows([30], "sf", 5, 700.0)
    with monkeypatch.context() as mp:
        mp.setattr(fg_write, "_existing_hits", no_key_reads)
        t.upsert(batch)
    for r in batch:
        model[(r["city"], r["id"])] = r["fare"]
    t = lsm_lab.open_table(t.path)
    assert _model(t) == model
    after = _locations(t)
    assert after[("city=nyc", "id001")] == where[("city=nyc", "id001")]  # updated in place: tagged to its group
    assert after[("city=sf", "id004")] == where[("city=sf", "id004")]
    m = t.metadata_table()
    assert m is not None and mi.RECORD_INDEX not in m.partitions()  # not written by lsm_lab: removed, not stale
    more = _rows([1, 30], "sf", 6, 50.0)
    t.upsert(more)
    for r in more:
        model[(r["city"], r["id"])] = r["fare"]
    assert _model(lsm_lab.open_table(t.path)) == model
    assert pa.compute.count_distinct(lsm_lab.open_table(t.path).read(columns=[KEY]).column(0)).as_py() == 21
