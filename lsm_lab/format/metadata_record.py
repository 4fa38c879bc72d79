"""The values of Hudi's metadata table: `HoodieMetadataRecord` (Avro), decoded and combined.

Every cell of a metadata-table HFile (base file or log block, `format/hfile.py`) is a record key →
one Avro-encoded `HoodieMetadataRecord`; its `type` says which index it belongs to:

    type  partition                     key                                      payload field
    1     files                         "__all_partitions__"                    filesystemMetadata (partition → info)
    2     files                         partition path ("." = the table root)   filesystemMetadata (file → size, isDeleted)
    3     column_stats                  b64(col hash)+b64(part hash)+b64(file)  ColumnStatsMetadata
    4     bloom_filters                 b64(part hash)+b64(file hash)            BloomFilterMetadata
    5     record_index                  the record key                          recordIndexMetadata
    6     partition_stats               b64(col hash)+b64(part hash)             ColumnStatsMetadata (fileName = partition)
    7     secondary_index_<name>        escaped value + "$" + escaped record key SecondaryIndexMetadata (isDeleted)

    value bytes ──fastavro, writer schema (HFile file info "schema" / log block SCHEMA header)──► dict
               ──► `MetadataValue(key, type, payload)`; `combine(older, newer)` = upstream's preCombine

Values are decoded with the *writer's* schema, which Hudi stores with every file (the file info
`schema` of an HFile, the `SCHEMA` header of a log block): Avro needs it, and it carries Hudi's
five `_hoodie_*` meta columns (always null here) before `key`.  `HOODIE_METADATA_RECORD` below
transcribes apache/hudi `hudi-common/src/main/avro/HoodieMetadata.avsc` (the fields up to
`SecondaryIndexMetadata`, as Hudi 1.0/1.1 write them; the newest avsc adds `VectorIndexMetadata`)
and is used when a file carries no schema; a test checks it against every shipped file's schema.

**Combining** (upstream `HoodieMetadataPayload.preCombine`, `combineFileSystemMetadata`,
`mergeColumnStatsRecords`, `combineSecondaryIndexRecord`; the per-type dispatch is
`MetadataPartitionType.combineMetadataPayloads`): a deleted newer record wins; a newer record
after a deleted one wins; `files` records merge their maps — a file in the newer record that the
older one lists is dropped when the newer says `isDeleted`, else its size is the max of the two;
a file the older one does not list is carried over as it is (a tombstone too, so that it still
cancels the file in a later merge with the base file); column and partition stats: a tombstone
on either side → the newer, else min of the minimums, max of the maximums, sums of the counts;
the other types: the newer wins (a deleted secondary index entry removes the key).

**Record index** (upstream `HoodieMetadataPayload.createRecordIndexUpdate`,
`HoodieTableMetadataUtil.getLocationFromRecordIndexInfo`, `HoodieRecordIndexInfo` in the avsc):
`fileIdEncoding` 0 stores a file id `<uuid>-<n>` as the UUID's two 64-bit halves (`fileIdHighBits`,
`fileIdLowBits`, Java's most/least significant bits) plus `fileIndex` (-1: no `-<n>` suffix);
encoding 1 stores `fileId` as text.  `instantTime` is the commit's time in epoch milliseconds,
parsed from the instant time in the writer's time zone (`hoodie.table.timeline.timezone`,
default the JVM's local zone): `metadata_table.py` maps it back to the data table's instant.

**Partitioned record index file groups** (upstream 1.1, apache/hudi PR #13603): the record index of a table
with `hoodie.metadata.record.level.index.enable=true` keeps a key once per data partition; each data partition has
its own file groups, `HoodieTableMetadataUtil.getFileIDForFileGroup(RECORD_INDEX, i, "record_index",
Option.of(partition))` = `record-index-` + `PartitionPathEncodeUtils.escapeFileName(partition)` + `-NNNN-0`
(`city=sf` → `record-index-city%3Dsf-0000-0`; escapeFileName writes `%XX` for controls, `"#%'*/:=?\\` DEL `{[]^`
and also `_` and `-`, so the partition piece holds no '-'); `getDataTablePartitionNameFromFileGroupName` unescapes
the third '-' piece from the end.  Its cells carry the record key as the HFile key (`createRecordIndexUpdate`:
`HoodieKey(recordKey, "record_index")`), the value names the partition as the global index's does.

**Secondary index keys** (upstream `SecondaryIndexKeyUtils`): `escape(value) + "$" +
escape(record key)`, where escape puts a backslash before `\\` and `$`; `split_secondary_key`
undoes it (the first unescaped `$` separates the two).

Simplified compared with Apache Hudi: expression index and vector index records are not decoded
(their types are reported as they are); the column-stats `valueType` is not interpreted — min and
max are unwrapped from their wrapper record, whose name says the type.

Taught in: notebooks/14_metadata_table.ipynb (and docs/FORMAT.md, "The metadata table (read)")
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import io
import json
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import fastavro

from lsm_lab.errors import CorruptFileError, UnsupportedFeatureError

TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2
TYPE_COLUMN_STATS = 3
TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5
TYPE_PARTITION_STATS = 6
TYPE_SECONDARY_INDEX = 7
#: `HoodieTableMetadata.RECORDKEY_PARTITION_LIST`
ALL_PARTITIONS_KEY = "__all_partitions__"
#: the `files` key of the table root (`HoodieTableMetadataUtil.getPartitionIdentifierForFilesPartition`)
NON_PARTITIONED_KEY = "."
_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, value_type: Any) -> dict[str, Any]:
    return {"namespace": _NS, "type": "record", "name": name, "fields": [{"name": "value", "type": value_type}]}


#: the value wrappers of `minValue` / `maxValue`, in the avsc's union order
_WRAPPERS: list[dict[str, Any]] = [
    _wrapper("BooleanWrapper", "boolean"),
    _wrapper("IntWrapper", "int"),
    _wrapper("LongWrapper", "long"),
    _wrapper("FloatWrapper", "float"),
    _wrapper("DoubleWrapper", "double"),
    _wrapper("BytesWrapper", "bytes"),
    _wrapper("StringWrapper", "string"),
    _wrapper("DateWrapper", {"type": "int"}),
    _wrapper("DecimalWrapper", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    _wrapper("TimeMicrosWrapper", {"type": "long", "logicalType": "time-micros"}),
    _wrapper("TimestampMicrosWrapper", {"type": "long"}),
    _wrapper("LocalDateWrapper", {"type": "int"}),
]
_WRAPPER_NAMES = [f"{_NS}.{w['name']}" for w in _WRAPPERS]
_ARRAY_WRAPPER = {
    "namespace": _NS, "type": "record", "name": "ArrayWrapper",
    "fields": [{"name": "wrappedValues", "default": None,
                "type": ["null", {"type": "array", "items": ["null", *_WRAPPER_NAMES]}]}],
}


def _opt(t: Any) -> list[Any]:
    return ["null", t]


#: `HoodieMetadataRecord`, transcribed from apache/hudi hudi-common/src/main/avro/HoodieMetadata.avsc
HOODIE_METADATA_RECORD: dict[str, Any] = {
    "namespace": _NS, "type": "record", "name": "HoodieMetadataRecord",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "type", "type": "int"},
        {"name": "filesystemMetadata", "type": _opt({"type": "map", "values": {
            "type": "record", "name": "HoodieMetadataFileInfo",
            "fields": [{"name": "size", "type": "long"}, {"name": "isDeleted", "type": "boolean"}]}})},
        {"name": "BloomFilterMetadata", "default": None, "type": _opt({
            "name": "HoodieMetadataBloomFilter", "type": "record",
            "fields": [{"name": "type", "type": "string"}, {"name": "timestamp", "type": "string"},
                       {"name": "bloomFilter", "type": "bytes"}, {"name": "isDeleted", "type": "boolean"}]})},
        {"name": "ColumnStatsMetadata", "default": None, "type": _opt({
            "name": "HoodieMetadataColumnStats", "type": "record",
            "fields": [
                {"name": "fileName", "type": ["null", "string"], "default": None},
                {"name": "columnName", "type": ["null", "string"], "default": None},
                {"name": "minValue", "type": ["null", *_WRAPPERS, _ARRAY_WRAPPER], "default": None},
                {"name": "maxValue", "type": ["null", *_WRAPPER_NAMES, f"{_NS}.ArrayWrapper"], "default": None},
                {"name": "valueCount", "type": ["null", "long"], "default": None},
                {"name": "nullCount", "type": ["null", "long"], "default": None},
                {"name": "totalSize", "type": ["null", "long"], "default": None},
                {"name": "totalUncompressedSize", "type": ["null", "long"], "default": None},
                {"name": "isDeleted", "type": "boolean"},
                {"name": "isTightBound", "type": "boolean", "default": False},
                {"name": "valueType", "default": None, "type": _opt({
                    "type": "record", "name": "HoodieValueTypeInfo", "namespace": _NS,
                    "fields": [{"name": "typeOrdinal", "type": "int"},
                               {"name": "additionalInfo", "type": ["null", "string"], "default": None}]})},
            ]})},
        {"name": "recordIndexMetadata", "default": None, "type": _opt({
            "type": "record", "name": "HoodieRecordIndexInfo",
            "fields": [
                {"name": "partitionName", "type": ["null", "string"], "default": None},
                {"name": "fileIdHighBits", "type": ["null", "long"], "default": None},
                {"name": "fileIdLowBits", "type": ["null", "long"], "default": None},
                {"name": "fileIndex", "type": ["null", "int"], "default": None},
                {"name": "fileId", "type": ["null", "string"], "default": None},
                {"name": "instantTime", "type": ["null", "long"], "default": None},
                {"name": "fileIdEncoding", "type": "int", "default": 0},
                {"name": "position", "type": ["null", "long"], "default": None},
            ]})},
        {"name": "SecondaryIndexMetadata", "default": None, "type": _opt({
            "type": "record", "name": "HoodieSecondaryIndexInfo",
            "fields": [{"name": "isDeleted", "type": "boolean"}]})},
    ],
}

_PARSED: dict[str, Any] = {}


def _schema(text: str | None) -> Any:
    key = text or ""
    parsed = _PARSED.get(key)
    if parsed is None:
        try:
            parsed = fastavro.parse_schema(json.loads(text) if text else HOODIE_METADATA_RECORD)
        except Exception as exc:  # noqa: BLE001 - a damaged SCHEMA header or file info
            raise CorruptFileError(f"the metadata record schema cannot be parsed ({type(exc).__name__}: {exc})") from None
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[key] = parsed
    return parsed


@dataclass(frozen=True)
class MetadataValue:
    """One metadata record: its key (the cell's), type, payload fields, and whether it is a tombstone."""

    key: str
    type: int
    payload: Mapping[str, Any]
    deleted: bool = False


def decode_value(key: str, value: bytes, schema_text: str | None, *, source: str = "") -> MetadataValue:
    """One cell → `MetadataValue`, decoded with the writer's schema (`schema_text`; None: the transcription)."""
    schema = _schema(schema_text)
    buf = io.BytesIO(value)
    try:
        rec = fastavro.schemaless_reader(buf, schema, None, return_record_name=True)
    except Exception as exc:  # noqa: BLE001 - fastavro raises many kinds on bad bytes
        raise CorruptFileError(f"metadata record {key!r} cannot be decoded ({type(exc).__name__}: {exc})",
                               path=source or None) from None
    if not isinstance(rec, dict) or not isinstance(rec.get("type"), int):
        raise CorruptFileError(f"metadata record {key!r} has no int 'type'", path=source or None)
    payload = {k: _unwrap(v) for k, v in rec.items() if not k.startswith("_hoodie_")}
    stats = payload.get("ColumnStatsMetadata")
    if isinstance(stats, dict):  # keep the wrapper's name with min and max: it says the value's type
        payload["ColumnStatsMetadata"] = {**stats, "minValue": wrapper_of(stats.get("minValue")),
                                          "maxValue": wrapper_of(stats.get("maxValue")),
                                          "valueType": _unwrap(stats.get("valueType"))}
    kind = int(rec["type"])
    return MetadataValue(key, kind, payload, deleted=_is_deleted(kind, payload))


def _unwrap(v: Any) -> Any:
    """fastavro's (record name, value) pair of a union member → the value."""
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str):
        return v[1]
    return v


