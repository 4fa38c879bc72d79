"""Bad inputs and damaged settings end in a typed error, and Hudi's conventional inputs are accepted (issue 28).

    finding 8    a bucket-index table without a readable `hoodie.bucket.index.num.buckets`: TableConfigError
    finding 10   out-of-range times, NUL paths, duplicate columns, huge bucket counts, file://host URIs,
                 wrong storage_options, non-bool flags, key-less batches, dict lookups: typed errors;
                 "0", "000", 14 and 17 zeros mean "from the beginning"; read(columns=[]) keeps the rows
    finding 12   read_cdc past what the cleaner kept says so, and what to do
    finding 13   no credentials towards an S3 endpoint: no instance-metadata probe, a "no credentials" error
"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from localpath import local
from s3_server import S3Server, s3_server  # noqa: F401 - fixture: a real S3 server (moto) on 127.0.0.1

import lsm_lab
from lsm_lab.cli.app import main as cli_main
from lsm_lab.errors import InputError, LsmLabError, SchemaError, StorageError, TableConfigError, TimelineError
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.clock import BEGINNING_TIMES, parse_time

KEY = "hoodie.bucket.index.num.buckets"


def _table(path: Path, **kw: Any) -> lsm_lab.Table:
    kw.setdefault("num_buckets", 2)
    t = lsm_lab.create_table(path, name="t", record_key="id", **kw)
    t.insert([{"id": f"k{i}", "v": i} for i in range(6)])
    return t


def _instants(t: lsm_lab.Table) -> list[str]:
    return [i.file_name for i in lsm_lab.open_table(t.path).active_timeline.instants()]


# --------------------------------------------------------------------------- finding 8
def _set_properties_line(table: Path, old: str, new: str | None) -> None:
    props = table / ".hoodie" / "hoodie.properties"
    lines = props.read_bytes().split(b"\n")
    at = [i for i, line in enumerate(lines) if line.startswith(old.encode())]
    assert len(at) == 1, old
    if new is None:
        del lines[at[0]]
    else:
        lines[at[0]] = new.encode("utf-8")
    props.write_bytes(b"\n".join(lines))


@pytest.mark.parametrize("value", [None, "", "four", "4.0", "-1", "0", "100000001", "0x4", "\u0664", "4 4"],
                         ids=lambda v: repr(v))
def test_bucket_table_without_a_readable_bucket_count_does_not_open(tmp_path: Path, value: str | None) -> None:
    t = _table(tmp_path / "t")
    _set_properties_line(local(t.path), KEY + "=", None if value is None else f"{KEY}={value}")
    with pytest.raises(TableConfigError, match=KEY) as info:
        lsm_lab.open_table(t.path)
    assert "hoodie.properties" in str(info.value)


def test_every_one_bit_flip_of_the_bucket_count_key_is_refused(tmp_path: Path) -> None:
    """The key name damaged (`...num.bucketr`): the key is missing, never a default of 4."""
    t = _table(tmp_path / "t", num_buckets=2)
    props = local(t.path) / ".hoodie" / "hoodie.properties"
    good = props.read_bytes()
    at = good.index(KEY.encode())
    for i in range(at, at + len(KEY)):
        for bit in range(8):
            damaged = bytearray(good)
            damaged[i] ^= 1 << bit
            props.write_bytes(bytes(damaged))
            with pytest.raises(TableConfigError):
                lsm_lab.open_table(t.path)
    props.write_bytes(good)
    assert lsm_lab.open_table(t.path).config.num_buckets == 2


def test_the_value_flips_that_can_be_seen_are_refused(tmp_path: Path) -> None:
    """'2' (0x32) with one bit flipped: '3', '0', '6', ':', '"', 'r', chr(0x12), chr(0xb2).  A flip to
    another digit above 0 is another valid count (not detectable from the file); every other is refused."""
    t = _table(tmp_path / "t", num_buckets=2)
    props = local(t.path) / ".hoodie" / "hoodie.properties"
    good = props.read_bytes()
    at = good.index(f"{KEY}=2".encode()) + len(KEY) + 1
    for bit in range(8):
        damaged = bytearray(good)
        damaged[at] ^= 1 << bit
        props.write_bytes(bytes(damaged))
        flipped = chr(damaged[at])
        if flipped in "123456789":
            assert lsm_lab.open_table(t.path).config.num_buckets == int(flipped)
        else:
            with pytest.raises(TableConfigError):
                lsm_lab.open_table(t.path)


def test_a_damaged_index_type_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    _set_properties_line(local(t.path), "hoodie.index.type=", "hoodie.index.type=BUCKEU")
    with pytest.raises(TableConfigError, match="hoodie.index.type"):
        lsm_lab.open_table(t.path)


def test_tables_without_the_bucket_index_keep_the_default(tmp_path: Path) -> None:
    """Hudi's own tables (SIMPLE/BLOOM index) never write the key: they still open."""
    t = _table(tmp_path / "t", layout="default")
    _set_properties_line(local(t.path), KEY + "=", None)
    assert lsm_lab.open_table(t.path).read().num_rows == 6
    props = {"hoodie.table.name": "t", "hoodie.table.type": "MERGE_ON_READ", "hoodie.table.version": "6",
             "hoodie.table.recordkey.fields": "id"}
    assert cfg.TableConfig.from_props(props).num_buckets == 4
    with pytest.raises(TableConfigError, match=KEY):
        cfg.TableConfig.from_props({**props, "hoodie.index.type": "BUCKET"})


