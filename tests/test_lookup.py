"""Lookups and key-pruned reads: always the rows of a full read filtered to the keys.

The central property (Hypothesis): for random histories of inserts, upserts and
deletes, on both layouts, both table types and both merge modes, at the latest
time and at every earlier completed instant,

    table.lookup(keys, as_of=t)  ==  table.read(as_of=t) filtered to keys   (sorted by key, partition)
    table.read(as_of=t, filter=[(key, "in", keys)])  ==  the same rows

Then the safety nets: a missing, corrupt or garbage bloom filter never hides a
key; and the counters show the pruning at work (sorted files read one row group,
unsorted files all of them).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spies import columns_read

import lsm_lab
from lsm_lab.cli import app as cli
from lsm_lab.errors import InputError
from lsm_lab.filegroup import fsview
from lsm_lab.format import parquet_footer, parquet_write
from lsm_lab.interop.hudi_tables import unpack_tables
from lsm_lab.merge.records import PARTITION_PATH, RECORD_KEY
from lsm_lab.table.footer import FooterCache, clear_footer_cache
from lsm_lab.table.lookup import open_lookup, probe_file
from lsm_lab.table.predicate import KeyPredicate, key_predicate
from lsm_lab.table.stats import LookupStats

ORDER = [(RECORD_KEY, "ascending"), (PARTITION_PATH, "ascending")]
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
KEYS = [f"k{i:02d}" for i in range(14)] + ["é", "k1"]


def expected(table: lsm_lab.Table, keys: list[str], as_of: Any = None, columns: list[str] | None = None) -> pa.Table:
    full = table.read(as_of=as_of)
    rows = full.filter(pc.is_in(full.column(RECORD_KEY), value_set=pa.array(keys, pa.string())))
    rows = rows.sort_by(ORDER)
    return rows.select(columns) if columns is not None else rows


def sort(t: pa.Table) -> pa.Table:
    return t.sort_by(ORDER)


# --------------------------------------------------------------------------- the property
rows_st = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(["a", "b"]), st.integers(0, 4),
                             st.integers(0, 99)), min_size=1, max_size=12)
Row = tuple[str, str, int, int]  # id, p, ts, v
op_st = st.tuples(st.sampled_from(["upsert", "upsert", "insert", "delete"]), rows_st)


def as_batch(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "p": p, "ts": ts, "v": v} for i, p, ts, v in rows], schema=SCHEMA)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(["lsm_tree", "default"]), table_type=st.sampled_from(["MERGE_ON_READ", "COPY_ON_WRITE"]),
       ordering=st.sampled_from(["ts", None]), buckets=st.sampled_from([1, 2]),
       first=rows_st, ops=st.lists(op_st, max_size=5),
       wanted=st.lists(st.sampled_from([*KEYS, "absent", "k99"]), min_size=1, max_size=6))
def test_lookup_equals_filtered_read(layout: str, table_type: str, ordering: str | None, buckets: int,
                                     first: list[Row], ops: list[tuple[str, list[Row]]], wanted: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = lsm_lab.create_table(Path(tmp) / "t", name="t", record_key="id", partition_by="p",
                                     ordering_field=ordering, layout=layout, table_type=table_type,
                                     num_buckets=buckets)
        instants = [table.bulk_insert(as_batch(first))]
        for op, rows in ops:
            instants.append(getattr(table, op)(as_batch(rows)))
        for as_of in [None, *instants[:-1]]:
            want = expected(table, wanted, as_of)
            stats = LookupStats()
            got = table.lookup(wanted, as_of=as_of, stats=stats)
            assert got.equals(want), f"as_of={as_of}\n{got.to_pylist()}\n!=\n{want.to_pylist()}"
            assert stats.slices_fallback == 0
            by_filter = table.read(as_of=as_of, filter=[(RECORD_KEY, "in", wanted)])
            assert sort(by_filter).equals(want)
            by_field = table.read(as_of=as_of, filter=[("id", "in", wanted), ("v", ">=", 0)])
            assert sort(by_field).equals(want.filter(pc.greater_equal(want.column("v"), 0)))
        cols = ["v", "id"]
        assert table.lookup(wanted, columns=cols).equals(expected(table, wanted, columns=cols))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(["lsm_tree", "default"]), ops=st.lists(op_st, min_size=1, max_size=4),
       lo=st.sampled_from([None, *KEYS]), hi=st.sampled_from([None, *KEYS]),
       lo_op=st.sampled_from([">", ">="]), hi_op=st.sampled_from(["<", "<="]))
def test_range_filters_prune_without_changing_results(layout: str, ops: list[tuple[str, list[Row]]], lo: str | None,
                                                      hi: str | None, lo_op: str, hi_op: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = lsm_lab.create_table(Path(tmp) / "t", name="t", record_key="id", partition_by="p",
                                     ordering_field="ts", layout=layout, num_buckets=2)
        table.bulk_insert(as_batch([(k, "a", 1, 1) for k in KEYS]))
        for op, rows in ops:
            getattr(table, op)(as_batch(rows))
        conds = ([(RECORD_KEY, lo_op, lo)] if lo is not None else []) + ([("id", hi_op, hi)] if hi is not None else [])
        if not conds:
            return
        full = table.read()
        assert sort(table.read(filter=conds)).equals(sort(full.filter(pq.filters_to_expression(conds))))


# --------------------------------------------------------------------------- examples
@pytest.fixture()
def trips_tables(tmp_path: Path) -> dict[str, Any]:
    """Both layouts with the same trips: a base, two upsert logs and a delete log per group."""
    from lsm_lab.lab.datagen import TripsGenerator

    out: dict[str, Any] = {}
    for layout in ("lsm_tree", "default"):
        gen = TripsGenerator(11)
        table = lsm_lab.create_table(tmp_path / layout, name="trips", record_key="uuid", partition_by="city",
                                     ordering_field="ts", layout=layout, num_buckets=2)
        table.bulk_insert(gen.inserts(30_000))
        table.upsert(gen.updates(500))
        table.upsert(pa.concat_tables([gen.updates(300), gen.inserts(200)]))
        deletes = gen.deletes(100)
        table.delete(deletes)
        out[layout] = table
        out["keys"] = gen.keys.to_pylist()
        out["deleted"] = deletes.column("uuid").to_pylist()
    return out


def test_lookup_of_present_deleted_and_absent_keys(trips_tables: dict[str, Any]) -> None:
    keys = trips_tables["keys"][:20] + trips_tables["deleted"][:5] + ["absent-key", ""]
    results = []
    for layout in ("lsm_tree", "default"):
        table = trips_tables[layout]
        got = table.lookup(keys)
        assert got.equals(expected(table, keys))
        assert set(got.column("uuid").to_pylist()).isdisjoint(trips_tables["deleted"])
        results.append(got.select(["uuid", "ts", "fare", "city"]))
    assert results[0].equals(results[1])  # same data, same answers, whatever the layout


def test_sorted_files_read_one_row_group(tmp_path: Path) -> None:
    from lsm_lab.lab.datagen import TripsGenerator

    stats = {}
    data = TripsGenerator(5).inserts(40_000)
    key = data.column("uuid")[777].as_py()
    for layout in ("lsm_tree", "default"):
        table = lsm_lab.create_table(tmp_path / layout, name="t", record_key="uuid", ordering_field="ts",
                                     layout=layout, num_buckets=1)
        table.bulk_insert(data)
        stats[layout] = LookupStats()
        assert table.lookup(key, stats=stats[layout]).column("uuid").to_pylist() == [key]
    lsm, default = stats["lsm_tree"], stats["default"]
    # sorted base: row groups of ~3.5k rows (1 MiB), statistics pick one, binary search finds the row
    assert lsm.row_groups >= 5 and lsm.row_groups_read == 1 and lsm.binary_searches == 1
    # unsorted base: statistics cannot prune, every row group's key chunk is scanned
    assert default.binary_searches == 0 and default.row_groups_read == default.row_groups
    assert lsm.data_bytes * 4 < default.data_bytes


def test_bucket_and_bloom_pruning_across_slices(trips_tables: dict[str, Any]) -> None:
    key = trips_tables["keys"][123]
    lsm = LookupStats()
    trips_tables["lsm_tree"].lookup(key, stats=lsm)
    # 2 buckets x 3 cities: only the key's bucket is looked at; blooms skip the files of the other cities
    assert lsm.slices == 6 and lsm.slices_pruned_bucket == 3
    assert 1 <= lsm.files_opened <= 2 and lsm.files_pruned_bloom >= lsm.files - 3  # (a 1% false positive may open one more)


def test_probe_sorted_versus_unsorted_file(tmp_path: Path) -> None:
    keys = [f"key-{i:06d}" for i in range(20_000)]
    table = pa.table({RECORD_KEY: keys, "v": list(range(20_000))})
    rng = np.random.default_rng(0)
    shuffled = table.take(pa.array(rng.permutation(20_000)))
    parquet_write.write_parquet(tmp_path / "sorted.parquet", table, is_sorted=True, row_group_size=1000)
    parquet_write.write_parquet(tmp_path / "shuffled.parquet", shuffled, row_group_size=1000)
    cache = FooterCache()
    pred = KeyPredicate.of_keys(["key-012345"])
    found = {}
    counters = {}
    for name in ("sorted", "shuffled"):
        stats = LookupStats()
        info = cache.get(tmp_path / f"{name}.parquet", stats)
        found[name] = probe_file(info, RECORD_KEY, pred, None, [RECORD_KEY, "v"], stats)
        counters[name] = stats
    assert found["sorted"] is not None and found["shuffled"] is not None
    assert found["sorted"].to_pylist() == found["shuffled"].to_pylist() == [{RECORD_KEY: "key-012345", "v": 12345}]
    assert counters["sorted"].row_groups_read == 1 and counters["sorted"].binary_searches == 1
    assert counters["shuffled"].row_groups_read == 20 and counters["shuffled"].scans == 20
    assert counters["sorted"].data_bytes * 10 < counters["shuffled"].data_bytes
    # a range: contiguous in the sorted file
    rng_pred = KeyPredicate(lo="key-001500", hi="key-002499")
    stats = LookupStats()
    rows = probe_file(cache.get(tmp_path / "sorted.parquet"), RECORD_KEY, rng_pred, None, [RECORD_KEY], stats)
    assert rows is not None and rows.num_rows == 1000 and stats.row_groups_read == 2


# --------------------------------------------------------------------------- broken blooms never hide a key
def rewrite_footer(path: Path, bloom: str | None) -> None:
    """Rewrite a data file with the same rows and row groups, its bloom replaced (None: removed)."""
    md = pq.read_metadata(path)
    data = pq.read_table(path)
    tmp = path.with_name(path.name + ".rewrite")
    with pq.ParquetWriter(tmp, data.schema) as writer:
        start = 0
        for i in range(md.num_row_groups):
            n = md.row_group(i).num_rows
            writer.write_table(data.slice(start, n), row_group_size=n)
            start += n
        if bloom is not None:
            writer.add_key_value_metadata({parquet_footer.KEY_BLOOM: bloom})
    os.replace(tmp, path)


def _data_files(table: lsm_lab.Table) -> list[Path]:
    return [p for _, p, name in fsview.list_data_files(table.path) if name.ext == "parquet"]


@pytest.mark.usefixtures("hand_edited")
@pytest.mark.parametrize("damage", ["missing", "flipped", "garbage", "truncated", "other_key"])
def test_broken_bloom_never_hides_a_key(trips_tables: dict[str, Any], damage: str) -> None:
    from lsm_lab.format.bloom import BloomFilter

    table = trips_tables["lsm_tree"]
    keys = trips_tables["keys"][:30] + trips_tables["deleted"][:5]
    want = expected(table, keys)
    for path in _data_files(table):
        text = parquet_footer.footer(path).get(parquet_footer.KEY_BLOOM)
        assert text is not None  # every file lsm_lab writes has one
        if damage == "missing":
            new = None
        elif damage == "flipped":  # bits changed, CRC left alone: detected
            raw = bytearray(BloomFilter.from_base64(text).to_bytes())
            for i in range(28, len(raw)):
                raw[i] = 0
            import base64

            new = base64.b64encode(bytes(raw)).decode()
        elif damage == "garbage":
            new = "%%% not a bloom %%%"
        elif damage == "truncated":
            new = text[: len(text) // 2]
        else:  # an unknown version of the format
            raw = bytearray(BloomFilter.from_base64(text).to_bytes())
            raw[4] = 2
            import base64

            new = base64.b64encode(bytes(raw)).decode()
        rewrite_footer(path, new)
    clear_footer_cache()
    stats = LookupStats()
    got = table.lookup(keys, stats=stats)
    assert got.equals(want)
    assert stats.files_pruned_bloom == 0 and stats.files_without_bloom > 0
    assert sort(table.read(filter=[("uuid", "in", keys)])).equals(want)


def test_files_written_without_bloom_or_range(tmp_path: Path) -> None:
    keys = [f"k{i:04d}" for i in range(3000)]
    table = pa.table({RECORD_KEY: keys, "v": list(range(3000))})
    parquet_write.write_parquet(tmp_path / "plain.parquet", table, key_column=None, bloom_fpp=None, row_group_size=500)
    info = FooterCache().get(tmp_path / "plain.parquet")
    assert info.bloom() is None and info.bloom_status == "missing" and info.min_key is None
    stats = LookupStats()
    rows = probe_file(info, RECORD_KEY, KeyPredicate.of_keys(["k2999", "zz"]), None, [RECORD_KEY, "v"], stats)
    assert rows is not None and rows.to_pylist() == [{RECORD_KEY: "k2999", "v": 2999}]
    assert stats.row_groups_read == 1  # row-group statistics still prune


# --------------------------------------------------------------------------- other shapes of tables
def test_composite_keys_and_field_filters(tmp_table: Any) -> None:
    table = tmp_table(record_key=["id", "name"], ordering_field="ts", layout="lsm_tree")
    table.bulk_insert([{"id": i, "name": n, "ts": 1, "v": i} for i in range(50) for n in ("x", "y")])
    table.upsert([{"id": 7, "name": "x", "ts": 2, "v": 700}])
    table.delete([{"id": 8, "name": "y", "ts": 3}])
    keys = ["id:7,name:x", "id:8,name:y", "id:8,name:x", "id:99,name:x"]
    got = table.lookup(keys)
    assert got.equals(expected(table, keys))
    assert got.column("v").to_pylist() == [700, 8]
    pred = key_predicate(table.config, table.read_context(None).full_schema,
                         [("id", "in", [7, 8]), ("name", "=", "x")])
    assert pred is not None and pred.keys == ("id:7,name:x", "id:8,name:x")
    by_fields = table.read(filter=[("id", "in", [7, 8]), ("name", "=", "x")])
    assert sort(by_fields).column("v").to_pylist() == [700, 8]


def test_integer_key_field_filter(tmp_table: Any) -> None:
    table = tmp_table(record_key="id", layout="default")
    table.bulk_insert([{"id": i, "v": i * 10} for i in range(100)])
    assert table.read(filter=[("id", "=", 42)]).column("v").to_pylist() == [420]
    assert table.lookup("42").column("v").to_pylist() == [420]
    pred = key_predicate(table.config, table.read_context(None).full_schema, [("id", "in", [1, 2])])
    assert pred is not None and pred.keys == ("1", "2")
    # a type mismatch cannot prune (the filter itself decides what happens)
    assert key_predicate(table.config, table.read_context(None).full_schema, [("id", "=", "x")]) is None


def test_key_predicate_shapes(tmp_table: Any) -> None:
    table = tmp_table(record_key="id", layout="lsm_tree")
    table.bulk_insert([{"id": f"k{i}", "v": i} for i in range(10)])
    schema = table.read_context(None).full_schema
    cfg = table.config
    assert key_predicate(cfg, schema, None) is None
    assert key_predicate(cfg, schema, [("v", "=", 1)]) is None
    assert key_predicate(cfg, schema, [("id", "!=", "k1")]) is None
    one = key_predicate(cfg, schema, [("id", "=", "k1"), ("id", "in", ["k1", "k2"])])
    assert one is not None and one.keys == ("k1",)
    one = key_predicate(cfg, schema, [("id", "in", ["k1", "k5"]), ("id", ">", "k3")])
    assert one is not None and one.keys == ("k5",)
    p = key_predicate(cfg, schema, [("id", ">=", "k2"), ("id", ">", "k2"), ("id", "<=", "k7")])
    assert p is not None
    assert (p.keys, p.lo, p.lo_inclusive, p.hi, p.hi_inclusive) == (None, "k2", False, "k7", True)
    empty = key_predicate(cfg, schema, [("id", "=", "k1"), ("id", "=", "k2")])
    assert empty is not None and empty.is_empty
    assert table.read(filter=[("id", "=", "k1"), ("id", "=", "k2")]).num_rows == 0


def test_empty_table_and_bad_keys(tmp_table: Any) -> None:
    table = tmp_table(record_key="id")
    assert table.lookup(["a"]).num_rows == 0
    table.bulk_insert([{"id": "a", "v": 1}])
    assert table.lookup([]).num_rows == 0
    with pytest.raises(InputError):
        table.lookup([1, 2])
    with pytest.raises(InputError):
        table.lookup(3)
    with pytest.raises(InputError):
        table.lookup(["a"], columns=["nope"])


def test_prepared_lookup_counts_and_caches_footers(trips_tables: dict[str, Any]) -> None:
    clear_footer_cache()
    kl = open_lookup(trips_tables["lsm_tree"])
    first, second = LookupStats(), LookupStats()
    key = trips_tables["keys"][5]
    a = kl.lookup(key, stats=first)
    b = kl.lookup(key, stats=second)
    assert a.equals(b) and a.num_rows == 1
    assert first.footers_read > 0 and second.footers_read == 0
    assert second.bytes_read == second.data_bytes > 0
    assert set(first.as_dict()) >= {"files_opened", "row_groups_read", "bytes_read"}


def test_trace_explains_each_decision(trips_tables: dict[str, Any]) -> None:
    stats = LookupStats(trace=[])
    trips_tables["lsm_tree"].lookup("absent-key", stats=stats)
    text = "\n".join(stats.trace or [])
    assert "bucket" in text and ("bloom" in text or "key range" in text)


# --------------------------------------------------------------------------- command line
def test_cli_read_key_and_lookup(trips_tables: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    table = trips_tables["lsm_tree"]
    key = trips_tables["keys"][3]
    assert cli.main(["read", str(table.path), "--key", key, "--key", "nope", "--columns", "uuid,fare", "--json"]) == 0
    out = capsys.readouterr()
    assert key in out.out and "lookup:" in out.err and "files opened" in out.err
    assert cli.main(["lookup", str(table.path), key, "--explain"]) == 0
    out = capsys.readouterr()
    assert key in out.out and "binary search" in out.err
    assert cli.main(["show", "blooms", str(table.path)]) == 0
    assert "bloom:" in capsys.readouterr().out
    assert cli.main(["read", str(table.path), "--key", key, "--read-optimized"]) == 2


def test_compat_tables_with_v1_logs_fall_back(tmp_path: Path) -> None:
    table = lsm_lab.create_table(tmp_path / "v8", name="t", record_key="id", ordering_field="ts", table_version=8)
    table.bulk_insert([{"id": f"k{i}", "ts": 1, "v": i} for i in range(100)])
    table.upsert([{"id": "k5", "ts": 2, "v": 500}])
    table.delete([{"id": "k6", "ts": 3}])
    stats = LookupStats()
    keys = ["k5", "k6", "k7", "nope"]
    got = table.lookup(keys, stats=stats)
    assert got.equals(expected(table, keys)) and got.column("v").to_pylist() == [500, 7]
    assert stats.slices_fallback >= 1  # v1 (#HUDI#) logs: the slice is read in full, then filtered


def test_real_hudi_tables(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tables Apache Hudi wrote (no lsm_lab bloom; Hudi's own min/max footers; some without meta fields)."""
    zips = shared_dir / "hudi-tables"
    assert zips.is_dir(), f"{zips} is missing from this checkout"
    tables = unpack_tables(zips, tmp_path_factory.mktemp("hudi-lookup"))
    checked = 0
    for stem, path in sorted(tables.items()):
        table = lsm_lab.open_table(path)
        for inst in [None, *table.completed_writes()]:
            as_of = None if inst is None else inst.completion_time
            full = table.read(as_of=as_of)
            keys = [*sorted(set(full.column(RECORD_KEY).to_pylist()))[:6], "absent-key"]
            got = table.lookup(keys, as_of=as_of)
            assert got.equals(expected(table, keys, as_of)), f"{stem} as of {as_of}"
            assert sort(table.read(as_of=as_of, filter=[(RECORD_KEY, "in", keys)])).equals(got), stem
            checked += 1
    assert checked > 0