def _is_deleted(kind: int, payload: Mapping[str, Any]) -> bool:
    field = {TYPE_BLOOM_FILTER: "BloomFilterMetadata", TYPE_COLUMN_STATS: "ColumnStatsMetadata",
             TYPE_PARTITION_STATS: "ColumnStatsMetadata", TYPE_SECONDARY_INDEX: "SecondaryIndexMetadata"}.get(kind)
    if field is None:
        return False
    inner = payload.get(field)
    return bool(isinstance(inner, dict) and inner.get("isDeleted"))


def tombstone(key: str) -> MetadataValue:
    """What a delete block's key becomes (upstream: an empty payload)."""
    return MetadataValue(key, 0, {}, deleted=True)


def combine(older: MetadataValue | None, newer: MetadataValue) -> MetadataValue:
    """Upstream's `HoodieMetadataPayload.preCombine(older)` called on `newer` (see the module docstring)."""
    if older is None or newer.type == 0 or older.type == 0:  # delete-block tombstones: the newer wins
        return newer
    if newer.type != older.type:
        raise CorruptFileError(f"metadata record {newer.key!r}: cannot combine type {older.type} with {newer.type}")
    if newer.type in (TYPE_PARTITION_LIST, TYPE_FILE_LIST):
        return replace(newer, payload={**newer.payload, "filesystemMetadata": combine_file_lists(
            older.payload.get("filesystemMetadata"), newer.payload.get("filesystemMetadata"))})
    if newer.type in (TYPE_COLUMN_STATS, TYPE_PARTITION_STATS):
        return _combine_stats(older, newer)
    return newer


