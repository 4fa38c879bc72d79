"""Record-index point lookups (table/mdt_lookup.py): the seek path equals the whole-shard merge, which equals
the whole partition decoded — on the shipped Hudi tables and on lsm_lab tables written with the record index
through upserts, deletes, MDT compaction and a rollback; and a seek reads only the blocks its keys fall in."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.format import hfile
from lsm_lab.format import metadata_record as mr
from lsm_lab.table.metadata_table import MetadataTable

REAL = ["v8_trips_8i3u1d", "v9_txns_simple_meta", "v9_txns_complex_meta", "v9_nonpartitioned_rollback"]
N = 3000  # one shard of 3,000 cells: a base HFile of several 64 KB blocks after the MDT compacts


def _mdt(path: Path, share: float) -> MetadataTable:
    m = lsm_lab.open_table(path).metadata_table()
    assert m is not None
    m.whole_merge_share = share
    return m


def _model(path: Path) -> dict[str, tuple[str | None, str | None, int | None]]:
    """key → location from the whole `record_index` partition, every cell decoded (`records`)."""
    m = _mdt(path, 0.0)
    return {k: mr.record_location(v.payload.get("recordIndexMetadata") or {})
            for k, v in m.records("record_index").items()}


def _rows(m: MetadataTable, keys: list[str]) -> list[dict[str, Any]]:
    return sorted(m.record_index(keys).to_pylist(), key=lambda r: r["record_key"])


def _check(path: Path, keys: list[str], model: dict[str, Any]) -> None:
    seek, merged = _mdt(path, math.inf), _mdt(path, 0.0)
    a, b = _rows(seek, keys), _rows(merged, keys)
    assert a == b
    assert {r["record_key"] for r in a} == {k for k in keys if k in model}
    assert seek.lookup_counts.shards_merged == 0 and merged.lookup_counts.shards_sought == 0
    assert seek.record_keys() == sorted(model)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An lsm_lab MOR table with the record index in one shard, after upserts, deletes, MDT compaction and a rollback."""
    path = tmp_path_factory.mktemp("ri") / "t"
    t = lsm_lab.create_table(path, name="x", record_key="id", ordering_field="ts", partition_by="p", layout="default",
                             table_type="MERGE_ON_READ", table_version=9,
                             properties={"hoodie.metadata.enable": "true", "hoodie.index.type": "RECORD_INDEX",
                                         "hoodie.metadata.record.index.enable": "true",
                                         "hoodie.metadata.record.index.min.filegroup.count": "1",
                                         "hoodie.metadata.compact.max.delta.commits": "2"})
    t.insert([{"id": f"k{i:05d}", "p": f"p{i % 3}", "ts": 0} for i in range(N)])
    t.upsert([{"id": f"k{i:05d}", "p": f"p{i % 3}", "ts": 1} for i in range(0, N + 200, 7)])
    t.delete([{"id": f"k{i:05d}", "p": f"p{i % 3}"} for i in range(0, N, 11)])
    t.upsert([{"id": f"k{i:05d}", "p": f"p{i % 3}", "ts": 2} for i in range(5, N, 13)])
    t.compact(strategy="full")
    t.upsert([{"id": f"k{i:05d}", "p": f"p{i % 3}", "ts": 3} for i in range(3, N + 400, 17)])
    t.rollback(t.instants()[-1])  # the last upsert: its MDT log block no longer counts
    t.delete([{"id": f"k{i:05d}", "p": f"p{i % 3}"} for i in range(1, 200, 3)])
    return path


def test_the_written_table_has_a_base_hfile_of_several_blocks(written: Path) -> None:
    m = _mdt(written, math.inf)
    slices = m.mdt.latest_slices(partitions=["record_index"])
    assert len(slices) == 1 and slices[0].base_file is not None
    h = hfile.read_hfile(slices[0].base_file.path)
    assert len(h.data_index) >= 3
    model = _model(written)
    t = lsm_lab.open_table(written)
    assert any(i.action == "rollback" for i in t.instants())
    assert sorted(model) == sorted(t.read(columns=["id"]).column("id").to_pylist())
    assert "k03201" not in model and "k00000" not in model and "k00001" not in model and "k00008" in model
    assert "k03199" in model and "k03216" not in model  # inserted by an upsert; one of the rolled-back upsert
    key = sorted(model)[len(model) // 2]
    m.record_index([key])
    # one key: one data block of the base file touched and parsed (the root index is read with the file)
    c = m.lookup_counts
    assert c.keys == 1 and c.base_blocks_touched == 1 and c.base_blocks_parsed == 1 and c.blocks_per_key() <= 2
    assert h.block_of(b"") == -1 and h.block_of(key.encode()) >= 0
    assert h.get(key.encode()) is not None or key not in {k.decode() for k, _ in h.items()}


_KEYS = st.lists(st.integers(0, N + 500), min_size=1, max_size=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids=_KEYS)
def test_seek_equals_whole_merge_on_a_written_table(written: Path, ids: list[int]) -> None:
    model = _model(written)
    _check(written, [f"k{i:05d}" for i in ids] + ["nope"], model)


@pytest.mark.parametrize("name", REAL)
def test_seek_equals_whole_merge_on_the_shipped_tables(real_table: Callable[[str], Path], name: str) -> None:
    path = real_table(name)
    model = _model(path)
    keys = sorted(model)
    assert keys

    @settings(max_examples=15, deadline=None)
    @given(picked=st.lists(st.sampled_from([*keys, "no-such-key", ""]), min_size=1, max_size=12))
    def check(picked: list[str]) -> None:
        _check(path, picked, model)

    check()


def test_the_rule_merges_a_shard_whole_for_many_keys(written: Path) -> None:
    m = _mdt(written, 0.25)
    keys = sorted(_model(written))
    m.record_index(keys[:5])
    assert m.lookup_counts.shards_sought == 1 and not m._shards  # 5 keys < 1/4 of the cells: a seek
    m.record_index(keys)
    assert m.lookup_counts.shards_merged == 1 and list(m._shards) == [0]  # all of them: merged whole, kept
    m.record_index(keys[:5])
    assert m.lookup_counts.shards_sought == 1 and m.lookup_counts.shards_merged == 1  # served from the kept merge


@settings(max_examples=40, deadline=None)
@given(cells=st.lists(st.tuples(st.text(min_size=0, max_size=12), st.binary(max_size=30)), max_size=300,
                      unique_by=lambda c: c[0]),
       uniform=st.booleans(), block=st.sampled_from([64, 512, 65536]))
def test_hfile_to_table_is_the_cells(cells: list[tuple[str, bytes]], uniform: bool, block: int) -> None:
    """The vectorised `to_table` (uniform blocks by stride, others by a loop over cell starts) == `items()`."""
    from lsm_lab.format import hfile_write

    if uniform:  # fixed-length keys and values: the stride path
        cells = [(f"{i:06d}", bytes([i % 256]) * 7) for i in range(len(cells))]
    encoded = sorted((k.encode(), v) for k, v in cells)
    written = hfile_write.write_hfile(encoded, block_size=block)
    h = hfile.parse_hfile(written[0] if isinstance(written, tuple) else written)
    t = h.to_table()
    assert t.column("key").to_pylist() == [k.decode() for k, _ in h.items()] == [k.decode() for k, _ in encoded]
    assert t.column("value").to_pylist() == [v for _, v in encoded]
