"""hoodie.properties <-> TableConfig: Java .properties syntax, validation, what lsm_lab writes, real tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lsm_lab.errors import TableConfigError, TableNotFoundError
from lsm_lab.timeline import config as cfg

MINIMAL = {
    "hoodie.table.name": "t",
    "hoodie.table.type": "MERGE_ON_READ",
    "hoodie.table.version": "9",
    "hoodie.table.recordkey.fields": "id",
}


# --------------------------------------------------------------------------- properties syntax
def test_parse_properties_syntax() -> None:
    text = "\n".join([
        "# a comment",
        "! another comment",
        "   ",
        "a=1",
        "b : 2",
        "c 3",
        "  d=  padded",
        r"e\:key=x\=y",
        r"f=caf\u00e9",
        r"g=one\ntwo\ttab",
        "h=first \\",
        "    second",
        r"i=ends with backslash\\",
        "j=",
        "k",
    ])
    props = cfg.parse_properties(text)
    assert props == {
        "a": "1", "b": "2", "c": "3", "d": "padded", "e:key": "x=y", "f": "café", "g": "one\ntwo\ttab",
        "h": "first second", "i": "ends with backslash\\", "j": "", "k": "",
    }


def test_parse_real_escaped_schema_value() -> None:
    props = cfg.parse_properties(r'hoodie.table.create.schema={"type"\:"record","fields"\:[]}' + "\n")
    assert props["hoodie.table.create.schema"] == '{"type":"record","fields":[]}'


def test_format_properties_is_sorted_with_header() -> None:
    text = cfg.format_properties({"b": "2", "a": "x:y"}, header="hello")
    assert text.splitlines() == ["#hello", "a=x\\:y", "b=2"]


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.dictionaries(_text.filter(bool), _text, max_size=8))
@example({"\x1e": "\u2028", "\f": "\x85\x1c", " k#": "\\", "!": " v"})  # line/blank characters of Python, not Java
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert cfg.parse_properties(cfg.format_properties(props, header="x")) == props


def test_table_checksum_matches_hudi() -> None:
    # format page, section 2: CRC32 of "<database>.<table>"
    assert cfg.table_checksum("default", "v8_trips_8i3u1d") == 1197752875


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("missing", ["hoodie.table.name", "hoodie.table.type", "hoodie.table.recordkey.fields"])
def test_missing_required_key(missing: str) -> None:
    props = {k: v for k, v in MINIMAL.items() if k != missing}
    with pytest.raises(TableConfigError, match=missing.replace(".", r"\.")):
        cfg.TableConfig.from_props(props)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hoodie.table.type", "MERGE_ON_WRITE", "unknown hoodie.table.type"),
        ("hoodie.table.version", "nine", "not an integer"),
        ("hoodie.table.version", "5", "unknown table version 5"),
        ("hoodie.table.version", "7", "unknown table version 7"),
        ("hoodie.table.version", "11", "unknown table version 11"),
        ("hoodie.record.merge.mode", "LATEST", "unknown hoodie.record.merge.mode"),
        ("hoodie.table.storage.layout", "btree", "unknown hoodie.table.storage.layout"),
        ("hoodie.record.merge.mode", "EVENT_TIME_ORDERING", "needs an ordering field"),
        ("hoodie.bucket.index.num.buckets", "x", "not an integer"),
        ("hoodie.bucket.index.num.buckets", "0", "at least 1"),
        ("lsm_lab.log.format.version", "3", "must be 1 or 2"),
        ("lsm_lab.timeline.instant.format", "xml", "must be json or avro"),
        ("hoodie.meta.fields.mode", "_hoodie_record_key", "hoodie.meta.fields.mode must be one of ALL, NONE"),
    ],
)
def test_invalid_values(key: str, value: str, message: str) -> None:
    with pytest.raises(TableConfigError, match=message):
        cfg.TableConfig.from_props({**MINIMAL, key: value}, path="/x/hoodie.properties")


def test_error_names_the_file() -> None:
    with pytest.raises(TableConfigError) as info:
        cfg.TableConfig.from_props({**MINIMAL, "hoodie.table.version": "42"}, path="/x/hoodie.properties")
    assert str(info.value).startswith("/x/hoodie.properties: ")


def test_defaults_and_derived_facts() -> None:
    c = cfg.TableConfig.from_props(MINIMAL)
    assert (c.name, c.table_type, c.version, c.record_key) == ("t", "MERGE_ON_READ", 9, ("id",))
    assert c.partition_by == () and c.ordering_field is None
    assert c.merge_mode == "COMMIT_TIME_ORDERING"
    assert c.layout == "default" and not c.is_lsm and c.is_mor
    assert c.timeline_layout == 2 and c.num_buckets == 4 and not c.hive_style
    assert c.keygen_type == "NON_PARTITION"
    v6 = cfg.TableConfig.from_props({**MINIMAL, "hoodie.table.version": "6", "hoodie.table.type": "copy_on_write"})
    assert v6.timeline_layout == 1 and v6.table_type == "COPY_ON_WRITE" and not v6.is_mor
    assert v6.instant_format == "json"


def test_fields_split_and_suffixes() -> None:
    c = cfg.TableConfig.from_props({**MINIMAL, "hoodie.table.recordkey.fields": " a , b ",
                                    "hoodie.table.partition.fields": "city:SIMPLE,day:TIMESTAMP",
                                    "hoodie.table.ordering.fields": "ts,seq"})
    assert c.record_key == ("a", "b")
    assert c.partition_by == ("city", "day")
    assert c.ordering_field == "ts"
    assert c.keygen_type == "COMPLEX"


@pytest.mark.parametrize(
    ("version", "payload", "ordering", "expected"),
    [
        (6, "", "ts", "COMMIT_TIME_ORDERING"),
        (6, "org.apache.hudi.common.model.DefaultHoodieRecordPayload", "ts", "EVENT_TIME_ORDERING"),
        (8, "", "ts", "EVENT_TIME_ORDERING"),
        (8, "", None, "COMMIT_TIME_ORDERING"),
    ],
)
def test_merge_mode_inferred_when_absent(version: int, payload: str, ordering: str | None, expected: str) -> None:
    props = {**MINIMAL, "hoodie.table.version": str(version)}
    if payload:
        props["hoodie.compaction.payload.class"] = payload
    if ordering:
        props["hoodie.table.precombine.field"] = ordering
    assert cfg.TableConfig.from_props(props).merge_mode == expected


def test_unknown_keys_are_kept() -> None:
    c = cfg.TableConfig.from_props({**MINIMAL, "some.other.key": "v"})
    assert c.props["some.other.key"] == "v"
    assert c.with_props(another="w").props["some.other.key"] == "v"


# --------------------------------------------------------------------------- what lsm_lab writes
def _build(**kw: Any) -> dict[str, str]:
    args: dict[str, Any] = {"name": "trips", "record_key": ("uuid",), "partition_by": ("city",), "ordering_field": "ts",
                "table_type": "MERGE_ON_READ", "layout": "lsm_tree", "version": 9, "hive_style": True, "num_buckets": 8}
    args.update(kw)
    return cfg.build_props(**args)


def test_build_props_contents() -> None:
    props = _build()
    assert props["hoodie.table.storage.layout"] == "lsm_tree"
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert props["hoodie.table.ordering.fields"] == "ts"
    assert "hoodie.table.precombine.field" not in props
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert props["hoodie.bucket.index.num.buckets"] == "8"
    assert props["hoodie.index.type"] == "BUCKET"
    assert props["hoodie.table.checksum"] == str(cfg.table_checksum("default", "trips"))
    assert props["hoodie.timeline.path"] == "timeline"
    assert props["hoodie.table.keygenerator.type"] == "SIMPLE"
    c = cfg.TableConfig.from_props(props)
    assert (c.is_lsm, c.hive_style, c.num_buckets, c.ordering_field, c.log_format_version) == (True, True, 8, "ts", 2)


def test_build_props_commit_time_and_keygens() -> None:
    props = _build(ordering_field=None, record_key=("a", "b"), partition_by=(), layout="default", hive_style=False)
    assert props["hoodie.record.merge.mode"] == "COMMIT_TIME_ORDERING"
    assert "hoodie.table.ordering.fields" not in props
    assert props["hoodie.table.keygenerator.type"] == "COMPLEX"
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "false"
    assert props["hoodie.index.type"] == "SIMPLE"
    assert "hoodie.table.partition.fields" not in props
    assert _build(partition_by=())["hoodie.table.keygenerator.type"] == "NON_PARTITION"
    assert _build(partition_by=("a", "b"))["hoodie.table.keygenerator.type"] == "COMPLEX"


@pytest.mark.parametrize(("populate", "mode", "expected"), [
    (None, None, "ALL"), ("true", None, "ALL"), ("true", "COMMIT_TIME_ONLY", "ALL"),  # the boolean wins when true
    ("false", None, "NONE"), ("false", "", "NONE"), ("false", " FILE_NAME_ONLY ", "FILE_NAME_ONLY"),
    ("false", "COMMIT_TIME_AND_FILE_NAME", "COMMIT_TIME_AND_FILE_NAME"),
])
def test_meta_fields_mode_follows_upstream(populate: str | None, mode: str | None, expected: str) -> None:
    """`MetaFieldsMode.fromConfig`: the legacy boolean first, then the mode, NONE when it is empty."""
    props = dict(MINIMAL)
    if populate is not None:
        props["hoodie.populate.meta.fields"] = populate
    if mode is not None:
        props[cfg.KEY_META_FIELDS_MODE] = mode
    assert cfg.TableConfig.from_props(props).meta_fields_mode == expected


def test_version_10_states_its_meta_fields_mode() -> None:
    assert _build(version=10)[cfg.KEY_META_FIELDS_MODE] == "ALL"
    assert cfg.KEY_META_FIELDS_MODE not in _build(version=9)  # version 9 has no such key (TenToNine drops it)


# --------------------------------------------------------------------------- files
def test_write_then_read_config(tmp_path: Path) -> None:
    props = _build()
    written = cfg.write_config(tmp_path, props, create=True)
    assert cfg.read_config(tmp_path) == written
    assert [p.name for p in (tmp_path / ".hoodie").iterdir()] == ["hoodie.properties"]  # no temp file left


def test_create_never_overwrites(tmp_path: Path) -> None:
    cfg.write_config(tmp_path, _build(name="first"), create=True)
    with pytest.raises(TableConfigError, match="already exists"):
        cfg.write_config(tmp_path, _build(name="second"), create=True)
    assert cfg.read_config(tmp_path).name == "first"
    cfg.write_config(tmp_path, _build(name="second"), create=False)  # an update replaces
    assert cfg.read_config(tmp_path).name == "second"
    assert sorted(p.name for p in (tmp_path / ".hoodie").iterdir()) == ["hoodie.properties"]


def test_invalid_props_never_reach_disk(tmp_path: Path) -> None:
    with pytest.raises(TableConfigError):
        cfg.write_config(tmp_path, {**MINIMAL, "hoodie.table.version": "3"}, create=True)
    assert not cfg.properties_path(tmp_path).exists()


def test_read_config_errors(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match="no such folder"):
        cfg.read_config(tmp_path / "missing")
    with pytest.raises(TableNotFoundError, match="not a table"):
        cfg.read_config(tmp_path)
    (tmp_path / ".hoodie").mkdir()
    with pytest.raises(TableConfigError, match="no hoodie.properties"):
        cfg.read_config(tmp_path)
    cfg.properties_path(tmp_path).write_bytes(b"hoodie.table.name=\xff\xfe\n")
    with pytest.raises(TableConfigError, match="cannot read"):
        cfg.read_config(tmp_path)
    cfg.properties_path(tmp_path).write_text("hoodie.table.name=t\n")
    with pytest.raises(TableConfigError, match="hoodie.table.type"):
        cfg.read_config(tmp_path)


# --------------------------------------------------------------------------- real Hudi tables
REAL = {
    # name: (version, type, merge mode, ordering, partition fields, timeline layout)
    "v6_nonpartitioned": (6, "COPY_ON_WRITE", "COMMIT_TIME_ORDERING", "longField", (), 1),
    "v6_trips_8i1u": (6, "MERGE_ON_READ", "COMMIT_TIME_ORDERING", "ts", ("city",), 1),
    "v8_complexkeygen_hivestyle": (8, "COPY_ON_WRITE", "EVENT_TIME_ORDERING", "longField",
                                   ("byteField", "shortField"), 2),
    "v8_trips_8i3u1d": (8, "MERGE_ON_READ", "EVENT_TIME_ORDERING", "ts", ("city",), 2),
    "v9_txns_simple_nometa": (9, "MERGE_ON_READ", "EVENT_TIME_ORDERING", "txn_ts", ("region",), 2),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_tables(real_table: Callable[[str], Path], name: str) -> None:
    path = real_table(name)
    c = cfg.read_config(path)
    version, ttype, mode, ordering, parts, layout = REAL[name]
    assert (c.version, c.table_type, c.merge_mode, c.ordering_field, c.timeline_layout) == (
        version, ttype, mode, ordering, layout)
    assert c.partition_by == parts
    assert c.layout == "default" and not c.is_lsm
    assert int(c.props["hoodie.table.checksum"]) == cfg.table_checksum(c.database, c.name)
    # round trip: everything Hudi wrote survives lsm_lab's writer
    assert cfg.parse_properties(cfg.format_properties(c.props)) == dict(c.props)