def test_chunk_bytes_per_row_group_add_up_to_the_file(tmp_path: Path) -> None:
    """`FileInfo.chunk_bytes(rg)` (computed for the row groups a lookup reads) sums the compressed chunks of
    each top-level column, nested leaves included, and over all row groups gives every chunk once."""
    path = tmp_path / "f.parquet"
    n = 5000
    table = pa.table({"k": [f"k{i:05d}" for i in range(n)], "v": np.arange(n),
                      "s": pa.array([{"a": i, "b": str(i)} for i in range(n)])})
    pq.write_table(table, path, row_group_size=1200)
    info = FooterCache().get(path)
    md = pq.read_metadata(path)
    assert info.num_row_groups == md.num_row_groups == 5
    total = 0
    for rg in range(md.num_row_groups):
        sizes = info.chunk_bytes(rg)
        assert set(sizes) == {"k", "v", "s"}
        leaves = [md.row_group(rg).column(c) for c in range(md.num_columns)]
        assert sizes["s"] == sum(c.total_compressed_size for c in leaves if c.path_in_schema.startswith("s."))
        assert info.chunk_bytes(rg) is sizes  # computed once
        total += sum(sizes.values())
    assert total == sum(md.row_group(r).column(c).total_compressed_size
                        for r in range(md.num_row_groups) for c in range(md.num_columns))


