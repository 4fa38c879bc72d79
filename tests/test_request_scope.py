"""The request scope of an object store (storage/scope.py): each question asked once per operation, our own
writes seen, the lock and a heartbeat always asked of the store again."""

from __future__ import annotations

import pytest
from s3_server import S3Server

import lsm_lab
from lsm_lab.services.lock import table_lock
from lsm_lab.storage import StoragePath, open_storage, request_scope
from lsm_lab.storage.objectstore import ObjectStorage


@pytest.fixture()
def store(s3_server: S3Server) -> ObjectStorage:
    st = open_storage(f"s3://{s3_server.new_bucket()}/t", s3_server.options())
    assert isinstance(st, ObjectStorage)
    return st


def test_a_listing_is_asked_once_and_our_writes_update_it(store: ObjectStorage) -> None:
    store.write("a/1", b"x")
    with request_scope():
        before = store.counts.snapshot()
        assert [i.key for i in store.list_files("a")] == ["a/1"]
        assert [i.key for i in store.list_files("a")] == ["a/1"]
        assert store.counts.since(before)["LIST"] == 1
        store.write("a/2", b"yy")  # our own write: in the kept listing, no LIST again
        store.delete("a/1")
        assert [(i.key, i.size) for i in store.list_files("a")] == [("a/2", 2)]
        assert store.head("a/2") is not None and store.head("a/3") is None  # answered by the kept listing
        assert store.counts.since(before)["LIST"] == 1 and store.counts.since(before)["HEAD"] == 0
    before = store.counts.snapshot()
    store.list_files("a")  # outside a scope nothing is kept
    store.list_files("a")
    assert store.counts.since(before)["LIST"] == 2


def test_another_writer_is_seen_after_the_lock_is_taken(store: ObjectStorage, s3_server: S3Server) -> None:
    other = open_storage(store.uri, s3_server.options())  # another process, in effect
    root = StoragePath(store, "")
    with request_scope():
        assert store.list_files(".hoodie/timeline") == []
        other.write(".hoodie/timeline/1.commit", b"{}")
        assert store.list_files(".hoodie/timeline") == []  # the snapshot the operation started from
        with table_lock(root):  # the conflict check lists again
            assert [i.key for i in store.list_files(".hoodie/timeline")] == [".hoodie/timeline/1.commit"]


def test_a_heartbeat_is_never_taken_for_absent_from_a_listing(store: ObjectStorage, s3_server: S3Server) -> None:
    other = open_storage(store.uri, s3_server.options())
    with request_scope():
        store.list_files(".hoodie", recursive=True)  # kept: no heartbeat, no properties
        other.write(".hoodie/.heartbeat/20260101000000000", b"1")
        other.write(".hoodie/hoodie.properties", b"k=v")
        assert store.read(".hoodie/.heartbeat/20260101000000000") == b"1"  # asked of the store
        with pytest.raises(FileNotFoundError):
            store.read(".hoodie/hoodie.properties")  # absent in the kept listing: the operation's snapshot


def test_an_upsert_through_the_scope_reads_back_right(s3_server: S3Server) -> None:
    t = lsm_lab.create_table(f"s3://{s3_server.new_bucket()}/t", storage_options=s3_server.options(), name="t",
                             record_key="id", ordering_field="ts", table_type="MERGE_ON_READ")
    model: dict[str, int] = {}
    for ts, ids in ((1, range(10)), (2, range(5, 15)), (3, range(0, 15, 3))):
        t.upsert([{"id": f"k{i:02d}", "ts": ts, "v": ts * 100 + i} for i in ids])
        model.update({f"k{i:02d}": ts * 100 + i for i in ids})
        t.compact(strategy="full") if ts == 2 else None
    got = t.read()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist())) == model
    assert t.lookup(["k03", "k14"]).column("v").to_pylist() == [model["k03"], model["k14"]]
