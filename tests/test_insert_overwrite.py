"""`insert_overwrite` / `insert_overwrite_table`: one replacecommit whose rows replace whole file groups.

Against a dict model (Hypothesis: random write sequences with overwrites, in memory and streamed); the
instant as upstream writes it (action, operationType, partitionToReplaceFileIds); hudi-rs reads the same
rows on versions 8 and 9; the metadata table's `files` partition follows; a writer killed mid-overwrite
leaves the table at its last commit and the next writer rolls it back; CDC; the CLI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lsm_lab
from lsm_lab.cli.app import main
from lsm_lab.filegroup import fsview
from lsm_lab.interop.hudi_tables import compare_rows, hudi_available

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("a", "b", "c")
LAYOUTS = [("lsm_tree", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE"), ("default", "MERGE_ON_READ"),
           ("lsm_tree", "COPY_ON_WRITE")]

Model = dict[tuple[str, str], int]


def _make(path: Path, layout: str, table_type: str, version: int = 10, **kw: Any) -> lsm_lab.Table:
    return lsm_lab.create_table(path, name="t", record_key="id", partition_by="p", ordering_field="ts",
                                layout=layout, table_type=table_type, table_version=version, num_buckets=2, **kw)


def _batch(keys: list[tuple[int, int]], ts: int, value: int) -> pa.Table:
    return pa.table({"id": [f"k{k}" for _, k in keys], "p": [PARTS[p] for p, _ in keys],
                     "ts": pa.array([ts] * len(keys), pa.int64()), "v": pa.array([value + k for _, k in keys],
                                                                                pa.int64())})


def _apply(model: Model, op: str, rows: pa.Table) -> None:
    """The operation on the dict model: (partition, key) → v."""
    got = list(zip(rows.column("p").to_pylist(), rows.column("id").to_pylist(), rows.column("v").to_pylist()))
    if op == "insert_overwrite_table":
        model.clear()
    if op == "insert_overwrite":
        for p in {p for p, _, _ in got}:
            for k in [k for k in model if k[0] == p]:
                del model[k]
    for p, key, v in got:
        if op == "delete":
            model.pop((p, key), None)
        else:
            model[(p, key)] = v


def _read(t: lsm_lab.Table, **kw: Any) -> Model:
    r = t.read(**kw)
    if r.num_rows == 0:  # (a table no row was ever written to has no columns yet)
        return {}
    return {(p, k): v for p, k, v in zip(r.column("p").to_pylist(), r.column("id").to_pylist(),
                                         r.column("v").to_pylist())}


OPS = st.sampled_from(["insert", "upsert", "delete", "insert_overwrite", "insert_overwrite_table"])
KEYS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12)), max_size=10, unique_by=lambda x: x[1])
STEPS = st.lists(st.tuples(OPS, KEYS, st.booleans(), st.sampled_from(["", "", "compact", "cluster"])),
                 min_size=1, max_size=7)


@pytest.mark.parametrize(("layout", "table_type"), LAYOUTS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_random_sequences_match_the_dict_model(tmp_path_factory: pytest.TempPathFactory, layout: str,
                                               table_type: str, steps: list[tuple[str, list[tuple[int, int]], bool,
                                                                                  str]]) -> None:
    """Every step, and time travel to every earlier step, equal the model; an overwrite is one replacecommit."""
    t = _make(tmp_path_factory.mktemp("t") / "t", layout, table_type)
    model: Model = {}
    history: list[tuple[lsm_lab.Instant, Model]] = []
    for i, (op, keys, streamed, service) in enumerate(steps):
        rows = _batch(keys, ts=i, value=100 * i)
        data: Any = rows
        if streamed and rows.num_rows:  # the streamed write (filegroup/stream_write.py), two rows per chunk
            data = rows.to_batches(max_chunksize=2)
        done = getattr(t, op)(data, buffer_rows=2) if streamed else getattr(t, op)(data)
        _apply(model, op, rows)
        if op.startswith("insert_overwrite"):
            assert done.action == "replacecommit"
            meta = t.instant_metadata(done)
            assert meta["operationType"] == op.upper() and "partitionToReplaceFileIds" in meta
        assert _read(t) == model, (i, op)
        names = sorted({f"k{k}" for _, k in keys} | {"k0", "k5"})  # point lookups see the same (key index, blooms)
        found = t.lookup(names, columns=["p", "id", "v"]) if model else None
        if found is not None:
            assert {(p, k): v for p, k, v in zip(*(found.column(c).to_pylist() for c in ("p", "id", "v")))} == \
                {pk: v for pk, v in model.items() if pk[1] in names}, (i, op)
        history.append((done, dict(model)))
        if service == "compact" and t.config.is_mor:
            t.compact(strategy="full")
        elif service == "cluster":
            t.cluster()
        assert _read(t) == model, (i, service)
    for inst, then in history:
        assert _read(t, as_of=inst) == then  # (a completed Instant: its completion time)


@pytest.mark.parametrize(("layout", "table_type"), LAYOUTS)
def test_the_replacecommit_as_upstream_writes_it(tmp_path: Path, layout: str, table_type: str) -> None:
    t = _make(tmp_path / "t", layout, table_type)
    t.insert(_batch([(0, 1), (1, 2), (2, 3)], 0, 0))
    before = {(g.partition, g.file_id) for g in t.file_groups()}
    done = t.insert_overwrite(_batch([(0, 7)], 1, 0))
    meta = t.instant_metadata(done)
    replaced = {(p, f) for p, ids in meta["partitionToReplaceFileIds"].items() for f in ids}
    written = {(p, s["fileId"]) for p, stats in meta["partitionToWriteStats"].items() for s in stats}
    assert {p for p, _ in written} == {"p=a"}
    if t.config.bucket_index:  # bucket ids are kept: a new slice per bucket of the partition, nothing replaced
        assert replaced == set()
        assert written == {g for g in before if g[0] == "p=a"} | written
    else:
        assert replaced == {g for g in before if g[0] == "p=a"} and not written & before
    assert lsm_lab.open_table(t.path).timeline_rows()[-1]["operation"] == "INSERT_OVERWRITE"
    text = lsm_lab.services.commit.describe_write(meta)
    assert text.startswith("insert_overwrite: 1 row in → 1 inserted")
    assert ("replaced" in text) != t.config.bucket_index
    # the cleaner removes the replaced file groups' files once no retained snapshot needs them
    t.insert_overwrite_table(_batch([(1, 9)], 2, 0))
    t.clean(retained=1)
    t.upsert(_batch([(1, 9)], 3, 5))
    t.clean(retained=1)
    assert _read(t) == {("b", "k9"): 14}
    live = {f.path.name for fs in t.latest_slices() for f in ((fs.base_file,) if fs.base_file else ()) + fs.log_files}
    on_disk = {name.name for _, _, name in fsview.list_data_files(t.path)}
    assert live <= on_disk and len(on_disk) < 12


def test_conflicts_with_a_concurrent_write_to_a_replaced_group(tmp_path: Path) -> None:
    """The replaced groups count as touched: an upsert of one of them that started before the overwrite
    and commits after it conflicts (services/occ.py)."""
    from lsm_lab.services import occ

    t = _make(tmp_path / "t", "default", "MERGE_ON_READ")
    t.insert(_batch([(0, 1), (0, 2)], 0, 0))
    real = occ.WriteTransaction.commit
    started: list[Any] = []

    def late_commit(self: Any, *a: Any, **kw: Any) -> Any:
        if not started:
            started.append(self)
            lsm_lab.open_table(t.path).insert_overwrite(_batch([(0, 5)], 2, 0))  # commits first
        return real(self, *a, **kw)

    occ.WriteTransaction.commit = late_commit  # type: ignore[method-assign]
    try:
        with pytest.raises(lsm_lab.ConflictError):
            t.upsert(_batch([(0, 1)], 1, 50))
    finally:
        occ.WriteTransaction.commit = real  # type: ignore[method-assign]
    assert _read(lsm_lab.open_table(t.path)) == {("a", "k5"): 5}


_KILL = textwrap.dedent("""
    import os, signal, sys
    import pyarrow as pa
    import lsm_lab
    from lsm_lab.services import overwrite
    real = overwrite.Replacement.finish
    def die(self, *a, **kw):
        out = real(self, *a, **kw)     # the new files are written (and any empty bucket bases)
        os.kill(os.getpid(), signal.SIGKILL)
    overwrite.Replacement.finish = die
    t = lsm_lab.open_table(sys.argv[1])
    t.insert_overwrite_table(pa.table({"id": ["z"], "p": ["a"], "ts": [9], "v": [9]}))
