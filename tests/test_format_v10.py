"""Table version 10: upstream Hudi's bucket hash, native log names and footers, delete-log schema, upgrade.

The hash values below are computed by hand from the definitions in the Java
language specification (String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16
code units, modulo 2^32; List.hashCode: h = 1; h = 31*h + e.hashCode()), which
is what Hudi's `BucketIdentifier.getBucketId` applies to the key field values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from localpath import local

import lsm_lab
from lsm_lab.errors import CorruptFileError, InputError, UnsupportedFeatureError
from lsm_lab.filegroup import index
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming
from lsm_lab.interop.upgrade import upgrade_to_v10
from lsm_lab.timeline import config as cfg
from lsm_lab.timeline.config import KEY_UPGRADE_PENDING

MakeTable = Callable[..., lsm_lab.Table]  # the tmp_table fixture

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- Java hashes, by hand
# "a"      = 97
# "abc"    = 97*31^2 + 98*31 + 99             = 93217 + 3038 + 99         = 96354
# "hello"  = 99162322                                                     (a classic Java example)
# "é"      = U+00E9                           = 233                       (one UTF-16 unit, two UTF-8 bytes)
# "日本"    = U+65E5*31 + U+672C = 26085*31 + 26412 = 808635 + 26412     = 835047
# "𠀀x"     = U+20000 is the surrogate pair D840 DC00 (55360, 56320), then 'x' (120):
#            55360*31^2 + 56320*31 + 120      = 53200960 + 1745920 + 120  = 54947000
# "uuid-1" = 3460888223 (mod 2^32; -834079073 as a Java int)
HAND = {"": 0, "a": 97, "abc": 96354, "hello": 99162322, "é": 233, "日本": 835047, "𠀀x": 54947000,
        "uuid-1": 3460888223}


def test_java_string_hash_by_hand() -> None:
    keys = list(HAND)
    assert index.java_string_hashes(pa.array(keys)).tolist() == [HAND[k] for k in keys]
    # a slice (non-zero offset) and nulls (Objects.hashCode(null) = 0)
    assert index.java_string_hashes(pa.array(["x", "abc", None, "é"]).slice(1)).tolist() == [96354, 0, 233]
    assert index.java_string_hashes(pa.chunked_array([["a"], ["hello"]])).tolist() == [97, 99162322]
    assert index.java_string_hashes(pa.array([], pa.string())).tolist() == []


def test_java_list_hash_and_bucket_by_hand() -> None:
    # List.of("abc").hashCode() = 31*1 + 96354 = 96385; bucket of 4: 96385 % 4 = 1
    assert index.java_list_hashes([pa.array(["abc"])]).tolist() == [96385]
    assert index.hudi_bucket_ids([pa.array(["abc"])], 4).tolist() == [1]
    # List.of("7", "x"): 31*(31*1 + 55) + 120 = 2786; bucket of 10: 6
    assert index.java_list_hashes([pa.array(["7"]), pa.array(["x"])]).tolist() == [2786]
    assert index.hudi_bucket_ids([pa.array(["7"]), pa.array(["x"])], 10).tolist() == [6]
    # List.of("uuid-1"): 31 + 3460888223 = 3460888254 is a negative Java int; & Integer.MAX_VALUE
    # = 3460888254 - 2^31 = 1313404606; % 4 = 2  (a plain `% 4` of the signed int would give -2)
    assert index.java_list_hashes([pa.array(["uuid-1"])]).tolist() == [3460888254]
    assert index.hudi_bucket_ids([pa.array(["uuid-1"])], 4).tolist() == [2]
    # List.of("日本"): 31 + 835047 = 835078; % 7 = 835078 - 7*119296 = 6
    assert index.hudi_bucket_ids([pa.array(["日本"])], 7).tolist() == [6]
    # List.of("𠀀x"): 31 + 54947000 = 54947031; % 16 = 7  (a supplementary character: two UTF-16 units)
    assert index.hudi_bucket_ids([pa.array(["𠀀x"])], 16).tolist() == [7]
    # a null key part (Hudi's "__null__") and an empty one ("__empty__") both hash to 0: List.of(null).hashCode() = 31
    assert index.java_list_hashes([pa.array([None, ""], pa.string())]).tolist() == [31, 31]
    assert index.hudi_bucket_file_id(3) == "00000003-0000-0000-0000-000000000000-0"


def _reference(s: str) -> int:
    units = s.encode("utf-16-le")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "little")) & 0xFFFFFFFF
    return h


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=["Cs"]), max_size=40), max_size=50))
def test_vectorised_hash_equals_the_definition(keys: list[str]) -> None:
    assert index.java_string_hashes(pa.array(keys, pa.string())).tolist() == [_reference(k) for k in keys]


def test_equal_length_keys_hashed_in_blocks_equal_the_definition() -> None:
    """ASCII keys of one length are hashed in blocks of rows (`index._HASH_BLOCK_BYTES`): many blocks, a
    partial last one and a sliced array give the definition's hashes."""
    import random
    import uuid

    rng = random.Random(11)
    keys = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(3 * (index._HASH_BLOCK_BYTES // 36) + 17)]
    arr = pa.array(["zz", *keys]).slice(1)
    assert index.java_string_hashes(arr).tolist() == [_reference(k) for k in keys]


def test_key_values_from_key_strings_match_the_columns() -> None:
    keys = pa.array(["id:7,name:x", "id:__null__,name:__empty__"])
    parts = index.key_values_from_keys(keys, ["id", "name"])
    assert parts is not None and [p.to_pylist() for p in parts] == [["7", None], ["x", ""]]
    single = index.key_values_from_keys(pa.array(["k1"]), ["id"])
    assert single is not None and single[0].to_pylist() == ["k1"]
    assert index.key_values_from_keys(pa.array(["id:a,b,name:x"]), ["id", "name"]) is None  # ',' in a value
    assert index.key_values_from_keys(pa.array(["name:x,id:7"]), ["id", "name"]) is None   # other field order


def test_lookup_of_composite_keys_with_commas(tmp_table: MakeTable) -> None:
    t = tmp_table(record_key=["id", "name"], num_buckets=4)
    rows = [{"id": f"a,{i}", "name": f"n{i}", "v": i} for i in range(12)]
    t.insert(rows)
    for i in (0, 5, 11):
        got = t.lookup(f"id:a,{i},name:n{i}", columns=["v"])
        assert got.column("v").to_pylist() == [i]


def test_writer_places_keys_in_hudis_buckets(tmp_table: MakeTable) -> None:
    t = tmp_table(record_key=["id", "n"], num_buckets=5)
    rows = [{"id": f"u{i}", "n": i % 3, "v": i} for i in range(60)]
    t.insert(rows)
    expected = index.hudi_bucket_ids([pa.array([r["id"] for r in rows]), pa.array([str(r["n"]) for r in rows])], 5)
    got = {}
    for fs in t.latest_slices():
        assert fs.base_file is not None
        for k in pq.read_table(fs.base_file.path, columns=["id", "n"]).to_pylist():
            got[(k["id"], k["n"])] = fs.file_id
    for r, b in zip(rows, expected.tolist(), strict=True):
        assert got[(r["id"], r["n"])] == index.hudi_bucket_file_id(b)


# --------------------------------------------------------------------------- names
def test_native_log_names() -> None:
    name = naming.native_log_file_name("00000001-0000-0000-0000-000000000000-0", "0-1-0", "20261125010203004", 3,
                                       naming.NATIVE_DELETES)
    assert name == "00000001-0000-0000-0000-000000000000-0_0-1-0_20261125010203004_3.deletes.parquet"
    parsed = naming.parse(name)
    assert parsed is not None and parsed.is_log and parsed.is_delete and parsed.version == 3
    assert parsed.log_format == 2 and parsed.write_token == "0-1-0" and parsed.instant == "20261125010203004"
    cdc = naming.parse("f1_0-0-0_20261125010203004_1.cdc.parquet")
    assert cdc is not None and cdc.content == "cdc"
    orc = naming.parse("f1_0-0-0_20261125010203004_1.log.orc")
    assert orc is not None and orc.ext == "orc" and orc.content == "data"
    # the draft's names still parse
    draft = naming.parse("f1_0-0-0_20261125010203004_1.delete.parquet")
    assert draft is not None and draft.is_delete
    assert naming.log_file_name("f", "0-0-0", "20261125010203004", 2, native=True) == \
        "f_0-0-0_20261125010203004_2.log.parquet"
    with pytest.raises(InputError, match="no '.' or '_'"):
        naming.native_log_file_name("bad_id", "0-0-0", "20261125010203004", 1)


# --------------------------------------------------------------------------- footers
def test_upstream_footer_is_one_compact_map_with_version_first() -> None:
    footer = v2.upstream_footer({"INSTANT_TIME": "20261125010203004", "SCHEMA": '{"type":"record"}'})
    assert list(footer) == [v2.KEY_METADATA]
    assert footer[v2.KEY_METADATA] == \
        '{"VERSION":"2","INSTANT_TIME":"20261125010203004","SCHEMA":"{\\"type\\":\\"record\\"}"}'


def test_reader_accepts_both_footer_layouts_and_refuses_a_newer_version() -> None:
    one_key = {v2.KEY_METADATA: '{"VERSION":"2","INSTANT_TIME":"t1"}'}
    per_entry = {"hudi.log.format.VERSION": "2", "hudi.log.format.INSTANT_TIME": "t1"}  # apache/hudi PR #19247
    assert v2.decode_footer(one_key) == v2.decode_footer(per_entry) == {"VERSION": "2", "INSTANT_TIME": "t1"}
    with pytest.raises(UnsupportedFeatureError, match="newer"):
        v2.decode_footer({v2.KEY_METADATA: '{"VERSION":"3","INSTANT_TIME":"t1"}'})
    with pytest.raises(CorruptFileError, match="not a number"):
        v2.decode_footer({v2.KEY_METADATA: '{"VERSION":"two","INSTANT_TIME":"t1"}'})
    with pytest.raises(CorruptFileError, match="has no"):
        v2.decode_footer({"other": "x"})


def test_delete_log_schema_keeps_the_ordering_type() -> None:
    table = pa.schema([("id", pa.string()), ("ts", pa.timestamp("us")), ("v", pa.float64())])
    schema = v2.upstream_delete_schema(table, ["ts"])
    assert schema == pa.schema([pa.field("_hoodie_record_key", pa.string(), nullable=False),
                                pa.field("ts", pa.timestamp("us"), nullable=True)])
    assert v2.upstream_delete_schema(table, []).names == ["_hoodie_record_key"]
    with pytest.raises(lsm_lab.SchemaError, match="not in the table schema"):
        v2.upstream_delete_schema(table, ["nope"])


# --------------------------------------------------------------------------- golden table
GOLDEN = REPO / "tests" / "golden" / "v10_mor_table.txt"


def _golden_text(table: lsm_lab.Table, instants: list[str]) -> str:
    """File names, footer maps and delete-log schemas, instants replaced by <t1>, <t2>, ..."""
    def norm(text: str) -> str:
        for i, t in enumerate(instants, 1):
            text = text.replace(t, f"<t{i}>")
        return text

    lines = []
    root = local(table.path)
    for path in sorted(p for p in root.rglob("*.parquet") if ".hoodie" not in p.parts):
        rel = norm(str(path.relative_to(root)))
        kv = {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}
        lines.append(f"file {rel}")
        if v2.KEY_METADATA in kv:
            header = json.loads(kv[v2.KEY_METADATA])
            schema = header.pop("SCHEMA", None)
            lines.append(f"  footer keys {sorted(k for k in kv if k.startswith('hudi.'))}")
            lines.append(f"  {v2.KEY_METADATA} {norm(json.dumps(header, separators=(',', ':')))}")
            if schema is not None:
                fields = [f["name"] for f in json.loads(schema)["fields"]]
                lines.append(f"  SCHEMA record {json.loads(schema)['name']} fields {fields}")
        parsed = naming.parse(path.name)
        assert parsed is not None, path.name
        if parsed.is_delete:
            arrow = pq.read_schema(path)
            lines.append("  columns " + ", ".join(
                f"{f.name}:{f.type}{'' if f.nullable else ' not null'}" for f in arrow))
    return "\n".join(lines) + "\n"


def _expected(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("#")) + "\n"


def test_golden_v10_table(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "golden", name="trips", record_key="id", ordering_field="ts",
                             num_buckets=2)
    i1 = t.insert([{"id": k, "ts": 1, "fare": 1.0} for k in ("a", "b", "c", "d")])
    i2 = t.upsert([{"id": "a", "ts": 2, "fare": 2.0}, {"id": "b", "ts": 2, "fare": 2.0}])
    i3 = t.delete([{"id": "c", "ts": 3}, {"id": "d"}])
    got = _golden_text(t, [i1.begin_time, i2.begin_time, i3.begin_time])
    assert got == _expected(GOLDEN.read_text()), got


# --------------------------------------------------------------------------- old tables and the upgrade
def _v9_table(path: Path, **kw: Any) -> lsm_lab.Table:
    t = lsm_lab.create_table(path, name="t", record_key="id", partition_by="city", ordering_field="ts",
                             num_buckets=3, table_version=9, **kw)
    t.insert([{"id": f"k{i}", "city": "a" if i % 2 else "b", "ts": 1, "v": i} for i in range(40)])
    t.upsert([{"id": f"k{i}", "city": "a" if i % 2 else "b", "ts": 2, "v": 10 * i} for i in range(0, 40, 3)])
    t.delete([{"id": f"k{i}", "city": "a" if i % 2 else "b", "ts": 3} for i in range(0, 40, 7)])
    return t


def _rows(t: lsm_lab.Table, **kw: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.read(columns=["id", "city", "ts", "v"], **kw).to_pylist())


def test_version_9_tables_keep_their_dialect(tmp_path: Path) -> None:
    t = _v9_table(tmp_path / "t")
    names = [p.name for p in local(t.path).rglob("*.parquet")]
    assert any(n.endswith("_1.delete.parquet") for n in names)
    assert not any(n.endswith((".log.parquet", ".deletes.parquet")) for n in names)
    fids = {fs.file_id for fs in t.latest_slices()}
    assert all(not f.startswith(("00000000-0000", "00000001-0000")) for f in fids)  # uuid5 ids, CRC-32 buckets
    assert t.config.version == 9 and not t.config.upstream_format


def test_upgrade_rewrites_to_version_10_as_one_instant(tmp_path: Path) -> None:
    t = _v9_table(tmp_path / "t")
    before, writes = _rows(t), t.completed_writes()
    u = upgrade_to_v10(t)
    assert u.config.version == 10 and KEY_UPGRADE_PENDING not in u.config.props
    assert u.config.props["lsm_lab.upgraded.from.version"] == "9"
    new = u.completed_writes()
    assert len(new) == len(writes) + 1 and new[-1].action == "replacecommit"
    assert _rows(u) == before
    assert _rows(u, as_of=writes[-1].completion_time) == before  # time travel to before the upgrade
    for fs in u.latest_slices():  # every key sits in its Hudi bucket
        assert fs.base_file is not None
        keys = pq.read_table(fs.base_file.path, columns=["id"]).column("id")
        assert {index.hudi_bucket_file_id(b) for b in index.hudi_bucket_ids([keys], 3).tolist()} == {fs.file_id}
    assert upgrade_to_v10(u).completed_writes() == new  # idempotent
    u.upsert([{"id": "k1", "city": "a", "ts": 9, "v": -1}])
    u.delete([{"id": "k3", "city": "a"}])
    names = [p.name for p in (u.path / "city=a").iterdir()]
    assert any(n.endswith("_1.log.parquet") for n in names) and any(n.endswith("_1.deletes.parquet") for n in names)
    assert ("k1", "a", 9, -1) in _rows(u) and not any(r[0] == "k3" for r in _rows(u))


def test_upgrade_of_a_version_8_compatibility_table(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "v8", name="t", record_key="id", ordering_field="ts", table_version=8,
                             layout="default")
    t.insert([{"id": f"k{i}", "ts": 1, "v": i} for i in range(10)])
    t.upsert([{"id": "k1", "ts": 2, "v": 100}])
    before = sorted(tuple(r.values()) for r in t.read(columns=["id", "ts", "v"]).to_pylist())
    u = t.upgrade()
    assert u.config.version == 10
    assert sorted(tuple(r.values()) for r in u.read(columns=["id", "ts", "v"]).to_pylist()) == before


def test_upgrade_refuses_tables_lsm_lab_did_not_write(real_table: Callable[[str], Path]) -> None:
    path = real_table("v8_trips_8i3u1d")
    with pytest.raises(UnsupportedFeatureError, match="only tables it created"):
        upgrade_to_v10(path)


CHILD = r"""
import os, sys
from lsm_lab.services import upgrade as up
step = sys.argv[2]
if step == "before-files":
    def crash(*a, **k):
        os._exit(9)
    up._rewrite_snapshot = crash
elif step == "after-one-file":
    original = up._write_base
    def crash(*a, **k):
        original(*a, **k)
        os._exit(9)
    up._write_base = crash
elif step == "after-commit":
    def crash(*a, **k):
        os._exit(9)
    up._finish_v10 = crash
import lsm_lab
up.upgrade_to_v10(lsm_lab.open_table(sys.argv[1]))
"""


@pytest.mark.parametrize("step", ["before-files", "after-one-file", "after-commit"])
def test_a_killed_upgrade_leaves_the_table_readable_and_finishes_on_rerun(tmp_path: Path, step: str) -> None:
    t = _v9_table(tmp_path / "t")
    before = _rows(t)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(t.path), step], env=env, capture_output=True,
                          timeout=120, check=False)
    assert proc.returncode == 9, proc.stderr.decode()
    crashed = lsm_lab.open_table(t.path)
    assert _rows(crashed) == before  # readable at its last completed commit
    assert crashed.config.props.get(KEY_UPGRADE_PENDING)  # ... and writers refuse it until the upgrade finishes
    with pytest.raises(UnsupportedFeatureError, match="has not finished"):
        crashed.upsert([{"id": "k0", "city": "b", "ts": 5, "v": 0}])
    committed = [i for i in crashed.completed_writes() if i.action == "replacecommit"]
    assert len(committed) == (1 if step == "after-commit" else 0)
    u = upgrade_to_v10(local(t.path))
    assert u.config.version == 10 and _rows(u) == before
    assert len([i for i in u.completed_writes() if i.action == "replacecommit"]) == 1
    assert [i for i in u.active_timeline.pending() if i.action == "replacecommit"] == []
    u.upsert([{"id": "k0", "city": "b", "ts": 5, "v": 0}])
    assert ("k0", "b", 5, 0) in _rows(u)
    # no data file of an instant the timeline does not know
    known = {i.begin_time for i in u.completed_writes()}
    leftovers = [p.name for p in local(u.path).rglob("*.parquet") if ".hoodie" not in p.parts
                 and (parsed := naming.parse(p.name)) is not None and parsed.instant not in known]
    assert leftovers == []


