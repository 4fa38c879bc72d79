"""What is part of a table: the regression tests of issue 28's findings 1, 3, 4 and 5.

1. What a log compaction replaced is read from its plan on the timeline, so a chain of
   log compactions stays readable after the cleaner deletes the compacted logs in between.
3. Partitions come from the commits: a partition folder deleted by hand is a typed error,
   never a silently smaller result (snapshot, time travel, filtered, incremental, read-optimized).
4. A file no completed instant committed (a copied partition folder, a stray file) is ignored.
5. A data file whose size differs from its committed size, or whose rows name another file
   group, partition or bucket (two files swapped), is a typed error.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from instantfiles import read_instant, write_instant_json

import lsm_lab
from lsm_lab.errors import CorruptFileError, CorruptTableError, LsmLabError
from lsm_lab.filegroup import fsview


def _rows(t: lsm_lab.Table, **kw: Any) -> list[tuple[str, int]]:
    return sorted((r["id"], r["v"]) for r in t.read(columns=["id", "v"], **kw).to_pylist())


@pytest.mark.parametrize("archive", [False, True])
def test_log_compaction_chain_survives_the_cleaner(tmp_path: Path, archive: bool) -> None:
    """Finding 1 (the issue's reproducer, then one more round, an archive and a full compaction)."""
    p = tmp_path / "t"
    t = lsm_lab.create_table(p, name="t", record_key="id", num_buckets=1)
    t.insert([{"id": f"k{i}", "v": 0} for i in range(4)])
    t.compact(strategy="full")
    t.upsert([{"id": "k1", "v": 1}])
    t.upsert([{"id": "k2", "v": 2}])
    t.compact(strategy="log")
    t.clean(retained=1)
    t.upsert([{"id": "k3", "v": 3}])
    t.compact(strategy="log")
    t.clean(retained=1)
    want = [("k0", 0), ("k1", 1), ("k2", 2), ("k3", 3)]
    assert _rows(lsm_lab.open_table(p)) == want
    t.upsert([{"id": "k0", "v": 5}])
    t.compact(strategy="log")
    t.clean(retained=1)
    want[0] = ("k0", 5)
    if archive:
        t.archive(keep=2)
    assert _rows(lsm_lab.open_table(p)) == want
    assert lsm_lab.open_table(p).lookup(["k0", "k3"]).num_rows == 2
    t.compact(strategy="full")
    t.clean(retained=1)
    assert _rows(lsm_lab.open_table(p)) == want


def _partitioned(p: Path) -> tuple[lsm_lab.Table, lsm_lab.Instant]:
    t = lsm_lab.create_table(p, name="t", record_key="id", partition_by="p", num_buckets=1)
    first = t.insert([{"id": f"k{i}", "p": "a" if i % 2 else "b", "v": 0} for i in range(6)])
    t.upsert([{"id": "k1", "p": "a", "v": 1}])
    return t, first


@pytest.mark.parametrize("read", ["snapshot", "as_of", "filter", "incremental", "read_optimized", "lookup"])
def test_missing_partition_folder_is_an_error(tmp_path: Path, read: str) -> None:
    """Finding 3: every read that covers a deleted partition folder raises, naming a missing committed file."""
    t, first = _partitioned(tmp_path / "t")
    shutil.rmtree(tmp_path / "t" / "p=a")
    t = lsm_lab.open_table(tmp_path / "t")
    calls = {
        "snapshot": lambda: t.read(),
        "as_of": lambda: t.read(as_of=first),
        "filter": lambda: t.read(filter=[("p", "=", "a")]),
        "incremental": lambda: t.read_incremental(first.begin_time),
        "read_optimized": lambda: t.read_optimized(),
        "lookup": lambda: t.lookup(["k1"]),
    }
    with pytest.raises(CorruptTableError, match="missing"):
        calls[read]()
    assert "p=a" in t.partitions()


def test_copied_partition_folder_is_ignored(tmp_path: Path) -> None:
    """Finding 4: a copy of a partition folder is not read, an upsert leaves one version of each key,
    and inspection lists the copy's files as not part of the table."""
    t, _ = _partitioned(tmp_path / "t")
    before = _rows(t)
    shutil.copytree(tmp_path / "t" / "p=a", tmp_path / "t" / "p=a_backup")
    t = lsm_lab.open_table(tmp_path / "t")
    assert _rows(t) == before
    assert "p=a_backup" not in t.partitions()
    t.upsert([{"id": "k3", "p": "a", "v": 7}])
    rows = _rows(lsm_lab.open_table(tmp_path / "t"))
    assert len(rows) == len({k for k, _ in rows}) == 6
    assert ("k3", 7) in rows
    assert {f.partition for f in t.uncommitted_files()} == {"p=a_backup"}


def test_stray_file_under_a_completed_instant_is_ignored(tmp_path: Path) -> None:
    """Finding 4: a data file named with a completed instant's time but listed by no commit is ignored."""
    t, _ = _partitioned(tmp_path / "t")
    before = _rows(t)
    src = sorted((tmp_path / "t" / "p=a").glob("*.parquet"))[0]
    stray = src.with_name("abcdef01-2345-6789-abcd-ef0123456789-0" + src.name[src.name.index("_"):])
    shutil.copy(src, stray)
    assert _rows(lsm_lab.open_table(tmp_path / "t")) == before
    assert [f.path.name for f in lsm_lab.open_table(tmp_path / "t").uncommitted_files()] == [stray.name]


def _swap(a: Path, b: Path) -> None:
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def test_swapped_files_of_other_sizes_are_refused(tmp_path: Path) -> None:
    """Finding 5: the listing's size against the committed size."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=2, table_type="COPY_ON_WRITE")
    # incompressible values of 2**i bytes: the two buckets' files cannot come out the same size (a sum of
    # distinct powers of two names its subset), whatever the commit time inside them
    t.insert([{"id": f"k{i}", "v": random.Random(i).randbytes(2 ** (i + 4)).hex()} for i in range(8)])
    a, b = sorted((tmp_path / "t").glob("*.parquet"))
    assert a.stat().st_size != b.stat().st_size
    _swap(a, b)
    with pytest.raises(CorruptFileError, match="commit recorded"):
        lsm_lab.open_table(tmp_path / "t").read()


@pytest.mark.parametrize("partitioned", [True, False])
@pytest.mark.parametrize("how", ["read", "lookup"])
def test_swapped_files_of_one_size_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               partitioned: bool, how: str) -> None:
    """Finding 5: with the size check off (as for two files of one size), the rows' own file name and
    partition, or the bucket of a delete log's keys, give the swap away on a read and on a lookup."""
    monkeypatch.setattr(lsm_lab.table.state.TableState, "own_files", property(lambda self: False))
    p = tmp_path / "t"
    t = lsm_lab.create_table(p, name="t", record_key="id", partition_by="p" if partitioned else None,
                             num_buckets=2)
    t.insert([{"id": f"k{i}", "p": "a" if i % 2 else "b", "v": i} for i in range(8)])
    t.delete([{"id": f"k{i}", "p": "a" if i % 2 else "b"} for i in range(8)])
    for kind in ("base", "delete"):
        q = tmp_path / kind
        shutil.copytree(p, q)
        files = [f for _, f, n in fsview.list_data_files(q) if (n.is_delete if kind == "delete" else n.is_base)]
        assert len(files) >= 2, kind
        _swap(files[0], files[1])
        t2 = lsm_lab.open_table(q)
        with pytest.raises(CorruptFileError, match="swapped"):
            if how == "read":
                t2.read()
            else:
                t2.lookup([f"k{i}" for i in range(8)])


def test_undamaged_tables_pass_the_checks(tmp_path: Path) -> None:
    """The checks never fire on a table that only lsm_lab touched: every kind of write and service."""
    for table_type in ("MERGE_ON_READ", "COPY_ON_WRITE"):
        p = tmp_path / table_type
        t = lsm_lab.create_table(p, name="t", record_key="id", partition_by="p", num_buckets=2,
                                 table_type=table_type)
        t.insert([{"id": f"k{i}", "p": "a" if i % 2 else "b", "v": 0} for i in range(20)])
        t.upsert([{"id": f"k{i}", "p": "a" if i % 2 else "b", "v": 1} for i in range(0, 20, 3)])
        t.delete([{"id": "k1", "p": "a"}])
        t.bulk_insert([{"id": f"z{i}", "p": "a", "v": 0} for i in range(5)])
        if table_type == "MERGE_ON_READ":
            t.compact(strategy="log")
            t.compact(strategy="full")
        t.cluster()
        t.upsert([{"id": "k6", "p": "b", "v": 9}])
        t.clean(retained=1)
        t = lsm_lab.open_table(p)
        assert t.read().num_rows == 24
        assert t.lookup([f"k{i}" for i in range(20)]).num_rows == 19
        assert t.uncommitted_files() == []


def test_errors_are_typed(tmp_path: Path) -> None:
    """The classes the checks raise are LsmLabErrors (the CLI prints them as one line)."""
    assert issubclass(CorruptTableError, LsmLabError)
    assert issubclass(CorruptFileError, LsmLabError)


# ---------------------------------------------------------------- found by the stateful model (tests/test_services_model.py)
def test_two_log_compactions_then_one_clean(tmp_path: Path) -> None:
    """Finding 1's variant: a slice with a data and a delete log is log-compacted twice, then cleaned once."""
    p = tmp_path / "t"
    t = lsm_lab.create_table(p, name="t", record_key="id", num_buckets=1)
    t.insert([{"id": "a", "v": 0}, {"id": "b", "v": 0}])
    t.upsert([{"id": "a", "v": 1}])
    t.delete(["b"])
    t.compact(strategy="log")
    t.compact(strategy="log")
    t.clean(retained=1)
    assert _rows(lsm_lab.open_table(p)) == [("a", 1)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_time_travel_past_a_file_versions_clean_names_the_cleaner(tmp_path: Path, table_type: str) -> None:
    """KEEP_LATEST_FILE_VERSIONS records no earliest retained instant: a read of a cleaned snapshot says the
    cleaner deleted its file (RetentionError), never "deleted by hand?" — time travel and read_cdc alike."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, table_type=table_type,
                             layout="default", cdc=True)
    w1 = t.insert([{"id": "a", "v": 0}])
    t.upsert([{"id": "a", "v": 1}])
    if table_type == "MERGE_ON_READ":
        t.compact(strategy="full")  # a second file version (one slice has nothing to clean)
    t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    with pytest.raises(lsm_lab.RetentionError, match="cleaner deleted"):
        t.read(as_of=w1)
    with pytest.raises(lsm_lab.RetentionError, match="past what the cleaner kept"):
        t.read_cdc(None)
    assert _rows(t) == [("a", 1)]


def test_time_travel_after_cluster_and_clean_is_refused_not_empty(tmp_path: Path) -> None:
    """A replaced file group cleaned away: time travel to before the clustering is refused, not []."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, layout="default")
    w1 = t.upsert([{"id": "a", "v": 0}])
    t.delete(["a"])
    t.cluster(options={"hoodie.clustering.plan.strategy.small.file.limit": "1000000000000"})
    t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    with pytest.raises(lsm_lab.RetentionError):
        t.read(as_of=w1)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_rollback_after_the_cleaner_took_the_previous_versions_is_refused(tmp_path: Path, table_type: str) -> None:
    """Rolling back the latest write would make cleaned file versions current again: refused, table intact."""
    p = tmp_path / "t"
    t = lsm_lab.create_table(p, name="t", record_key="id", num_buckets=1, table_type=table_type, layout="default")
    t.insert([{"id": "a", "v": 0}])
    w2 = t.upsert([{"id": "b", "v": 1}])
    t.clean(retained=1)
    with pytest.raises(lsm_lab.InputError, match="cannot roll back"):
        t.rollback(w2)
    assert _rows(lsm_lab.open_table(p)) == [("a", 0), ("b", 1)]


def test_positions_past_the_base_are_not_trusted() -> None:
    """A damaged RECORD_POSITIONS naming a row past the base: the slice merges by key (no IndexError)."""
    import numpy as np
    import pyarrow as pa

    from lsm_lab.filegroup import posmerge

    base = pa.array(["a", "b", "c"])
    assert posmerge.positions_name_their_keys(base, [(pa.array(["b"]), np.array([1]))])
    assert not posmerge.positions_name_their_keys(base, [(pa.array(["b"]), np.array([7]))])
    assert not posmerge.positions_name_their_keys(base, [(pa.array(["b"]), np.array([-1]))])
    assert not posmerge.positions_name_their_keys(pa.array(["a", None, "c"]).drop_null(),
                                                  [(pa.array(["c"]), np.array([2]))])


def test_cli_show_uncommitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`lsm-lab show uncommitted T` lists the files reads ignore, and says what they are."""
    from lsm_lab.cli.app import main as cli_main

    _partitioned(tmp_path / "t")
    shutil.copytree(tmp_path / "t" / "p=a", tmp_path / "t" / "p=a_backup")
    assert cli_main(["show", "uncommitted", str(tmp_path / "t"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert "p=a_backup" in out and "not part of the table" in err



def _edit_commit(path: Path, begin: str, edit: Callable[[dict[str, Any]], object]) -> None:
    """Rewrite the completed instant file of `begin` (JSON) with `edit(content)` applied."""

    (done,) = [f for f in (path / ".hoodie" / "timeline").iterdir() if f.name.startswith(f"{begin}_")]
    content = read_instant(done)
    edit(content)
    write_instant_json(done, content)


@pytest.mark.parametrize("damage", ["no_map", "no_partition", "empty_path"])
def test_a_lost_write_stat_is_an_error_not_vanished_rows(tmp_path: Path, damage: str) -> None:
    """A delete's commit that lost its write stats would bring the deleted rows back: refused instead."""
    p = tmp_path / "t"
    t = lsm_lab.create_table(p, name="t", record_key="id", partition_by="p", num_buckets=1, table_version=9)
    t.insert([{"id": f"k{i}", "p": "a", "v": i} for i in range(4)])
    gone = t.delete([{"id": "k1", "p": "a"}])
    edits = {
        "no_map": lambda c: c.pop("partitionToWriteStats"),
        "no_partition": lambda c: c["partitionToWriteStats"].pop("p=a"),
        "empty_path": lambda c: c["partitionToWriteStats"]["p=a"][0].update(path=""),
    }
    _edit_commit(p, gone.begin_time, edits[damage])
    with pytest.raises(CorruptTableError, match="metadata is damaged"):
        lsm_lab.open_table(p).read()


def test_time_travel_past_an_archived_clean_names_the_cleaner(tmp_path: Path) -> None:
    """The clean that deleted a file may have been archived since: it still speaks for the file."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, table_type="COPY_ON_WRITE")
    w1 = t.insert([{"id": "a", "v": 0}])
    for v in range(1, 4):
        t.upsert([{"id": "a", "v": v}])
    t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    t.upsert([{"id": "a", "v": 9}])
    t.archive(keep=1)
    assert any(i.action == "clean" for i in t.archived_instants())
    with pytest.raises(lsm_lab.RetentionError, match="cleaner deleted"):
        t.read(as_of=w1)
