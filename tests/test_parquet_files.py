"""The one data-file writer (format/parquet_write.py, parquet_read.py, parquet_footer.py) and atomic files (lsm_lab/storage/atomic.py).

Streaming a table through `ParquetFileWriter` in any batch split gives the
footer `write_parquet` gives for the whole table: key range, the same bloom
bits, sortedness, Parquet's own bloom and sorting columns; files are
published atomically and never overwritten.
"""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spies import columns_read

from lsm_lab.errors import LsmLabError, TimelineError
from lsm_lab.format import parquet_footer, parquet_read, parquet_write
from lsm_lab.format.bloom import BloomFilter
from lsm_lab.storage import atomic

KEY = parquet_footer.RECORD_KEY


def _table(keys: list[str]) -> pa.Table:
    return pa.table({KEY: pa.array(keys, pa.string()), "v": pa.array(range(len(keys)), pa.int64())})


def _row_groups(path: Path) -> list[int]:
    md = pq.read_metadata(path)
    return [md.row_group(i).num_rows for i in range(md.num_row_groups)]


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.lists(st.text(min_size=1, max_size=12), max_size=400, unique=True),
       cuts=st.lists(st.integers(0, 400), max_size=6), row_group_size=st.integers(1, 150))
def test_streamed_file_has_the_footer_of_a_whole_write(tmp_path: Path, keys: list[str], cuts: list[int],
                                                       row_group_size: int) -> None:
    data = _table(keys)
    whole, streamed = tmp_path / f"w{len(keys)}_{row_group_size}_{len(cuts)}.parquet", tmp_path / "s.parquet"
    streamed.unlink(missing_ok=True)
    whole.unlink(missing_ok=True)
    parquet_write.write_parquet(whole, data, row_group_size=row_group_size, metadata={"x": "1"})
    writer = parquet_write.ParquetFileWriter(streamed, data.schema, row_group_size=row_group_size, metadata={"x": "1"})
    bounds = sorted({0, len(keys), *(c for c in cuts if c <= len(keys))})
    for a, b in itertools.pairwise(bounds):
        writer.write(data.slice(a, b - a).to_batches()[0] if b > a else data.slice(a, 0))
    writer.close()
    assert pq.read_table(streamed).equals(pq.read_table(whole))
    assert parquet_footer.footer(streamed) == parquet_footer.footer(whole)  # key range, bloom bits, caller's keys
    assert _row_groups(streamed) == _row_groups(whole)
    if keys:
        kv = parquet_footer.footer(whole)
        assert (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == (min(keys), max(keys))
        bloom = BloomFilter.from_base64(kv[parquet_footer.KEY_BLOOM])
        assert bloom.num_keys == len(keys) and bool(bloom.might_contain(keys).all())
    assert not list(tmp_path.glob(".*.tmp"))


def test_sorted_file_footer_and_row_groups(tmp_path: Path) -> None:
    keys = [f"key{i:06d}" for i in range(30_000)]
    data = _table(keys).append_column("pad", pa.array(["x" * 200] * len(keys)))
    path = tmp_path / "sorted.parquet"
    writer = parquet_write.ParquetFileWriter(path, data.schema, is_sorted=True, expected_rows=len(keys))
    for batch in data.to_batches(max_chunksize=4_000):
        writer.write(batch)
    size = writer.close()
    assert size == path.stat().st_size
    md = pq.read_metadata(path)
    kv = parquet_footer.footer_kv(md)
    assert parquet_footer.is_sorted_footer(kv) and pq.read_schema(path).metadata[b"lsm_lab.sorted"] == b"true"
    assert BloomFilter.from_base64(kv[parquet_footer.KEY_BLOOM]).might_contain(keys).all()
    sizes = _row_groups(path)
    expected = parquet_write.rows_per_group(data.slice(0, 4_000), parquet_write.DEFAULT_ROW_GROUP_ROWS,
                                         parquet_write.SORTED_ROW_GROUP_BYTES)
    assert len(sizes) > 2 and all(s == expected for s in sizes[:-1])  # byte-capped row groups
    for i in range(md.num_row_groups):
        assert md.row_group(i).sorting_columns == (pq.SortingColumn(0),)
        assert (md.row_group(i).column(0).bloom_filter_offset or 0) > 0  # Parquet's split-block bloom


def test_threaded_writer_writes_the_same_file(tmp_path: Path) -> None:
    data = _table([f"k{i:05d}" for i in range(10_000)])
    paths = []
    for threaded in (False, True):
        path = tmp_path / f"t{threaded}.parquet"
        writer = parquet_write.ParquetFileWriter(path, data.schema, row_group_size=1_000, threaded=threaded)
        for batch in data.to_batches(max_chunksize=333):
            writer.write(batch)
        writer.close()
        assert writer.rows == 10_000 and writer.row_groups == 10
        paths.append(path)
    assert pq.read_table(paths[0]).equals(pq.read_table(paths[1]))
    assert parquet_footer.footer(paths[0]) == parquet_footer.footer(paths[1])


class _GatedWrites:
    """Stands in for `pq.ParquetWriter.write_table`: each call waits for the gate, and may fail."""

    def __init__(self, real: Any, fail_at: int | None = None) -> None:
        self.real, self.fail_at = real, fail_at
        self.gate = threading.Event()
        self.started = 0
        self.lock = threading.Lock()

    def __call__(self, writer: pq.ParquetWriter, table: pa.Table, **kw: Any) -> None:
        with self.lock:
            self.started += 1
            n = self.started
        assert self.gate.wait(10)
        if n == self.fail_at:
            raise OSError("No space left on device")
        self.real(writer, table, **kw)


def test_threaded_writer_queues_at_most_encode_queue_row_groups(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    gated = _GatedWrites(pq.ParquetWriter.write_table)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", lambda self, table, **kw: gated(self, table, **kw))
    data = _table([f"k{i:05d}" for i in range(100)])
    writer = parquet_write.ParquetFileWriter(tmp_path / "q.parquet", data.schema, row_group_size=10, threaded=True)

    def feed() -> None:
        for b in data.to_batches(max_chunksize=10):
            writer.write(b)

    feeder = threading.Thread(target=feed)
    feeder.start()
    feeder.join(0.5)  # the encoder is stuck at its first row group: the caller must be held back
    assert feeder.is_alive() and writer.row_groups == parquet_write.ENCODE_QUEUE + 1  # queued, then one waiting
    gated.gate.set()
    feeder.join(10)
    writer.close()
    assert pq.read_table(tmp_path / "q.parquet").equals(data)


def test_threaded_writer_reports_a_queued_row_group_that_failed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    gated = _GatedWrites(pq.ParquetWriter.write_table, fail_at=2)
    gated.gate.set()
    monkeypatch.setattr(pq.ParquetWriter, "write_table", lambda self, table, **kw: gated(self, table, **kw))
    data = _table([f"k{i:05d}" for i in range(30)])
    path = tmp_path / "f.parquet"
    writer = parquet_write.ParquetFileWriter(path, data.schema, row_group_size=10, threaded=True)
    for batch in data.to_batches(max_chunksize=10):  # three row groups: all queued, the second fails
        writer.write(batch)
    with pytest.raises(OSError, match="No space left"):
        writer.close()
    writer.abort()
    assert not path.exists() and not list(tmp_path.glob(".*.tmp"))


def test_stale_facts_in_the_input_schema_are_dropped(tmp_path: Path) -> None:
    stale = {parquet_footer.KEY_MIN: "a", parquet_footer.KEY_MAX: "zzz", parquet_footer.KEY_SORTED: "true", "keep": "me"}
    data = _table(["m", "n"]).replace_schema_metadata(stale)
    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, data)
    kv = parquet_footer.footer(path)
    assert (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == ("m", "n")
    assert parquet_footer.KEY_SORTED not in kv and kv["keep"] == "me"


def test_null_keys_mean_no_bloom_and_no_key_column_means_no_key_facts(tmp_path: Path) -> None:
    schema = pa.schema([pa.field(KEY, pa.string()), pa.field("v", pa.int64())])
    path = tmp_path / "nulls.parquet"
    writer = parquet_write.ParquetFileWriter(path, schema)
    writer.write(pa.table({KEY: ["a", "b"], "v": [1, 2]}, schema=schema))
    writer.write(pa.table({KEY: [None, "c"], "v": [3, 4]}, schema=schema))
    writer.close()
    kv = parquet_footer.footer(path)
    assert parquet_footer.KEY_BLOOM not in kv and (kv[parquet_footer.KEY_MIN], kv[parquet_footer.KEY_MAX]) == ("a", "c")
    other = tmp_path / "nokey.parquet"
    parquet_write.write_parquet(other, pa.table({"x": [1]}))
    assert not {parquet_footer.KEY_MIN, parquet_footer.KEY_BLOOM} & set(parquet_footer.footer(other))


def test_empty_file_keeps_its_schema(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    parquet_write.write_parquet(path, _table([]), is_sorted=True)
    assert pq.read_table(path).schema.names == [KEY, "v"] and pq.read_metadata(path).num_rows == 0
    assert parquet_footer.KEY_MIN not in parquet_footer.footer(path)


def test_never_overwrites_and_abort_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, _table(["a"]))
    before = path.read_bytes()
    with pytest.raises(LsmLabError, match="refusing to overwrite"):
        parquet_write.write_parquet(path, _table(["b"]))
    assert path.read_bytes() == before
    writer = parquet_write.ParquetFileWriter(tmp_path / "g.parquet", _table([]).schema, row_group_size=1)
    writer.write(_table(["x", "y"]))
    writer.abort()
    assert not (tmp_path / "g.parquet").exists()
    with parquet_write.ParquetFileWriter(path, _table([]).schema, overwrite=True) as replacing:
        replacing.write(_table(["c"]))
    assert pq.read_table(path).column(KEY).to_pylist() == ["c"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.parquet"]


def test_atomic_create_and_replace(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "instant"
    atomic.create_file(path, b"one", mkdir=True)
    with pytest.raises(TimelineError, match="taken"):
        atomic.create_file(path, b"two", on_exists=lambda p: TimelineError("taken", path=p))
    with pytest.raises(LsmLabError, match="refusing to overwrite"):
        atomic.create_file(path, b"two")
    assert path.read_bytes() == b"one"
    atomic.replace_file(path, b"three")
    assert path.read_bytes() == b"three"
    with pytest.raises(RuntimeError), atomic.creating(tmp_path / "never") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")
    assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["instant"]
    assert not (tmp_path / "never").exists() and not list(tmp_path.glob(".*"))


def test_read_dictionary_keeps_only_columns_stored_with_few_values(tmp_path: Path) -> None:
    n = 20_000
    table = pa.table({"few": pa.array([f"city-{i % 3}" for i in range(n)]),
                      "unique": pa.array([f"key-{i:08d}-{'x' * 20}" for i in range(n)]),
                      "num": pa.array(range(n), pa.int64())})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=5_000)
    md = pq.read_metadata(path)
    assert parquet_footer.few_values(md, "few") and not parquet_footer.few_values(md, "unique")
    assert not parquet_footer.few_values(md, "absent")
    got = parquet_read.read_parquet(path, ["few", "unique", "num"], read_dictionary=["few", "unique", "absent"])
    assert pa.types.is_dictionary(got.schema.field("few").type)
    assert got.schema.field("unique").type == pa.string() and got.schema.field("num").type == pa.int64()
    assert got.cast(table.schema).equals(table)
    assert parquet_read.read_parquet(path, ["num"], read_dictionary=["few"]).column_names == ["num"]


def test_compression_only_where_it_pays(tmp_path: Path) -> None:
    """Plain columns that snappy barely shrinks (random ids, random doubles) are stored uncompressed, others
    snappy; the file reads back equal, and a file written before (snappy everywhere) reads the same."""
    import uuid

    import numpy as np

    rng = np.random.default_rng(7)
    n = 5000
    keys = sorted(str(uuid.UUID(int=int(rng.integers(0, 2**63)) << 64 | int(rng.integers(0, 2**63)))) for _ in range(n))
    t = pa.table({KEY: pa.array(keys), "id": pa.array(keys), "lat": pa.array(rng.random(n)),
                  "ts": pa.array(np.arange(n, dtype=np.int64) * 1000), "city": pa.array(["sf", "nyc"] * (n // 2)),
                  "note": pa.array([f"row {i % 50} of a repetitive text column" for i in range(n)])})
    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, t, is_sorted=True)
    md = pq.read_metadata(path).row_group(0)
    codec = {md.column(i).path_in_schema: md.column(i).compression for i in range(md.num_columns)}
    assert codec == {KEY: "UNCOMPRESSED", "id": "UNCOMPRESSED", "lat": "UNCOMPRESSED", "ts": "SNAPPY",
                     "city": "SNAPPY", "note": "SNAPPY"}
    assert pq.read_table(path).select(t.column_names).equals(t)
    old = tmp_path / "old.parquet"
    pq.write_table(t, old, compression="snappy")
    assert parquet_read.read_parquet(old).equals(parquet_read.read_parquet(path).select(t.column_names))
    # nothing to sample, or a nested column: one codec for all
    assert parquet_write.compression_of_columns(t.schema, None, []) == parquet_write.COMPRESSION
    nested = t.append_column("s", pa.array([{"a": 1}] * n))
    assert parquet_write.compression_of_columns(nested.schema, nested, []) == parquet_write.COMPRESSION
    # a column with nulls and a large string column are judged on their values
    holes = pa.table({"id": pa.array([None if i % 3 == 0 else k for i, k in enumerate(keys)], pa.large_string())})
    assert parquet_write.compression_of_columns(holes.schema, holes, []) == {"id": "none"}


def test_text_columns_of_one_value_are_filled_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`read_parquet` fills a text column whose statistics prove one value in the whole file, and decodes
    every other column: one value per row group but two in the file, a null, a number, a file without
    statistics.  The table equals pyarrow's own read (fails when any of those is filled, or a constant is
    decoded)."""
    n, per_group = 3_000, 1_000
    data = pa.table({
        KEY: pa.array([f"k{i:05d}" for i in range(n)]),
        "city": pa.array(["sao_paulo"] * n),
        "big": pa.array(["é" * 3] * n, pa.large_string()),
        "per_group": pa.array([f"g{i // per_group}" for i in range(n)]),
        "nulls": pa.array(["x"] * (n - 1) + [None]),
        "num": pa.array([7] * n, pa.int64()),
    })
    path = tmp_path / "c.parquet"
    parquet_write.write_parquet(path, data, is_sorted=True, row_group_size=per_group)
    assert parquet_footer.constant_text(pq.read_metadata(path), data.column_names) == {"city": "sao_paulo", "big": "ééé"}
    decoded = columns_read(monkeypatch, "read")
    whole = parquet_read.read_parquet(path)
    assert whole.equals(pq.read_table(path)) and whole.schema.metadata == pq.ParquetFile(path).read().schema.metadata
    assert decoded == [[KEY, "per_group", "nulls", "num"]]
    assert parquet_read.read_parquet(path, ["num", "city"]).equals(pq.read_table(path, columns=["num", "city"]))
    alone = parquet_read.read_parquet(path, ["city"])  # nothing left to decode
    assert alone.num_rows == n and alone.equals(pq.read_table(path, columns=["city"]))
    as_dict = parquet_read.read_parquet(path, ["city", KEY], read_dictionary=["city"])
    assert pa.types.is_dictionary(as_dict.schema.field("city").type)
    assert as_dict.column("city").cast(pa.string()).equals(data.column("city"))
    bare = tmp_path / "nostats.parquet"
    pq.write_table(data, bare, write_statistics=False)
    assert parquet_footer.constant_text(pq.read_metadata(bare), data.column_names) == {}
    assert parquet_read.read_parquet(bare).equals(pq.read_table(bare))