def combine_file_lists(older: Mapping[str, Any] | None, newer: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """`HoodieMetadataPayload.combineFileSystemMetadata`: name → {size, isDeleted}."""
    out: dict[str, dict[str, Any]] = dict(older or {})
    for name, info in (newer or {}).items():
        if name not in out:
            out[name] = info
        elif info.get("isDeleted"):
            del out[name]
        else:
            out[name] = {"size": max(int(info.get("size") or 0), int(out[name].get("size") or 0)), "isDeleted": False}
    return out


def _combine_stats(older: MetadataValue, newer: MetadataValue) -> MetadataValue:
    """`HoodieMetadataPayload.mergeColumnStatsRecords` (via `MetadataPartitionType.COLUMN_STATS`)."""
    a, b = older.payload.get("ColumnStatsMetadata"), newer.payload.get("ColumnStatsMetadata")
    if not isinstance(a, dict) or not isinstance(b, dict) or a.get("isDeleted") or b.get("isDeleted"):
        return newer
    mins = [v for v in (_unwrap_wrapper(a.get("minValue")), _unwrap_wrapper(b.get("minValue"))) if v is not None]
    maxs = [v for v in (_unwrap_wrapper(a.get("maxValue")), _unwrap_wrapper(b.get("maxValue"))) if v is not None]
    merged = dict(b)
    try:
        merged["minValue"] = _rewrap(b.get("minValue") or a.get("minValue"), min(mins)) if mins else None
        merged["maxValue"] = _rewrap(b.get("maxValue") or a.get("maxValue"), max(maxs)) if maxs else None
    except TypeError:
        raise CorruptFileError(f"metadata record {newer.key!r}: column stats of different types") from None
    for count in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        merged[count] = int(a.get(count) or 0) + int(b.get(count) or 0)
    return replace(newer, payload={**newer.payload, "ColumnStatsMetadata": merged})


def _unwrap_wrapper(w: Any) -> Any:
    return w.get("value") if isinstance(w, dict) else None


def _rewrap(template: Any, value: Any) -> Any:
    return {**template, "value": value} if isinstance(template, dict) else {"value": value}


def stat_text(w: Any) -> tuple[str | None, str | None]:
    """(text, type) of a wrapped min/max: ints and floats as Python writes them, booleans true/false,
    dates ISO (days since 1970), timestamps ISO in UTC (micros since 1970), decimals as written,
    bytes as hex; (None, None) when absent.  `type` is the wrapper's name without "Wrapper", lower case."""
    if w is None:
        return None, None
    if isinstance(w, dict) and "value" in w:
        kind = str(w.get("__wrapper__", ""))
        return _text(w["value"], kind), kind or None
    if isinstance(w, dict) and "wrappedValues" in w:
        return json.dumps(w["wrappedValues"], default=str), "array"
    return str(w), None


def wrapper_of(raw: Any) -> Any:
    """fastavro with `return_record_name=True` gives (name, {"value": v}); keep the name with the value."""
    if isinstance(raw, tuple) and len(raw) == 2 and isinstance(raw[0], str) and isinstance(raw[1], dict):
        kind = raw[0].rsplit(".", 1)[-1].removesuffix("Wrapper").lower()
        return {**raw[1], "__wrapper__": kind}
    return raw


def _text(v: Any, kind: str) -> str | None:
    if v is None:
        return None
    if kind in ("date", "localdate") and isinstance(v, int):
        return (dt.date(1970, 1, 1) + dt.timedelta(days=v)).isoformat()
    if kind == "timestampmicros" and isinstance(v, int):
        return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=v)).isoformat()
    if kind == "timemicros" and isinstance(v, int):
        return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=v)).time().isoformat()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, decimal.Decimal):
        return str(v.normalize()) if v == v.to_integral_value() else format(v.normalize(), "f")
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def record_location(info: Mapping[str, Any]) -> tuple[str | None, str | None, int | None]:
    """(partition, file id, instant epoch millis) of a `HoodieRecordIndexInfo`."""
    partition = info.get("partitionName")
    if int(info.get("fileIdEncoding") or 0) == 1:
        file_id = info.get("fileId")
    else:
        hi, lo, index = info.get("fileIdHighBits"), info.get("fileIdLowBits"), info.get("fileIndex")
        if hi is None or lo is None:
            file_id = None
        else:
            u = uuid.UUID(int=((hi & (2**64 - 1)) << 64) | (lo & (2**64 - 1)))
            file_id = str(u) if index is None or index == -1 else f"{u}-{index}"
    millis = info.get("instantTime")
    return partition, file_id, (int(millis) if millis is not None else None)