# --------------------------------------------------------------------------- the prepared reader's fast paths
def test_one_prepared_lookup_serves_many_keys_and_column_sets(tmp_path: Path) -> None:
    """A `KeyLookup` keeps per-snapshot facts (column plans, slice files, buckets) across lookups; the
    per-lookup facts (the keys' buckets) must not leak from one lookup into the next."""
    from lsm_lab.lab.datagen import TripsGenerator

    gen = TripsGenerator(21)
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", partition_by="city",
                                 ordering_field="ts", layout="lsm_tree", num_buckets=4)
    table.bulk_insert(gen.inserts(6_000))
    table.upsert(pa.concat_tables([gen.updates(300), gen.inserts(100)]))
    table.delete(gen.deletes(50))
    keys = gen.keys.to_pylist()
    rng = np.random.default_rng(3)
    kl = open_lookup(table)
    column_sets: list[list[str] | None] = [None, ["fare", "uuid"], ["city"], None, ["rider", "ts", "uuid"]]
    for i in range(30):
        wanted = [keys[j] for j in rng.integers(0, len(keys), 1 + i % 4)] + (["absent"] if i % 5 == 0 else [])
        cols = column_sets[i % len(column_sets)]
        stats = LookupStats()
        got = kl.lookup(wanted, columns=cols, stats=stats)
        assert got.equals(expected(table, wanted, columns=cols)), (i, wanted, cols)
        assert stats.slices_pruned_bucket > 0 or len(set(wanted)) > 1
    one, every = LookupStats(), LookupStats()  # a column set reads its columns only, not the last set's
    kl.lookup(keys[7], columns=["city"], stats=one)
    kl.lookup(keys[7], stats=every)
    assert 0 < one.data_bytes < every.data_bytes


