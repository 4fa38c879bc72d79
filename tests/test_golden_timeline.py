"""Golden bytes of a version 10 timeline: a completed deltacommit, a compaction plan and a clean plan.

Each file in tests/golden/ holds the exact bytes lsm_lab writes for fixed content (the content built by the
same helpers the services use; the Avro sync marker is derived from the content, so the bytes are
reproducible). The tests compare the bytes whole, then decode them with upstream Hudi's schemas as Avro
reader schemas (tests/test_upstream_avro.py: the writer schemas of real Hudi 1.x files, and
apache/hudi hudi-common/src/main/avro/*.avsc) and check every field lsm_lab sets, with the upstream
class that defines it.

After an intended change:  LSM_LAB_UPDATE_GOLDEN=1 pytest tests/test_golden_timeline.py  and review the diff
(e.g. `python -c "import fastavro,sys; print(list(fastavro.reader(open(sys.argv[1],'rb'))))" FILE`).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, cast

import fastavro
import pytest
from test_upstream_avro import upstream_schemas  # noqa: F401 - the fixture

from lsm_lab.filegroup.planner import FULL, CompactionPlan, Operation
from lsm_lab.services.clean import KEEP_LATEST_COMMITS
from lsm_lab.timeline.metadata import AVRO_MAGIC, WriteStat, commit_metadata, encode_avro_instant

GOLDEN = Path(__file__).resolve().parent / "golden"
FILE_ID = "00000001-0000-0000-0000-000000000000-0"
LOG = f"{FILE_ID}_0-1-0_20260101000000001_1.log.parquet"  # a version 10 native data log (FileNameParser)
BASE = f"{FILE_ID}_0-1-0_20260101000000000.parquet"
SCHEMA = ('{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":'
          '[{"name":"id","type":"string"},{"name":"ts","type":"long"}]}')


def _golden(name: str, data: bytes) -> bytes:
    path = GOLDEN / name
    if os.environ.get("LSM_LAB_UPDATE_GOLDEN") == "1":
        path.write_bytes(data)
    assert path.exists(), f"{path} is missing: run LSM_LAB_UPDATE_GOLDEN=1 pytest {__file__}"
    want = path.read_bytes()
    assert data == want, f"{name} changed; if intended, regenerate with LSM_LAB_UPDATE_GOLDEN=1 and review"
    assert want[:4] == AVRO_MAGIC
    return want


def _read(data: bytes, schema: Any) -> dict[str, Any]:
    (record,) = list(fastavro.reader(io.BytesIO(data), reader_schema=schema))
    return cast("dict[str, Any]", record)


def test_v10_deltacommit(upstream_schemas: dict[str, Any]) -> None:  # noqa: F811
    stat = WriteStat("city=x", FILE_ID, f"city=x/{LOG}", "20260101000000000", numWrites=3, numInserts=1,
                     numUpdateWrites=1, numDeletes=1, totalWriteBytes=900, fileSizeInBytes=900, baseFile=BASE,
                     logFiles=[LOG], minRecordKey="a", maxRecordKey="c")
    content = commit_metadata([stat], operation="upsert", extra={"schema": SCHEMA})
    data = _golden("v10_deltacommit.avro", encode_avro_instant("deltacommit", "completed", content) or b"")
    r = _read(data, upstream_schemas["HoodieCommitMetadata"])
    # org.apache.hudi.common.model.HoodieCommitMetadata: operationType (WriteOperationType), extraMetadata
    # ("schema": the Avro writer schema, HoodieCommitMetadata.SCHEMA_KEY), partitionToWriteStats
    assert r["operationType"] == "UPSERT" and r["extraMetadata"] == {"schema": SCHEMA} and r["version"] == 1
    (s,) = r["partitionToWriteStats"]["city=x"]
    # org.apache.hudi.common.model.HoodieWriteStat: fileId, path (relative to the table), prevCommit (the base
    # instant), partitionPath, numWrites/numInserts/numUpdateWrites/numDeletes, totalWriteBytes, fileSizeInBytes
    assert (s["fileId"], s["path"], s["prevCommit"], s["partitionPath"]) == (
        FILE_ID, f"city=x/{LOG}", "20260101000000000", "city=x")
    assert (s["numWrites"], s["numInserts"], s["numUpdateWrites"], s["numDeletes"]) == (3, 1, 1, 1)
    assert (s["totalWriteBytes"], s["fileSizeInBytes"]) == (900, 900)
    # (upstream's reader schema has no baseFile/logFiles/key range: Avro resolution skips lsm_lab's extras;
    # HoodieDeltaWriteStat's baseFile and logFiles are in the writer schema, read here without a reader schema)
    (raw,) = list(fastavro.reader(io.BytesIO(data)))
    raw_stat = cast("dict[str, Any]", raw)["partitionToWriteStats"]["city=x"][0]
    assert raw_stat["baseFile"] == BASE and raw_stat["logFiles"] == [LOG]


def test_v10_compaction_plan(upstream_schemas: dict[str, Any]) -> None:  # noqa: F811
    op = Operation("city=x", FILE_ID, "20260101000000000", BASE, (LOG,), FULL,
                   {"TOTAL_LOG_FILES": 1.0, "TOTAL_LOG_FILES_SIZE": 900.0, "BASE_FILE_SIZE": 4000.0}, "strategy full")
    content = CompactionPlan((op,), strategy="full").to_json()
    data = _golden("v10_compaction.requested.avro", encode_avro_instant("compaction", "requested", content) or b"")
    r = _read(data, upstream_schemas["HoodieCompactionPlan"])
    # org.apache.hudi.avro.model.HoodieCompactionPlan: operations, extraMetadata, version
    assert r["extraMetadata"] == {"lsm_lab.strategy": "full"} and r["version"] == content["version"]
    (o,) = r["operations"]
    # HoodieCompactionOperation (built by CompactionUtils.buildHoodieCompactionOperation): baseInstantTime,
    # dataFilePath and deltaFilePaths (file names, relative to the partition since plan version 2), fileId,
    # partitionPath, metrics (CompactionStrategy.TOTAL_LOG_FILES, TOTAL_LOG_FILES_SIZE, ...)
    assert (o["baseInstantTime"], o["dataFilePath"], o["deltaFilePaths"], o["fileId"], o["partitionPath"]) == (
        "20260101000000000", BASE, [LOG], FILE_ID, "city=x")
    assert o["metrics"]["TOTAL_LOG_FILES"] == 1.0 and o["bootstrapFilePath"] is None
    assert r["preserveHoodieMetadata"] is False  # (upstream's default)


def test_v10_clean_plan(upstream_schemas: dict[str, Any]) -> None:  # noqa: F811
    content: dict[str, Any] = {
        "earliestInstantToRetain": {"timestamp": "20260101000000000", "action": "deltacommit", "state": "COMPLETED"},
        "lastCompletedCommitTimestamp": "20260102000000000", "policy": KEEP_LATEST_COMMITS,
        "filesToBeDeletedPerPartition": None,
        "filePathsToBeDeletedPerPartition": {"city=x": [{"filePath": f"city=x/{BASE}", "isBootstrapBaseFile": False}]},
        "partitionsToBeDeleted": [], "version": 2}  # the shape of services/clean.py `_plan`
    data = _golden("v10_clean.requested.avro", encode_avro_instant("clean", "requested", content) or b"")
    r = _read(data, upstream_schemas["HoodieCleanerPlan"])
    # org.apache.hudi.avro.model.HoodieCleanerPlan (CleanPlanner / CleanPlanActionExecutor): earliestInstantToRetain
    # (HoodieActionInstant), lastCompletedCommitTimestamp, policy (HoodieCleaningPolicy), version
    # (CleanPlanV2MigrationHandler.VERSION = 2), filePathsToBeDeletedPerPartition (HoodieCleanFileInfo)
    assert r["earliestInstantToRetain"] == content["earliestInstantToRetain"]
    assert (r["lastCompletedCommitTimestamp"], r["policy"], r["version"]) == (
        "20260102000000000", "KEEP_LATEST_COMMITS", 2)
    assert r["filePathsToBeDeletedPerPartition"] == content["filePathsToBeDeletedPerPartition"]
    assert r["filesToBeDeletedPerPartition"] is None and r["partitionsToBeDeleted"] == []


@pytest.mark.parametrize("name", ["v10_deltacommit.avro", "v10_compaction.requested.avro", "v10_clean.requested.avro"])
def test_golden_bytes_read_back_as_lsm_lab_wrote_them(name: str) -> None:
    from lsm_lab.timeline.metadata import decode_instant_content

    content = decode_instant_content((GOLDEN / name).read_bytes(), path=name)
    assert content and isinstance(content, dict)