def escape_secondary(text: str) -> str:
    """`SecondaryIndexKeyUtils.escapeSpecialChars`: a backslash before `\\` and `$`."""
    return text.replace("\\", "\\\\").replace("$", "\\$")


def split_secondary_key(key: str) -> tuple[str, str]:
    """(secondary value, record key) of a secondary index key, both unescaped."""
    out: list[str] = []
    i = 0
    while i < len(key):
        c = key[i]
        if c == "\\" and i + 1 < len(key):
            out.append(key[i + 1])
            i += 2
            continue
        if c == "$":
            return "".join(out), _unescape(key[i + 1 :])
        out.append(c)
        i += 1
    raise CorruptFileError(f"secondary index key {key!r} has no unescaped '$'")


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)



# --------------------------------------------------------------------------- partitioned record index file groups
#: `PartitionPathEncodeUtils.charToEscapeFilename`: ASCII controls, `"#%'*/:=?\` DEL `{[]^`, and `_` and `-`
_FILE_NAME_ESCAPES = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^_-"))
PARTITIONED_PREFIX = "record-index-"


def escape_file_name(text: str) -> str:
    """`PartitionPathEncodeUtils.escapeFileName`: each character of `_FILE_NAME_ESCAPES` as `%XX` (upper-case hex).

    A partition with a '.' is refused (`UnsupportedFeatureError`): upstream's spelling of it is not settled — a dot
    in a hive-style column name is escaped since apache/hudi#19751 and was not before, one in a value breaks
    upstream's own log-file names (issue #19750; #18378 proposes escaping every dot)."""
    if "." in text:
        raise UnsupportedFeatureError(
            f"data partition {text!r} holds a '.': the partitioned record index's file-group name for it differs "
            "between Hudi versions (apache/hudi#19750, #19751, #18378); use the global record index")
    return "".join(f"%{ord(c):02X}" if c in _FILE_NAME_ESCAPES else c for c in text)


