"""Table configuration: `.hoodie/hoodie.properties` <-> `TableConfig`.

Every Hudi table carries one small Java `.properties` file that says what the
table *is*: its name, type (COPY_ON_WRITE or MERGE_ON_READ), version, record key
fields, partition fields, ordering field and merge mode.  RFC-103 adds one key,
`hoodie.table.storage.layout`, whose value `lsm_tree` promises that every data
file of the table is sorted by record key.  Apache Hudi ties that layout to table
version 10 (`TableStorageLayout.LSM_TREE`), which lsm_lab creates by default;
`TableConfig.upstream_format` tells the modules that write files which dialect
a table speaks (docs/FORMAT.md, "seed RFC | upstream | lsm_lab").

    .hoodie/hoodie.properties
    ┌──────────────────────────────────────────────────────┐
    │ hoodie.table.name=trips                              │
    │ hoodie.table.type=MERGE_ON_READ                      │
    │ hoodie.table.version=10                              │
    │ hoodie.table.recordkey.fields=uuid                   │
    │ hoodie.table.partition.fields=city                   │
    │ hoodie.table.ordering.fields=ts                      │  (v6/v8: precombine.field)
    │ hoodie.record.merge.mode=EVENT_TIME_ORDERING         │
    │ hoodie.table.storage.layout=lsm_tree                 │  (RFC-103)
    │ hoodie.bucket.index.num.buckets=4                    │
    └──────────────────────────────────────────────────────┘

The file is read leniently (unknown keys are kept and written back unchanged,
so real Hudi tables round-trip) and validated strictly (a missing table type or
an unknown version is a `TableConfigError`, never a guess).

Simplified compared with Apache Hudi: no config upgrade/downgrade machinery, no
backup file (`hoodie.properties.backup`); the file is replaced atomically
instead (write a temp file, then rename).

Taught in: notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from lsm_lab.errors import InputError, TableConfigError, TableNotFoundError
from lsm_lab.storage import StoragePath, TablePath, as_path, atomic, paths

PROPERTIES_FILE = "hoodie.properties"
META_FOLDER = ".hoodie"

SUPPORTED_TABLE_VERSIONS = (6, 8, 9, 10)
UPSTREAM_LSM_VERSION = 10  # Apache Hudi's RFC-103 table version: native logs, Java-hash buckets
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
LAYOUTS = ("default", "lsm_tree")
MERGE_MODES = ("COMMIT_TIME_ORDERING", "EVENT_TIME_ORDERING", "CUSTOM")
KEY_NUM_BUCKETS = "hoodie.bucket.index.num.buckets"
# A bucket file id starts with the bucket number as 8 decimal digits (Hudi's BucketIdentifier: "%08d"), which is
# read back from the first 8 characters: bucket 100,000,000 would have a file id naming another bucket.
MAX_BUCKETS = 100_000_000
# HoodieIndex.IndexType (hoodie.index.type): only BUCKET places keys by bucket
INDEX_TYPES = ("BUCKET", "SIMPLE", "GLOBAL_SIMPLE", "BLOOM", "GLOBAL_BLOOM", "INMEMORY", "HBASE", "FLINK_STATE",
               "RECORD_INDEX", "RECORD_LEVEL_INDEX", "GLOBAL_RECORD_LEVEL_INDEX")

# Folders under .hoodie/ named by properties (validated by the path guard, lsm_lab.storage.paths).
TIMELINE_FOLDER_KEYS = ("hoodie.timeline.path", "hoodie.timeline.history.path", "hoodie.archivelog.folder")

# Keys lsm_lab adds for its own bookkeeping (documented in docs/FORMAT.md).
KEY_INSTANT_FORMAT = "lsm_lab.timeline.instant.format"  # json | avro
KEY_LOG_FORMAT = "lsm_lab.log.format.version"  # 1 (#HUDI# blocks) | 2 (native Parquet)
KEY_UPGRADE_PENDING = "lsm_lab.upgrade.pending"  # begin time of an upgrade to version 10 not yet finished
KEY_CDC_ENABLED = "hoodie.table.cdc.enabled"  # true | false (HoodieTableConfig.CDC_ENABLED)
KEY_CDC_MODE = "hoodie.table.cdc.supplemental.logging.mode"  # HoodieCDCSupplementalLoggingMode
KEY_META_FIELDS_MODE = "hoodie.meta.fields.mode"  # version 10: which meta columns are populated (MetaFieldsMode)
# upstream's `org.apache.hudi.common.model.MetaFieldsMode`, in its order; ALL is `populate.meta.fields=true`
META_FIELDS_MODES = ("ALL", "NONE", "COMMIT_TIME_ONLY", "FILE_NAME_ONLY", "COMMIT_TIME_AND_FILE_NAME")
CDC_MODES = ("DATA_BEFORE_AFTER", "DATA_BEFORE", "OP_KEY_ONLY")
_LEGACY_CDC_MODES = {"CDC_DATA_BEFORE_AFTER": "DATA_BEFORE_AFTER", "CDC_DATA_BEFORE": "DATA_BEFORE",
                     "CDC_OP_KEY": "OP_KEY_ONLY"}  # the values of Hudi 0.13's HoodieCDCSupplementalLoggingMode


# --------------------------------------------------------------------------- properties syntax
def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 5 < len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch in "\\:=#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\f":
            out.append("\\f")
        else:
            out.append(ch)
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (comments, `=`/`:` separators, escapes, continuations)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    # only \n, \r and \r\n end a line, and only space, tab and form feed are blanks (as in
    # java.util.Properties); str.splitlines/str.strip would also cut at \x1c-\x1e, \x85, \u2028...
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        # a line ending in an odd number of backslashes continues on the next line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key_chars: list[str] = []
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                key_chars.append(line[i : i + 2])
                i += 2
                continue
            if ch in "=: \t":
                break
            key_chars.append(ch)
            i += 1
        rest = line[i:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        props[_unescape("".join(key_chars))] = _unescape(rest)
    return props


def format_properties(props: Mapping[str, str], header: str | None = None) -> str:
    lines = [f"#{header}"] if header else []
    for key in sorted(props):
        lines.append(f"{_escape(key, is_key=True)}={_escape(str(props[key]), is_key=False)}")
    return "\n".join(lines) + "\n"


def table_checksum(database: str, table: str) -> int:
    """Hudi's `hoodie.table.checksum`: CRC32 of `<database>.<table>` (format page, section 2)."""
    return zlib.crc32(f"{database}.{table}".encode())


