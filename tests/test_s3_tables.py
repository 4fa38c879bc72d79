"""Tables on a real S3 server (moto on 127.0.0.1): every service and read kind, request counts, real Hudi tables.

The same sequence of writes and services runs on a local table and on an S3
table; every read kind (snapshot, time travel, read-optimized, incremental,
lookup) and every inspection must agree between them.  The local table is
itself checked against a dict model elsewhere (test_table_model.py), so
agreement means the S3 table is right.  Instant times differ between the two
tables, so rows are compared without the meta columns that hold them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from s3_server import S3Server
from twin import Twins, assert_reads_agree, assert_twins_agree, batch, cli_round_trip, make_twins, rows

import lsm_lab
from lsm_lab.errors import LsmLabError, StorageError, TableNotFoundError
from lsm_lab.format import parquet_footer
from lsm_lab.interop.hudi_tables import unpack_tables
from lsm_lab.storage import LocalStorage, ObjectInfo, StoragePath, open_storage
from lsm_lab.storage.objectstore import ObjectStorage

MakeTable = Callable[..., lsm_lab.Table]  # the s3_table and tmp_table fixtures


@pytest.fixture(scope="module")
def twin_tables(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Twins:
    return make_twins(tmp_path_factory.mktemp("twin") / "t", f"s3://{s3_server.new_bucket()}/warehouse/twin", s3_server.options())


def test_every_service_gives_the_same_table_on_s3(twin_tables: Twins) -> None:
    assert_twins_agree(*twin_tables)


def test_reads_time_travel_incremental_lookup_on_s3(twin_tables: Twins) -> None:
    local, remote, _, _ = twin_tables
    assert_reads_agree(local, remote)


def test_archive_on_s3(tmp_path: Path, s3_table: MakeTable) -> None:
    table = s3_table(partition_by="city", ordering_field="ts", **{"hoodie.keep.min.commits": "2",
                                                                  "hoodie.keep.max.commits": "3"})
    for i in range(6):
        table.upsert(batch(i, 10))
    before = rows(table.read())
    moved = table.archive(keep=2)
    assert moved and table.archived_instants()
    again = lsm_lab.open_table(table.path)
    assert rows(again.read()) == before
    assert len(again.completed_writes()) == 6
    assert not again.timeline(archived=True).empty


def test_inspection_on_s3(twin_tables: Twins, s3_server: S3Server) -> None:
    local, remote, _, _ = twin_tables
    assert len(remote.file_slices()) == len(local.file_slices())
    assert remote.dump_levels().count("\n") == local.dump_levels().count("\n")
    assert len(remote.timeline()) == len(local.timeline())
    from lsm_lab.viz import levels_frame  # the pictures read the same facts from the bucket

    assert len(levels_frame(remote)) == len(levels_frame(local)) > 0
    feet = lsm_lab.footers(str(remote.path), storage_options=s3_server.options())
    assert len(feet) == len(lsm_lab.footers(local.path)) and (feet["num_rows"] > 0).any()


def test_snapshot_read_lists_once_and_reads_each_file_once(twin_tables: Twins, monkeypatch: pytest.MonkeyPatch) -> None:
    _, remote, _, _ = twin_tables
    table = lsm_lab.open_table(remote.path)
    gets: list[str] = []
    ranged: list[str] = []
    real_read, real_range = ObjectStorage.read, ObjectStorage.read_range

    def read(self: ObjectStorage, key: str) -> bytes:
        gets.append(key)
        return real_read(self, key)

    def read_range(self: ObjectStorage, key: str, start: int, end: int) -> bytes:
        ranged.append(key)
        return real_range(self, key, start, end)

    monkeypatch.setattr(ObjectStorage, "read", read)
    monkeypatch.setattr(ObjectStorage, "read_range", read_range)
    before = table.storage.counts.snapshot()
    result = table.read()
    cost = table.storage.counts.since(before)
    files = {str(f.path) for s in table.latest_slices() for f in s.files}
    data_gets = [k for k in gets if not k.startswith(".hoodie/")]
    assert result.num_rows > 0 and files
    assert len(data_gets) == len(set(data_gets)) == len(files)  # every file once: its footer is in that GET
    assert ranged == []  # no separate footer reads
    # one LIST of the data files (recursive, one page) + one of the timeline + one of the archive folder
    assert cost["LIST"] <= 3, cost
    assert cost["PUT"] == cost["DELETE"] == 0


def test_a_completed_instant_is_created_once(s3_table: MakeTable) -> None:
    table = s3_table()
    done = table.upsert([{"id": "a", "v": 1}])
    name = done.file_name
    folder = table.active_timeline.folder
    assert isinstance(folder, StoragePath)
    with pytest.raises(lsm_lab.ConflictError):  # create-if-absent: the loser gets a typed conflict
        lsm_lab.storage.create_bytes(folder / name, b"{}", lambda p: lsm_lab.ConflictError("lost", path=p))
    assert rows(table.read()) == rows(lsm_lab.open_table(table.path).read())


def test_data_files_appear_whole_or_not_at_all(s3_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails while streaming a data file leaves no object behind (the PUT happens at close)."""
    table = s3_table()
    table.upsert([{"id": "a", "v": 1}])
    from lsm_lab.format import parquet_write

    def broken(self: Any, data: Any) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(parquet_write.ParquetFileWriter, "write", broken)
    with pytest.raises(RuntimeError):
        table.upsert([{"id": "b", "v": 2}])
    monkeypatch.undo()
    keys = [i.key for i in table.storage.list_files("", recursive=True) if not i.key.startswith(".hoodie/")]
    done = {i.begin_time for i in table.completed_writes()}
    assert all(any(t in k for t in done) for k in keys if k.endswith(".parquet")), keys
    assert rows(table.read(columns=["id", "v"])) == [("a", "1")]


