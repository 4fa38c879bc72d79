"""Tables on Azure Blob Storage, checked end to end against Azurite on 127.0.0.1.

The twin-table sequence of test_s3_tables.py (every write kind and service)
runs on a local table and on an `az://` table, and every read kind must agree.
Azure differs from S3 where it matters to a table: it refuses suffix range
requests (`Range: bytes=-n`), so a footer read there is a HEAD for the size,
then a ranged GET; and its conditional writes (`If-None-Match: *`, `If-Match`)
are the commit primitive, as on S3.

Skipped, with a message, when Azurite is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from azure_server import AzureServer
from twin import Twins, assert_reads_agree, assert_twins_agree, cli_round_trip, make_twins, rows

import lsm_lab
from lsm_lab.errors import LsmLabError, StorageError
from lsm_lab.format import parquet_footer
from lsm_lab.storage import AlreadyExistsError, StoragePath, VersionMismatchError, open_storage
from lsm_lab.storage.objectstore import ObjectStorage


@pytest.fixture(scope="module")
def twin_tables(tmp_path_factory: pytest.TempPathFactory, azure_server: AzureServer) -> Twins:
    return make_twins(tmp_path_factory.mktemp("twin") / "t", f"az://{azure_server.new_container()}/warehouse/twin", azure_server.options())


def test_every_service_gives_the_same_table_on_azure(twin_tables: Twins) -> None:
    assert_twins_agree(*twin_tables)


def test_reads_and_lookups_on_azure(twin_tables: Twins) -> None:
    local, remote, _, _ = twin_tables
    assert_reads_agree(local, remote, incremental_from=-3)
    again = lsm_lab.open_table(remote.path)  # a second process's view: everything from the store
    assert rows(again.read()) == rows(local.read())


def test_a_footer_is_read_with_head_then_range_on_azure(azure_table: Callable[..., lsm_lab.Table]) -> None:
    """Azure refuses `bytes=-n`: the tail read asks for the size first (S3 does it in one GET)."""
    table = azure_table(ordering_field="ts")
    table.upsert([{"id": f"k{i}", "ts": 1, "v": i} for i in range(50)])
    data = [f for f in table.storage.list_files("", recursive=True) if f.key.endswith(".parquet")]
    assert data
    storage = table.storage
    assert isinstance(storage, ObjectStorage) and not storage.suffix_ranges
    before = storage.counts.snapshot()
    tail, size = storage.read_suffix(data[0].key, 100)
    after = storage.counts.snapshot()
    assert size == data[0].size and tail == storage.read(data[0].key)[-100:]
    assert after["HEAD"] - before["HEAD"] == 1 and after["GET"] - before["GET"] == 1
    md, _ = parquet_footer.read_footer(table.path / data[0].key)  # (a folder-less key: the table root's child)
    assert md.num_rows >= 1


def test_conditional_writes_on_azure(azure_server: AzureServer) -> None:
    storage = open_storage(f"az://{azure_server.new_container()}/p", azure_server.options())
    first = storage.create("x", b"1")
    with pytest.raises(AlreadyExistsError):  # If-None-Match: *  — the commit primitive
        storage.create("x", b"2")
    newer = storage.replace("x", b"3", expected=first)
    with pytest.raises(VersionMismatchError):  # If-Match: "<etag>" with a stale etag
        storage.replace("x", b"4", expected=first)
    assert storage.read("x") == b"3" and newer.etag != first.etag


def test_a_completed_instant_is_created_once_on_azure(azure_table: Callable[..., lsm_lab.Table]) -> None:
    table = azure_table()
    done = table.upsert([{"id": "a", "v": 1}])
    folder = table.active_timeline.folder
    assert isinstance(folder, StoragePath)
    with pytest.raises(lsm_lab.ConflictError):
        lsm_lab.storage.create_bytes(folder / done.file_name, b"{}", lambda p: lsm_lab.ConflictError("lost", path=p))
    assert rows(table.read()) == rows(lsm_lab.open_table(table.path).read())


def test_missing_container_is_one_typed_error(azure_server: AzureServer) -> None:
    started = time.monotonic()
    with pytest.raises(LsmLabError) as info:
        lsm_lab.open_table("az://no-such-container/t", storage_options=azure_server.options())
    assert "no-such-container" in str(info.value) and time.monotonic() - started < 20


def test_cli_on_azure(tmp_path: Path, azure_server: AzureServer, capsys: pytest.CaptureFixture[str]) -> None:
    cli_round_trip(f"az://{azure_server.new_container()}/cli/t", azure_server.options(), "azure_endpoint",
                   "/devstoreaccount1", tmp_path, capsys)


def test_bad_azure_key_is_one_typed_error(azure_server: AzureServer) -> None:
    options = {**azure_server.options(), "azure_storage_account_key": "d3Jvbmc="}  # base64 of "wrong"
    with pytest.raises(StorageError):
        lsm_lab.open_table(f"az://{azure_server.new_container()}/t", storage_options=options)
