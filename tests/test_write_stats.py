"""Write statistics stay exact although an upsert no longer reads every stored key of the file groups it touches.

`numUpdateWrites` comes from the base positions when every row of a log is in the
base, else from a probe of the slice's files with the batch's keys; live deletes
are merged over the deleted keys only; a bucket-placed lsm_tree batch is
de-duplicated per file group. Each case below is checked against counts worked
out by hand and against the snapshot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab


def _rows(ids: list[str], ts: int, city: str = "x") -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "city": [city] * len(ids), "v": [f"{i}@{ts}" for i in ids]})


def _last(t: lsm_lab.Table, col: str) -> int:
    return int(t.timeline()[col].iloc[-1])


@pytest.mark.parametrize("positions,cdc", [("true", False), ("false", False), ("true", True)])
def test_update_counts_from_positions_probe_and_logs(tmp_path: Path, positions: str, cdc: bool) -> None:
    """The same counts from positions, from the probe, and from a CDC write's one probe of the slice."""
    options: dict[str, Any] = {"hoodie.write.record.positions": positions}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=2, cdc=cdc, **options)
    t.bulk_insert(_rows([f"k{i:03d}" for i in range(100)], 1))
    t.upsert(_rows([f"k{i:03d}" for i in range(0, 100, 3)], 2))        # all in the base: 34 updates
    assert (_last(t, "records_updated"), _last(t, "records_inserted")) == (34, 0)
    t.upsert(_rows([f"n{i:03d}" for i in range(10)], 3))               # new keys into existing buckets
    assert (_last(t, "records_updated"), _last(t, "records_inserted")) == (0, 10)
    # keys only in a log (n...) and in the base (k...), plus new ones (m...)
    t.upsert(_rows([f"n{i:03d}" for i in range(5)] + ["k001", "k002"] + ["m1", "m2", "m3"], 4))
    assert (_last(t, "records_updated"), _last(t, "records_inserted")) == (7, 3)
    assert t.read().num_rows == 113
    t.delete(_rows(["k010", "n001"], 5))
    t.upsert(_rows(["k010", "n001", "m9"], 6))  # deleted keys are still held by the group: updates
    assert (_last(t, "records_updated"), _last(t, "records_inserted")) == (2, 1)


def test_live_deletes_and_duplicates_in_one_batch(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=2)
    t.bulk_insert(_rows([f"k{i:03d}" for i in range(50)], 10))
    t.upsert(_rows(["k000", "k001"], 20))
    # a batch holding one key three times: the greatest ordering value wins, ties to the later row
    batch = pa.table({"id": ["k005", "k005", "k005", "k006"], "ts": [30, 40, 40, 5], "city": ["x"] * 4,
                      "v": ["a", "b", "c", "old"]})
    t.upsert(batch)
    assert (_last(t, "records_updated"), _last(t, "records_inserted"), _last(t, "records_written")) == (2, 0, 2)
    got = {r["id"]: (r["ts"], r["v"]) for r in t.read().to_pylist()}
    assert got["k005"] == (40, "c") and got["k006"] == (10, "k006@10")  # ts 5 < 10: the stored record stays
    # deletes: absent keys and a delete that loses to a newer ordering value are written but not counted
    deletes = pa.table({"id": ["k000", "k001", "k002", "zz1", "zz2", "k003", "k003"],
                        "ts": [25, 15, 11, 1, 1, 50, 9], "city": ["x"] * 7})
    t.delete(deletes)
    assert _last(t, "records_deleted") == 3  # k000 (25 >= 20), k002 (11 >= 10), k003 (50); not k001 (15 < 20)
    ids = {r["id"] for r in t.read().to_pylist()}
    assert {"k000", "k002", "k003"}.isdisjoint(ids) and "k001" in ids and len(ids) == 47


def test_cdc_log_sees_the_deduplicated_share(tmp_path: Path) -> None:
    """The CDC log of a bucket-placed batch holding a key twice records the winning row once."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city", ordering_field="ts",
                             table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=2, cdc=True)
    t.bulk_insert(_rows(["a", "b", "c"], 1))
    t.upsert(pa.table({"id": ["b", "b", "z", "b"], "ts": [5, 9, 2, 7], "city": ["x"] * 4,
                       "v": ["b5", "b9", "z2", "b7"]}))
    rows = t.read_cdc(None).to_pylist()
    last = max(r["commit_time"] for r in rows)
    got = sorted((r["op"], r["record_key"], (r["after"] or {}).get("v")) for r in rows if r["commit_time"] == last)
    assert got == [("i", "z", "z2"), ("u", "b", "b9")]


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(base=st.dictionaries(st.integers(0, 40), st.integers(0, 9), min_size=1, max_size=30),
       update=st.dictionaries(st.integers(0, 60), st.integers(0, 9), max_size=15),
       deletes=st.lists(st.tuples(st.integers(0, 70), st.integers(0, 9)), min_size=1, max_size=20),
       cold=st.booleans())
def test_live_deletes_match_a_dict_model(tmp_path_factory: pytest.TempPathFactory, base: dict[int, int],
                                         update: dict[int, int], deletes: list[tuple[int, int]], cold: bool) -> None:
    """records_deleted counts the deletes that remove a live record (event-time ordering: the delete's value
    >= the record's), whether the base's keys come from the key cache (the writer's) or from the file (cold)."""
    from lsm_lab.filegroup import posmerge

    t = lsm_lab.create_table(tmp_path_factory.mktemp("t") / "t", name="t", record_key="id", partition_by="city",
                             ordering_field="ts", table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=2)

    def batch(items: list[tuple[int, int]]) -> pa.Table:
        return pa.table({"id": [f"k{k:03d}" for k, _ in items], "ts": [o for _, o in items],
                         "city": ["x"] * len(items)})

    t.bulk_insert(batch(sorted(base.items())))
    live = dict(base)
    if update:
        t.upsert(batch(sorted(update.items())))
        for k, o in update.items():  # the greater ordering value wins, a tie goes to the later write
            live[k] = o if k not in live or o >= live[k] else live[k]
    if cold:
        posmerge.forget_base_keys()
    wins: dict[int, int] = {}
    for k, o in deletes:
        wins[k] = max(o, wins.get(k, o))
    t.delete(batch(deletes))
    expected = sum(1 for k, o in wins.items() if k in live and o >= live[k])
    assert _last(t, "records_deleted") == expected
    assert {r["id"] for r in t.read().to_pylist()} == {f"k{k:03d}" for k in live
                                                       if not (k in wins and wins[k] >= live[k])}


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "bb", "c", "é", "d"]), st.one_of(st.none(), st.integers(0, 3))),
                     min_size=1, max_size=25),
       presorted=st.booleans(), is_delete=st.booleans(), event_time=st.booleans())
