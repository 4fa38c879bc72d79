"""The key index kept with the timeline (lsm_lab/format/keyindex.py): lookups with it equal lookups without it
and a filtered snapshot read, whatever happened to the sidecars; crash, rollback, clean, S3.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from localpath import local

import lsm_lab
from lsm_lab.cli import app as cli
from lsm_lab.errors import CorruptFileError
from lsm_lab.filegroup import fsview
from lsm_lab.format import keyindex, written_facts
from lsm_lab.merge.records import PARTITION_PATH, RECORD_KEY
from lsm_lab.table.footer import clear_footer_cache
from lsm_lab.table.lookup import open_lookup
from lsm_lab.table.stats import LookupStats

ORDER = [(RECORD_KEY, "ascending"), (PARTITION_PATH, "ascending")]
SCHEMA = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
KEYS = [f"k{i:03d}" for i in range(0, 300, 7)]
Row = tuple[str, str, int, int]  # id, p, ts, v
REPO = Path(__file__).resolve().parent.parent


def batch(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "p": p, "ts": ts, "v": v} for i, p, ts, v in rows], schema=SCHEMA)


def expected(table: lsm_lab.Table, keys: list[str]) -> pa.Table:
    full = table.read()
    return full.filter(pc.is_in(full.column(RECORD_KEY), value_set=pa.array(keys, pa.string()))).sort_by(ORDER)


def lookup_both(table: lsm_lab.Table, keys: list[str]) -> tuple[pa.Table, pa.Table, LookupStats, LookupStats]:
    """The same lookup with and without the key index, each with a cold footer cache."""
    kl = open_lookup(table)
    clear_footer_cache()
    with_index = LookupStats()
    a = kl.lookup(keys, stats=with_index)
    clear_footer_cache()
    without = LookupStats()
    b = kl.lookup(keys, stats=without, use_index=False)
    return a, b, with_index, without


def many_rows(n: int, parts: tuple[str, ...] = ("a", "b"), ts: int = 1) -> pa.Table:
    return batch([(f"k{i:03d}", parts[i % len(parts)], ts, i) for i in range(n)])


# --------------------------------------------------------------------------- the property
rows_st = st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(["a", "b"]), st.integers(0, 4),
                             st.integers(0, 99)), min_size=1, max_size=10)
Op = tuple[str, list[Row]]  # a write and its rows, or a service and no rows
op_st: st.SearchStrategy[Op] = st.one_of(
    st.tuples(st.sampled_from(["upsert", "insert", "delete"]), rows_st),
    st.tuples(st.sampled_from(["compact", "clean", "cluster", "rollback", "archive"]), st.just([])))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=st.sampled_from(["lsm_tree", "default"]), table_type=st.sampled_from(["MERGE_ON_READ", "COPY_ON_WRITE"]),
       ops=st.lists(op_st, max_size=7),
       wanted=st.lists(st.sampled_from([*KEYS, "absent", "k999"]), min_size=1, max_size=5))
def test_lookup_with_index_equals_filtered_read(layout: str, table_type: str, ops: list[Op], wanted: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = lsm_lab.create_table(Path(tmp) / "t", name="t", record_key="id", partition_by="p",
                                     ordering_field="ts", layout=layout, table_type=table_type, num_buckets=2)
        table.bulk_insert(many_rows(300))
        for op, rows in ops:
            if op == "compact":
                table.compact()
            elif op == "clean":
                table.clean(retained=1)
            elif op == "cluster":
                if layout == "default":
                    table.cluster()
            elif op == "rollback":
                table.rollback()
            elif op == "archive":  # archived instants keep their sidecars: their files may still be live
                table.archive(keep=2)
            else:
                getattr(table, op)(batch(rows))
        want = expected(table, wanted)
        a, b, _, without = lookup_both(table, wanted)
        assert a.equals(want), f"{a.to_pylist()}\n!=\n{want.to_pylist()}"
        assert b.equals(want)
        assert without.files_indexed == 0 and without.footers_skipped == 0
        # the index knows every Parquet file a commit wrote: no file of the snapshot is left to its footer
        kl = open_lookup(table)
        assert kl.index is not None
        for fs in kl.slices:
            for f in fs.files:
                assert kl.index.entry(f.path.name, f.size) is not None, f.path.name
        # sidecars only of instants with files on disk (rollback removes its instant's, clean prunes)
        live = {name.instant for _, _, name in fsview.list_data_files(table.path)}
        if any(op in ("rollback", "clean") for op, _ in ops):
            assert set(keyindex.sidecar_instants(table.path)) <= live


# --------------------------------------------------------------------------- footers skipped
@pytest.fixture()
def logged_table(tmp_table: Callable[..., lsm_lab.Table]) -> lsm_lab.Table:
    t = tmp_table(partition_by="p", ordering_field="ts", layout="lsm_tree", num_buckets=2)
    t.bulk_insert(many_rows(300))
    for r in range(4):
        t.upsert(batch([(f"k{i:03d}", "ab"[i % 2], 2 + r, r) for i in range(r, 300, 37)]))
    t.delete(batch([("k005", "b", 9, 0)]))
    return t


def test_index_skips_footers_and_counts_it(logged_table: lsm_lab.Table) -> None:
    a, b, with_index, without = lookup_both(logged_table, ["k010"])
    assert a.equals(b) and a.num_rows == 1
    assert with_index.index_sidecars >= 6  # bulk insert, four upserts, the delete
    assert with_index.files_indexed == without.files == with_index.files
    assert with_index.footers_skipped >= 1
    assert with_index.footers_read == without.footers_read - with_index.footers_skipped
    assert "footers skipped" in with_index.index_summary()
    assert "not used" in without.index_summary()


def test_a_deleted_and_an_absent_key(logged_table: lsm_lab.Table) -> None:
    for keys in (["k005"], ["zz"], ["k005", "k006", "zz"]):
        a, b, _, _ = lookup_both(logged_table, keys)
        assert a.equals(b) and a.equals(expected(logged_table, keys))
    _, _, st_absent, _ = lookup_both(logged_table, ["k9999"])
    assert st_absent.footers_read == 0  # ruled out everywhere by ranges or blooms, no footer opened


# --------------------------------------------------------------------------- damaged, missing, partial
def _sidecars(table: lsm_lab.Table) -> list[Path]:
    return sorted(Path(local(table.path), ".hoodie", keyindex.INDEX_FOLDER).iterdir())


@pytest.mark.parametrize("damage", ["missing_all", "missing_one", "garbage", "truncated", "flipped_byte",
                                    "bad_bloom", "wrong_size", "other_instant"])
def test_damaged_index_never_changes_answers(logged_table: lsm_lab.Table, damage: str) -> None:
    t = logged_table
    files = _sidecars(t)
    first = files[0]
    if damage == "missing_all":
        for f in files:
            f.unlink()
    elif damage == "missing_one":
        first.unlink()
    elif damage == "garbage":
        first.write_bytes(b"not a sidecar at all")
    elif damage == "truncated":
        first.write_bytes(first.read_bytes()[:-40])
    elif damage == "flipped_byte":
        raw = bytearray(first.read_bytes())
        raw[len(raw) // 3] ^= 0x5A
        first.write_bytes(bytes(raw))
    else:
        instant = keyindex.instant_of_sidecar(first.name)
        assert instant is not None
        entries = list(keyindex.decode(first.read_bytes(), path=str(first)).values())
        for e in entries:
            if damage == "bad_bloom" and e.bloom_bytes:  # an intact sidecar holding a filter that fails its CRC
                e.bloom_bytes = e.bloom_bytes[:-1] + bytes([e.bloom_bytes[-1] ^ 1])
            elif damage == "wrong_size":  # not the file the snapshot lists
                e.file_size += 1
        other = "20200101000000000" if damage == "other_instant" else instant
        first.write_bytes(keyindex.encode(other, entries))
    keys = [f"k{i:03d}" for i in range(0, 300, 11)] + ["k005", "nope"]
    a, b, with_index, _ = lookup_both(t, keys)
    assert a.equals(b) and a.equals(expected(t, keys))
    assert with_index.footers_read > 0
    if damage in ("garbage", "truncated", "other_instant"):
        assert with_index.index_sidecars_damaged == 1
    if damage == "missing_all":
        assert with_index.files_indexed == 0
    else:  # the damaged sidecar's files were left to their footers, the others' not
        assert 0 < with_index.files_indexed < with_index.files


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 10_000), flip=st.integers(0, 10_000), bit=st.integers(0, 7))
def test_decode_rejects_any_damage_with_a_typed_error(cut: int, flip: int, bit: int) -> None:
    entries = [keyindex.IndexEntry("p=a", "f1_0-0-0_20250101000000000.parquet", 123, "a", "m", b"LSMB" + bytes(40)),
               keyindex.IndexEntry("", "f2_0-0-0_20250101000000000.parquet", 7, None, None, None)]
    data = keyindex.encode("20250101000000000", entries)
    got = keyindex.decode(data, path="x", instant="20250101000000000")
    assert [(e.partition, e.file_size, e.min_key, e.bloom_bytes) for e in got.values()] == \
        [(e.partition, e.file_size, e.min_key, e.bloom_bytes) for e in entries]
    damaged = bytearray(data[: len(data) - 1 - cut % len(data)] if cut % 3 == 0 else data)
    if cut % 3 != 0:
        damaged[flip % len(damaged)] ^= 1 << bit
    with pytest.raises(CorruptFileError):
        keyindex.decode(bytes(damaged), path="x")


def test_table_written_before_the_index_reads_the_same(logged_table: lsm_lab.Table) -> None:
    """A table without .hoodie/.key_index (older lsm_lab, real Hudi writers) takes the footer path."""
    import shutil

    shutil.rmtree(Path(local(logged_table.path), ".hoodie", keyindex.INDEX_FOLDER))
    a, b, with_index, _ = lookup_both(logged_table, ["k010", "k011", "x"])
    assert a.equals(b) and a.equals(expected(logged_table, ["k010", "k011", "x"]))
    assert with_index.index_sidecars == 0 and with_index.files_indexed == 0
    logged_table.upsert(batch([("k010", "a", 50, 1)]))  # new commits are indexed again
    _, _, st2, _ = lookup_both(logged_table, ["k010"])
    assert st2.index_sidecars == 1 and st2.files_indexed >= 1


# --------------------------------------------------------------------------- the timeline's services
def test_rollback_removes_the_instants_sidecar(logged_table: lsm_lab.Table) -> None:
    t = logged_table
    done = t.upsert(batch([("k001", "b", 99, 7)]))
    assert done.begin_time in keyindex.sidecar_instants(t.path)
    t.rollback(done.begin_time)
    assert done.begin_time not in keyindex.sidecar_instants(t.path)
    a, b, _, _ = lookup_both(t, ["k001"])
    assert a.equals(b) and a.equals(expected(t, ["k001"]))


def test_compaction_and_clean_keep_the_index_right(logged_table: lsm_lab.Table) -> None:
    t = logged_table
    before = set(keyindex.sidecar_instants(t.path))
    done = t.compact()
    assert done is not None and done.begin_time in keyindex.sidecar_instants(t.path)
    t.clean(retained=1)
    after = set(keyindex.sidecar_instants(t.path))
    live = {name.instant for _, _, name in fsview.list_data_files(t.path)}
    assert after <= live and after != before  # the compacted-away instants' sidecars went with their files
    keys = [f"k{i:03d}" for i in range(0, 300, 13)]
    a, b, with_index, _ = lookup_both(t, keys)
    assert a.equals(b) and a.equals(expected(t, keys))
    assert with_index.files_indexed == with_index.files


def test_kill_between_sidecar_and_commit(tmp_path: Path) -> None:
    """A writer killed after its sidecar and before its completed instant: the table reads its last commit,
    and the next writer's rollback of the dead write removes the orphan sidecar."""
    path = tmp_path / "t"
    t = lsm_lab.create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts",
                             layout="lsm_tree", num_buckets=2)
    t.bulk_insert(many_rows(100))
    before = t.read().sort_by(ORDER)
    script = textwrap.dedent(f"""
        import os, pyarrow as pa, lsm_lab
        from lsm_lab.timeline.active import ActiveTimeline
        def die(self, instant, metadata):
            os._exit(9)  # killed right after the sidecar was written, before the commit point
        ActiveTimeline.complete = die
        t = lsm_lab.open_table({str(path)!r})
        t.upsert(pa.table({{"id": ["k001", "zzz"], "p": ["a", "a"], "ts": [5, 5], "v": [1, 2]}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    t = lsm_lab.open_table(path)
    pending = [i.begin_time for i in t.active_timeline.pending()]
    assert len(pending) == 1 and pending[0] in keyindex.sidecar_instants(path)  # the orphan is there
    assert t.read().sort_by(ORDER).equals(before)
    a, b, _, _ = lookup_both(t, ["k001", "zzz"])
    assert a.equals(b) and a.equals(expected(t, ["k001", "zzz"])) and a.num_rows == 1
    t.upsert(batch([("k002", "b", 6, 3)]))  # the next writer rolls the dead one back
    assert pending[0] not in keyindex.sidecar_instants(path)
    a, b, _, _ = lookup_both(t, ["k001", "k002", "zzz"])
    assert a.equals(b) and a.equals(expected(t, ["k001", "k002", "zzz"]))


def test_s3_table_uses_the_index(s3_table: Any) -> None:
    t = s3_table(partition_by="p", ordering_field="ts", layout="lsm_tree", num_buckets=2)
    t.bulk_insert(many_rows(200))
    t.upsert(batch([("k003", "b", 5, 1), ("new", "a", 5, 2)]))
    t.delete(batch([("k004", "a", 6, 0)]))
    t.compact()
    keys = ["k003", "k004", "k010", "new", "absent"]
    a, b, with_index, without = lookup_both(t, keys)
    assert a.equals(b) and a.equals(expected(t, keys))
    assert with_index.index_sidecars >= 1 and with_index.files_indexed == with_index.files
    assert with_index.footers_read < without.footers_read


def test_cli_lookup_says_whether_the_index_was_used(logged_table: lsm_lab.Table,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["lookup", str(logged_table.path), "k010"]) == 0
    out = capsys.readouterr().err
    assert "key index:" in out and "footers skipped" in out


def test_handed_back_facts_equal_the_footers(logged_table: lsm_lab.Table) -> None:
    """The writer hands its files' range and bloom to the commit's index (no footer read back): the sidecars
    must hold exactly what the footers say."""
    t = logged_table
    t.compact()
    files = {path.name: (p, path) for p, path, _ in fsview.list_data_files(t.path)}
    checked = 0
    for instant in keyindex.sidecar_instants(t.path):
        path = keyindex.sidecar_path(t.path, instant)
        for name, entry in keyindex.decode(local(path).read_bytes(), path=str(path), instant=instant).items():
            partition, data_path = files[name]
            assert written_facts.written_key_facts(data_path) is None  # consumed by the commit
            from_footer = keyindex.entry_for_file(partition, data_path)
            assert from_footer is not None
            assert (entry.partition, entry.file_size, entry.min_key, entry.max_key, entry.bloom_bytes) == \
                (from_footer.partition, from_footer.file_size, from_footer.min_key, from_footer.max_key,
                 from_footer.bloom_bytes)
            checked += 1
    assert checked >= len(files) - 1  # every data file (an empty commit writes none)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.text(max_size=12), max_size=400, unique=True), probes=st.lists(st.text(max_size=12),
       min_size=1, max_size=4), fpp=st.sampled_from([0.5, 0.1, 0.01]))
def test_scalar_bloom_probe_equals_the_vector_one(keys: list[str], probes: list[str], fpp: float) -> None:
    """A lookup of a few keys probes the (indexed) blooms with Python ints: the same answers as NumPy's."""
    import numpy as np

    from lsm_lab.format.bloom import BloomFilter, key_hashes

    bloom = BloomFilter.build(keys or ["x"], fpp)
    h1, h2 = key_hashes(probes)
    scalar = bloom.contains_hashes(h1, h2)
    many = bloom.contains_hashes(np.concatenate([h1] * 5), np.concatenate([h2] * 5))[: len(probes)]  # vector path
    assert scalar.tolist() == many.tolist()
    assert all(bloom.contains_hashes(*key_hashes([k]))[0] for k in keys[:20])  # no false negative