# --------------------------------------------------------------------------- bad input
def test_unknown_scheme_is_one_typed_error() -> None:
    with pytest.raises(StorageError, match="unknown storage scheme 'ftp'"):
        lsm_lab.open_table("ftp://host/t")


def test_missing_bucket_is_one_typed_error(s3_server: S3Server) -> None:
    started = time.monotonic()
    with pytest.raises(LsmLabError) as info:
        lsm_lab.open_table("s3://no-such-bucket-here/t", storage_options=s3_server.options())
    assert "no-such-bucket-here" in str(info.value) and time.monotonic() - started < 20


def test_not_a_table_on_s3(s3_server: S3Server) -> None:
    bucket = s3_server.new_bucket()
    with pytest.raises(TableNotFoundError, match=f"s3://{bucket}/nothing"):
        lsm_lab.open_table(f"s3://{bucket}/nothing", storage_options=s3_server.options())


def test_an_endpoint_that_does_not_answer_fails_in_bounded_time() -> None:
    with socket.socket() as s:  # a port that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        lsm_lab.open_table("s3://b/t", storage_options={
            "aws_endpoint_url": f"http://127.0.0.1:{port}", "aws_access_key_id": "x", "aws_secret_access_key": "y",
            "connect_timeout": "1", "timeout": "2", "max_retries": "1", "retry_timeout": "3"})
    assert "s3://b/t" in str(info.value)
    assert time.monotonic() - started < 30


# --------------------------------------------------------------------------- real Hudi tables
def _upload(src: Path, storage: Any) -> None:
    local = LocalStorage(src)
    for info in local.list_files("", recursive=True):
        storage.write(info.key, local.read(info.key))


REAL = ("qs_mor_avro_v6_trips_8i1u", "qs_mor_avro_v8_trips_8i3u1d", "s_cow_v8_complexkeygen_hivestyle",
        "s_mor_avro_v9_txns_simple_nometa", "s_mor_parquet_v6_nonpartitioned")


def test_real_hudi_tables_read_the_same_from_s3(shared_dir: Path, tmp_path: Path, s3_server: S3Server) -> None:
    zips = shared_dir / "hudi-tables"
    tables = unpack_tables(zips, tmp_path, names=REAL)
    bucket = s3_server.new_bucket()
    for stem, folder in tables.items():
        uri = f"s3://{bucket}/{stem}"
        _upload(folder, open_storage(uri, s3_server.options()))
        local = lsm_lab.open_table(folder)
        remote = lsm_lab.open_table(uri, storage_options=s3_server.options())
        assert rows(remote.read(), drop=()) == rows(local.read(), drop=()), stem
        assert rows(remote.read_optimized(), drop=()) == rows(local.read_optimized(), drop=()), stem
        for a, b in zip(local.completed_writes(), remote.completed_writes(), strict=True):
            assert a.begin_time == b.begin_time
            assert rows(remote.read(as_of=b), drop=()) == rows(local.read(as_of=a), drop=()), (stem, a)