# --------------------------------------------------------------------------- finding 10: times
BAD_TIMES = ["99999999999999999", "20241301000000000", "20240230000000000", "20240101246000000", "99999999999999"]


@pytest.mark.parametrize("text", BAD_TIMES)
def test_parse_time_of_an_impossible_time_is_typed(text: str) -> None:
    with pytest.raises(TimelineError, match="not an instant time"):
        parse_time(text)


@pytest.mark.parametrize("call", ["read", "read_optimized", "lookup", "read_incremental", "read_cdc",
                                  "read_incremental_end", "read_cdc_end", "file_slices"])
@pytest.mark.parametrize("text", BAD_TIMES[:2])
def test_impossible_times_are_typed_everywhere(tmp_path: Path, call: str, text: str) -> None:
    t = _table(tmp_path / "t")
    run: Callable[[], object]
    run = {"read": lambda: t.read(as_of=text), "read_optimized": lambda: t.read_optimized(as_of=text),
           "lookup": lambda: t.lookup(["k1"], as_of=text), "read_incremental": lambda: t.read_incremental(text),
           "read_cdc": lambda: t.read_cdc(text), "read_incremental_end": lambda: t.read_incremental(None, text),
           "read_cdc_end": lambda: t.read_cdc(None, text), "file_slices": lambda: t.file_slices(as_of=text)}[call]
    with pytest.raises(TimelineError, match=text):
        run()


@pytest.mark.parametrize("zero", BEGINNING_TIMES)
def test_hudi_beginning_times_mean_before_every_instant(tmp_path: Path, zero: str) -> None:
    t = _table(tmp_path / "t")
    t.upsert([{"id": "k1", "v": 10}])
    assert t.read_incremental(zero).num_rows == 6
    assert t.read_incremental(zero).num_rows == t.read_incremental(None).num_rows
    assert t.read_cdc(zero).to_pylist() == t.read_cdc(None).to_pylist()
    assert len(t.read_cdc(zero)) == 7
    assert t.read(as_of=zero).num_rows == 0  # the snapshot before every instant is empty
    assert t.lookup(["k1"], as_of=zero).num_rows == 0
    assert t.read_cdc(None, zero).num_rows == 0  # a window ending at the beginning holds nothing
    t.clean(retained=1)  # the empty snapshot needs no file: still readable after cleaning
    assert t.read(as_of=zero).num_rows == 0


def test_cli_impossible_time_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LSM_LAB_DEBUG", raising=False)
    t = _table(tmp_path / "t")
    for argv in (["read", str(t.path), "--as-of", "99999999999999999"],
                 ["read", str(t.path), "--key", "k1", "--as-of", "20241301000000000"],
                 ["read", str(t.path), "--cdc", "--start", "99999999999999999"]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("zero", BEGINNING_TIMES)
def test_cli_accepts_the_beginning_times(tmp_path: Path, capsys: pytest.CaptureFixture[str], zero: str) -> None:
    t = _table(tmp_path / "t")
    assert cli_main(["read", str(t.path), "--cdc", "--start", zero, "--json"]) == 0
    assert "(6 rows)" in capsys.readouterr().err
    assert cli_main(["read", str(t.path), "--as-of", zero]) == 0
    assert "(0 rows)" in capsys.readouterr().err


# --------------------------------------------------------------------------- finding 10: create_table arguments
def test_a_path_with_a_nul_byte_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="NUL"):
        lsm_lab.create_table(f"{tmp_path}/a\x00b", name="t", record_key="id")
    with pytest.raises(InputError, match="NUL"):
        lsm_lab.open_table(f"{tmp_path}/a\x00b")