def test_the_cli_upgrades(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lsm_lab.cli.app import main

    t = _v9_table(tmp_path / "t")
    assert main(["upgrade", str(t.path)]) == 0
    assert "table version 9 -> 10" in capsys.readouterr().out
    assert lsm_lab.open_table(t.path).config.version == 10
    assert cfg.read_config(t.path).upstream_format


def test_keys_are_ordered_by_unsigned_utf8_bytes(tmp_table: MakeTable) -> None:
    # U+E000 is EE 80 80 in UTF-8 and U+20000 is F0 A0 80 80: UTF-8 order puts U+E000 first, Java's UTF-16
    # order (0xE000 > 0xD840) the other way round (apache/hudi issue #19417, PR #19502)
    keys = ["\U00020000", "\ue000", "z", "é", "A"]
    t = tmp_table(num_buckets=1)
    t.insert([{"id": k, "v": 1} for k in keys])
    (fs,) = t.latest_slices()
    assert fs.base_file is not None
    stored = pq.read_table(fs.base_file.path, columns=["_hoodie_record_key"]).column(0).to_pylist()
    assert stored == sorted(keys, key=lambda k: k.encode("utf-8")) == ["A", "z", "é", "\ue000", "\U00020000"]
    assert sorted(keys, key=lambda k: k.encode("utf-16-be")) != stored


def test_upgrade_waits_for_pending_compaction_plans(tmp_path: Path) -> None:
    t = _v9_table(tmp_path / "t")
    t.compact(strategy="full", plan_only=True)
    assert [i for i in t.active_timeline.pending() if i.action == "compaction"]
    with pytest.raises(UnsupportedFeatureError, match="pending compaction plan"):
        upgrade_to_v10(t)
    assert lsm_lab.open_table(t.path).config.version == 9  # nothing changed
    t.compact(strategy="full")
    assert upgrade_to_v10(local(t.path)).config.version == 10


def test_log_compaction_of_a_v10_table_writes_upstream_logs(tmp_table: MakeTable) -> None:
    t = tmp_table(ordering_field="ts", num_buckets=1)
    t.insert([{"id": f"k{i}", "ts": 1, "v": i} for i in range(20)])
    for r in range(3):
        t.upsert([{"id": f"k{i}", "ts": 2 + r, "v": -i} for i in range(r, 20, 3)])
        t.delete([{"id": f"k{r}", "ts": 99}])
    before = t.read(columns=["id", "ts", "v"]).sort_by("id")
    done = t.compact(strategy="log")
    assert done is not None and done.action == "logcompaction"
    names = [p.name for p in local(t.path).glob(f"*_{done.begin_time}_*")]
    assert {n.split(".", 1)[1] for n in names} == {"log.parquet", "deletes.parquet"}
    for n in names:
        assert "hudi.log.block_type" not in {k.decode() for k in pq.read_metadata(t.path / n).metadata}
    assert t.read(columns=["id", "ts", "v"]).sort_by("id").equals(before)


def test_version_10_properties(tmp_table: MakeTable) -> None:
    lsm = tmp_table(record_key=["id", "n"], ordering_field="ts").config
    assert lsm.version == 10 and lsm.upstream_format and lsm.bucket_index and lsm.log_format_version == 2
    assert lsm.props["hoodie.bucket.index.hash.field"] == "id,n"
    assert lsm.props["hoodie.index.bucket.engine"] == "SIMPLE"
    assert lsm.props["hoodie.table.ordering.fields"] == "ts"
    plain = tmp_table(layout="default").config
    assert plain.version == 10 and not plain.bucket_index and "hoodie.bucket.index.hash.field" not in plain.props
    with pytest.raises(UnsupportedFeatureError, match="version 10"):
        tmp_table(table_version=11)


@pytest.mark.parametrize("table_type,layout", [("COPY_ON_WRITE", "lsm_tree"), ("MERGE_ON_READ", "default"),
                                               ("COPY_ON_WRITE", "default")])
def test_upgrade_of_every_table_type_and_layout(tmp_path: Path, table_type: str, layout: str) -> None:
    t = _v9_table(tmp_path / "t", table_type=table_type, layout=layout)
    before = _rows(t)
    u = t.upgrade()
    assert u.config.version == 10 and u.config.layout == layout and _rows(u) == before
    assert u.config.bucket_index == (layout == "lsm_tree")
    u.upsert([{"id": "k2", "city": "b", "ts": 7, "v": 7}, {"id": "new", "city": "a", "ts": 1, "v": 1}])
    expected = sorted([r for r in before if r[0] != "k2"] + [("k2", "b", 7, 7), ("new", "a", 1, 1)])
    assert _rows(u) == expected
    groups = [(fs.partition, fs.file_id) for fs in u.latest_slices()]
    assert len(groups) == len(set(groups))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.one_of(st.none(), st.text(max_size=40)), st.text(max_size=8)),
                     min_size=1, max_size=4))
def test_few_rows_hash_like_many(rows: list[tuple[str | None, str]]) -> None:
    """Up to `_SCALAR_ROWS` rows (a lookup's keys) are hashed with Python ints: the same List<String>
    hash codes as the vector path (text outside the BMP, nulls, empty strings, two key fields)."""
    first = pa.array([a for a, _ in rows], pa.string())
    second = pa.array([b for _, b in rows], pa.string())
    n = len(rows)
    repeat = index._SCALAR_ROWS + 1  # enough rows for the vector path
    many = [pa.concat_arrays([first] * repeat), pa.concat_arrays([second] * repeat)]
    assert index.java_list_hashes([first, second]).tolist() == index.java_list_hashes(many).tolist()[:n]
    assert index.java_list_hashes([first]).tolist() == index.java_list_hashes(many[:1]).tolist()[:n]
    ints = pa.array(range(n), pa.int64())  # a typed key field hashes as its string form
    assert index.java_list_hashes([ints]).tolist() == index.java_list_hashes(
        [pa.concat_arrays([ints] * repeat)]).tolist()[:n]