def test_object_info_of_listing_has_sizes(s3_table: MakeTable) -> None:
    table = s3_table()
    table.upsert([{"id": "a", "v": 1}])
    infos = table.storage.list_files("", recursive=True)
    assert infos and all(isinstance(i, ObjectInfo) and i.size >= 0 for i in infos)


# --------------------------------------------------------------------------- the CLI
def test_cli_on_s3_with_storage_options(tmp_path: Path, s3_server: S3Server,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    cli_round_trip(f"s3://{s3_server.new_bucket()}/cli/t", s3_server.options(), "aws_endpoint_url", "", tmp_path, capsys)


def test_a_table_root_pickles_as_uri_and_options(s3_table: MakeTable) -> None:
    """What Spark ships to its tasks: the root reopens from its URI and resolved options, counting afresh."""
    import pickle

    table = s3_table()
    table.upsert([{"id": "a", "v": 1}])
    copy = pickle.loads(pickle.dumps(table.read_context()))
    assert isinstance(copy.base_path, StoragePath) and str(copy.base_path) == str(table.path)
    assert copy.base_path.storage.counts is not table.storage.counts
    assert rows(lsm_lab.open_table(copy.base_path).read()) == rows(table.read())


def test_bench_storage_small() -> None:
    from lsm_lab.bench import storage as bench

    result = bench.run(rows=3000, repeats=1, log=lambda _: None)
    text = bench.report(result)
    assert all(op in text for op in bench.OPS)
    read = result["s3"]["read"]["requests"]
    assert read["LIST"] <= 3 and read["PUT"] == 0 and read["GET"] > 0
    assert result["s3"]["bulk_insert"]["requests"]["PUT"] > 0


@pytest.mark.parametrize("version", [6, 8])
def test_compatibility_tables_and_upgrade_on_s3(s3_table: MakeTable, tmp_table: MakeTable, version: int) -> None:
    """v1 (#HUDI#) logs, the flat v6 timeline, Avro v8 instants and the upgrade to 10, in a bucket."""
    kw: dict[str, Any] = {"partition_by": "p", "ordering_field": "ts", "table_version": version}
    remote, local = s3_table(**kw), tmp_table(**kw)
    for t in (remote, local):
        for i in range(3):
            t.upsert([{"id": f"k{j}", "p": "x", "ts": i, "v": i * 10 + j} for j in range(5)])
        t.delete([{"id": "k1", "p": "x", "ts": 9}])
    assert any(f.name.log_format == 1 for s in remote.latest_slices() for f in s.log_files)
    assert rows(remote.read()) == rows(local.read())
    remote.compact(strategy="full")
    local.compact(strategy="full")
    assert rows(remote.read()) == rows(local.read())
    if version == 8:
        upgraded = remote.upgrade()
        assert upgraded.config.version == 10 and rows(upgraded.read()) == rows(local.read())


@pytest.mark.parametrize("uri, options", [
    ("gs://bucket/lake/t", {}),
    ("az://container/lake/t", {"azure_storage_account_name": "acct", "azure_storage_account_key": "a2V5"}),
])
def test_gcs_and_azure_roots_are_configured(uri: str, options: dict[str, str]) -> None:
    """GCS and Azure have no local server here: check the configuration only (no request is sent)."""
    import pickle

    from lsm_lab.storage import as_path

    root = as_path(uri, options)
    assert isinstance(root, StoragePath) and str(root) == uri
    assert (root / ".hoodie" / "hoodie.properties").key == ".hoodie/hoodie.properties"
    assert str(pickle.loads(pickle.dumps(root / "p=1"))) == f"{uri}/p=1"
    with pytest.raises(StorageError):
        root / "/etc/passwd"  # a key never re-roots


def test_clustering_on_s3(s3_table: MakeTable, tmp_table: MakeTable) -> None:
    """Small file groups of the default layout clustered into one, in a bucket as on disk."""
    kw: dict[str, Any] = {"layout": "default", "hoodie.parquet.small.file.limit": "0"}
    remote, local = s3_table(**kw), tmp_table(**kw)
    for t in (remote, local):
        for i in range(4):
            t.insert([{"id": f"k{i}{j}", "v": j} for j in range(5)])
        assert len(t.file_slices()) == 4
        done = t.cluster()
        assert done is not None and done.is_completed and len(t.file_slices()) == 1
    assert rows(remote.read()) == rows(local.read()) and remote.read().num_rows == 20


def _data_keys(table: lsm_lab.Table) -> dict[str, int]:
    return {f.relative: f.size for s in table.latest_slices() for f in s.files}


def test_services_read_each_input_once_on_s3(s3_table: MakeTable, tmp_table: MakeTable,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Log compaction, full compaction and clustering GET each input file once (a small object whole, its
    footer with it), send no HEAD per file, and a clean deletes its files with one bulk DELETE (issue 33)."""
    kw: dict[str, Any] = {"partition_by": "p", "ordering_field": "ts", "table_type": "MERGE_ON_READ",
                          "layout": "lsm_tree", "num_buckets": 2}
    remote, local = s3_table(**kw), tmp_table(**kw)
    gets: list[str] = []
    real_read, real_range = ObjectStorage.read, ObjectStorage.read_range
    real_suffix = ObjectStorage.read_suffix

    def read(self: ObjectStorage, key: str) -> bytes:
        gets.append(self._key(key))
        return real_read(self, key)

    def read_range(self: ObjectStorage, key: str, start: int, end: int) -> bytes:
        gets.append(self._key(key))
        return real_range(self, key, start, end)

    def read_suffix(self: ObjectStorage, key: str, n: int) -> tuple[bytes, int]:
        gets.append(self._key(key))
        return real_suffix(self, key, n)

    monkeypatch.setattr(ObjectStorage, "read", read)
    monkeypatch.setattr(ObjectStorage, "read_range", read_range)
    monkeypatch.setattr(ObjectStorage, "read_suffix", read_suffix)
    prefix = remote.storage.prefix if isinstance(remote.storage, ObjectStorage) else ""

    def data_gets() -> list[str]:
        return [k[len(prefix):].lstrip("/") for k in gets if "/.hoodie/" not in k and not k.startswith(".hoodie/")]

    def step(name: str, fn: Callable[[lsm_lab.Table], Any]) -> tuple[dict[str, int], list[str], dict[str, int]]:
        inputs = _data_keys(remote)
        gets.clear()
        before = remote.storage.counts.snapshot()
        fn(remote)
        cost = remote.storage.counts.since(before)
        read_keys = data_gets()
        fn(local)
        assert rows(remote.read()) == rows(local.read()), name
        return cost, read_keys, inputs

    for t in (remote, local):
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(40)])
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 2, "v": -i} for i in range(0, 40, 3)])
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 3, "v": i * 7} for i in range(0, 40, 5)])

    cost, read_keys, inputs = step("log compact", lambda t: t.compact(strategy="log"))
    logs = {k for k in inputs if ".log." in k}
    assert sorted(read_keys) == sorted(logs), read_keys  # every log once, no base file
    assert cost["HEAD"] <= 1, cost

    cost, read_keys, inputs = step("compact", lambda t: t.compact(strategy="full"))
    assert set(read_keys) <= set(inputs)
    # each input once; a compacted log's footer is read once more to learn what it replaces
    assert len(read_keys) <= len(inputs) + len([k for k in inputs if ".log." in k]), read_keys
    assert cost["HEAD"] <= 1, cost

    for t in (remote, local):
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "ts": 4, "v": i} for i in range(0, 40, 2)])
    cost, read_keys, inputs = step("cluster", lambda t: t.cluster())
    assert len(read_keys) == len(set(read_keys)) and set(read_keys) <= set(inputs), read_keys
    assert cost["HEAD"] <= 1, cost

    before_files = _data_keys(remote)
    cost, _, _ = step("clean", lambda t: t.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1))
    assert set(_data_keys(remote)) <= set(before_files)
    assert cost["DELETE"] <= 3, cost  # one DeleteObjects for the files, the lock's release; no HEAD per file
    assert cost["HEAD"] <= 2, cost


def test_windowed_stream_reads_whole_row_groups(s3_server: S3Server, tmp_path: Path) -> None:
    """A streamed read of an object larger than the window: a footer GET, then one GET per window of row groups."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lsm_lab.format import ranged
    from lsm_lab.format.parquet_read import open_parquet, open_stream

    table = pa.table({"k": [f"{i:08d}" for i in range(20_000)], "v": list(range(20_000))})
    local = tmp_path / "f.parquet"
    pq.write_table(table, local, row_group_size=1_000)
    storage = open_storage(f"s3://{s3_server.new_bucket()}", s3_server.options())
    storage.write("f.parquet", local.read_bytes())
    size = local.stat().st_size
    path = StoragePath(storage, "f.parquet")
    window = size // 4
    before = storage.counts.snapshot()
    source, tail = ranged.stream_source(path, size, window=window)
    md = pq.read_metadata(pa.BufferReader(tail))
    pf = open_parquet(source, metadata=md, pre_buffer=False, buffer_size=4096)
    out = pa.Table.from_batches(list(pf.iter_batches(batch_size=700)))
    cost = storage.counts.since(before)
    assert out.equals(table)
    assert cost["HEAD"] == 0 and cost["GET"] <= 1 + 5, cost  # footer + about size / window
    before = storage.counts.snapshot()
    source, md2, _ = open_stream(path, size)  # smaller than the default window: one GET, whole
    assert storage.counts.since(before)["GET"] == 1 and md2.num_rows == 20_000
    assert open_parquet(source, metadata=md2, pre_buffer=False).read().equals(table)


def test_delete_many_is_one_bulk_request_on_s3(s3_server: S3Server) -> None:
    storage = open_storage(f"s3://{s3_server.new_bucket()}", s3_server.options())
    for i in range(5):
        storage.write(f"d/f{i}", b"x")
    before = storage.counts.snapshot()
    storage.delete_many([f"d/f{i}" for i in range(5)] + ["d/missing"])
    assert storage.counts.since(before)["DELETE"] == 1
    assert storage.list_files("d") == []
    storage.write("m/a/b", b"x")
    storage.write("m/c", b"x")
    before = storage.counts.snapshot()
    assert storage.delete_prefix("m") == 2
    assert storage.counts.since(before) == {"LIST": 1, "GET": 0, "HEAD": 0, "PUT": 0, "DELETE": 1}


def test_lookup_on_s3_reads_a_file_once_after_its_footer(s3_table: MakeTable, tmp_table: MakeTable,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup of keys spread over a file of many row groups: the footer GET, then the row groups from the first
    to the last hit in one ranged GET (both their key and their other columns); rows as on local disk."""
    from lsm_lab.format import parquet_write

    monkeypatch.setattr(parquet_write, "SORTED_ROW_GROUP_BYTES", 16 * 1024)  # row groups of ~1,024 rows
    kw: dict[str, Any] = {"ordering_field": "ts", "table_type": "MERGE_ON_READ", "layout": "lsm_tree"}
    remote, local = s3_table(**kw), tmp_table(**kw)
    data = [{"id": f"k{i:06d}", "ts": 1, "v": i, "s": f"text-{i % 97}"} for i in range(20_000)]
    for t in (remote, local):
        t.bulk_insert(data)
    files = [f for s in remote.latest_slices() for f in s.files]
    assert all(parquet_footer.read_footer(f.path)[0].num_row_groups >= 4 for f in files)
    keys = [f"k{i:06d}" for i in range(0, 20_000, 700)] + ["absent"]
    before = remote.storage.counts.snapshot()
    got = remote.lookup(keys)
    cost = remote.storage.counts.since(before)
    assert rows(got) == rows(local.lookup(keys)) and got.num_rows == len(keys) - 1
    # the timeline and the key index (≤ 5), per file one footer and one GET for its row groups (before: a footer
    # and two GETs per row group hit: 5 + 4 + 2 x 29)
    assert cost["GET"] <= 5 + 2 * len(files) and cost["HEAD"] == 0, (cost, len(files))


def test_a_footer_larger_than_the_first_guess_is_one_get_once_seen(s3_server: S3Server, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The tail GET asks for the largest footer seen so far: a second file like the first costs one GET, not two."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lsm_lab.format import ranged

    cols = {f"c{j}": [f"{j}-{i:06d}" for i in range(6_000)] for j in range(8)}
    local = tmp_path / "f.parquet"
    pq.write_table(pa.table(cols), local, row_group_size=50)  # 120 row groups x 8 columns: a large footer
    data = local.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little") + 8
    assert footer > ranged.FOOTER_GUESS and len(data) // ranged.FOOTER_SHARE < footer  # the size alone is no help
    storage = open_storage(f"s3://{s3_server.new_bucket()}", s3_server.options())
    storage.write("a.parquet", data)
    storage.write("b.parquet", data)
    monkeypatch.setattr(ranged, "_largest_footer", [0])
    before = storage.counts.snapshot()
    first = ranged.tail_bytes(StoragePath(storage, "a.parquet"), len(data))
    assert storage.counts.since(before)["GET"] == 2  # the guess, then the whole footer
    before = storage.counts.snapshot()
    second = ranged.tail_bytes(StoragePath(storage, "b.parquet"), len(data))
    assert storage.counts.since(before)["GET"] == 1
    assert first.endswith(data[-footer:]) and second.endswith(data[-footer:])
    assert ranged.footer_guess(32 << 20) >= (32 << 20) // ranged.FOOTER_SHARE  # and it grows with the object


def test_markers_this_process_wrote_are_deleted_without_a_listing(s3_server: S3Server) -> None:
    from lsm_lab.services import markers

    storage = open_storage(f"s3://{s3_server.new_bucket()}", s3_server.options())
    base = StoragePath(storage, "t")
    for i in range(3):
        markers.create_marker(base, "20240101000000000", "p", f"f{i}.parquet", "CREATE")
    before = storage.counts.snapshot()
    markers.delete_markers(base, "20240101000000000", mine_only=True)
    assert storage.counts.since(before) == {"LIST": 0, "GET": 0, "HEAD": 0, "PUT": 0, "DELETE": 1}
    assert markers.marked_files(base, "20240101000000000") == []
    # markers another process wrote (none recorded here): the folder is listed, as before
    storage.write("t/.hoodie/.temp/20240101000000001/p/g.parquet.marker.CREATE", b"")
    before = storage.counts.snapshot()
    markers.delete_markers(base, "20240101000000001", mine_only=True)
    assert storage.counts.since(before)["LIST"] == 1
    assert markers.marked_files(base, "20240101000000001") == []


def test_clean_on_s3_runs_in_one_lock_hold_without_a_heartbeat(s3_table: MakeTable, tmp_table: MakeTable,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan, instants, one bulk DELETE (the emptied key index sidecars with the files) and the completion under
    one lock hold; a clean killed before its completion is resumed by the next one."""
    from lsm_lab.format import keyindex, naming
    from lsm_lab.timeline.active import ActiveTimeline

    remote, local = s3_table(partition_by="p"), tmp_table(partition_by="p")
    for t in (remote, local):
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "v": i} for i in range(20)])
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "v": -i} for i in range(0, 20, 2)])
        t.compact(strategy="full")
    before_sidecars = keyindex.sidecar_instants(remote.path)
    before = remote.storage.counts.snapshot()
    done = remote.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    cost = remote.storage.counts.since(before)
    assert done is not None
    # LIST .hoodie + LIST of the data files; lock PUT, 3 instant PUTs, release PUT; one DeleteObjects
    assert cost == {"LIST": 2, "GET": 0, "HEAD": 0, "PUT": 5, "DELETE": 1}, cost
    live = {p.instant for p in (naming.parse(n) for n in _data_names(remote)) if p is not None}
    after_sidecars = keyindex.sidecar_instants(remote.path)
    assert set(after_sidecars) <= live and set(after_sidecars) < set(before_sidecars)
    local.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert rows(remote.read()) == rows(local.read())
    assert rows(remote.lookup(["k3", "k4"])) == rows(local.lookup(["k3", "k4"]))

    # killed before its completion: pending, no heartbeat; the next clean resumes it
    for t in (remote, local):
        t.upsert([{"id": f"k{i}", "p": "ab"[i % 2], "v": 100 + i} for i in range(20)])
        t.compact(strategy="full")
    real_complete = ActiveTimeline.complete

    def killed(self: ActiveTimeline, instant: Any, *a: Any, **kw: Any) -> Any:
        if instant.action == "clean":
            raise RuntimeError("killed")
        return real_complete(self, instant, *a, **kw)

    monkeypatch.setattr(ActiveTimeline, "complete", killed)
    with pytest.raises(RuntimeError):
        remote.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    monkeypatch.setattr(ActiveTimeline, "complete", real_complete)
    reopened = lsm_lab.open_table(remote.path)
    assert [i.action for i in reopened.active_timeline.pending()] == ["clean"]
    assert reopened.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1) is not None
    assert reopened.active_timeline.pending() == []
    local.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert rows(reopened.read()) == rows(local.read())