def unescape_path_name(text: str) -> str:
    """`PartitionPathEncodeUtils.unescapePathName`: `%XX` (two hex digits) back to its character."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        code = text[i + 1:i + 3]
        if c == "%" and i + 2 < len(text) and len(code) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in code):
            out.append(chr(int(code, 16)))
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def partitioned_file_id(partition: str, i: int) -> str:
    """`HoodieTableMetadataUtil.getFileIDForFileGroup(RECORD_INDEX, i, "record_index", Option.of(partition))`:
    `record-index-` + escapeFileName(partition) + `-` + i as 4 digits + `-0` (upstream's test:
    "record-index-test-0012-0"); the non-partitioned table's "" gives `record-index--0000-0`."""
    return f"{PARTITIONED_PREFIX}{escape_file_name(partition)}-{i:04d}-0"


def partition_of_file_id(file_id: str) -> tuple[str, int] | None:
    """(data partition, index within it) of a partitioned record index's file id, None for any other id
    (`getDataTablePartitionNameFromFileGroupName`: unescape the third piece from the end of the id split on '-';
    `verifyRLIFile`: a partitioned id has four '-')."""
    pieces = file_id.split("-")
    if not file_id.startswith(PARTITIONED_PREFIX) or len(pieces) != 5 or pieces[4] != "0" \
            or not (len(pieces[3]) == 4 and pieces[3].isdigit()):
        return None
    return unescape_path_name(pieces[2]), int(pieces[3])


