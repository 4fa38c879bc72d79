"""What an instant file holds: commit metadata with per-file write statistics.

A completed write instant stores a `HoodieCommitMetadata`:

    {
      "operationType": "UPSERT",
      "compacted": false,
      "extraMetadata": {"schema": "<avro schema json>", "lsm_lab.arrow_schema": "<base64>"},
      "partitionToWriteStats": {
        "city=chennai": [
          {"fileId": "00000001-...-0", "path": "city=chennai/00000001-..._0-1-0_2026....parquet",
           "prevCommit": "null", "numWrites": 120, "numInserts": 100, "numUpdateWrites": 20,
           "numDeletes": 0, "totalWriteBytes": 20480, "fileSizeInBytes": 20480,
           "partitionPath": "city=chennai", "baseFile": "", "logFiles": []}
        ]
      }
    }

lsm_lab writes JSON (say so in `hoodie.properties`, `lsm_lab.timeline.instant.format=json`);
Apache Hudi 1.x writes the same structure as an Avro object container file
(`Obj\\x01` magic).  `decode_instant_content` reads both, so that the rest of the
library only ever sees dicts.

Simplified compared with Apache Hudi: no per-file runtime stats (`totalLogBlocks`,
`totalCorruptLogBlock`, timings); the Avro encoding is read but never written.
"""

from __future__ import annotations

import io
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from lsm_lab.errors import CorruptFileError

AVRO_MAGIC = b"Obj\x01"


@dataclass
class WriteStat:
    """Statistics of one file written by an instant (Hudi's `HoodieWriteStat`, JSON field names)."""

    partitionPath: str
    fileId: str
    path: str
    prevCommit: str = "null"
    numWrites: int = 0
    numInserts: int = 0
    numUpdateWrites: int = 0
    numDeletes: int = 0
    totalWriteBytes: int = 0
    fileSizeInBytes: int = 0
    baseFile: str = ""
    logFiles: list[str] = field(default_factory=list)
    minRecordKey: str | None = None
    maxRecordKey: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def commit_metadata(
    stats: list[WriteStat],
    *,
    operation: str,
    extra: Mapping[str, str] | None = None,
    compacted: bool = False,
) -> dict[str, Any]:
    """Build a `HoodieCommitMetadata` dict from write stats."""
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for stat in stats:
        by_partition.setdefault(stat.partitionPath, []).append(stat.to_json())
    return {
        "partitionToWriteStats": by_partition,
        "compacted": compacted,
        "extraMetadata": dict(extra or {}),
        "operationType": operation.upper(),
    }


def encode_json(content: Mapping[str, Any]) -> bytes:
    return json.dumps(content, indent=2, sort_keys=True).encode("utf-8")


def decode_instant_content(data: bytes, *, path: str | None = None) -> dict[str, Any]:
    """Decode an instant file: empty → {}, Avro container → first record, else JSON."""
    if not data or not data.strip():
        return {}
    if data.startswith(AVRO_MAGIC):
        import fastavro

        try:
            records = list(fastavro.reader(io.BytesIO(data)))
        except Exception as exc:  # fastavro raises many types for bad bytes
            raise CorruptFileError(f"cannot decode Avro instant file: {exc}", path=path) from None
        if not records:
            return {}
        return _plain(records[0])
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptFileError(f"instant file is neither Avro nor JSON: {exc}", path=path) from None
    if not isinstance(value, dict):
        raise CorruptFileError("instant file JSON is not an object", path=path)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def iter_write_stats(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """All write stats of a commit metadata dict, each with its `partitionPath` filled in."""
    out: list[dict[str, Any]] = []
    for partition, stats in (metadata.get("partitionToWriteStats") or {}).items():
        for stat in stats or []:
            stat = dict(stat)
            stat.setdefault("partitionPath", partition)
            if stat.get("partitionPath") is None:
                stat["partitionPath"] = partition
            out.append(stat)
    return out


def summarize(metadata: Mapping[str, Any]) -> dict[str, int]:
    """Totals over all write stats: files, records written/inserted/updated/deleted, bytes."""
    stats = iter_write_stats(metadata)
    return {
        "partitions": len(metadata.get("partitionToWriteStats") or {}),
        "files": len(stats),
        "records_written": sum(int(s.get("numWrites") or 0) for s in stats),
        "records_inserted": sum(int(s.get("numInserts") or 0) for s in stats),
        "records_updated": sum(int(s.get("numUpdateWrites") or 0) for s in stats),
        "records_deleted": sum(int(s.get("numDeletes") or 0) for s in stats),
        "bytes_written": sum(int(s.get("totalWriteBytes") or 0) for s in stats),
    }