def _sorted_trips(tmp_path: Path) -> tuple[lsm_lab.Table, list[str]]:
    from lsm_lab.lab.datagen import TripsGenerator

    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", ordering_field="ts",
                                 layout="lsm_tree", num_buckets=1)
    table.bulk_insert(TripsGenerator(8).inserts(12_000))  # one sorted base of ~4 row groups of 1 MiB
    return table, sorted(table.read(columns=["uuid"]).column("uuid").to_pylist())


def test_rows_picked_from_one_row_group(tmp_path: Path) -> None:
    """Several keys in one row group: consecutive rows (a slice) and scattered rows (a take), and keys in
    two row groups."""
    table, keys = _sorted_trips(tmp_path)
    kl = open_lookup(table)
    for wanted in (keys[100:103], [keys[100], keys[105], keys[190]], [keys[0]], keys[-2:],
                   [keys[50], keys[5000], keys[9000]], [keys[3000 + i] for i in range(0, 1500, 7)]):
        clear_footer_cache()
        stats = LookupStats()
        got = kl.lookup(wanted, stats=stats)
        want = expected(table, wanted)
        assert got.num_rows == len(wanted) and got.equals(want), wanted
        if len(wanted) <= 3:  # (many keys against one row group: one scan is cheaper than bisecting each)
            assert stats.binary_searches >= 1 and stats.scans == 0