# ------------------------------------------------------------------------------------- keys (HashID)
_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)
#: `HashID.HASH_SEED` 0xdabadaba, a Java int: negative, sign-extended to the long seed of XXHash64
HASH_SEED = 0xDABADABA - (1 << 32)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, v: int) -> int:
    return (_rotl((acc + v * _P2) & _M64, 31) * _P1) & _M64


def xxh64(data: bytes, seed: int = HASH_SEED) -> int:
    """XXHash64 (the algorithm of lz4-java's `XXHash64`, used by `HashID`), as an unsigned int."""
    seed &= _M64
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed, (seed - _P1) & _M64]
        while i + 32 <= n:
            lanes = struct.unpack_from("<4Q", data, i)
            v = [_round(a, b) for a, b in zip(v, lanes, strict=True)]
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h ^= _round(0, struct.unpack_from("<Q", data, i)[0])
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h ^= (struct.unpack_from("<I", data, i)[0] * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


def hash64_id(text: str) -> str:
    """`HashID.hash(text, BITS_64)` as Base64 (ColumnIndexID, PartitionIndexID)."""
    return base64.b64encode(struct.pack(">Q", xxh64(text.encode("utf-8")))).decode("ascii")


def hash128_id(text: str) -> str:
    """`HashID.hash(text, BITS_128)` (MD5) as Base64 (FileIndexID)."""
    return base64.b64encode(hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest()).decode("ascii")


def partition_identifier(partition: str) -> str:
    """`HoodieTableMetadataUtil.getPartitionIdentifier`: "." for the table root."""
    return partition if partition else NON_PARTITIONED_KEY


def bloom_filter_key(partition: str, file_name: str) -> str:
    """The `bloom_filters` key of a base file (`HoodieMetadataPayload.getBloomFilterRecordKey`)."""
    return hash64_id(partition_identifier(partition)) + hash128_id(file_name)


__all__ = [
    "ALL_PARTITIONS_KEY",
    "HASH_SEED",
    "HOODIE_METADATA_RECORD",
    "NON_PARTITIONED_KEY",
    "PARTITIONED_PREFIX",
    "TYPE_BLOOM_FILTER",
    "TYPE_COLUMN_STATS",
    "TYPE_FILE_LIST",
    "TYPE_PARTITION_LIST",
    "TYPE_PARTITION_STATS",
    "TYPE_RECORD_INDEX",
    "TYPE_SECONDARY_INDEX",
    "MetadataValue",
    "bloom_filter_key",
    "combine",
    "combine_file_lists",
    "decode_value",
    "escape_file_name",
    "escape_secondary",
    "hash64_id",
    "hash128_id",
    "partition_identifier",
    "partition_of_file_id",
    "partitioned_file_id",
    "record_location",
    "split_secondary_key",
    "stat_text",
    "tombstone",
    "unescape_path_name",
    "wrapper_of",
    "xxh64",
]