def _data_names(table: lsm_lab.Table) -> list[str]:
    from lsm_lab.storage import walk_sized

    return [n for _, n, _ in walk_sized(table.path)]


def test_lookup_hits_with_one_window_between_them_are_one_get(s3_table: MakeTable, tmp_table: MakeTable,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys in the first and the last row group of a large file: when the bytes between the hits are at most
    `ranged.WHOLE_MAX`, the footer GET and one ranged GET from the first hit to the last (not two windows)."""
    from lsm_lab.format import parquet_write, ranged
    from lsm_lab.format.parquet_read import read_parquet

    monkeypatch.setattr(parquet_write, "SORTED_ROW_GROUP_BYTES", 16 * 1024)  # row groups of ~1,024 rows
    kw: dict[str, Any] = {"ordering_field": "ts", "table_type": "MERGE_ON_READ", "layout": "lsm_tree"}
    remote, local = s3_table(**kw), tmp_table(**kw)
    data = [{"id": f"k{i:06d}", "ts": 1, "v": i, "s": f"text-{i % 97}"} for i in range(20_000)]
    for t in (remote, local):
        t.bulk_insert(data)
    target = max((f for s in remote.latest_slices() for f in s.files), key=lambda f: f.size)
    md = parquet_footer.read_footer(target.path)[0]
    spans = ranged.row_group_spans(md)
    assert len(spans) >= 4
    ids = read_parquet(target.path, ["id"]).column(0)
    keys = [ids[0].as_py(), ids[len(ids) - 1].as_py()]  # (a sorted file: in its first and last row group)
    hit = (spans[0][1] - spans[0][0]) + (spans[-1][1] - spans[-1][0])
    between = spans[-1][1] - spans[0][0] - hit
    assert between > hit  # twice the hits' bytes would not cover the span
    monkeypatch.setattr(ranged, "WHOLE_MAX", between)  # exactly one window between the hits; the file is larger
    assert target.size > ranged.WHOLE_MAX
    # (two keys at its ends would read most of the file: `ranged.whole_pays` fetches such a file whole, cold;
    # the ranged path is what this test checks, so only files of at most WHOLE_MAX bytes are fetched whole)
    monkeypatch.setattr(ranged, "whole_pays", lambda size, keys: size <= ranged.WHOLE_MAX)
    reads: list[str] = []
    real_range = ObjectStorage.read_range

    def read_range(self: ObjectStorage, key: str, start: int, end: int) -> bytes:
        reads.append(key)
        return real_range(self, key, start, end)

    monkeypatch.setattr(ObjectStorage, "read_range", read_range)
    got = remote.lookup(keys)
    assert rows(got) == rows(local.lookup(keys)) and got.num_rows == 2
    on_target = [k for k in reads if k.endswith(target.path.name)]
    assert 1 <= len(on_target) <= 2, on_target  # (the footer, unless cached) and one GET for both row groups


def _sorted_file_table(s3_table: MakeTable, tmp_table: MakeTable,
                       monkeypatch: pytest.MonkeyPatch) -> tuple[lsm_lab.Table, lsm_lab.Table, Any, list[str]]:
    """A remote and a local table of one sorted base file of many row groups, its file and its keys in order;
    a wide text column `pad` lies between the key column and `s` in every row group."""
    from lsm_lab.format import parquet_write, ranged
    from lsm_lab.format.parquet_read import read_parquet

    monkeypatch.setattr(parquet_write, "SORTED_ROW_GROUP_BYTES", 64 * 1024)
    # the tail guess grows with the largest footer this process has read (a Hudi bloom filter's is ~330 KB,
    # read by other tests in the same worker): these tests count GETs from a guess that has seen nothing yet
    monkeypatch.setattr(ranged, "_largest_footer", [0])
    kw: dict[str, Any] = {"ordering_field": "ts", "table_type": "MERGE_ON_READ", "layout": "lsm_tree",
                          "num_buckets": 1}
    remote, local = s3_table(**kw), tmp_table(**kw)
    data = [{"id": f"k{i:06d}", "ts": 1, "pad": f"{i * 7919 % 1000003:07d}" * 8, "s": f"text-{i % 97}"}
            for i in range(20_000)]
    for t in (remote, local):
        t.bulk_insert(data)
    files = [f for s in remote.latest_slices() for f in s.files]
    assert len(files) == 1
    target = files[0]
    assert parquet_footer.read_footer(target.path)[0].num_row_groups >= 8
    ids = read_parquet(target.path, ["id"]).column(0).to_pylist()
    return remote, local, target, ids


def _reads_of(monkeypatch: pytest.MonkeyPatch, name: str) -> list[str]:
    """Every GET of the object `name` from now on: "whole" or "range"."""
    reads: list[str] = []
    real_read, real_range = ObjectStorage.read, ObjectStorage.read_range

    def read(self: ObjectStorage, key: str) -> bytes:
        if key.endswith(name):
            reads.append("whole")
        return real_read(self, key)

    def read_range(self: ObjectStorage, key: str, start: int, end: int) -> bytes:
        if key.endswith(name):
            reads.append("range")
        return real_range(self, key, start, end)

    monkeypatch.setattr(ObjectStorage, "read", read)
    monkeypatch.setattr(ObjectStorage, "read_range", read_range)
    return reads


def test_a_cold_lookup_fetches_a_large_file_whole_when_its_keys_would_read_most_of_it(
        s3_table: MakeTable, tmp_table: MakeTable, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file larger than `ranged.WHOLE_MAX` whose footer is not cached: keys spread over it are one GET of the
    whole object (a footer GET and a ranged GET would fetch most of it in two); one key is a footer GET and one
    ranged GET.  Rows as on local disk either way."""
    from lsm_lab.format import keyindex, ranged
    from lsm_lab.table.footer import clear_footer_cache

    remote, local, target, ids = _sorted_file_table(s3_table, tmp_table, monkeypatch)
    monkeypatch.setattr(ranged, "WHOLE_MAX", target.size // 4)
    spread = ids[:: len(ids) // 10]
    assert ranged.whole_pays(target.size, len(spread)) and not ranged.whole_pays(target.size, 1)
    reads = _reads_of(monkeypatch, target.path.name)
    for keys, expected in ((spread, ["whole"]), ([ids[len(ids) // 2]], ["range", "range"])):
        clear_footer_cache()
        reads.clear()
        got = remote.lookup(keys)
        assert rows(got) == rows(local.lookup(keys)) and got.num_rows == len(keys)
        assert reads == expected, (keys, reads)
    # without a key index entry (nothing says how many keys the file holds) a large file is never fetched whole
    monkeypatch.setattr(keyindex.KeyIndex, "entry", lambda self, name, size: None)
    clear_footer_cache()
    reads.clear()
    assert rows(remote.lookup(spread)) == rows(local.lookup(spread))
    assert "whole" not in reads and len(reads) >= 2


@given(size=st.integers(1, 200 << 20), keys=st.one_of(st.none(), st.integers(0, 10_000)))
@settings(max_examples=300, deadline=None)
def test_whole_pays_is_a_bounded_rule_that_grows_with_the_keys(size: int, keys: int | None) -> None:
    """Small objects are always fetched whole; past `WHOLE_BUDGET`, with no key admitted or none known, never;
    in between, more keys in the same object never turn a whole GET back into ranged ones."""
    from lsm_lab.format import ranged

    pays = ranged.whole_pays(size, keys)
    if size <= ranged.WHOLE_MAX:
        assert pays
    elif keys is None or keys == 0 or size > ranged.WHOLE_BUDGET:
        assert not pays
    else:
        assert not pays or ranged.whole_pays(size, keys + 1)
        if pays:  # the bytes a ranged read was expected to spare are at most WHOLE_MAX
            assert size - ranged.footer_guess(size) - size * (keys - 1) // (keys + 1) <= ranged.WHOLE_MAX


def test_a_warm_lookup_reads_one_row_group_with_one_get(s3_table: MakeTable, tmp_table: MakeTable,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Footer cached, one key: its row group's key chunk and the other columns wanted are one ranged GET,
    even with an unwanted wide column between them (pyarrow's pre-buffer alone made that two GETs)."""
    from lsm_lab.table.footer import clear_footer_cache

    remote, local, target, ids = _sorted_file_table(s3_table, tmp_table, monkeypatch)
    key = [ids[len(ids) // 3]]
    clear_footer_cache()
    remote.lookup(key, columns=["id", "s"])  # (the footer, now cached)
    reads = _reads_of(monkeypatch, target.path.name)
    got = remote.lookup(key, columns=["id", "s"])
    assert rows(got) == rows(local.lookup(key, columns=["id", "s"])) and got.num_rows == 1
    assert reads == ["range"], reads