def test_key_statistics_of_non_ascii_keys(tmp_path: Path) -> None:
    """Row-group key statistics are decoded from their raw UTF-8 bytes: the same strings pyarrow's typed
    statistics give, so keys outside ASCII are found in the right row group."""
    rng = np.random.default_rng(5)
    alphabet = ["a", "z", "é", "ß", "日", "本", "😀", "~", "0"]
    keys = sorted({"".join(rng.choice(alphabet, 6)) for _ in range(3000)})
    path = tmp_path / "f.parquet"
    parquet_write.write_parquet(path, pa.table({RECORD_KEY: keys, "v": list(range(len(keys)))}), is_sorted=True,
                             row_group_size=97)
    info = FooterCache().get(path)
    md = pq.read_metadata(path)
    leaf = next(i for i in range(md.num_columns) if md.schema.column(i).path == RECORD_KEY)
    typed = [(md.row_group(r).column(leaf).statistics.min, md.row_group(r).column(leaf).statistics.max, 0)
             for r in range(md.num_row_groups)]
    assert info.key_stats(RECORD_KEY) == typed
    for i in range(0, len(keys), 41):
        stats = LookupStats()
        rows = probe_file(info, RECORD_KEY, KeyPredicate.of_keys([keys[i]]), None, [RECORD_KEY, "v"], stats)
        assert rows is not None and rows.to_pylist() == [{RECORD_KEY: keys[i], "v": i}]
        assert stats.row_groups_read == 1