@pytest.mark.parametrize("count", [10**20, 2**31, 100_000_001])
def test_too_many_buckets_is_an_input_error(tmp_path: Path, count: int) -> None:
    with pytest.raises(InputError, match="num_buckets must be at most 100,000,000"):
        lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=count)
    assert not (tmp_path / "t").exists()


def test_the_largest_bucket_count_is_accepted(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=100_000_000)
    assert lsm_lab.open_table(t.path).config.num_buckets == 100_000_000


@pytest.mark.parametrize("host", ["relative", "host", "127.0.0.1"])
def test_a_file_uri_with_a_host_is_refused(tmp_path: Path, host: str) -> None:
    """`file://relative/x` is host "relative", path "/x" (it wrote to /x); the test's URIs end under tmp_path,
    so that the old code, which ignored the host, wrote there."""
    uri = f"file://{host}{tmp_path}/x"
    with pytest.raises(InputError, match="names a host"):
        lsm_lab.create_table(uri, name="t", record_key="id")
    with pytest.raises(InputError, match="names a host"):
        lsm_lab.open_table(uri)
    assert not (tmp_path / "x").exists()


def test_file_uris_without_a_host_still_work(tmp_path: Path) -> None:
    lsm_lab.create_table(f"file://{tmp_path}/a", name="t", record_key="id")
    lsm_lab.create_table(f"file://localhost{tmp_path}/b", name="t", record_key="id")
    assert (tmp_path / "a" / ".hoodie").is_dir() and (tmp_path / "b" / ".hoodie").is_dir()


@pytest.mark.parametrize("options", [5, "endpoint=x", ["a"], True])
def test_storage_options_must_be_a_mapping(tmp_path: Path, options: object) -> None:
    with pytest.raises(InputError, match="storage_options must be a mapping"):
        lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", storage_options=options)  # type: ignore[arg-type]
    t = _table(tmp_path / "u")
    with pytest.raises(InputError, match="storage_options must be a mapping"):
        lsm_lab.open_table(t.path, storage_options=options)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="storage_options must be a mapping"):
        lsm_lab.open_table("s3://bucket/t", storage_options=options)  # type: ignore[arg-type]


def test_storage_options_for_a_local_path_are_refused(tmp_path: Path) -> None:
    options = {"aws_endpoint_url": "http://127.0.0.1:9", "aws_access_key_id": "x"}
    with pytest.raises(InputError, match="object-store URIs"):
        lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", storage_options=options)
    with pytest.raises(InputError, match="object-store URIs"):
        lsm_lab.create_table(f"file://{tmp_path}/t", name="t", record_key="id", storage_options=options)
    assert not (tmp_path / "t").exists()
    t = _table(tmp_path / "u", storage_options={})  # an empty mapping says nothing: accepted
    with pytest.raises(InputError, match="object-store URIs"):
        lsm_lab.open_table(t.path, storage_options=options)


# --------------------------------------------------------------------------- finding 10: flags, batches, lookups
@pytest.mark.parametrize("call", ["compact_plan_only", "compact_progress", "cluster_plan_only"])
@pytest.mark.parametrize("flag", ["yes", 1, "false", None])
def test_non_bool_flags_are_refused(tmp_path: Path, call: str, flag: object) -> None:
    if call == "compact_progress" and flag is None:
        pytest.skip("progress=None means: as configured")
    t = _table(tmp_path / "t")
    t.upsert([{"id": "k1", "v": 1}])
    before = _instants(t)
    run: Callable[[], object]
    run = {"compact_plan_only": lambda: t.compact(plan_only=flag),  # type: ignore[arg-type]
           "compact_progress": lambda: t.compact(progress=flag),  # type: ignore[arg-type]
           "cluster_plan_only": lambda: t.cluster(plan_only=flag)}[call]  # type: ignore[arg-type]
    with pytest.raises(InputError, match="must be True or False"):
        run()
    assert _instants(t) == before


@pytest.mark.parametrize("op", ["insert", "upsert", "bulk_insert", "delete"])
@pytest.mark.parametrize("data", [[{}], [{}, {}], [{"v": 1}], "frame"], ids=["one_empty", "two_empty", "no_key",
                                                                                "frame_no_columns"])
def test_a_batch_without_the_key_column_commits_nothing(tmp_path: Path, op: str, data: object) -> None:
    t = _table(tmp_path / "t")
    if data == "frame":
        data = pd.DataFrame(index=range(3))
    before = _instants(t)
    files = sorted(p.name for p in local(t.path).rglob("*") if p.is_file() and ".hoodie" not in p.parts)
    with pytest.raises(SchemaError, match="no record key column 'id'"):
        getattr(t, op)(data)
    assert _instants(t) == before
    assert sorted(p.name for p in local(t.path).rglob("*") if p.is_file() and ".hoodie" not in p.parts) == files