def _split_fields(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


# --------------------------------------------------------------------------- TableConfig
@dataclass(frozen=True)
class TableConfig:
    """The parsed, validated contents of `hoodie.properties`.

    `props` holds every key of the file (unknown ones included) so that a
    round trip never loses what another writer put there.
    """

    name: str
    table_type: str
    version: int
    record_key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    ordering_field: str | None = None
    merge_mode: str = "COMMIT_TIME_ORDERING"
    layout: str = "default"
    hive_style: bool = False
    num_buckets: int = 4
    database: str = "default"
    props: Mapping[str, str] = field(default_factory=dict)

    # ---- derived facts used everywhere
    @property
    def is_mor(self) -> bool:
        return self.table_type == "MERGE_ON_READ"

    @property
    def is_lsm(self) -> bool:
        return self.layout == "lsm_tree"

    @property
    def bucket_index(self) -> bool:
        """Whether writes place keys by bucket (`hoodie.index.type=BUCKET`, lsm_lab's default for lsm_tree).

        A table switched to lsm_tree later (`lsm_lab.interop.upgrade`) keeps its
        key-lookup index: its existing file groups are not buckets.
        """
        default = "BUCKET" if self.is_lsm else "SIMPLE"
        return self.props.get("hoodie.index.type", default).upper() == "BUCKET"

    @property
    def upstream_format(self) -> bool:
        """Table version 10: upstream Hudi's native log names and footers, delete-log schema and bucket hash.

        Tables of versions 6-9 keep the formats they were written with (the RFC-103
        draft's names for lsm_lab's version 9); `lsm_lab.interop.upgrade` moves one to 10.
        """
        return self.version >= UPSTREAM_LSM_VERSION

    @property
    def timeline_layout(self) -> int:
        """1 = table version 6 (flat `.hoodie/`), 2 = versions 8+ (`.hoodie/timeline/`)."""
        return 1 if self.version < 8 else 2

    @property
    def log_format_version(self) -> int:
        """Which log format new log files use: 2 (native Parquet) unless the table says 1."""
        raw = self.props.get(KEY_LOG_FORMAT)
        if raw is not None:
            return int(raw)
        if self.version >= UPSTREAM_LSM_VERSION:
            return 2
        return 2 if self.version >= 9 and self.props.get("lsm_lab.created") == "true" else 1

    @property
    def instant_format(self) -> str:
        return self.props.get(KEY_INSTANT_FORMAT, "avro" if self.version >= 8 else "json")

    @property
    def keygen_type(self) -> str:
        if "hoodie.table.keygenerator.type" in self.props:
            return self.props["hoodie.table.keygenerator.type"]
        cls = self.props.get("hoodie.table.keygenerator.class", "")
        if "NonpartitionedKeyGenerator" in cls:
            return "NON_PARTITION"
        if "ComplexKeyGenerator" in cls:
            return "COMPLEX"
        if len(self.record_key) > 1:
            return "COMPLEX"
        return "SIMPLE" if self.partition_by else "NON_PARTITION"

    @property
    def cdc_enabled(self) -> bool:
        """Whether writers add change-data-capture logs (`hoodie.table.cdc.enabled`, default false)."""
        return self.props.get(KEY_CDC_ENABLED, "false").strip().lower() == "true"

    @property
    def cdc_mode(self) -> str:
        """What a CDC log keeps: DATA_BEFORE_AFTER (default), DATA_BEFORE or OP_KEY_ONLY (upper-cased)."""
        return cdc_mode_of(self.props.get(KEY_CDC_MODE))

    @property
    def populate_meta_fields(self) -> bool:
        return self.props.get("hoodie.populate.meta.fields", "true").lower() != "false"

    @property
    def meta_fields_mode(self) -> str:
        """Which meta columns files populate, by upstream's rule (`MetaFieldsMode.fromConfig`).

        `hoodie.populate.meta.fields=true` means ALL whatever `hoodie.meta.fields.mode` says; false with
        no mode means NONE; false with a mode means that mode. Readers need no more than the boolean:
        every mode but ALL leaves the record key unpopulated, so keys are rebuilt from the key fields.
        """
        if self.populate_meta_fields:
            return "ALL"
        return (self.props.get(KEY_META_FIELDS_MODE) or "").strip() or "NONE"

    def with_props(self, **updates: str) -> TableConfig:
        props = dict(self.props)
        props.update(updates)
        return TableConfig.from_props(props)

    # ---- properties <-> config
    @classmethod
    def from_props(cls, props: Mapping[str, str], *, path: str | None = None) -> TableConfig:
        def need(key: str) -> str:
            value = props.get(key)
            if value is None or value == "":
                raise TableConfigError(f"hoodie.properties has no '{key}'", path=path)
            return value

        name = need("hoodie.table.name")
        table_type = need("hoodie.table.type").upper()
        if table_type not in TABLE_TYPES:
            raise TableConfigError(
                f"unknown hoodie.table.type '{table_type}' (expected one of {', '.join(TABLE_TYPES)})", path=path
            )
        raw_version = props.get("hoodie.table.version")
        if raw_version is None:  # guessing a version would read the wrong timeline layout as an empty table
            raise TableConfigError("hoodie.properties has no 'hoodie.table.version'", path=path)
        try:
            version = int(raw_version)
        except ValueError:
            raise TableConfigError(f"hoodie.table.version '{raw_version}' is not an integer", path=path) from None
        if version not in SUPPORTED_TABLE_VERSIONS:
            raise TableConfigError(
                f"unknown table version {version}: lsm_lab reads versions "
                f"{', '.join(map(str, SUPPORTED_TABLE_VERSIONS))}",
                path=path,
            )
        record_key = _split_fields(props.get("hoodie.table.recordkey.fields"))
        if not record_key:
            raise TableConfigError("hoodie.properties has no 'hoodie.table.recordkey.fields'", path=path)
        partition_by = _split_fields(props.get("hoodie.table.partition.fields"))
        # partition fields may carry a key generator suffix (`city:SIMPLE` in custom keygen)
        partition_by = tuple(p.split(":")[0] for p in partition_by)
        ordering = props.get("hoodie.table.ordering.fields") or props.get("hoodie.table.precombine.field") or None
        if ordering and "," in ordering:
            ordering = _split_fields(ordering)[0]
        merge_mode = props.get("hoodie.record.merge.mode") or _infer_merge_mode(props, version, ordering)
        if merge_mode not in MERGE_MODES:
            raise TableConfigError(f"unknown hoodie.record.merge.mode '{merge_mode}'", path=path)
        layout = props.get("hoodie.table.storage.layout", "default")
        if layout not in LAYOUTS:
            raise TableConfigError(
                f"unknown hoodie.table.storage.layout '{layout}' (expected one of {', '.join(LAYOUTS)})", path=path
            )
        if merge_mode == "EVENT_TIME_ORDERING" and not ordering:
            raise TableConfigError("EVENT_TIME_ORDERING needs an ordering field", path=path)
        num_buckets = _num_buckets(props, layout, path)
        for key in TIMELINE_FOLDER_KEYS:  # folders under .hoodie/: never a way out of the table
            if props.get(key) is not None:
                paths.relative(props[key], file=path, field=key)
        if props.get(KEY_CDC_ENABLED) is not None and props[KEY_CDC_ENABLED].strip().lower() not in ("true", "false"):
            raise TableConfigError(f"{KEY_CDC_ENABLED} must be true or false, not {props[KEY_CDC_ENABLED]!r}",
                                   path=path)
        if props.get(KEY_CDC_MODE) is not None and props[KEY_CDC_MODE].strip().upper() not in (
                *CDC_MODES, *_LEGACY_CDC_MODES):
            raise TableConfigError(f"{KEY_CDC_MODE} must be one of {', '.join(CDC_MODES)}, not "
                                   f"{props[KEY_CDC_MODE]!r}", path=path)
        mode = (props.get(KEY_META_FIELDS_MODE) or "").strip()
        if mode and mode not in META_FIELDS_MODES:
            raise TableConfigError(f"{KEY_META_FIELDS_MODE} must be one of {', '.join(META_FIELDS_MODES)}, not "
                                   f"{mode!r}", path=path)
        for key, allowed in ((KEY_LOG_FORMAT, ("1", "2")), (KEY_INSTANT_FORMAT, ("json", "avro"))):
            if props.get(key) is not None and props[key] not in allowed:
                raise TableConfigError(f"{key} must be {' or '.join(allowed)}, not {props[key]!r}", path=path)
        return cls(
            name=name,
            table_type=table_type,
            version=version,
            record_key=record_key,
            partition_by=partition_by,
            ordering_field=ordering,
            merge_mode=merge_mode,
            layout=layout,
            hive_style=props.get("hoodie.datasource.write.hive_style_partitioning", "false").lower() == "true",
            num_buckets=num_buckets,
            database=props.get("hoodie.database.name", "default") or "default",
            props=dict(props),
        )


def _num_buckets(props: Mapping[str, str], layout: str, path: str | None) -> int:
    """`hoodie.bucket.index.num.buckets`, required when the table places keys by bucket.

    A bucket-index table without its bucket count cannot be read right: with a guessed
    count lookups look in the wrong bucket and upserts write a second version of a key
    elsewhere.  So a missing key (one flipped bit in its name is enough), a value that is
    not an integer or one out of range is a `TableConfigError`; the default of 4 is
    only used by tables that do not place keys by bucket (Hudi's own tables with a
    SIMPLE or BLOOM index, which never write the key)."""
    index = props.get("hoodie.index.type")
    if index is not None and index.upper() not in INDEX_TYPES:
        raise TableConfigError(f"unknown hoodie.index.type {index!r} (expected one of {', '.join(INDEX_TYPES)})",
                               path=path)
    bucket = (index or ("BUCKET" if layout == "lsm_tree" else "SIMPLE")).upper() == "BUCKET"
    raw = props.get(KEY_NUM_BUCKETS)
    if raw is None or raw.strip() == "":
        if bucket:
            raise TableConfigError(f"hoodie.properties has no '{KEY_NUM_BUCKETS}', which a bucket-index table "
                                   "needs (its keys are placed by bucket; a guessed count would misplace them)",
                                   path=path)
        return 4
    text = raw.strip()
    if not (text.isascii() and text.isdigit()):
        raise TableConfigError(f"{KEY_NUM_BUCKETS} {raw!r} is not an integer", path=path)
    value = int(text)
    if not 1 <= value <= MAX_BUCKETS:
        raise TableConfigError(f"{KEY_NUM_BUCKETS} must be at least 1 and at most {MAX_BUCKETS:,}, not {value}", path=path)
    return value


def cdc_mode_of(value: str | None) -> str:
    """A supplemental logging mode as stored (any case; Hudi 0.13's `cdc_op_key` ... too) → its name."""
    mode = (value or CDC_MODES[0]).strip().upper()
    mode = _LEGACY_CDC_MODES.get(mode, mode)
    return mode if mode in CDC_MODES else CDC_MODES[0]


def _infer_merge_mode(props: Mapping[str, str], version: int, ordering: str | None) -> str:
    """Tables without `hoodie.record.merge.mode` (version 6) merge as their payload class did.

    Hudi 0.x defaulted to `OverwriteWithLatestAvroPayload` (latest write wins:
    commit-time ordering); `DefaultHoodieRecordPayload` compares the ordering field.
    """
    payload = props.get("hoodie.compaction.payload.class", "")
    if "DefaultHoodieRecordPayload" in payload and ordering:
        return "EVENT_TIME_ORDERING"
    if version < 8 or not ordering:
        return "COMMIT_TIME_ORDERING"
    return "EVENT_TIME_ORDERING"


# properties set from create_table's explicit arguments (an option may not contradict them)
ARGUMENT_KEYS = {
    "hoodie.table.name": "name",
    "hoodie.table.type": "table_type",
    "hoodie.table.version": "table_version",
    "hoodie.table.recordkey.fields": "record_key",
    "hoodie.table.partition.fields": "partition_by",
    "hoodie.table.ordering.fields": "ordering_field",
    "hoodie.table.precombine.field": "ordering_field",
    "hoodie.table.storage.layout": "layout",
    "hoodie.datasource.write.hive_style_partitioning": "hive_style",
    "hoodie.bucket.index.num.buckets": "num_buckets",
}
_ORDERING_KEYS = ("hoodie.table.ordering.fields", "hoodie.table.precombine.field")


def build_props(
    *,
    name: str,
    record_key: tuple[str, ...],
    partition_by: tuple[str, ...],
    ordering_field: str | None,
    table_type: str,
    layout: str,
    version: int,
    hive_style: bool,
    num_buckets: int,
    database: str = "default",
    extra: Mapping[str, str] | None = None,
    cdc: bool = False,
    cdc_mode: str = CDC_MODES[0],
) -> dict[str, str]:
    """The properties lsm_lab writes for a new table (format page, section 2)."""
    merge_mode = "EVENT_TIME_ORDERING" if ordering_field else "COMMIT_TIME_ORDERING"
    if len(record_key) > 1 or (partition_by and len(partition_by) > 1):
        keygen = "COMPLEX"
    elif partition_by:
        keygen = "SIMPLE"
    else:
        keygen = "NON_PARTITION"
    props: dict[str, str] = {
        "hoodie.table.name": name,
        "hoodie.database.name": database,
        "hoodie.table.type": table_type,
        "hoodie.table.version": str(version),
        "hoodie.table.initial.version": str(version),
        "hoodie.table.recordkey.fields": ",".join(record_key),
        "hoodie.table.keygenerator.type": keygen,
        "hoodie.record.merge.mode": merge_mode,
        "hoodie.table.storage.layout": layout,
        "hoodie.datasource.write.hive_style_partitioning": "true" if hive_style else "false",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.populate.meta.fields": "true",
        "hoodie.index.type": "BUCKET" if layout == "lsm_tree" else "SIMPLE",
        "hoodie.bucket.index.num.buckets": str(num_buckets),
        # version 10 states the meta-fields mode beside the legacy boolean (MetaFieldsMode; version 9 has no such key)
        **({"hoodie.table.base.file.format": "PARQUET", KEY_META_FIELDS_MODE: "ALL"}
           if version >= UPSTREAM_LSM_VERSION else {}),
        **({"hoodie.index.bucket.engine": "SIMPLE", "hoodie.bucket.index.hash.field": ",".join(record_key)}
           if version >= UPSTREAM_LSM_VERSION and layout == "lsm_tree" else {}),
        "hoodie.table.checksum": str(table_checksum(database, name)),
        KEY_CDC_ENABLED: "true" if cdc else "false",
        **({KEY_CDC_MODE: cdc_mode} if cdc else {}),
        "lsm_lab.created": "true",
    }
    if partition_by:
        props["hoodie.table.partition.fields"] = ",".join(partition_by)
    if ordering_field:
        key = "hoodie.table.ordering.fields" if version >= 9 else "hoodie.table.precombine.field"
        props[key] = ordering_field
    if version >= 8:
        props["hoodie.timeline.layout.version"] = "2"
        props["hoodie.timeline.path"] = "timeline"
        props["hoodie.timeline.history.path"] = "history"
    else:
        props["hoodie.timeline.layout.version"] = "1"
        props["hoodie.archivelog.folder"] = "archived"
    # completed write instants as Avro, as upstream writes timeline layout 2 (CommitMetadataSerDeV2); tables
    # created before this say "json" in their properties and keep it
    props[KEY_INSTANT_FORMAT] = "avro" if version >= 8 else "json"
    # native (Parquet) logs: version 10, and version 9's lsm_tree (the RFC-103 draft); a version 9 table of the
    # default layout keeps upstream Hudi 1.x's v1 log blocks, so that hudi-rs and Spark read it (docs/FORMAT.md)
    native = version >= UPSTREAM_LSM_VERSION or (version == 9 and layout == "lsm_tree")
    props[KEY_LOG_FORMAT] = "2" if native else "1"
    for key, argument in ARGUMENT_KEYS.items():  # an option may repeat an explicit argument, never contradict it
        if extra and key in extra:
            mine = props.get(key, ordering_field if key in _ORDERING_KEYS else None)
            if str(extra[key]) != (mine if mine is not None else ""):
                raise InputError(f"option {key}={extra[key]!r} contradicts the argument {argument}="
                                 f"{mine!r}; pass the value as the argument")
    if extra:
        props.update({k: str(v) for k, v in extra.items()})
    return props


# --------------------------------------------------------------------------- file I/O
def properties_path(base_path: str | os.PathLike[str] | StoragePath) -> TablePath:
    return as_path(base_path) / META_FOLDER / PROPERTIES_FILE


def read_config(base_path: str | os.PathLike[str] | StoragePath) -> TableConfig:
    """Read and validate `<base_path>/.hoodie/hoodie.properties`."""
    base_path = as_path(base_path)
    if isinstance(base_path, StoragePath):  # an object store: one GET, a LIST only to explain a miss
        ppath = properties_path(base_path)
        try:
            text = ppath.read_bytes().decode("utf-8")
        except FileNotFoundError:
            if (base_path / META_FOLDER).is_dir():
                raise TableConfigError("the table has a .hoodie folder but no hoodie.properties", path=ppath) from None
            raise TableNotFoundError("not a table: there is no .hoodie/hoodie.properties", path=base_path) from None
        except UnicodeDecodeError as exc:
            raise TableConfigError(f"cannot read hoodie.properties: {exc}", path=ppath) from None
        return TableConfig.from_props(parse_properties(text), path=str(ppath))
    if not base_path.exists():
        raise TableNotFoundError("no such folder", path=base_path)
    if not (base_path / META_FOLDER).is_dir():
        raise TableNotFoundError("not a table: there is no .hoodie folder" + _tables_below(base_path), path=base_path)
    ppath = properties_path(base_path)
    if not ppath.is_file():
        raise TableConfigError("the table has a .hoodie folder but no hoodie.properties", path=ppath)
    try:
        text = ppath.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TableConfigError(f"cannot read hoodie.properties: {exc}", path=ppath) from None
    return TableConfig.from_props(parse_properties(text), path=str(ppath))


def _tables_below(folder: TablePath) -> str:
    """A hint naming the tables one or two folders down (an unzipped table often sits in a folder of its own)."""
    if not folder.is_dir():
        return ""
    found: list[str] = []
    for depth in ("*", "*/*"):
        found += sorted(str(p.parent.parent) for p in folder.glob(f"{depth}/{META_FOLDER}/{PROPERTIES_FILE}")
                        if "__MACOSX" not in p.parts)
        if found:
            break
    if not found:
        return ""
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"; a table is below it: {found[0]}{more}"


def write_config(base_path: str | os.PathLike[str] | StoragePath, props: Mapping[str, str], *, create: bool) -> TableConfig:
    """Write hoodie.properties atomically (temp file + rename); `create=True` never overwrites."""
    ppath = properties_path(base_path)
    paths.make_folders(ppath.parent)  # never through a link out of the table (.hoodie -> elsewhere)
    config = TableConfig.from_props(props, path=str(ppath))  # validate before touching disk
    data = format_properties(props, header="written by lsm_lab").encode("utf-8")
    if create:
        atomic.create_file(ppath, data, on_exists=lambda p: TableConfigError("a table already exists here", path=p))
    else:
        atomic.replace_file(ppath, data)
    return config
