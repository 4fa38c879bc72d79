"""A bucket table's write gathers each file group's rows on the thread that writes the group (`write.GroupRows`).

Checked here: the chunk-by-chunk take equals Arrow's take for every column type and chunking;
each group's rows are exactly its rows of the batch, in key order (lsm_tree) or arrival order;
the writer receives per-group tables (not slices of one reordered copy of the batch), and no
more than the groups in flight are materialised at once; a multi-chunk batch written through the
API reads back as a plain dict model says.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.filegroup import write as writer
from lsm_lab.merge import records

_TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "int": (pa.int64(), st.one_of(st.none(), st.integers(-5, 5))),
    "text": (pa.string(), st.one_of(st.none(), st.text(max_size=4))),
    "large_text": (pa.large_string(), st.one_of(st.none(), st.text(max_size=3))),
    "list": (pa.list_(pa.int32()), st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3))),
    "struct": (pa.struct([("a", pa.int8())]), st.one_of(st.none(), st.fixed_dictionaries({"a": st.integers(0, 9)}))),
    "bool": (pa.bool_(), st.one_of(st.none(), st.booleans())),
}


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from([*_TYPES, "dictionary"]), data=st.data())
def test_take_by_chunks_equals_arrow_take(kind: str, data: st.DataObject) -> None:
    """`_take` (chunk by chunk, then one take of the group's pieces) gives Arrow's take of the whole column."""
    type_, values = _TYPES["text"] if kind == "dictionary" else _TYPES[kind]
    items = data.draw(st.lists(values, min_size=1, max_size=40))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(items)), max_size=5)))
    bounds = [0, *cuts, len(items)]
    chunks = [pa.array(items[a:b], type_) for a, b in itertools.pairwise(bounds)]
    if kind == "dictionary":
        chunks = [c.dictionary_encode() for c in chunks]
    column = pa.chunked_array(chunks, chunks[0].type)
    order = np.array(data.draw(st.lists(st.integers(0, len(items) - 1), min_size=1, max_size=40, unique=True)),
                     dtype=np.int64)
    splits: dict[tuple[int, ...], Any] = {}
    got = writer._take(column, order, pa.array(order), splits)
    expected = column.take(pa.array(order))
    assert records.one_array(got).equals(records.one_array(expected))
    again = writer._take(column, order, pa.array(order), splits)  # the second column of a layout: the kept plan
    assert records.one_array(again).equals(records.one_array(expected))


def _batch(n: int, chunks: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = [f"k{int(k):05d}" for k in rng.integers(0, n // 2, n)]  # repeated keys: the writer de-duplicates
    rider = [None if i % 7 == 0 else f"r{i}" for i in range(n)]
    table = pa.table({"id": keys, "city": [["x", "y", "z"][i % 3] for i in range(n)], "ts": np.arange(n),
                      "rider": pa.array(rider, pa.string()), "fare": rng.random(n)})
    bounds = np.linspace(0, n, chunks + 1).astype(int)
    return pa.Table.from_batches([b for a, e in itertools.pairwise(bounds) for b in table.slice(a, e - a).to_batches()])


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
@pytest.mark.parametrize(("chunks", "min_rows"), [(1, None), (4, 0), (4, None), (100, None)])
def test_group_rows_are_the_groups_rows_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str,
                                                 chunks: int, min_rows: int | None) -> None:
    """Every row of the batch in exactly one group, of its partition; an lsm_tree group's in key order (ties in
    arrival order), another's in arrival order; each group a table of its own rows, one chunk a column.
    Chunks of 750 or 30 rows are made contiguous first (`MIN_TAKE_CHUNK_ROWS`); with it 0 they are taken from."""
    if min_rows is not None:
        monkeypatch.setattr(writer, "MIN_TAKE_CHUNK_ROWS", min_rows)
    options: dict[str, Any] = {"hoodie.index.type": "BUCKET"}  # (the default layout's default: SIMPLE)
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city", ordering_field="ts",
                                 table_type="MERGE_ON_READ", layout=layout, num_buckets=4, **options)
    assert table.config.bucket_index
    batch = writer.prepare(table.config, None, _batch(3000, chunks, 1), "bulk_insert").rows
    tagged = writer.tag(table.config, batch, {}, None, op="bulk_insert")
    assert len(tagged) == 12  # 3 cities x 4 buckets
    place = {t: i for i, t in enumerate(batch.column("ts").to_pylist())}  # (`default`: the batch de-duplicated)
    seen: list[int] = []
    for partition, _, share, latest, keys in tagged:
        assert isinstance(share, writer.GroupRows) and latest is None and keys is None
        rows = share.table()
        assert rows.schema == batch.schema and rows.num_rows == share.num_rows
        assert all(c.num_chunks == 1 for c in rows.columns)
        assert set(rows.column(records.PARTITION_PATH).to_pylist()) == {partition}
        assert rows.column("id").equals(rows.column(records.RECORD_KEY))
        at = [place[t] for t in rows.column("ts").to_pylist()]  # ts = the row's place in the input
        assert rows.equals(batch.take(pa.array(at)))  # the batch's rows, whole
        order = list(zip(rows.column("id").to_pylist(), at)) if layout == "lsm_tree" else at
        assert order == sorted(order)
        seen.extend(at)
    assert sorted(seen) == list(range(batch.num_rows))


def test_writer_gets_one_groups_rows_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bulk insert hands each file group a table of its own rows (not a slice of one reordered copy of the
    batch, whose buffers would be the whole batch's), and holds at most the groups in flight at once."""
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city", ordering_field="ts",
                                 table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4)
    data = _batch(6000, 3, 2)
    whole = writer.prepare(table.config, None, data, "bulk_insert").rows.get_total_buffer_size()
    lock = threading.Lock()
    live, peak, sizes, buffers = [0], [0], [], []
    real_table, real_write, real_inner = writer.GroupRows.table, writer.write_file_group, writer._write_file_group

    def counted_table(self: writer.GroupRows, **kw: Any) -> pa.Table:
        with lock:
            live[0] += self.num_rows
            peak[0] = max(peak[0], live[0])
            sizes.append(self.num_rows)
        return real_table(self, **kw)

    def counted_write(**kw: Any) -> Any:
        try:
            return real_write(**kw)
        finally:
            with lock:
                live[0] -= kw["rows"].num_rows

    def inner(**kw: Any) -> Any:
        buffers.append(kw["rows"].get_total_buffer_size())
        return real_inner(**kw)

    monkeypatch.setattr(writer.GroupRows, "table", counted_table)
    monkeypatch.setattr(writer, "write_file_group", counted_write)
    monkeypatch.setattr(writer, "_write_file_group", inner)
    table.bulk_insert(data)
    assert len(sizes) == len(buffers) == 12 and live[0] == 0
    assert peak[0] <= sum(sorted(sizes)[-writer.WRITE_THREADS:]) < sum(sizes)
    assert max(buffers) < whole / 4  # each a twelfth of the batch or so: its own buffers
    model: dict[tuple[str, str], dict[str, Any]] = {}
    for row in data.to_pylist():  # a key per partition; the greatest ts wins, and ts grows with the row
        model[(row["city"], row["id"])] = row
    got = {(r["city"], r["id"]): r for r in table.read(columns=["id", "city", "ts", "rider", "fare"]).to_pylist()}
    assert got == model


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 400), cuts=st.lists(st.integers(0, 400), max_size=6), seed=st.integers(0, 2**16),
       key=st.sampled_from([["id"], ["id", "ts"]]), version=st.sampled_from([10, 9]), hive=st.booleans())
