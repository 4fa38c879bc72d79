"""The storage seam, on the local file system and on a real S3 server (moto on 127.0.0.1).

Every test runs against both backends: what a table does on disk it must do on S3.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lsm_lab
from lsm_lab.storage import (
    AlreadyExistsError,
    LocalStorage,
    Storage,
    StorageError,
    StorageLock,
    VersionMismatchError,
    clean_key,
    open_storage,
)
from lsm_lab.storage.lock import LOCK_KEY, LockState


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return open_storage(tmp_path / "table")
    server = request.getfixturevalue("s3_server")
    bucket = server.new_bucket()
    return open_storage(f"s3://{bucket}/warehouse/table", server.options())


def test_round_trip_and_listing(storage: Storage) -> None:
    assert storage.list_files() == []  # a missing root lists as empty
    storage.write(".hoodie/hoodie.properties", b"hoodie.table.name=t\n")
    storage.write("city=a/f1.parquet", b"0123456789")
    storage.write("city=a/f2.parquet", b"abc")
    storage.write("city=b/sub/f3.parquet", b"x")
    assert storage.read("city=a/f1.parquet") == b"0123456789"
    assert storage.read_range("city=a/f1.parquet", 2, 5) == b"234"
    assert [i.key for i in storage.list_files("city=a")] == ["city=a/f1.parquet", "city=a/f2.parquet"]
    assert [i.size for i in storage.list_files("city=a")] == [10, 3]
    assert storage.list_folders() == [".hoodie", "city=a", "city=b"]
    assert storage.list_folders("city=b") == ["city=b/sub"]
    assert [i.key for i in storage.list_files("city=b", recursive=True)] == ["city=b/sub/f3.parquet"]
    info = storage.head("city=a/f2.parquet")
    assert info is not None and info.size == 3 and info.name == "f2.parquet" and info.etag
    assert storage.head("city=a/missing") is None
    with pytest.raises(FileNotFoundError):
        storage.read("city=a/missing")
    storage.delete("city=a/f1.parquet")
    storage.delete("city=a/f1.parquet")  # deleting a missing object is not an error
    assert [i.key for i in storage.list_files("city=a")] == ["city=a/f2.parquet"]
    assert storage.delete_prefix("city=b") == 1
    assert storage.list_files("city=b", recursive=True) == []


def test_request_counts(storage: Storage) -> None:
    before = storage.counts.snapshot()
    storage.write("a", b"1")
    storage.read("a")
    storage.head("a")
    storage.list_files()
    storage.delete("a")
    assert storage.counts.since(before) == {"LIST": 1, "GET": 1, "HEAD": 1, "PUT": 1, "DELETE": 1}


def test_create_is_create_if_absent(storage: Storage) -> None:
    storage.create(".hoodie/timeline/1_2.commit", b"first")
    with pytest.raises(AlreadyExistsError) as info:
        storage.create(".hoodie/timeline/1_2.commit", b"second")
    assert isinstance(info.value, lsm_lab.ConflictError)
    assert "1_2.commit" in str(info.value)
    assert storage.read(".hoodie/timeline/1_2.commit") == b"first"


def test_racing_creates_have_exactly_one_winner(storage: Storage) -> None:
    wins: list[int] = []
    losses: list[int] = []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            storage.create("race", str(i).encode())
            wins.append(i)
        except AlreadyExistsError:
            losses.append(i)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert storage.read("race") == str(wins[0]).encode()


def test_replace_is_compare_and_swap(storage: Storage) -> None:
    first = storage.write("lock", b"v1")
    second = storage.replace("lock", b"v2", expected=first)
    assert second.etag != first.etag
    with pytest.raises(VersionMismatchError):
        storage.replace("lock", b"v3", expected=first)  # stale version
    assert storage.read("lock") == b"v2"
    data, info = storage.read_versioned("lock")
    assert data == b"v2"
    storage.replace("lock", b"v3", expected=info)
    assert storage.read("lock") == b"v3"


def test_concurrent_replace_loses_no_update(storage: Storage) -> None:
    """Eight threads increment a counter by compare-and-swap; every successful swap counts once."""
    storage.write("counter", b"0")
    done = []

    def worker() -> None:
        n = 0
        while n < 5:
            data, info = storage.read_versioned("counter")
            try:
                storage.replace("counter", str(int(data) + 1).encode(), expected=info)
                n += 1
            except VersionMismatchError:
                continue
        done.append(n)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(done) == 20
    assert storage.read("counter") == b"20"


def test_parquet_through_the_arrow_filesystem(storage: Storage) -> None:
    fs, _ = storage.arrow_filesystem()
    table = pa.table({"k": ["a", "b"], "v": [1, 2]})
    path = storage.arrow_path("p/f.parquet")
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, path, filesystem=fs)
    assert pq.read_table(path, filesystem=fs).equals(table)
    assert [i.key for i in storage.list_files("p")] == ["p/f.parquet"]
    assert storage.read("p/f.parquet")[:4] == b"PAR1"


def test_child_shares_counters(storage: Storage) -> None:
    sub = storage.child(".hoodie")
    sub.write("x", b"1")
    assert storage.read(".hoodie/x") == b"1"
    assert sub.counts is storage.counts
    assert sub.url("x") == storage.url(".hoodie/x")


def test_keys_cannot_climb_out_of_the_root(storage: Storage) -> None:
    assert clean_key("/a//b/./c") == "a/b/c"
    for bad in ("../x", "a/../../x", "a/.."):
        with pytest.raises(StorageError, match="climbs out"):
            storage.write(bad, b"x")


# -- the storage lock ------------------------------------------------------------------------

def test_lock_excludes_a_second_owner_until_released(storage: Storage) -> None:
    first, second = StorageLock(storage, validity=10), StorageLock(storage, validity=10)
    first.acquire(timeout=5)
    assert first.held and not second.try_acquire()
    with pytest.raises(lsm_lab.ConflictError, match="could not take the table lock"):
        second.acquire(timeout=0.3)
    first.release()
    assert not first.held
    second.acquire(timeout=5)
    state = LockState.decode(storage.read(LOCK_KEY))
    assert state is not None and state.owner == second.owner and not state.expired
    second.release()
    state = LockState.decode(storage.read(LOCK_KEY))
    assert state is not None and state.expired


def test_lock_is_reentrant_per_holder(storage: Storage) -> None:
    lock = StorageLock(storage, validity=10)
    with lock:
        with lock:
            assert lock.held
        assert lock.held
    assert not lock.held


def test_a_dead_owners_lock_is_taken_over_after_it_expires(storage: Storage) -> None:
    dead = LockState("dead-writer", int(time.time() * 1000) + 300, False)  # a lease of 0.3 s, never renewed
    storage.write(LOCK_KEY, dead.encode())
    lock = StorageLock(storage, validity=10)
    assert not lock.try_acquire()  # still valid
    started = time.monotonic()
    lock.acquire(timeout=5)  # 0.3 s lease + 0.5 s clock-drift margin
    assert 0.5 < time.monotonic() - started < 5
    lock.release()


def test_heartbeat_keeps_the_lease_and_a_lost_lease_is_detected(storage: Storage) -> None:
    lock = StorageLock(storage, validity=0.6, heartbeat=0.1)
    other = StorageLock(storage, validity=10)
    lock.acquire(timeout=5)
    time.sleep(1.5)  # well past the first lease: the heartbeat must have renewed it
    assert not other.try_acquire()
    lock.check()
    # another writer takes the lock over (as if it judged the lease expired: a stale clock): the holder notices
    intruder = LockState("intruder", int(time.time() * 1000) + 60_000, False).encode()
    while True:
        _, seen = storage.read_versioned(LOCK_KEY)
        try:
            storage.replace(LOCK_KEY, intruder, expected=seen)
            break
        except VersionMismatchError:  # the heartbeat renewed in between: read again
            continue
    deadline = time.monotonic() + 5
    while lock.held and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(lsm_lab.ConflictError, match="lost"):
        lock.check()
    lock.release()
    state = LockState.decode(storage.read(LOCK_KEY))
    assert state is not None and state.owner == "intruder"  # the lost holder released nothing of the intruder's


# -- locations and bad input -----------------------------------------------------------------

def test_locations(tmp_path: Path) -> None:
    assert isinstance(open_storage(tmp_path), LocalStorage)
    assert isinstance(open_storage(str(tmp_path)), LocalStorage)
    local = open_storage(f"file://{tmp_path}")
    assert isinstance(local, LocalStorage) and local.root == tmp_path
    with pytest.raises(StorageError, match="unknown storage scheme 'ftp'") as info:
        open_storage("ftp://host/table")
    assert "ftp://host/table" in str(info.value)
    with pytest.raises(StorageError, match="names no bucket"):
        open_storage("s3:///prefix")
    for bad in (None, 3, ""):
        with pytest.raises(StorageError):
            open_storage(bad)  # type: ignore[arg-type]


def test_environment_variables_configure_s3(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    bucket = s3_server.new_bucket()
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    storage = open_storage(f"s3://{bucket}/t")
    storage.write("a", b"1")
    assert storage.read("a") == b"1"
    fs, root = storage.arrow_filesystem()
    assert fs.get_file_info(f"{root}/a").size == 1


def test_missing_bucket_is_a_storage_error(s3_server: Any) -> None:
    storage = open_storage("s3://no-such-bucket/t", s3_server.options())
    with pytest.raises(StorageError, match="bucket") as info:
        storage.list_files()
    assert "s3://no-such-bucket/t" in str(info.value)


def test_an_endpoint_that_does_not_answer_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    from s3_server import free_port

    options = {"aws_endpoint_url": f"http://127.0.0.1:{free_port()}", "aws_access_key_id": "x",
               "aws_secret_access_key": "y", "max_retries": 1, "retry_timeout": 2, "connect_timeout": 1}
    storage = open_storage("s3://bucket/t", options)
    started = time.monotonic()
    with pytest.raises(StorageError, match="PUT failed") as info:
        storage.write("a", b"1")
    assert time.monotonic() - started < 15
    assert "s3://bucket/t/a" in str(info.value)