def test_thread_pool_rule_does_not_change_answers(trips_tables: dict[str, Any],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.table import lookup as lookup_module

    keys = trips_tables["keys"][:8] + trips_tables["deleted"][:2]
    for layout in ("lsm_tree", "default"):
        table = trips_tables[layout]
        answers = []
        for threshold in (0, 1 << 62):  # pyarrow's pool for every read, then for none
            monkeypatch.setattr(lookup_module, "READ_THREADS_MIN_BYTES", threshold)
            clear_footer_cache()
            answers.append(table.lookup(keys))
        assert answers[0].equals(answers[1]) and answers[0].equals(expected(table, keys))


@pytest.mark.usefixtures("hand_edited")
@pytest.mark.parametrize("layout", ["default", "lsm_tree"])
def test_a_file_holding_a_key_twice_is_merged(tmp_path: Path, layout: str) -> None:
    """Files from other writers may hold a key twice (or rows out of key order): the rows of the one file
    that holds the keys are the answer only when each key is there once, in key order; else the merge
    picks the version, as a snapshot read does."""
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="p",
                                 ordering_field="ts", layout=layout, num_buckets=1)
    table.bulk_insert(as_batch([(f"k{i:02d}", "a", 1, i) for i in range(10)]))
    (path,) = _data_files(table)
    data = pq.read_table(path)
    twice = data.filter(pc.equal(data.column(RECORD_KEY), "k03"))
    later = twice.set_column(twice.schema.get_field_index("ts"), "ts", pa.array([9], pa.int64()))
    later = later.set_column(later.schema.get_field_index("v"), "v", pa.array([99], pa.int64()))
    rows = pa.concat_tables([data.slice(0, 5), later, data.slice(5)])  # k03 twice, the later version after k04
    tmp = path.with_name(path.name + ".rewrite")
    with pq.ParquetWriter(tmp, rows.schema) as writer:  # no footer facts: no bloom, range or sorted flag
        writer.write_table(rows)
    os.replace(tmp, path)
    full = table.read()
    assert full.filter(pc.equal(full.column("id"), "k03")).column("v").to_pylist() == [99]
    for wanted in (["k03"], ["k02", "k03"], ["k03", "k04"]):
        clear_footer_cache()
        got = table.lookup(wanted)
        assert got.equals(expected(table, wanted)) and got.num_rows == len(wanted), wanted


