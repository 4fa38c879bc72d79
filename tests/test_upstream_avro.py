"""Every completed write instant of a version 9 or 10 table decodes with upstream Hudi's own Avro schemas.

The reader schemas below are apache/hudi's `hudi-common/src/main/avro/HoodieCommitMetadata.avsc` and
`HoodieReplaceCommitMetadata.avsc` (field names, types, defaults and namespace as upstream declares them),
used as fastavro *reader* schemas: Avro's schema resolution is what upstream's reader does with a file
whose writer schema has more fields (lsm_lab's `baseFile`, `logFiles`, `cdcStats`, key ranges) or fewer
(upstream's `prevFilePathOverwritten`, `totalLogFiles`: their defaults).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, cast

import fastavro
import pytest
from localpath import local

import lsm_lab
from lsm_lab.timeline.instant import REPLACE_COMMIT
from lsm_lab.timeline.metadata import AVRO_MAGIC

NS = "org.apache.hudi.avro.model"


def _nullable(name: str, kind: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", kind], "default": None}


# HoodieWriteStat as upstream declares it (HoodieCommitMetadata.avsc), in its field order
UPSTREAM_WRITE_STAT = {"name": "HoodieWriteStat", "type": "record", "fields": [
    *(_nullable(n, "string") for n in ("fileId", "path", "prevCommit", "prevFilePathOverwritten")),
    *(_nullable(n, "long") for n in ("numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
                                      "totalWriteErrors")),
    _nullable("partitionPath", "string"),
    *(_nullable(n, "long") for n in ("totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted",
                                      "numInserts", "totalLogBlocks", "totalCorruptLogBlock",
                                      "totalRollbackBlocks", "fileSizeInBytes")),
]}
_TAIL = [_nullable("extraMetadata", {"type": "map", "values": "string"}),
         {"name": "version", "type": ["int", "null"], "default": 1},
         _nullable("operationType", "string")]
UPSTREAM_COMMIT = {"namespace": NS, "type": "record", "name": "HoodieCommitMetadata", "fields": [
    _nullable("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": UPSTREAM_WRITE_STAT}}),
    *_TAIL]}
UPSTREAM_REPLACE = {"namespace": NS, "type": "record", "name": "HoodieReplaceCommitMetadata", "fields": [
    _nullable("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": UPSTREAM_WRITE_STAT}}),
    *_TAIL, _nullable("partitionToReplaceFileIds", {"type": "map", "values": {"type": "array", "items": "string"}})]}


@pytest.mark.parametrize("version,layout", [(10, "lsm_tree"), (9, "default"), (9, "lsm_tree")])
def test_every_completed_instant_decodes_with_upstream_schemas(tmp_path: Path, version: int, layout: str) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="trips", record_key="id", partition_by="p", ordering_field="ts",
                             table_version=version, layout=layout, cdc=True, num_buckets=2)
    rows: list[dict[str, Any]] = [{"id": f"k{i:02d}", "p": "ab"[i % 2], "ts": 1, "v": i} for i in range(40)]
    t.insert(rows)
    t.upsert([dict(r, ts=2, v=-r["v"]) for r in rows[::3]])
    t.delete([{"id": r["id"], "p": r["p"], "ts": 3} for r in rows[::7]])
    t.compact(strategy="full")
    t.bulk_insert([{"id": f"n{i:02d}", "p": "ab"[i % 2], "ts": 4, "v": i} for i in range(10)])
    clustered = t.cluster()  # (None when the planner finds nothing to cluster)
    ours = {i.begin_time: t.instant_metadata(i) for i in t.completed_writes()}
    timeline = local(t.path) / ".hoodie" / "timeline"
    seen = replaced = 0
    for inst in t.completed_writes():
        data = (timeline / inst.file_name).read_bytes()
        assert data[:4] == AVRO_MAGIC, inst.file_name
        replace = inst.file_name.endswith("." + REPLACE_COMMIT)  # (a completed clustering is a replacecommit file)
        upstream = UPSTREAM_REPLACE if replace else UPSTREAM_COMMIT
        (decoded,) = list(fastavro.reader(io.BytesIO(data), reader_schema=fastavro.parse_schema(upstream)))
        record = cast("dict[str, Any]", decoded)
        mine = ours[inst.begin_time]
        assert record["operationType"] == mine["operationType"]
        assert {p: sorted(s["path"] for s in lst) for p, lst in (record["partitionToWriteStats"] or {}).items()} \
            == {p: sorted(s["path"] for s in lst) for p, lst in (mine.get("partitionToWriteStats") or {}).items()}
        if replace:
            replaced += 1
            assert record["partitionToReplaceFileIds"] == mine["partitionToReplaceFileIds"]
        writer_schema = json.loads(record["extraMetadata"]["schema"])  # the Avro writer schema, as upstream
        assert writer_schema["name"] == "trips_record" and writer_schema["namespace"] == "hoodie.trips"
        fastavro.parse_schema(writer_schema)
        seen += 1
    assert seen >= 5 and replaced >= (clustered is not None)