""")


@pytest.mark.parametrize(("layout", "table_type"), [("lsm_tree", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE")])
def test_a_killed_overwrite_leaves_the_last_commit_and_is_rolled_back(tmp_path: Path, layout: str,
                                                                      table_type: str) -> None:
    path = tmp_path / "t"
    t = _make(path, layout, table_type)
    t.insert(_batch([(0, 1), (1, 2), (2, 3)], 0, 0))
    before = _read(t)
    files = {n.name for _, _, n in fsview.list_data_files(path)}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _KILL, str(path)], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    t = lsm_lab.open_table(path)
    pending = [i for i in t.instants() if not i.is_completed]
    assert [i.action for i in pending] == ["replacecommit"]
    assert _read(t) == before  # readers ignore the pending replacecommit and its files
    t.upsert(_batch([(0, 4)], 1, 0))  # the next writer rolls it back
    t = lsm_lab.open_table(path)
    assert not [i for i in t.instants() if not i.is_completed and i.is_write]
    assert any(i.action == "rollback" for i in t.instants())
    assert _read(t) == {**before, ("a", "k4"): 4}
    left = [n for _, _, n in fsview.list_data_files(path) if n.name not in files]
    assert left and all(n.instant != pending[0].begin_time for n in left)  # the dead overwrite's files are gone


@pytest.mark.skipif(not hudi_available(), reason="hudi-rs (the `hudi` package) is not installed")
@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize(("layout", "table_type"), [("default", "COPY_ON_WRITE"), ("default", "MERGE_ON_READ")])
def test_hudi_rs_reads_the_same_rows(tmp_path: Path, version: int, layout: str, table_type: str) -> None:
    import hudi

    t = _make(tmp_path / "t", layout, table_type, version=version)
    t.insert(_batch([(p, k) for k in range(12) for p in (k % 3,)], 0, 0))
    t.upsert(_batch([(1, 4), (2, 5)], 1, 50))
    t.insert_overwrite(_batch([(0, 3), (0, 20)], 2, 1000))
    t.upsert(_batch([(0, 20), (1, 7)], 3, 2000))
    ours = t.read()
    theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(str(t.path)).build()
                                   .read(hudi.HudiReadOptions()))
    assert ours.num_rows == theirs.num_rows
    assert compare_rows(ours, theirs, ["id"], columns=["id", "p", "v"]) == []
    t.insert_overwrite_table(_batch([(2, 30)], 4, 0))
    theirs = pa.Table.from_batches(hudi.HudiTableBuilder.from_base_uri(str(t.path)).build()
                                   .read(hudi.HudiReadOptions()))
    assert theirs.column("id").to_pylist() == ["k30"] == t.read().column("id").to_pylist()


@pytest.mark.parametrize("version", [8, 9])
def test_the_metadata_table_lists_the_new_files(tmp_path: Path, version: int) -> None:
    """The MDT hook (services/mdt_write.py `update`) sees the replacecommit: its new files are listed, the
    replaced ones stay listed until cleaned (as upstream); hudi-rs lists the table from the MDT."""
    path = tmp_path / "t"
    t = _make(path, "default", "MERGE_ON_READ", version=version, properties={"hoodie.metadata.enable": "true"})
    t.insert(_batch([(p, k) for k in range(9) for p in (k % 3,)], 0, 0))
    t.insert_overwrite(_batch([(0, 3), (0, 20)], 1, 100))
    t.insert_overwrite_table(_batch([(1, 5), (2, 6)], 2, 200))
    t = lsm_lab.open_table(path)
    pending = {i.begin_time for i in t.instants() if not i.is_completed}
    committed = {(p, f.name): f.stat().st_size for p, f, name in fsview.list_data_files(path)
                 if name.instant not in pending}
    m = t.metadata_table()
    assert m is not None
    files = m.files()
    listed = {(p, n): s for p, n, s in zip(files.column("partition").to_pylist(), files.column("file_name").to_pylist(),
                                           files.column("size").to_pylist(), strict=True)}
    assert listed == committed
    assert _read(t) == {("b", "k5"): 205, ("c", "k6"): 206}
    if hudi_available():
        import hudi

        table = hudi.HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable",
                                                                                "true").build()
        theirs = pa.Table.from_batches(table.read(hudi.HudiReadOptions()))
        assert sorted(theirs.column("id").to_pylist()) == ["k5", "k6"]


def test_cdc_of_an_overwrite_is_inferred(tmp_path: Path) -> None:
    """No CDC log: read_cdc infers "d" for the keys gone, "u" for keys written again, "i" for new ones."""
    t = _make(tmp_path / "t", "lsm_tree", "MERGE_ON_READ", cdc=True)
    first = t.insert(_batch([(0, 1), (0, 2), (1, 3)], 0, 0))
    done = t.insert_overwrite(_batch([(0, 2), (0, 9)], 1, 100))
    meta = t.instant_metadata(done)
    assert all(s.get("cdcStats") is None for stats in meta["partitionToWriteStats"].values() for s in stats)
    ch = t.read_cdc(first.completion_time)
    got = sorted(zip(ch.column("op").to_pylist(), ch.column("record_key").to_pylist(),
                     [b and b["v"] for b in ch.column("before").to_pylist()],
                     [a and a["v"] for a in ch.column("after").to_pylist()]))
    assert got == [("d", "k1", 1, None), ("i", "k9", None, 109), ("u", "k2", 2, 102)]


def test_cli_write_operation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t"
    t = _make(path, "default", "COPY_ON_WRITE")
    t.insert(_batch([(0, 1), (1, 2)], 0, 0))
    src = tmp_path / "in.parquet"
    pq.write_table(_batch([(0, 5)], 1, 0), src)
    assert main(["write", str(path), str(src), "--operation", "insert_overwrite"]) == 0
    assert "insert_overwrite: 1 row in → 1 inserted" in capsys.readouterr().out
    assert _read(lsm_lab.open_table(path)) == {("a", "k5"): 5, ("b", "k2"): 2}
    assert main(["write", str(path), str(src), "--op", "insert_overwrite_table"]) == 0
    assert _read(lsm_lab.open_table(path)) == {("a", "k5"): 5}
    pq.write_table(_batch([(1, 6)], 2, 0), src)
    assert main(["write", str(path), str(src), "--op", "insert_overwrite", "--partition", "p=b",
                 "--partition", "p=a"]) == 0  # a static overwrite: p=a gets no row and reads empty
    assert _read(lsm_lab.open_table(path)) == {("b", "k6"): 6}
    assert main(["write", str(path), str(src), "--partition", "p=b"]) == 2  # (upsert: refused)
    assert "takes --operation insert_overwrite" in capsys.readouterr().err


REPLACING = st.sampled_from(["insert_overwrite", "insert_overwrite_table", "cluster"])


@pytest.mark.parametrize(("layout", "table_type"), [("lsm_tree", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE")])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["insert", "upsert", "delete"]), KEYS), min_size=1, max_size=4),
       replacing=REPLACING, keys=KEYS)
def test_rolling_back_a_completed_replacecommit_restores_the_replaced_groups(
        tmp_path_factory: pytest.TempPathFactory, layout: str, table_type: str,
        steps: list[tuple[str, list[tuple[int, int]]]], replacing: str, keys: list[tuple[int, int]]) -> None:
    """`Table.rollback` of the latest write when it is a replacecommit (an overwrite, or a clustering): the
    table reads — and looks keys up — as before it (the dict model), its files are gone, the next write
    follows the model again."""
    t = _make(tmp_path_factory.mktemp("t") / "t", layout, table_type)
    model: Model = {}
    for i, (op, ks) in enumerate(steps):
        rows = _batch(ks, ts=i, value=100 * i)
        getattr(t, op)(rows)
        _apply(model, op, rows)
    before = dict(model)
    if replacing == "cluster":
        done = t.cluster()
        if done is None:
            return  # nothing to cluster
    else:
        rows = _batch(keys, ts=50, value=5000)
        done = getattr(t, replacing)(rows)
        _apply(model, replacing, rows)
    assert done.action in ("replacecommit", "clustering")  # (a completed clustering of table version 10)
    assert t.completed_writes()[-1].begin_time == done.begin_time
    assert _read(t) == model
    (rolled,) = t.rollback(done)
    assert rolled.action == "rollback"
    assert t.instant_metadata(rolled)["instantsRollback"] == [{"commitTime": done.begin_time,
                                                               "action": done.action}]
    t = lsm_lab.open_table(t.path)
    assert _read(t) == before
    assert all(n.instant != done.begin_time for _, _, n in fsview.list_data_files(t.path))
    names = sorted({f"k{k}" for _, k in keys} | {"k0", "k5"})
    found = t.lookup(names, columns=["p", "id", "v"]) if before else None
    if found is not None:
        assert {(p, k): v for p, k, v in zip(*(found.column(c).to_pylist() for c in ("p", "id", "v")))} == \
            {pk: v for pk, v in before.items() if pk[1] in names}
    after = _batch([(0, 1), (2, 7)], ts=60, value=600)
    t.upsert(after)
    _apply(before, "upsert", after)
    assert _read(t) == before


@pytest.mark.parametrize(("layout", "table_type"), [("lsm_tree", "MERGE_ON_READ"), ("default", "COPY_ON_WRITE")])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["insert", "upsert", "delete"]), KEYS), min_size=1, max_size=3),
       static=st.sets(st.integers(0, 2), min_size=1), keys=KEYS, streamed=st.booleans())
def test_a_static_partition_overwrite_replaces_exactly_its_partitions(
        tmp_path_factory: pytest.TempPathFactory, layout: str, table_type: str,
        steps: list[tuple[str, list[tuple[int, int]]]], static: set[int], keys: list[tuple[int, int]],
        streamed: bool) -> None:
    """`insert_overwrite(rows, partitions=[...])`: the partitions named are replaced by the rows (none: they
    read empty), the others keep theirs — the dict model; in memory and streamed."""
    t = _make(tmp_path_factory.mktemp("t") / "t", layout, table_type)
    model: Model = {}
    for i, (op, ks) in enumerate(steps):
        rows = _batch(ks, ts=i, value=100 * i)
        getattr(t, op)(rows)
        _apply(model, op, rows)
    rows = _batch([(p, k) for p, k in keys if p in static], ts=50, value=5000)
    data: Any = rows.to_batches(max_chunksize=2) if streamed and rows.num_rows else rows
    done = t.insert_overwrite(data, partitions=[f"p={PARTS[p]}" for p in static],
                              **({"buffer_rows": 2} if streamed else {}))
    model = {pk: v for pk, v in model.items() if pk[0] not in {PARTS[p] for p in static}}
    _apply(model, "upsert", rows)
    assert done.action == "replacecommit" and t.instant_metadata(done)["operationType"] == "INSERT_OVERWRITE"
    assert _read(lsm_lab.open_table(t.path)) == model


def test_a_static_partition_overwrite_refuses_rows_outside_and_bad_partitions(tmp_path: Path) -> None:
    t = _make(tmp_path / "t", "lsm_tree", "MERGE_ON_READ")
    t.insert(_batch([(0, 1), (1, 2), (2, 3)], 0, 0))
    before, writes = _read(t), len(t.completed_writes())
    files = {n.name for _, _, n in fsview.list_data_files(t.path)}
    with pytest.raises(lsm_lab.InputError, match="p=b, outside them"):
        t.insert_overwrite(_batch([(0, 4), (1, 5)], 1, 0), partitions=["p=a"])
    assert _read(t) == before and len(t.completed_writes()) == writes
    assert {n.name for _, _, n in fsview.list_data_files(t.path)} == files  # what it wrote is gone
    for bad in (["a"], ["p=a/q=b"], ["p=.."], []):
        with pytest.raises(lsm_lab.InputError):
            t.insert_overwrite(_batch([(0, 4)], 1, 0), partitions=bad)
    t.insert_overwrite([], partitions=["p=c", "p=a"])  # no row: both partitions read empty
    assert _read(t) == {("b", "k2"): 2}