@pytest.mark.parametrize("layout", ["default", "lsm_tree"])
def test_answers_hold_their_rows_only(tmp_path: Path, layout: str) -> None:
    """A lookup's answer is a copy of the rows found, not a view into the row group it was read from: a
    service keeping answers (or the benchmark's agreement check) must not pin megabytes per row."""
    from lsm_lab.lab.datagen import TripsGenerator

    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", ordering_field="ts",
                                 layout=layout, num_buckets=1)
    data = TripsGenerator(4).inserts(20_000)
    table.bulk_insert(data)
    for key in data.column("uuid").to_pylist()[:3]:
        got = table.lookup(key)
        assert got.num_rows == 1
        assert got.get_total_buffer_size() < 20_000, got.get_total_buffer_size()  # one row: well under 20 kB


def test_the_key_field_is_filled_from_the_key_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a simple key generator the key field equals `_hoodie_record_key` in every data row: a lookup
    decodes the key column once and fills the field from it (fails when the field's chunk is read, or
    filled from another column).  Keys updated by a log and keys in the base, both layouts' answers equal
    the filtered read."""
    from lsm_lab.lab.datagen import TripsGenerator

    gen = TripsGenerator(8)
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", ordering_field="ts",
                                 layout="lsm_tree", num_buckets=1)
    table.bulk_insert(gen.inserts(12_000))
    table.upsert(gen.updates(200))  # a log holding some of the keys
    keys = sorted(table.read(columns=["uuid"]).column("uuid").to_pylist())
    asked = columns_read(monkeypatch)
    kl = open_lookup(table)
    for wanted in ([keys[10]], [keys[20], keys[7000]], keys[300:305]):
        clear_footer_cache()
        asked.clear()
        got = kl.lookup(wanted)
        assert got.equals(expected(table, wanted)), wanted
        assert got.column("uuid").equals(got.column(RECORD_KEY))
        assert asked and all("uuid" not in cols for cols in asked), asked
        assert any(RECORD_KEY in cols for cols in asked)


def test_a_key_filtered_read_uses_the_key_index(trips_tables: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """`read(filter=[(key, "in", keys)])` skips the files the key index rules out without reading their
    footers, as a lookup does, and returns the same rows as without the index (fails when the filtered
    read reads every candidate footer)."""
    from lsm_lab.format import keyindex
    from lsm_lab.table import footer as footer_mod

    table = trips_tables["lsm_tree"]
    keys = trips_tables["keys"][:3]
    read: list[str] = []
    real = footer_mod._file_info

    def counted(path: Any, size: Any = None) -> Any:
        read.append(str(path))
        return real(path, size)

    monkeypatch.setattr(footer_mod, "_file_info", counted)
    clear_footer_cache()
    with_index = sort(table.read(filter=[("uuid", "in", keys)]))
    footers_with = len(read)
    monkeypatch.setattr(keyindex, "load_index", lambda *a, **k: keyindex.KeyIndex())
    read.clear()
    clear_footer_cache()
    without = sort(table.read(filter=[("uuid", "in", keys)]))
    assert with_index.equals(without) and with_index.equals(expected(table, keys))
    assert with_index.num_rows == 3
    assert footers_with <= 3 + 1 < len(read), (footers_with, len(read))  # a bloom false positive at most


def test_text_columns_of_one_value_are_filled_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text column whose row-group statistics show one value (min = max, no nulls) is filled with it:
    a table's partition path, file name and bulk-insert commit time are never decoded by a lookup, and
    the answers equal the filtered read (fails when those chunks are read, or filled with another value)."""
    from lsm_lab.lab.datagen import TripsGenerator

    gen = TripsGenerator(9)
    table = lsm_lab.create_table(tmp_path / "t", name="t", record_key="uuid", ordering_field="ts",
                                 partition_by="city", layout="lsm_tree", num_buckets=1)
    table.bulk_insert(gen.inserts(6_000))
    table.upsert(gen.updates(150))  # a log: its keys' rows come from another file, with other values
    keys = sorted(table.read(columns=["uuid"]).column("uuid").to_pylist())
    asked = columns_read(monkeypatch)
    kl = open_lookup(table)
    for wanted in ([keys[3]], [keys[40], keys[4000]], keys[100:106]):
        clear_footer_cache()
        asked.clear()
        got = kl.lookup(wanted)
        assert got.equals(expected(table, wanted)), wanted
        read = {c for cols in asked for c in cols}
        assert read and not read & {PARTITION_PATH, "_hoodie_file_name", "city"}, read


