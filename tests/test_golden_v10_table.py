"""A whole version 10 table checked in as bytes: lsm_lab keeps reading it, and upstream's rules decode it.

tests/golden/v10_table/ is a small MERGE_ON_READ `lsm_tree` table lsm_lab wrote (recipe in `_write`): one
bucket, ten keys inserted, three updated, two deleted. Its native data log and delete log carry
RECORD_POSITIONS; its completed instants are Avro. The tests

- read the checked-in table with lsm_lab (files written by an older lsm_lab stay readable: docs/FORMAT.md's
  stability promise), against the dict model of the recipe;
- decode every log with pyarrow and an independent reading of upstream's footer rules (no lsm_lab code):
  `NativeLogFooterMetadata` (one key `hudi.log.format.metadata`, a JSON map, VERSION first),
  `LogReaderUtils.decodeRecordPositionsLongList` (Base64 of a big-endian int32 count and one unsigned LEB128
  varlong per record, in file order), `HoodieSchemas.createDeleteLogSchema` (the delete-log columns);
- decode every completed instant with upstream's Avro schemas as reader schemas (tests/test_upstream_avro.py).

After an intended format change: LSM_LAB_UPDATE_GOLDEN=1 pytest tests/test_golden_v10_table.py, then review.
"""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import struct
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from test_upstream_avro import upstream_schemas  # noqa: F401 - the fixture

import lsm_lab
from lsm_lab.timeline.metadata import AVRO_MAGIC

GOLDEN = Path(__file__).resolve().parent / "golden" / "v10_table"
KEYS = [f"k{i:02d}" for i in range(10)]
UPDATED = ["k07", "k02", "k05"]  # handed in out of key order: the log is sorted, positions follow the file
DELETED = ["k09", "k03"]


def _model() -> dict[str, tuple[int, float]]:
    rows = {k: (1, float(i)) for i, k in enumerate(KEYS)}
    rows.update(dict.fromkeys(UPDATED, (2, -1.0)))
    for k in DELETED:
        del rows[k]
    return rows


def _write(path: Path) -> None:
    t = lsm_lab.create_table(path, name="trips", record_key="id", ordering_field="ts", num_buckets=1)
    t.insert([{"id": k, "ts": 1, "fare": float(i)} for i, k in enumerate(KEYS)])
    t.upsert([{"id": k, "ts": 2, "fare": -1.0} for k in UPDATED])
    t.delete([{"id": k, "ts": 3} for k in DELETED])
    for name in (".lsm_lab.lock", ".lsm_lab_clock", ".lsm_lab_clock.lock", ".lsm_lab_first_write"):
        (path / ".hoodie" / name).unlink(missing_ok=True)  # a writer's locks and clock, not the table's format


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("LSM_LAB_UPDATE_GOLDEN") == "1":
        shutil.rmtree(GOLDEN, ignore_errors=True)
        _write(GOLDEN)
    assert (GOLDEN / ".hoodie" / "hoodie.properties").is_file(), f"run LSM_LAB_UPDATE_GOLDEN=1 pytest {__file__}"
    copy = tmp_path_factory.mktemp("golden") / "v10_table"
    shutil.copytree(GOLDEN, copy)  # reads never write, but a lock or marker folder must not land in the repo
    return copy


def test_lsm_lab_reads_the_checked_in_table(golden: Path) -> None:
    t = lsm_lab.open_table(golden)
    assert (t.config.version, t.config.layout) == (10, "lsm_tree")
    got = {r["id"]: (r["ts"], r["fare"]) for r in t.read(columns=["id", "ts", "fare"]).to_pylist()}
    assert got == _model()
    assert t.read(positions=False).sort_by("id").equals(t.read().sort_by("id"))  # by position = by key


def _positions(text: str) -> list[int]:
    """decodeRecordPositionsLongList, read byte by byte."""
    raw = base64.b64decode(text, validate=True)
    (count,) = struct.unpack(">i", raw[:4])
    at, out = 4, []
    for _ in range(count):
        value = shift = 0
        while True:
            byte = raw[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        out.append(value)
    assert at == len(raw), "bytes after the last position"
    return out


def _footer(path: Path) -> dict[str, Any]:
    kv = {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}
    assert [k for k in kv if k.startswith("hudi.")] == ["hudi.log.format.metadata"]
    header: dict[str, Any] = json.loads(kv["hudi.log.format.metadata"])
    assert next(iter(header)) == "VERSION" and header["VERSION"] == "2"
    return header


def test_logs_decode_by_upstream_rules(golden: Path) -> None:
    base = {p.name: p for p in golden.glob("*.parquet") if not p.name.endswith((".log.parquet", ".deletes.parquet"))}
    (base_file,) = base.values()
    base_keys = pq.read_table(base_file, columns=["_hoodie_record_key"]).column(0).to_pylist()
    base_instant = base_file.name.rsplit("_", 1)[1].removesuffix(".parquet")
    (data_log,) = golden.glob("*_1.log.parquet")  # <fileId>_<token>_<instant>_<version>.log.parquet
    (delete_log,) = golden.glob("*_1.deletes.parquet")

    header = _footer(data_log)
    rows = pq.read_table(data_log)
    keys = rows.column("_hoodie_record_key").to_pylist()
    assert keys == sorted(UPDATED)  # a sorted run (lsm_tree)
    assert header["BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS"] == base_instant
    assert _positions(header["RECORD_POSITIONS"]) == [base_keys.index(k) for k in keys]  # one per record, in order
    schema = json.loads(header["SCHEMA"])
    fastavro.parse_schema(schema)
    assert [f["name"] for f in schema["fields"]][:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                                         "_hoodie_record_key", "_hoodie_partition_path",
                                                         "_hoodie_file_name"]

    header = _footer(delete_log)
    deletes = pq.read_table(delete_log)
    # HoodieSchemas.createDeleteLogSchema: the record key (required string), then each ordering field, nullable
    assert [(f.name, str(f.type), f.nullable) for f in deletes.schema] == [
        ("_hoodie_record_key", "string", False), ("ts", "int64", True)]
    assert deletes.column("_hoodie_record_key").to_pylist() == sorted(DELETED)
    assert _positions(header["RECORD_POSITIONS"]) == [base_keys.index(k) for k in sorted(DELETED)]


def test_instants_decode_with_upstream_schemas(golden: Path, upstream_schemas: dict[str, Any]) -> None:  # noqa: F811
    timeline = golden / ".hoodie" / "timeline"
    completed = sorted(p for p in timeline.iterdir() if p.name.endswith(".deltacommit") and "_" in p.name)
    assert len(completed) == 3
    ops = []
    for path in completed:
        data = path.read_bytes()
        assert data[:4] == AVRO_MAGIC
        (record,) = list(fastavro.reader(io.BytesIO(data), reader_schema=upstream_schemas["HoodieCommitMetadata"]))
        assert isinstance(record, dict)
        ops.append(record["operationType"])
        assert json.loads(record["extraMetadata"]["schema"])["name"] == "trips_record"
    assert ops == ["INSERT", "UPSERT", "DELETE"]
