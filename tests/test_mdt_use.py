"""Using the metadata table's indexes (issue 32, "Use it"): pruning and index lookups never change a result.

On the four shipped Hudi tables with a metadata table:
  column stats     every filter of a Hypothesis-generated set gives the same rows with and without the
                   indexes; the slices skipped are exactly the base-only slices with no matching row
                   (min/max are attained values, so for one condition the rule is exact); a slice with
                   logs is never judged (hudi-rs FilePruner's rule)
  record index     lookups read only the file groups the index names, same rows
  secondary index  `=` / `in` on merchant_name and txn_date: same rows, fewer slices
  staleness        after a write that does not maintain the MDT, the indexes are not used (a new value is found)
  upsert tagging   through the record index (when the writer maintains it) lands keys in their file groups,
                   the table equals a dict model; a global index refuses to move a key between partitions
And on a version 10 table lsm_lab writes (native HFile MDT logs): tagging and every index used, as a model says.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.errors import LsmLabError, UnsupportedFeatureError
from lsm_lab.filegroup import index
from lsm_lab.filegroup import write as writer
from lsm_lab.filegroup.readstats import ReadStats
from lsm_lab.services import mdt_maintained
from lsm_lab.table import mdt_use
from lsm_lab.table.stats import LookupStats

TABLES = ["v8_trips_8i3u1d", "v9_txns_simple_meta", "v9_txns_complex_meta", "v9_nonpartitioned_rollback"]
KEY = "_hoodie_record_key"


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([(KEY, "ascending"), ("_hoodie_partition_path", "ascending")])


def _user_columns(t: lsm_lab.Table) -> list[str]:
    assert t.schema is not None
    return [f.name for f in t.schema if not f.name.startswith("_hoodie") and f.name not in t.config.partition_by
            and not pa.types.is_nested(f.type)]


def _same(t: lsm_lab.Table, filter: Any) -> ReadStats:
    with_index = t.read(filter=filter)
    stats = t.last_read_stats
    assert stats is not None
    without = t.read(filter=filter, indexes=False)
    assert t.last_read_stats is not None and t.last_read_stats.indexes_used == []
    assert _sorted(with_index).equals(_sorted(without)), filter
    return stats


@pytest.mark.parametrize("name", TABLES)
def test_filters_give_the_same_rows_with_and_without_indexes(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    snapshot = t.read()
    cols = _user_columns(t)
    values = {c: [v for v in snapshot.column(c).to_pylist() if v is not None] for c in cols}
    ops = ["=", "<", "<=", ">", ">=", "in"]

    def bump(v: Any, d: int) -> Any:
        if isinstance(v, (bool, str)):
            return v
        if isinstance(v, dt.datetime):
            return v + dt.timedelta(hours=d)
        if isinstance(v, dt.date):
            return v + dt.timedelta(days=d)
        if isinstance(v, decimal.Decimal):
            return v + decimal.Decimal(d)
        return v + d

    cond = st.sampled_from([c for c in cols if values[c]]).flatmap(lambda c: st.tuples(
        st.just(c), st.sampled_from(ops), st.sampled_from(values[c]), st.integers(-2, 2)))

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(cond, min_size=1, max_size=2))
    def check(conds: list[tuple[str, str, Any, int]]) -> None:
        filter = [(c, op, [bump(v, d), v] if op == "in" else bump(v, d)) for c, op, v, d in conds]
        _same(t, filter)

    check()


@pytest.mark.parametrize(("name", "column", "value"), [
    ("v9_txns_simple_meta", "amount", decimal.Decimal("100.00")),
    ("v9_txns_complex_meta", "amount", decimal.Decimal("100.00")),
    ("v9_nonpartitioned_rollback", "amount", decimal.Decimal("100.00")),
    ("v8_trips_8i3u1d", "fare", 30.0),
])
def test_column_stats_skip_exactly_the_base_files_without_a_match(real_table: Callable[[str], Path], name: str,
                                                                   column: str, value: Any) -> None:
    t = lsm_lab.open_table(real_table(name))
    slices = t.latest_slices()
    checks: list[tuple[str, Callable[[Any], bool]]] = [("<", lambda x: bool(x < value)), (">", lambda x: bool(x > value))]
    for op, holds in checks:
        stats = _same(t, [(column, op, value)])
        judged = [s for s in slices if s.base_file is not None and not s.log_files]
        expected = 0
        for s in judged:
            assert s.base_file is not None
            own = pq.read_table(s.base_file.path, columns=[column]).column(column).to_pylist()
            expected += not any(v is not None and holds(v) for v in own)
        assert stats.files_judged_column_stats == len(judged)  # a slice with logs is never judged
        assert stats.files_skipped_column_stats == expected, op
        assert "column_stats" in stats.indexes_used
    assert any(_same(t, [(column, op, value)]).files_skipped_column_stats for op in ("<", ">"))


def test_a_slice_with_logs_is_never_skipped(real_table: Callable[[str], Path]) -> None:
    t = lsm_lab.open_table(real_table("v8_trips_8i3u1d"))
    with_logs = [s for s in t.latest_slices() if s.log_files]
    assert with_logs
    rows = t.read(filter=[("fare", ">", 1e9)])  # no row: every base-only slice is ruled out, logs are read
    stats = t.last_read_stats
    assert rows.num_rows == 0 and stats is not None
    assert stats.files_skipped_column_stats == len(t.latest_slices()) - len(with_logs)


@pytest.mark.parametrize("name", TABLES)
def test_lookup_through_the_record_index(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    snap = t.read(columns=[KEY, "_hoodie_partition_path", "_hoodie_file_name"]).to_pylist()
    homes: dict[str, set[tuple[str, str]]] = {}
    for r in snap:
        homes.setdefault(r[KEY], set()).add((r["_hoodie_partition_path"], r["_hoodie_file_name"].split("_")[0]))
    keys = sorted(homes)
    single = [k for k in keys if len(homes[k]) == 1]
    m = t.metadata_table()
    assert m is not None
    for wanted in (single[:1], single[::3], [*single[:2], "no-such-key"], ["no-such-key"]):
        stats = LookupStats()
        got = t.lookup(wanted, stats=stats)
        assert got.equals(t.lookup(wanted, indexes=False)), wanted
        assert got.num_rows == len([k for k in wanted if k in homes])
        groups = {(r["partition"], r["file_id"]) for r in m.record_index(wanted).to_pylist()}
        assert stats.slices_pruned_record_index == len(t.latest_slices()) - len(groups)
    t.lookup(single[:1])
    assert t.last_read_stats is not None and t.last_read_stats.indexes_used == ["record_index"]
    # a key a table holds in two file groups (the rolled-back table has one): the record index keeps one
    # location, and a lookup through it reads that group only, as upstream's record-level index does
    for k in [k for k in keys if len(homes[k]) > 1]:
        loc = m.record_index([k]).to_pylist()[0]
        got = t.lookup([k], columns=["_hoodie_file_name"]).column(0).to_pylist()
        assert [f.split("_")[0] for f in got] == [loc["file_id"]]
        assert t.lookup([k], indexes=False).num_rows == len(homes[k])


@pytest.mark.parametrize("name", ["v9_txns_simple_meta", "v9_txns_complex_meta"])
def test_secondary_index_filters(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    snap = t.read()
    merchants = sorted({v for v in snap.column("merchant_name").to_pylist() if v is not None})
    dates = sorted({v for v in snap.column("txn_date").to_pylist() if v is not None})
    cases: list[tuple[list[Any], str]] = [
        ([("merchant_name", "=", merchants[0])], "secondary_index_merchant_idx"),
        ([("merchant_name", "in", merchants[1:3])], "secondary_index_merchant_idx"),
        ([("merchant_name", "=", "no such merchant")], "secondary_index_merchant_idx"),
        ([("txn_date", "=", dates[-1])], "secondary_index_txn_date_idx"),
        ([("txn_date", "in", dates[:2]), ("amount", ">", decimal.Decimal("50"))], "secondary_index_txn_date_idx"),
    ]
    for filter, index_name in cases:
        stats = _same(t, filter)
        assert index_name in stats.indexes_used and "record_index" in stats.indexes_used, filter
        assert stats.slices_skipped_index > 0, filter
    # time travel: the record and secondary indexes hold the latest state only, so they are not used
    old = t.completed_writes()[-3].begin_time
    a = t.read(as_of=old, filter=[("merchant_name", "=", merchants[0])])
    assert t.last_read_stats is not None and "record_index" not in t.last_read_stats.indexes_used
    assert _sorted(a).equals(_sorted(t.read(as_of=old, filter=[("merchant_name", "=", merchants[0])], indexes=False)))


def _copy(real_table: Callable[[str], Path], name: str, tmp_path: Path, index_type: str | None = None) -> Path:
    target = tmp_path / name
    shutil.copytree(real_table(name), target)
    if index_type is not None:
        with open(target / ".hoodie" / "hoodie.properties", "a") as f:
            f.write(f"hoodie.index.type={index_type}\n")
    return target


def _changed(t: lsm_lab.Table, n: int, merchant: str) -> pa.Table:
    snap = t.read()
    cols = [c for c in snap.column_names if not c.startswith("_hoodie")]
    rows = snap.select(cols).slice(0, n)
    rows = rows.set_column(rows.schema.get_field_index("merchant_name"), "merchant_name", pa.array([merchant] * n))
    return rows.set_column(rows.schema.get_field_index("txn_ts"), "txn_ts", pa.array([2 * 10**12] * n, pa.int64()))


def test_an_index_lsm_lab_keeps_is_used_and_a_stale_one_is_not(real_table: Callable[[str], Path],
                                                                 tmp_path: Path) -> None:
    t = lsm_lab.open_table(_copy(real_table, "v9_txns_simple_meta", tmp_path))
    m = t.metadata_table()
    assert m is not None and mdt_use.index_is_current(m)
    t.upsert(_changed(t, 2, "Zeta"))  # lsm_lab keeps a declared MDT (upstream's writer default): still current
    m = t.metadata_table()
    assert m is not None and mdt_use.index_is_current(m)
    got = t.read(filter=[("merchant_name", "=", "Zeta")])
    assert got.num_rows == 2
    assert t.last_read_stats is not None and "record_index" in t.last_read_stats.indexes_used
    # an MDT that missed a data write (its deltacommit lost, as a writer with the MDT off would leave it) is stale
    last = t.completed_writes()[-1].begin_time
    timeline = t.path / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    for f in timeline.iterdir():
        if f.name.startswith(last):
            f.unlink()
    t = lsm_lab.open_table(t.path, use_metadata=False)
    m = t.metadata_table()
    assert m is not None and not mdt_use.index_is_current(m)
    got = t.read(filter=[("merchant_name", "=", "Zeta")])
    assert got.num_rows == 2
    assert t.last_read_stats is not None and "record_index" not in t.last_read_stats.indexes_used
    keys = got.column(KEY).to_pylist()
    stats = LookupStats()
    assert t.lookup(keys, stats=stats).num_rows == 2 and stats.slices_pruned_record_index == 0


def _model(before: pa.Table, rows: pa.Table, key: str) -> dict[str, dict[str, Any]]:
    model = {r[KEY]: {c: r[c] for c in rows.column_names} for r in before.to_pylist()}
    for r in rows.to_pylist():
        model[r[key]] = r
    return model


@pytest.mark.parametrize("index_type", ["RECORD_INDEX", "GLOBAL_RECORD_LEVEL_INDEX"])
def test_upsert_tags_existing_keys_through_the_record_index(real_table: Callable[[str], Path], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch, index_type: str) -> None:
    t = lsm_lab.open_table(_copy(real_table, "v9_txns_simple_meta", tmp_path, index_type))
    # lsm_lab keeps the record index of a table that declares it (services/mdt_write.maintained_partitions)
    assert "record_index" in mdt_maintained.maintained_partitions(t.config)
    located: list[str] = []
    real = writer._located_hits

    def spy(partition: str, *args: Any) -> Any:
        located.append(partition)
        return real(partition, *args)

    monkeypatch.setattr(writer, "_located_hits", spy)
    read_keys: list[Any] = []

    def no_keys(*args: Any) -> pa.Array:
        read_keys.append(args)
        return pa.array([], pa.string())

    monkeypatch.setattr(writer, "slice_keys", no_keys)
    before = t.read()
    group_of = {r[KEY]: r["_hoodie_file_name"].split("_")[0] for r in before.to_pylist()}
    rows = _changed(t, 6, "Tagged")
    new = rows.slice(0, 1)
    new = new.set_column(0, "txn_id", pa.array(["TXN-NEW"]))
    batch = pa.concat_tables([rows, new])
    t.upsert(batch)
    assert located and not read_keys  # tagged from the index: no file group's keys were read
    after = t.read()
    for r in after.to_pylist():
        if r[KEY] in set(rows.column("txn_id").to_pylist()):
            assert r["_hoodie_file_name"].split("_")[0] == group_of[r[KEY]], r[KEY]
    model = _model(before, batch, "txn_id")
    got = {r[KEY]: {c: r[c] for c in batch.column_names} for r in after.to_pylist()}
    assert got == model


def test_record_level_index_type_does_not_tag_from_a_global_index(real_table: Callable[[str], Path],
                                                                 tmp_path: Path) -> None:
    """The shipped table's record index is global; `RECORD_LEVEL_INDEX` keys are unique per partition only, so
    the upsert reads the keys instead (tests/test_metadata_partitioned_index.py has the duplicate it avoids)."""
    t = lsm_lab.open_table(_copy(real_table, "v9_txns_simple_meta", tmp_path, "RECORD_LEVEL_INDEX"))
    assert "record_index" in mdt_maintained.maintained_partitions(t.config)
    assert mdt_use.record_index_locator(t, mdt_maintained.maintained_partitions(t.config)) is None
    before = t.read()
    rows = _changed(t, 3, "Level")
    t.upsert(rows)
    after = lsm_lab.open_table(t.path).read()
    assert after.num_rows == before.num_rows
    assert sorted(r[KEY] for r in after.to_pylist() if r["merchant_name"] == "Level") == \
        sorted(rows.column("txn_id").to_pylist())


def test_upsert_falls_back_when_the_writer_does_not_keep_the_index(real_table: Callable[[str], Path],
                                                                   tmp_path: Path) -> None:
    path = _copy(real_table, "v9_txns_simple_meta", tmp_path, "RECORD_INDEX")
    with open(path / ".hoodie" / "hoodie.properties", "a") as f:
        f.write("hoodie.metadata.enable=false\n")  # the writer keeps no MDT: the first write drops it
    t = lsm_lab.open_table(path)
    assert "record_index" not in mdt_maintained.maintained_partitions(t.config)
    assert mdt_use.record_index_locator(t, mdt_maintained.maintained_partitions(t.config)) is None
    before = t.read()
    rows = _changed(t, 3, "Again")
    for _ in range(2):  # twice: the second upsert must not be tagged from a stale index
        t.upsert(rows)
    after = t.read()
    assert after.num_rows == before.num_rows
    assert {r[KEY]: r["merchant_name"] for r in after.to_pylist() if r["merchant_name"] == "Again"} == \
        dict.fromkeys(rows.column("txn_id").to_pylist(), "Again")


def test_a_global_record_index_refuses_to_move_a_key(real_table: Callable[[str], Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    t = lsm_lab.open_table(_copy(real_table, "v9_txns_simple_meta", tmp_path, "RECORD_INDEX"))
    assert "record_index" in mdt_maintained.maintained_partitions(t.config)
    rows = _changed(t, 1, "Moved")
    region = rows.column("region")[0].as_py()
    rows = rows.set_column(rows.schema.get_field_index("region"), "region",
                           pa.array(["elsewhere" if region != "elsewhere" else "x"]))
    with pytest.raises(UnsupportedFeatureError, match="global record index"):
        t.upsert(rows)


def test_index_definitions_and_typed_bounds(real_table: Callable[[str], Path], tmp_path: Path) -> None:
    t = lsm_lab.open_table(_copy(real_table, "v9_txns_simple_meta", tmp_path))
    defs = mdt_use.index_definitions(t)
    assert defs["secondary_index_merchant_idx"]["sourceFields"] == ["merchant_name"]
    (t.path / ".hoodie" / ".index_defs" / "index.json").write_text("{not json")
    with pytest.raises(LsmLabError, match="index.json"):
        mdt_use.index_definitions(lsm_lab.open_table(t.path))
    dec = mdt_use.typed_bounds(["01e848", "ff38", None], ["bytes", "bytes", None], pa.decimal128(15, 2))
    assert dec.to_pylist() == [decimal.Decimal("1250.00"), decimal.Decimal("-2.00"), None]
    ts = mdt_use.typed_bounds(["1705336200000000", "2024-01-15T16:30:00"], ["long", "timestampmicros"],
                              pa.timestamp("us", tz="UTC"))
    assert pc.all(pc.equal(ts, pa.scalar(dt.datetime(2024, 1, 15, 16, 30, tzinfo=dt.UTC),
                                         pa.timestamp("us", tz="UTC")))).as_py()
    days = mdt_use.typed_bounds(["19737", "2024-01-15", "x"], ["int", "date", "int"], pa.date32())
    assert days.to_pylist() == [dt.date(2024, 1, 15), dt.date(2024, 1, 15), None]


def test_cli_read_and_lookup_report_the_indexes(real_table: Callable[[str], Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main as cli_main

    path = str(real_table("v9_txns_simple_meta"))
    assert cli_main(["read", path, "--filter", "merchant_name = 'Amazon'", "--columns", "txn_id", "--json"]) == 0
    out = capsys.readouterr()
    assert "secondary_index_merchant_idx" in out.err and "4 slices by the record index" in out.err
    assert [r["txn_id"] for r in json.loads(out.out)] == ["TXN-001"]
    assert cli_main(["read", path, "--filter", "merchant_name = 'Amazon'", "--no-indexes", "--json"]) == 0
    assert "indexes:" not in capsys.readouterr().err
    assert cli_main(["lookup", path, "TXN-001", "--columns", "txn_id"]) == 0
    assert "record index: 4 file slice(s) skipped" in capsys.readouterr().err
    assert cli_main(["lookup", path, "TXN-001", "--no-indexes"]) == 0
    assert "record index" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["v8_trips_8i3u1d", "v9_txns_complex_meta", "v9_txns_simple_meta"])
def test_read_optimized_with_a_filter(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    column = "fare" if "trips" in name else "amount"
    base = t.read_optimized()
    values = sorted(v for v in base.column(column).to_pylist() if v is not None)
    skipped = 0
    for op, value in [("<", values[len(values) // 2]), (">=", values[-1]), ("=", values[0])]:
        filter = [(column, op, value)]
        got = t.read_optimized(filter=filter)
        stats = t.last_read_stats
        assert stats is not None
        field = pc.field(column)
        expected = base.filter({"<": field < value, ">=": field >= value, "=": field == value}[op])
        assert _sorted(got).equals(_sorted(expected)), filter
        assert _sorted(t.read_optimized(filter=filter, indexes=False)).equals(_sorted(got))
        # every read-optimized slice is a base file alone: all are judged (logs are not read)
        assert stats.files_judged_column_stats == len([s for s in t.latest_slices() if s.base_file is not None])
        skipped += stats.files_skipped_column_stats
    assert skipped > 0


def test_cli_read_optimized_filter(real_table: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main as cli_main

    path = str(real_table("v9_txns_simple_meta"))
    assert cli_main(["read", path, "--read-optimized", "--filter", "merchant_name = 'Amazon'", "--json"]) == 0
    assert [r["txn_id"] for r in json.loads(capsys.readouterr().out)] == ["TXN-001"]


@pytest.mark.parametrize("name", TABLES)
def test_record_index_merges_only_the_shards_of_the_keys(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    keys = sorted(set(t.read(columns=[KEY]).column(KEY).to_pylist()))
    whole = t.metadata_table()
    assert whole is not None
    everything = whole.records("record_index")
    expected = whole.record_index([*keys, "no-such-key"]).to_pylist()
    m = t.metadata_table()
    assert m is not None
    one = m.record_index(keys[:1]).to_pylist()
    assert one == [r for r in expected if r["record_key"] == keys[0]]
    assert m.record_index([*keys, "no-such-key"]).to_pylist() == expected
    slices = sorted(m.mdt.latest_slices(partitions=["record_index"]), key=lambda fs: fs.file_id)
    if m._shards:  # upstream's layout (record-index-0000-0 … in sequence): each key sits in the shard it hashes to
        assert len(m._shards) < len(slices) or len(keys) >= len(slices)
        for i, shard in m._shards.items():
            assert slices[i].file_id == f"record-index-{i:04d}-0"
            for key in shard:
                h = int(np.int32(np.uint32(index.java_string_hashes(pa.array([key]))[0])))
                assert abs(h) % len(slices) == i, key
        live = [k for shard in m._shards.values() for k, cell in shard.items() if cell is not None]  # None: a tombstone
        assert sorted(live) == sorted(everything)
    else:  # another layout (a file group missing): the whole partition is merged
        assert "record_index" in m._cache


@pytest.mark.parametrize("name", TABLES)
def test_record_key_filters_through_the_record_index(real_table: Callable[[str], Path], name: str) -> None:
    t = lsm_lab.open_table(real_table(name))
    snap = t.read(columns=[KEY, "_hoodie_file_name"]).to_pylist()
    homes: dict[str, set[str]] = {}
    for r in snap:
        homes.setdefault(r[KEY], set()).add(r["_hoodie_file_name"].split("_")[0])
    single = sorted(k for k, v in homes.items() if len(v) == 1)  # (a key twice: see the lookup test)
    data = t.read()
    lows = {c: min(v) for c in _user_columns(t)
            if (v := [x for x in data.column(c).to_pylist() if x is not None]) and not isinstance(v[0], bool)}
    others = sorted(lows)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.sampled_from([*single, "no-such-key"]), min_size=1, max_size=4, unique=True),
           st.booleans(), st.sampled_from(others))
    def check(keys: list[str], as_in: bool, column: str) -> None:
        filter: list[Any] = [(KEY, "in", keys)] if as_in or len(keys) > 1 else [(KEY, "=", keys[0])]
        stats = _same(t, filter)
        assert "record_index" in stats.indexes_used
        both = _same(t, [*filter, (column, ">=", lows[column])])  # and a conjunct on another column
        assert "record_index" in both.indexes_used

    check()


def test_bench_functions_count_what_the_indexes_save(real_table: Callable[[str], Path], tmp_path: Path) -> None:
    from lsm_lab.bench import metadata_index as bench

    path = real_table("v9_txns_simple_meta")
    r = bench.column_stats_files(path, [("amount", "<", decimal.Decimal("100"))], repeats=1)
    assert r["slices_opened_with_stats"] < r["slices_opened_without"] == r["slices"] == 5
    assert r["files_read_with_stats"] == r["files_read_without"] and "column_stats" in r["indexes_used"]
    k = bench.record_index_lookup(path, ["TXN-001"], repeats=1)
    assert k["rows"] == 1 and k["slices_pruned_record_index"] == 4 and k["files_with_index"] < k["files_without_index"]
    assert "record index" in bench.report([r, k])
    t = bench.synthetic_cow(tmp_path / "syn", files=5, rows_per_file=4)
    assert len(t.latest_slices()) == 5 and bench.has_index(path, "column_stats")
    assert not bench.has_index(real_table("v9_nonpartitioned_rollback"), "partition_stats")
    r = bench.column_stats_files(tmp_path / "syn", [("value", "<", 4)], repeats=1)
    assert r["rows"] == 4 and r["files_read_with_stats"] == 1  # (footer statistics; column_stats once written)


def test_a_filter_the_table_cannot_apply_fails_the_same_with_indexes(real_table: Callable[[str], Path]) -> None:
    t = lsm_lab.open_table(real_table("v9_txns_simple_meta"))
    for filter in ([("txn_datetime", ">", "2030-01-01")], [("amount", ">", "5")], [("merchant_name", "=", 5)]):
        for indexes in (True, False):
            with pytest.raises(lsm_lab.LsmLabError, match="cannot apply the filter"):
                t.read(filter=filter, indexes=indexes)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_version_10_table_uses_its_own_indexes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 table_type: str) -> None:
    """A version 10 table lsm_lab writes (native HFile MDT logs): upserts are tagged through its record index
    (no file group's keys read), filters use its column stats, record and secondary indexes, and every result
    equals a dict model and the same read without the indexes."""
    t = lsm_lab.create_table(tmp_path / "t", name="v10", record_key="id", ordering_field="ts", partition_by="p",
                             table_type=table_type, layout="default", table_version=10,
                             properties={"hoodie.metadata.enable": "true", "hoodie.index.type": "RECORD_INDEX",
                                         "hoodie.metadata.compact.max.delta.commits": "3"})
    model: dict[str, dict[str, Any]] = {}

    def write(op: str, ids: range, ts: int) -> None:
        rows: list[dict[str, Any]] = [{"id": f"k{i:03d}", "p": f"p{i % 3}", "ts": ts, "amount": 10 * i + ts,
                                       "m": f"m{i % 5}"} for i in ids]
        getattr(t, op)(rows)
        model.update({str(r["id"]): r for r in rows})

    write("insert", range(60), 1)
    assert t.create_index("m_idx", "m") == "secondary_index_m_idx"
    read_keys: list[Any] = []
    real = writer.slice_keys

    def spy(*a: Any) -> Any:
        read_keys.append(a)
        return real(*a)

    monkeypatch.setattr(writer, "slice_keys", spy)
    for step, ids in enumerate((range(0, 60, 4), range(1, 70, 7), range(2, 60, 5))):
        write("upsert", ids, step + 2)
    assert not read_keys  # tagged from the record index
    assert t.metadata_table() is not None
    names = [n for d in (t.path / ".hoodie" / "metadata").iterdir() if d.is_dir() for n in d.iterdir()]
    assert any(n.name.endswith(".log.hfile") for n in names)
    got = {r["id"]: {c: r[c] for c in ("id", "p", "ts", "amount", "m")} for r in t.read().to_pylist()}
    assert got == model
    for flt, used in (([("m", "=", "m3")], "secondary_index_m_idx"), ([(KEY, "in", ["k004", "k063"])], "record_index"),
                      ([("amount", "<", 40)], "column_stats" if table_type == "COPY_ON_WRITE" else None)):
        stats = _same(t, flt)
        if used is not None:
            assert used in stats.indexes_used, (flt, stats.indexes_used)
    want = sorted(k for k, v in model.items() if v["m"] == "m3")
    assert sorted(t.read(filter=[("m", "=", "m3")]).column(KEY).to_pylist()) == want