def test_constant_text_needs_proof_from_the_statistics(tmp_path: Path) -> None:
    """Only flat text columns with min = max and a null count of 0 are filled; two values, a null, a
    number or a file written without statistics are decoded (fails when any of them is taken as constant)."""
    n = 1_000
    data = pa.table({
        RECORD_KEY: pa.array([f"k{i:05d}" for i in range(n)]),
        "one": pa.array(["same"] * n),
        "two": pa.array(["same"] * (n - 1) + ["other"]),
        "nulls": pa.array(["same"] * (n - 1) + [None]),
        "num": pa.array([7] * n, pa.int64()),
        "big": pa.array(["é" * 3] * n, pa.large_string()),
    })
    path = tmp_path / "c.parquet"
    parquet_write.write_parquet(path, data, is_sorted=True)
    info = FooterCache().get(path)
    assert info.constant_text(0, data.column_names) == {"one": "same", "big": "ééé"}
    stats = LookupStats()
    rows = probe_file(info, RECORD_KEY, KeyPredicate.of_keys(["k00998", "k00999"]), None, data.column_names, stats)
    assert rows is not None
    assert rows.select(data.column_names).equals(data.slice(n - 2)), rows
    bare = tmp_path / "nostats.parquet"
    pq.write_table(data, bare, write_statistics=False)
    assert FooterCache().get(bare).constant_text(0, data.column_names) == {}


def test_the_trace_names_the_file_of_every_row_group(tmp_path: Path) -> None:
    """After a hit in a row group with constant columns, later trace lines still name the file (issue 34, item 5)."""
    from lsm_lab.table.stats import LookupStats

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", layout="lsm_tree", num_buckets=1)
    t.insert([{"id": f"k{i:05d}", "v": i, "pad": f"{i:05d}" * 200} for i in range(5_000)])  # ~5 MB: row groups
    stats = LookupStats(trace=[])
    got = t.lookup(["k00003", "k02500", "k04990"], columns=["id", "v", "_hoodie_file_name"], stats=stats)
    assert got.column("id").to_pylist() == ["k00003", "k02500", "k04990"]
    (base,) = {f.path.name for fs in t.latest_slices() for f in [fs.base_file] if f is not None}
    lines = [line for line in stats.trace or [] if "row group" in line and "skipped" not in line]
    assert len(lines) >= 2, stats.trace
    assert all(line.startswith(f"{base}: row group") for line in lines), lines