def test_a_chunked_batch_is_tagged_as_the_combined_one(tmp_path_factory: pytest.TempPathFactory, n: int,
                                                       cuts: list[int], seed: int, key: list[str], version: int,
                                                       hive: bool) -> None:
    """`prepare` keeps the key's chunks and dictionary-encodes the partition path (no per-row copy of either);
    the groups `tag` makes of it, their rows and order, and the tables the writer gets (partition path as
    text) are those of the same batch as one chunk (Hudi's and the CRC-32 bucket hash, one- and two-field keys)."""
    table = lsm_lab.create_table(tmp_path_factory.mktemp("t") / "t", name="t", record_key=key, partition_by="city",
                                 ordering_field="ts", table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4,
                                 table_version=version, hive_style=hive)
    data = _batch(n, 1, seed)
    bounds = [0, *sorted(min(c, n) for c in cuts), n]
    chunked = pa.Table.from_batches([b for a, e in itertools.pairwise(bounds) for b in data.slice(a, e - a).to_batches()],
                                    schema=data.schema)
    batch = writer.prepare(table.config, None, chunked, "bulk_insert").rows
    whole = writer.prepare(table.config, None, data.combine_chunks(), "bulk_insert").rows
    assert pa.types.is_dictionary(batch.schema.field(records.PARTITION_PATH).type)
    if key == ["id"]:  # the key is the field's column itself
        assert batch.column(records.RECORD_KEY).num_chunks == chunked.column("id").num_chunks
    got = writer.tag(table.config, batch, {}, None, op="bulk_insert")
    expected = writer.tag(table.config, whole, {}, None, op="bulk_insert")
    assert [(p, f) for p, f, *_ in got] == [(p, f) for p, f, *_ in expected]
    for (partition, _, share, _, _), (_, _, other, _, _) in zip(got, expected):
        assert isinstance(share, writer.GroupRows) and isinstance(other, writer.GroupRows)
        rows = writer.rows_table(share)
        assert rows.schema.field(records.PARTITION_PATH).type == pa.string()
        assert rows.equals(writer.rows_table(other).cast(rows.schema))
        assert set(rows.column(records.PARTITION_PATH).to_pylist()) == {partition}
        assert share.table().schema == batch.schema  # the batch's own types, before `rows_table`