def test_one_per_key_equals_dedupe(rows: list[tuple[str, int | None]], presorted: bool, is_delete: bool,
                                   event_time: bool) -> None:
    """A file group's share, sorted by key (as `tag` gives it) or not: one row per key, the same rows as
    `records.dedupe` of the whole share (greatest ordering wins, ties to the later row, nulls per `deletes`)."""
    from lsm_lab.filegroup import write
    from lsm_lab.merge import records
    from lsm_lab.timeline.config import TableConfig

    config = TableConfig(name="t", table_type="MERGE_ON_READ", version=9, record_key=("id",), ordering_field="ts",
                         merge_mode="EVENT_TIME_ORDERING" if event_time else "COMMIT_TIME_ORDERING", layout="lsm_tree")
    batch = pa.table({records.RECORD_KEY: [k for k, _ in rows], "ts": pa.array([o for _, o in rows], pa.int64()),
                      "n": list(range(len(rows)))})
    if presorted:
        batch = records.sort_by_key(batch)
    ordering = "ts" if event_time else None
    expected = records.dedupe(batch, records.RECORD_KEY, ordering, deletes=is_delete)
    assert write._one_per_key(config, batch, is_delete).equals(expected)


@pytest.mark.parametrize(("table_type", "layout"), [("MERGE_ON_READ", "lsm_tree"), ("MERGE_ON_READ", "default"),
                                                    ("COPY_ON_WRITE", "default")])
def test_a_write_says_what_it_did(tmp_path: Path, table_type: str, layout: str) -> None:
    """Rows in, then inserted / updated / deleted, and why fewer (issue 34, item 4): checked against a dict."""
    from lsm_lab.services.commit import describe_write

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts", table_type=table_type,
                             layout=layout)
    def said(op: str, rows: list[dict[str, Any]]) -> str:
        inst = getattr(t, op)(rows)
        return describe_write(t.instant_metadata(inst))

    first = [{"id": "a", "ts": 1}, {"id": "b", "ts": 1}, {"id": "a", "ts": 2}, {"id": "c", "ts": 1}]
    assert said("upsert", first).startswith("upsert: 4 rows in → 3 inserted, 0 updated; 1 row repeated a key")
    assert said("upsert", [{"id": "a", "ts": 3}, {"id": "z", "ts": 1}]) == "upsert: 2 rows in → 1 inserted, 1 updated"
    assert said("delete", [{"id": "q", "ts": 1}, {"id": "r", "ts": 1}]).startswith(
        "delete: 2 keys in → 0 deleted; 2 named no live row")
    assert said("delete", [{"id": "a", "ts": 9}, {"id": "b", "ts": 9}]) == "delete: 2 keys in → 2 deleted"
    assert sorted(t.read().column("id").to_pylist()) == ["c", "z"]


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 8, 13])
def test_the_columns_a_write_adds_are_the_same_in_chunks(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    """`_meta_columns` builds its columns in chunks of META_CHUNK_ROWS (reused memory, not one large mapping):
    every row holds what one whole column would (commit time, `{instant}_{task}_{i}`, the file name)."""
    from lsm_lab.filegroup import write as fw

    monkeypatch.setattr(fw, "META_CHUNK_ROWS", 4)
    rows = pa.table({"_hoodie_record_key": [f"k{i}" for i in range(n)], "_hoodie_partition_path": ["p"] * n,
                     "v": list(range(n))}, schema=pa.schema([("_hoodie_record_key", pa.string()),
                                                             ("_hoodie_partition_path", pa.string()),
                                                             ("v", pa.int64())]))
    out = fw._meta_columns(rows, "20261129000000000", "f-0_1-0-0_20261129000000000.parquet", 7)
    assert out.column("_hoodie_commit_time").to_pylist() == ["20261129000000000"] * n
    assert out.column("_hoodie_commit_seqno").to_pylist() == [f"20261129000000000_7_{i}" for i in range(n)]
    assert out.column("_hoodie_file_name").to_pylist() == ["f-0_1-0-0_20261129000000000.parquet"] * n
    assert out.column("v").to_pylist() == list(range(n)) and out.num_rows == n
    assert all(len(c) <= 4 for c in out.column("_hoodie_file_name").chunks)