def test_an_empty_list_is_still_an_empty_batch(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert([])
    assert t.read().num_rows == 6


@pytest.mark.parametrize("make", ["arrow", "pandas"])
def test_duplicate_column_names_are_a_schema_error(tmp_path: Path, make: str) -> None:
    t = _table(tmp_path / "t")
    before = _instants(t)
    if make == "arrow":
        data: object = pa.table([pa.array(["k1"]), pa.array([1]), pa.array([2])], names=["id", "v", "v"])
    else:
        data = pd.DataFrame([["k1", 1, 2]], columns=["id", "v", "v"])
    with pytest.raises(SchemaError, match="'v' appears more than once"):
        t.upsert(data)
    assert _instants(t) == before


@pytest.mark.parametrize("keys", [{"k1": 1}, {"k1": "k1"}, {}])
def test_a_dict_is_not_a_key_list(tmp_path: Path, keys: dict[str, object]) -> None:
    t = _table(tmp_path / "t")
    with pytest.raises(InputError, match="lookup keys must be"):
        t.lookup(keys)


def test_read_of_no_columns_keeps_the_rows(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    first = t.completed_writes()[-1]
    t.upsert([{"id": "k9", "v": 9}])
    out = t.read(columns=[])
    assert (out.num_rows, out.num_columns) == (7, 0)
    assert t.read(columns=[], as_of=first).num_rows == 6
    assert t.read(columns=[], filter=[("v", ">", 3)]).num_rows == 3
    assert t.read(columns=[], filter=pa.compute.field("v") > 3).num_rows == 3
    t.compact(strategy="full")
    out = t.read_optimized(columns=[])
    assert (out.num_rows, out.num_columns) == (7, 0)
    assert t.lookup(["k1", "k9", "nope"], columns=[]).shape == (2, 0)
    assert t.read_incremental("0", columns=[]).shape == (7, 0)


# --------------------------------------------------------------------------- finding 12
@pytest.mark.parametrize("policy", ["KEEP_LATEST_COMMITS", "KEEP_LATEST_FILE_VERSIONS"])
@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("cdc_mode", [None, "OP_KEY_ONLY"])
def test_read_cdc_past_the_cleaner_says_so(tmp_path: Path, policy: str, table_type: str,
                                           cdc_mode: str | None) -> None:
    kw: dict[str, Any] = {"cdc": True, "cdc_mode": cdc_mode} if cdc_mode else {}
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, table_type=table_type, **kw)
    t.insert([{"id": f"k{i}", "v": 0} for i in range(4)])
    for r in range(3):
        t.upsert([{"id": "k1", "v": r + 1}])
        t.delete([f"k{r + 2}" if r < 2 else "k0"])
        if table_type == "MERGE_ON_READ":
            t.compact(strategy="full")
    t.clean(policy=policy, retained=1)
    with pytest.raises(InputError) as info:
        t.read_cdc("0")
    message = str(info.value)
    assert "reaches past what the cleaner kept" in message
    assert "hoodie.cleaner.commits.retained" in message and "clean(retained=" in message
    assert "deleted by hand" not in message
    since = message.split("a start at or after ")[1].split(" ")[0]
    parse_time(since)
    t.read_cdc(since)  # the start the message names is readable


# --------------------------------------------------------------------------- finding 13
@pytest.fixture()
def metadata_service(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A stand-in for the instance-metadata address on 127.0.0.1 (AWS_METADATA_ENDPOINT): the requests it got.

    Every AWS_* variable is removed first, so that nothing but the test's options configures the client."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            hits.append(f"{self.command} {self.path}")
            self.send_response(404)
            self.end_headers()

        do_GET = do_PUT = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield hits
    finally:
        server.shutdown()
        server.server_close()


def _no_keys(s3: S3Server) -> dict[str, str]:
    return {"aws_endpoint_url": s3.endpoint, "aws_allow_http": "true", "aws_region": "us-east-1",
            "max_retries": "0", "retry_timeout": "2", "timeout": "5"}


@pytest.mark.parametrize("how", ["option", "env", "cli"])
def test_no_credentials_towards_an_endpoint_never_probes_instance_metadata(
        s3_server: S3Server, metadata_service: list[str], monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        capsys: pytest.CaptureFixture[str], how: str) -> None:
    bucket = s3_server.new_bucket()
    uri = f"s3://{bucket}/t"
    if how == "cli":
        monkeypatch.delenv("LSM_LAB_DEBUG", raising=False)
        argv = ["read", uri]
        for key, value in _no_keys(s3_server).items():
            argv += ["--storage-option", f"{key}={value}"]
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "no credentials" in err and len(err.strip().splitlines()) == 1
    else:
        if how == "env":
            monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
            monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
            options = {k: v for k, v in _no_keys(s3_server).items() if k not in ("aws_endpoint_url", "aws_allow_http")}
        else:
            options = _no_keys(s3_server)
        with pytest.raises(StorageError, match="no credentials") as info:
            lsm_lab.open_table(uri, storage_options=options)
        assert "AWS_ACCESS_KEY_ID" in str(info.value) and "AWS_EC2_METADATA_DISABLED" in str(info.value)
    assert metadata_service == []


def test_the_probe_can_be_turned_back_on(s3_server: S3Server, metadata_service: list[str],  # noqa: F811
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_EC2_METADATA_DISABLED=false (or the option ec2_metadata_disabled): object_store asks as before."""
    bucket = s3_server.new_bucket()
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    with pytest.raises(LsmLabError):
        lsm_lab.open_table(f"s3://{bucket}/t", storage_options=_no_keys(s3_server))
    assert metadata_service and metadata_service[0].endswith("/latest/api/token")
    with pytest.raises(StorageError, match="must be true or false"):
        lsm_lab.open_table(f"s3://{bucket}/t", storage_options={**_no_keys(s3_server), "ec2_metadata_disabled": "?"})


def test_keys_still_work_with_the_probe_off(s3_server: S3Server, metadata_service: list[str]) -> None:  # noqa: F811
    uri = f"s3://{s3_server.new_bucket()}/t"
    t = lsm_lab.create_table(uri, name="t", record_key="id", num_buckets=1, storage_options=s3_server.options())
    t.insert([{"id": "a", "v": 1}])
    assert lsm_lab.open_table(uri, storage_options=s3_server.options()).read().num_rows == 1
    assert metadata_service == []


def test_a_folder_above_a_table_names_the_table(tmp_path: Path) -> None:
    """An unzipped real table sits one folder down: the error says where (issue 34, item 8)."""
    lsm_lab.create_table(tmp_path / "unzipped" / "v8_trips", name="t", record_key="id")
    with pytest.raises(lsm_lab.TableNotFoundError, match=r"a table is below it: .*unzipped/v8_trips$"):
        lsm_lab.open_table(tmp_path / "unzipped")
    with pytest.raises(lsm_lab.TableNotFoundError, match=r"no \.hoodie folder$"):
        lsm_lab.open_table(tmp_path / "unzipped" / "v8_trips" / ".hoodie" / "timeline")


def test_no_keys_and_no_instance_role_says_no_credentials(s3_server: S3Server, metadata_service: list[str],  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With the probe on and an instance-metadata service that has no role, the error says "no credentials"
    (issue 34, item 2), not the metadata service's HTTP status."""
    bucket = s3_server.new_bucket()
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    with pytest.raises(StorageError, match="not sent, no credentials: no access key was given") as info:
        lsm_lab.open_table(f"s3://{bucket}/t", storage_options=_no_keys(s3_server))
    assert "instance-metadata service gave none" in str(info.value) and "\n" not in str(info.value)
    assert metadata_service


@pytest.mark.parametrize("how", ["create", "open", "cli"])
def test_a_missing_bucket_keeps_the_stores_code(s3_server: S3Server, capsys: pytest.CaptureFixture[str],  # noqa: F811
                                                monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """`NoSuchBucket` survives into the one-line error (issue 34, item 2)."""
    uri = "s3://no-such-bucket-here/t"
    if how == "cli":
        monkeypatch.delenv("LSM_LAB_DEBUG", raising=False)
        argv = ["read", uri]
        for key, value in s3_server.options().items():
            argv += ["--storage-option", f"{key}={value}"]
        assert cli_main(argv) == 2
        err = capsys.readouterr().err
        assert "bucket not found" in err and "NoSuchBucket" in err and len(err.strip().splitlines()) == 1
        return
    with pytest.raises(StorageError, match=r"bucket not found: .*NoSuchBucket \(The specified bucket does not "
                                           r"exist\); create it first$"):
        if how == "create":
            lsm_lab.create_table(uri, name="t", record_key="id", storage_options=s3_server.options())
        else:
            lsm_lab.open_table(uri, storage_options=s3_server.options())


def test_a_missing_container_keeps_the_stores_code(azure_server: Any) -> None:
    """Azure's `ContainerNotFound` survives too; the README says how to make a container on Azurite."""
    with pytest.raises(StorageError, match=r"bucket not found: .*ContainerNotFound.*create it first$"):
        lsm_lab.open_table("az://no-such-container/t", storage_options=azure_server.options())
