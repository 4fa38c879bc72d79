"""Hudi log format v1 (lsm_lab.format.log_v1): blocks, corruption, rollbacks, names, writer.

Three groups of tests:
- self-contained ones (round trips, corruption of files this module wrote), run everywhere;
- real files from ../shared (skipped when absent): decoding, byte-exact re-encoding,
  truncation and concatenation of real blocks, HFile blocks as cells;
- hudi-rs reading what lsm_lab wrote, in a copy of a real table (skipped without both).
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import struct
import zipfile
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab import avro_schema as A
from lsm_lab.errors import ConflictError, CorruptFileError, InputError, SchemaError, UnsupportedFeatureError
from lsm_lab.format import log_v1 as v1
from lsm_lab.format import naming
from lsm_lab.format.log_v1 import BlockType, HeaderKey

T1, T2, T3 = "20250101000000001", "20250101000000002", "20250101000000003"

# --------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shared(shared_dir: Path) -> Path:
    """The shared folder (conftest's `shared_dir`: skips cleanly when it is absent)."""
    return shared_dir


@pytest.fixture(scope="module")
def real_log(shared: Path) -> Callable[[str], Path]:
    """real_log('valid_log_delete') -> the single real log file of that folder."""

    def find(kind: str) -> Path:
        (path,) = [p for p in (shared / "hudi-log-files" / kind).iterdir() if p.is_file()]
        return path

    return find


@pytest.fixture(scope="module")
def tables(shared: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real tables, unzipped once per module."""
    root = tmp_path_factory.mktemp("hudi_tables")
    for z in sorted((shared / "hudi-tables").glob("*.zip")):
        with zipfile.ZipFile(z) as archive:
            archive.extractall(root / z.stem)
    return root


def _is_v1_log(name: str) -> bool:
    parsed = naming.parse(name)
    return parsed is not None and parsed.log_format == 1


def _table_logs(root: Path, *, metadata: bool) -> list[Path]:
    return sorted(
        p
        for p in root.rglob(".*")
        if p.is_file()
        and "__MACOSX" not in p.parts
        and _is_v1_log(p.name)
        and (("metadata" in p.parts) == metadata)
    )


def _records(block: v1.LogBlock) -> pa.Table:
    """The rows of a decoded data or delete block (None only for command and corrupt blocks)."""
    assert block.records is not None
    return block.records


def _sample_table() -> pa.Table:
    """Rows covering every type the compatibility writer maps, with nulls."""
    schema = pa.schema(
        [
            pa.field("_hoodie_record_key", pa.string()),
            pa.field("id", pa.string(), nullable=False),
            pa.field("n", pa.int32()),
            pa.field("ts", pa.int64()),
            pa.field("f", pa.float32()),
            pa.field("d", pa.float64()),
            pa.field("ok", pa.bool_()),
            pa.field("raw", pa.binary()),
            pa.field("amount", pa.decimal128(15, 2)),
            pa.field("day", pa.date32()),
            pa.field("at", pa.timestamp("us", tz="UTC")),
            pa.field("local", pa.timestamp("ms")),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("props", pa.map_(pa.string(), pa.int64())),
            pa.field("addr", pa.struct([pa.field("zip", pa.string()), pa.field("at", pa.timestamp("us", tz="UTC"))])),
        ]
    )
    rows = [
        {
            "_hoodie_record_key": "k1",
            "id": "k1",
            "n": -7,
            "ts": 2**40,
            "f": 1.5,
            "d": 29.1,
            "ok": True,
            "raw": b"\x00#HUDI#\xff",  # the magic inside a value must not confuse the reader
            "amount": Decimal("1250.00"),
            "day": dt.date(2024, 1, 15),
            "at": dt.datetime(2024, 1, 15, 16, 30, 0, 123456, tzinfo=dt.UTC),
            "local": dt.datetime(2024, 1, 15, 16, 30, 0, 123000),
            "tags": ["a", None, "é"],
            "props": [("x", 1), ("y", None)],
            "addr": {"zip": "560001", "at": dt.datetime(2020, 2, 29, tzinfo=dt.UTC)},
        },
        {"id": "k2"},
    ]
    return pa.Table.from_pylist(rows, schema=schema)


def _data_block(table: pa.Table, instant: str = T1) -> bytes:
    return v1.encode_avro_data_block(table, instant_time=instant, table_name="t")


def _keys(*keys: str, **extra: pa.Array) -> pa.Table:
    return pa.table({"record_key": list(keys), "partition_path": ["p"] * len(keys), **extra})


def _three_block_file() -> tuple[bytes, list[bytes]]:
    blocks = [
        _data_block(_sample_table(), T1),
        v1.encode_delete_block(_keys("k1"), instant_time=T2),
        v1.encode_command_block(instant_time=T3, target_instant_time=T2),
    ]
    return b"".join(blocks), blocks


# --------------------------------------------------------------------------------------
# layout of what the writer produces
# --------------------------------------------------------------------------------------


def test_block_layout_matches_the_format_page() -> None:
    raw = v1.encode_command_block(instant_time=T3, target_instant_time=T2)
    assert raw[:6] == b"#HUDI#"
    (length,) = struct.unpack(">q", raw[6:14])
    assert len(raw) == 14 + length
    assert struct.unpack(">ii", raw[14:22]) == (1, BlockType.COMMAND)
    assert struct.unpack(">q", raw[-8:]) == (length + 6,)
    # header: count 3, then ordinal, length, UTF-8 value, in ordinal order
    assert struct.unpack(">iii", raw[22:34]) == (3, HeaderKey.INSTANT_TIME, 17)
    assert raw[34:51] == T3.encode()


def test_avro_data_content_layout() -> None:
    table = pa.table({"a": pa.array(["x", None])})
    content = v1.encode_avro_records(table, A.arrow_to_avro_schema(table.schema, name="r"))
    version, count, first_len = struct.unpack(">iii", content[:12])
    assert (version, count) == (3, 2)
    assert content[12 : 12 + first_len] == b"\x02\x02x"  # union branch 1 (string), length 1, "x"
    assert content[12 + first_len :] == struct.pack(">i", 1) + b"\x00"  # null branch


# --------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------


def test_avro_data_round_trip(tmp_path: Path) -> None:
    table = _sample_table()
    path = tmp_path / naming.v1_log_file_name("fg-0", T1, 1, "0-1-2")
    v1.write_log_file(path, [_data_block(table)])
    (block,) = v1.read_log_file(path)
    assert block.block_type == BlockType.AVRO_DATA
    assert block.instant_time == T1 and block.content_version == 3 and block.format_version == 1
    assert (block.offset, block.length) == (0, path.stat().st_size)
    assert _records(block).schema == table.schema
    assert _records(block).equals(table)


def test_empty_data_block_keeps_columns() -> None:
    table = _sample_table().slice(0, 0)
    (block,) = v1.decode_log_bytes(_data_block(table))
    assert block.num_rows == 0
    assert _records(block).schema == table.schema


def test_schema_text_is_stored_verbatim() -> None:
    text = '{"type":"record","name":"r","fields":[{"name":"a","type":["null","long"],"default":null}]}'
    (block,) = v1.decode_log_bytes(v1.encode_avro_data_block(pa.table({"a": [1, None]}), instant_time=T1, schema_json=text))
    assert block.header["SCHEMA"] == text
    assert _records(block).column("a").to_pylist() == [1, None]


def test_writer_casts_safely_and_refuses_mismatches() -> None:
    schema = A.arrow_to_avro_schema(
        pa.schema([pa.field("a", pa.int32(), nullable=False), pa.field("t", pa.timestamp("us", tz="UTC"))]), name="r"
    )
    ns = pa.array([1_000], pa.timestamp("ns", tz="UTC"))
    (block,) = v1.decode_log_bytes(
        v1.encode_avro_data_block(pa.table({"t": ns, "a": pa.array([5], pa.int8())}), instant_time=T1, schema_json=schema)
    )
    assert _records(block).to_pylist() == [{"a": 5, "t": dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)}]
    with pytest.raises(SchemaError, match="'t'"):  # 1 ns would be lost
        v1.encode_avro_records(pa.table({"a": [1], "t": pa.array([1], pa.timestamp("ns", tz="UTC"))}), schema)
    with pytest.raises(SchemaError, match="required"):
        v1.encode_avro_records(pa.table({"a": pa.array([None], pa.int32()), "t": ns}), schema)
    with pytest.raises(SchemaError, match="missing"):
        v1.encode_avro_records(pa.table({"a": [1]}), schema)
    with pytest.raises(InputError):
        v1.encode_avro_data_block(pa.table({"a": [1]}), instant_time=T1)  # neither schema nor table name


def test_parquet_data_block_round_trip() -> None:
    table = _sample_table()
    raw = v1.encode_parquet_data_block(table, instant_time=T1, table_name="t")
    (block,) = v1.decode_log_bytes(raw)
    assert block.block_type == BlockType.PARQUET_DATA
    assert _records(block).select(table.column_names).cast(table.schema).equals(table)


@pytest.mark.parametrize(
    ("values", "arrow_type"),
    [
        (pa.array([True, None]), pa.bool_()),
        (pa.array([0, 7], pa.int32()), pa.int32()),
        (pa.array([2**40, None], pa.int64()), pa.int64()),
        (pa.array([1.5, None], pa.float32()), pa.float32()),
        (pa.array([29.1, -0.0], pa.float64()), pa.float64()),
        (pa.array([b"\x00", None]), pa.binary()),
        (pa.array(["b", "a"]), pa.string()),
        (pa.array([dt.date(2024, 2, 29), None]), pa.date32()),
        (pa.array([Decimal("1.5"), Decimal("-2")], pa.decimal128(10, 2)), pa.decimal128(30, 15)),
        (pa.array([dt.time(12, 0, 0, 1), None], pa.time64("us")), pa.time64("us")),
        (pa.array([5, None], pa.timestamp("us", tz="UTC")), pa.timestamp("us", tz="UTC")),
    ],
)
def test_delete_round_trip_per_wrapper(values: pa.Array, arrow_type: pa.DataType) -> None:
    keys = _keys("k1", "k2", ordering_val=values)
    (block,) = v1.decode_log_bytes(v1.encode_delete_block(keys, instant_time=T1))
    assert block.is_delete and block.content_version == 3
    got = _records(block)
    assert got.column_names == ["record_key", "partition_path", "ordering_val"]
    assert got.column("record_key").to_pylist() == ["k1", "k2"]
    assert got.schema.field("ordering_val").type == arrow_type
    assert got.column("ordering_val").to_pylist() == values.cast(arrow_type).to_pylist()


def test_delete_defaults_follow_spark() -> None:
    # no ordering_val column -> IntWrapper(0); no partition_path -> ""
    content = v1.encode_delete_records(pa.table({"record_key": ["a"]}))
    assert content[8:] == b"\x02" + b"\x02\x02a" + b"\x02\x00" + b"\x04\x00" + b"\x00"
    table, _ = v1.decode_delete_records(content)
    assert table.to_pylist() == [{"record_key": "a", "partition_path": "", "ordering_val": 0}]
    assert table.schema.field("ordering_val").type == pa.int32()
    empty, _ = v1.decode_delete_records(v1.encode_delete_records(pa.table({"record_key": pa.array([], pa.string())})))
    assert empty.num_rows == 0 and empty.column_names == ["record_key", "partition_path", "ordering_val"]


def test_delete_writer_refuses_bad_input() -> None:
    with pytest.raises(SchemaError):
        v1.encode_delete_records(pa.table({"key": ["a"]}))
    with pytest.raises(SchemaError):
        v1.encode_delete_records(pa.table({"record_key": ["a", None]}))
    with pytest.raises(UnsupportedFeatureError):
        v1.encode_delete_records(pa.table({"record_key": ["a"], "ordering_val": pa.array([[1]])}))


def _delete_payload(orderings: list[tuple[str, Mapping[str, object]] | None]) -> bytes:
    """Delete content written straight with the delete schema, to craft mixes no writer makes."""
    datum = {
        "deleteRecordList": [
            {"recordKey": f"k{i}", "partitionPath": None, "orderingVal": o} for i, o in enumerate(orderings)
        ]
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, v1.deletes._DELETE_SCHEMA, datum)
    return struct.pack(">ii", 3, buf.tell()) + buf.getvalue()


def _w(name: str, value: object) -> tuple[str, dict[str, object]]:
    return (f"org.apache.hudi.avro.model.{name}", {"value": value})


def test_mixed_ordering_values() -> None:
    # Int(0) sentinel next to Longs: the sentinel becomes null, the rest stay longs
    table, _ = v1.decode_delete_records(_delete_payload([_w("IntWrapper", 0), _w("LongWrapper", 5), None]))
    assert table.schema.field("ordering_val").type == pa.int64()
    assert table.column("ordering_val").to_pylist() == [None, 5, None]
    assert table.column("partition_path").to_pylist() == [None, None, None]
    # int and long widen; float and double widen
    table, _ = v1.decode_delete_records(_delete_payload([_w("IntWrapper", 3), _w("LongWrapper", 5)]))
    assert table.column("ordering_val").to_pylist() == [3, 5]
    table, _ = v1.decode_delete_records(_delete_payload([_w("FloatWrapper", 0.5), _w("DoubleWrapper", 0.25)]))
    assert table.schema.field("ordering_val").type == pa.float64()
    # anything else mixed: strings
    table, _ = v1.decode_delete_records(
        _delete_payload([_w("StringWrapper", "x"), _w("IntWrapper", 3), _w("DateWrapper", 1), _w("BytesWrapper", b"\x01")])
    )
    assert table.column("ordering_val").to_pylist() == ["x", "3", "1970-01-02", "01"]


def test_array_wrapper_is_read_as_json_text() -> None:
    array = (
        "org.apache.hudi.avro.model.ArrayWrapper",
        {"wrappedValues": [_w("LongWrapper", 7), None, _w("StringWrapper", "b")]},
    )
    table, _ = v1.decode_delete_records(_delete_payload([array]))
    assert table.column("ordering_val").to_pylist() == ['[7, null, "b"]']


def test_commit_time_ordering_mask() -> None:
    ints = pa.table({"record_key": ["a", "b", "c"], "ordering_val": pa.array([0, 5, None], pa.int32())})
    assert v1.commit_time_ordering_mask(ints).to_pylist() == [True, False, True]
    longs = pa.table({"record_key": ["a", "b"], "ordering_val": pa.array([0, None], pa.int64())})
    assert v1.commit_time_ordering_mask(longs).to_pylist() == [False, True]


# --------------------------------------------------------------------------------------
# several blocks, rollbacks
# --------------------------------------------------------------------------------------


def test_several_blocks_per_file() -> None:
    data, parts = _three_block_file()
    blocks = v1.decode_log_bytes(data)
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND]
    assert [b.offset for b in blocks] == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert [b.length for b in blocks] == [len(p) for p in parts]
    assert blocks[2].is_rollback and blocks[2].target_instant_time == T2 and blocks[2].records is None


def _blocks_for(*spec: tuple[str, str]) -> list[v1.LogBlock]:
    """('data'|'delete'|'rollback'|'corrupt', instant) -> decoded blocks."""
    raw = []
    for kind, instant in spec:
        if kind == "data":
            raw.append(_data_block(pa.table({"id": [instant]}), instant))
        elif kind == "delete":
            raw.append(v1.encode_delete_block(_keys(instant), instant_time=instant))
        elif kind == "rollback":
            raw.append(v1.encode_command_block(instant_time="20990101000000000", target_instant_time=instant))
        elif kind == "corrupt":
            raw.append(_data_block(pa.table({"id": [instant]}), instant)[:-3] + b"xx")
    return v1.decode_log_bytes(b"".join(raw))


def test_rollback_removes_earlier_blocks_of_its_instant() -> None:
    blocks = _blocks_for(
        ("data", T1), ("data", T2), ("corrupt", T2), ("delete", T2), ("rollback", T2), ("data", T2), ("rollback", T3)
    )
    kept = v1.effective_blocks(blocks)
    assert [(b.block_type, b.instant_time) for b in kept] == [(BlockType.AVRO_DATA, T1), (BlockType.AVRO_DATA, T2)]
    assert kept[1] is blocks[-2]  # the block written after the rollback stays


def test_rollback_spans_files_and_unknown_commands_raise() -> None:
    first = _blocks_for(("data", T1), ("data", T2))
    second = _blocks_for(("rollback", T1))
    assert [b.instant_time for b in v1.effective_blocks(first + second)] == [T2]
    odd = v1.decode_log_bytes(
        v1.encode_block(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: T3, HeaderKey.COMMAND_BLOCK_TYPE: "1"})
    )
    with pytest.raises(UnsupportedFeatureError):
        v1.effective_blocks(odd)


# --------------------------------------------------------------------------------------
# corruption
# --------------------------------------------------------------------------------------


def _assert_covers(blocks: list[v1.LogBlock], size: int) -> None:
    pos = 0
    for b in blocks:
        assert b.offset == pos and b.length > 0
        pos += b.length
    assert pos == size


def test_every_truncation_of_the_last_block() -> None:
    data, parts = _three_block_file()
    good = len(parts[0]) + len(parts[1])
    for cut in range(good + 1, len(data)):
        blocks = v1.decode_log_bytes(data[:cut])
        _assert_covers(blocks, cut)
        assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.DELETE, BlockType.CORRUPT]
        assert _records(blocks[0]).equals(_sample_table())


def test_partial_block_followed_by_good_block() -> None:
    """A crashed writer's torn block, then a later append: skip to the next magic."""
    _data, parts = _three_block_file()
    torn = parts[0][: len(parts[0]) // 2]
    blocks = v1.decode_log_bytes(torn + parts[1] + parts[2])
    _assert_covers(blocks, len(torn) + len(parts[1]) + len(parts[2]))
    assert [b.block_type for b in blocks if not b.is_corrupt] == [BlockType.DELETE, BlockType.COMMAND]
    assert blocks[-2].offset == len(torn)
    assert "runs past" in blocks[0].detail or "total block length" in blocks[0].detail


def test_magic_inside_a_torn_block_never_yields_rows() -> None:
    """A value holding b"#HUDI#" inside a torn block is a false start: Hudi and lsm_lab scan
    to it, find no valid frame there either, and skip on; the skipped bytes come back
    as CORRUPT ranges."""
    _, parts = _three_block_file()
    at = parts[0].index(b"#HUDI#", 1)
    torn = parts[0][: at + 20]
    blocks = v1.decode_log_bytes(torn + parts[1])
    assert [(b.block_type, b.offset) for b in blocks] == [
        (BlockType.CORRUPT, 0),
        (BlockType.CORRUPT, at),
        (BlockType.DELETE, len(torn)),
    ]


def _patch(data: bytes, offset: int, raw: bytes) -> bytes:
    return data[:offset] + raw + data[offset + len(raw) :]


@pytest.mark.parametrize(
    ("where", "raw", "reason"),
    [
        (6, struct.pack(">q", 10), "smaller than the smallest"),
        (6, struct.pack(">q", -1), "smaller than the smallest"),
        (6, struct.pack(">q", 2**40), "runs past"),
        ("trailer", struct.pack(">q", 12345), "total block length"),
        (0, b"#HUDX#", "no #HUDI# magic"),
    ],
)
def test_bad_length_fields_make_a_corrupt_block(where: object, raw: bytes, reason: str) -> None:
    data, parts = _three_block_file()
    offset = len(parts[0]) - 8 if where == "trailer" else where
    assert isinstance(offset, int)
    blocks = v1.decode_log_bytes(_patch(data, offset, raw))
    _assert_covers(blocks, len(data))
    assert blocks[0].block_type == BlockType.CORRUPT and reason in blocks[0].detail
    # the sample's "#HUDI#" inside a value may cut the skipped range in two; never rows
    assert [b.block_type for b in blocks if not b.is_corrupt] == [BlockType.DELETE, BlockType.COMMAND]
    assert blocks[-2].offset == len(parts[0])


def test_content_length_out_of_bounds_skips_exactly_the_frame() -> None:
    data, parts = _three_block_file()
    delete = v1.decode_log_bytes(parts[1])[0]
    assert delete.instant_time is not None
    header_len = len(v1.writer._encode_metadata({HeaderKey.INSTANT_TIME: delete.instant_time}))
    at = len(parts[0]) + 22 + header_len
    blocks = v1.decode_log_bytes(_patch(data, at, struct.pack(">q", 10**6)))
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.CORRUPT, BlockType.COMMAND]
    assert (blocks[1].offset, blocks[1].length) == (len(parts[0]), len(parts[1]))
    assert "content length" in blocks[1].detail


def test_garbage_before_first_block_and_short_tail() -> None:
    _, parts = _three_block_file()
    blocks = v1.decode_log_bytes(b"junk" + parts[1] + b"#HU")
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.DELETE, BlockType.CORRUPT]
    assert blocks[0].length == 4 and blocks[2].length == 3


def test_garbage_right_after_a_block_distrusts_it_like_hudi() -> None:
    _, parts = _three_block_file()
    blocks = v1.decode_log_bytes(parts[1] + b"garbage!" + parts[2])
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.COMMAND]
    assert "no #HUDI# magic right after" in blocks[0].detail


def test_undecodable_content_in_a_sound_frame_raises() -> None:
    block = v1.encode_block(
        BlockType.AVRO_DATA,
        {HeaderKey.INSTANT_TIME: T1, HeaderKey.SCHEMA: '{"type":"record","name":"r","fields":[{"name":"a","type":"string"}]}'},
        struct.pack(">ii", 3, 1) + struct.pack(">i", 3) + b"\x7f\x00\x00",
    )
    with pytest.raises(CorruptFileError, match="offset 0"):
        v1.decode_log_bytes(block, source="x.log")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_single_byte_change_is_contained(data: st.DataObject) -> None:
    """Whatever byte changes, the reader covers the file and fails only with typed errors;
    blocks whose bytes were not touched come back exactly."""
    raw, _parts = _three_block_file()
    at = data.draw(st.integers(0, len(raw) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != raw[at]))
    changed = raw[:at] + bytes([value]) + raw[at + 1 :]
    try:
        blocks = v1.decode_log_bytes(changed)
    except (CorruptFileError, UnsupportedFeatureError):
        return
    _assert_covers(blocks, len(raw))
    original = v1.decode_log_bytes(raw)
    for b in blocks:
        untouched = not (b.offset <= at < b.offset + b.length)
        same = [o for o in original if (o.offset, o.length) == (b.offset, b.length)]
        if untouched and b.block_type != BlockType.CORRUPT:
            assert same and same[0].block_type == b.block_type
            if b.records is not None:
                assert b.records.equals(same[0].records)


def test_unsupported_blocks_and_versions() -> None:
    hfile = v1.encode_block(BlockType.HFILE, {HeaderKey.INSTANT_TIME: T1}, b"DATABLK*")
    with pytest.raises(CorruptFileError, match=r"x\.log: HFILE block at offset 0: .*not a readable HFile"):
        v1.decode_log_bytes(hfile, source="x.log")
    assert v1.decode_log_bytes(hfile, decode=False)[0].block_type == BlockType.HFILE
    kryo = v1.encode_block(BlockType.DELETE, {HeaderKey.INSTANT_TIME: T1}, struct.pack(">ii", 2, 1) + b"\x00")
    with pytest.raises(UnsupportedFeatureError, match="Kryo"):
        v1.decode_log_bytes(kryo)
    future = _patch(hfile, 14, struct.pack(">i", 2))
    with pytest.raises(UnsupportedFeatureError, match="format version 2"):
        v1.decode_log_bytes(future)
    unknown_type = _patch(hfile, 18, struct.pack(">i", 9))
    with pytest.raises(UnsupportedFeatureError, match="unknown block type 9"):
        v1.decode_log_bytes(unknown_type)


def test_iter_blocks_streams(tmp_path: Path) -> None:
    """Blocks before a bad one are yielded before the error."""
    path = tmp_path / "f.log"
    hfile = v1.encode_block(BlockType.HFILE, {HeaderKey.INSTANT_TIME: T2}, b"DATABLK*")
    path.write_bytes(_data_block(pa.table({"id": ["a"]})) + hfile)
    it = v1.iter_blocks(path)
    assert next(it).block_type == BlockType.AVRO_DATA
    with pytest.raises(CorruptFileError, match=str(path)):
        next(it)


def test_footer_and_unknown_header_keys_survive() -> None:
    header: dict[HeaderKey | int | str, str] = {HeaderKey.INSTANT_TIME: T1, 42: "x", "IS_PARTIAL": "true"}
    raw = v1.encode_block(
        BlockType.COMMAND,
        header,
        footer={HeaderKey.BLOCK_IDENTIFIER: "0,1"},
    )
    (block,) = v1.decode_log_bytes(raw)
    assert block.header == {"INSTANT_TIME": T1, "UNKNOWN_42": "x", "IS_PARTIAL": "true"}
    assert block.footer == {"BLOCK_IDENTIFIER": "0,1"}
    assert v1.encode_block(BlockType.COMMAND, block.header, footer=block.footer) == raw


# --------------------------------------------------------------------------------------
# writing files, names, dumps
# --------------------------------------------------------------------------------------


def test_write_log_file_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / ".fg_20250101000000001.log.1_0-1-1"
    block = v1.encode_command_block(instant_time=T2, target_instant_time=T1)
    assert v1.write_log_file(path, [block, block]) == 2 * len(block)
    with pytest.raises(ConflictError):
        v1.write_log_file(path, [block])
    with pytest.raises(InputError):
        v1.write_log_file(tmp_path / "other", [])
    with pytest.raises(InputError):
        v1.write_log_file(tmp_path / "other", [b"not a block"])
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temp files left
    assert path.read_bytes() == block + block


@pytest.mark.parametrize(
    ("name", "parts"),
    [
        (".ff32ab89-5ad0-4968-83b4-89a34c95d32f-0_20250316025816068.log.1_0-54-122",
         ("ff32ab89-5ad0-4968-83b4-89a34c95d32f-0", "20250316025816068", 1, "0-54-122", "data")),
        (".files-0000-0_00000000000000000.log.12_10-999-2838", ("files-0000-0", "00000000000000000", 12, "10-999-2838", "data")),
        (".a_b_20250101000000.log.2", ("a_b", "20250101000000", 2, "", "data")),
        (".fg_20250101000000001.log.3_1-2-3.cdc", ("fg", "20250101000000001", 3, "1-2-3", "cdc")),
    ],
)
def test_parse_log_file_name(name: str, parts: tuple[str, str, int, str, str]) -> None:
    """v1 log names are parsed by the one file-name grammar (format/naming.py)."""
    parsed = naming.parse(name)
    assert parsed is not None and parsed.log_format == 1 and parsed.is_log
    assert (parsed.file_id, parsed.instant, parsed.version, parsed.write_token, parsed.content) == parts
    assert parsed.name == name


@pytest.mark.parametrize(
    "name",
    ["fg_20250101000000.log.1_0-1-2", ".fg_20250101000000.log._0-1-2", ".fg_20250101000000.parquet",
     "fg_0-1-2_2025_1.parquet", ".fg_20250101000000.log.1_0-1", ".fg_2025.log.1_0-1-2"],
)
def test_not_log_file_names(name: str) -> None:
    assert not _is_v1_log(name)


def test_log_file_name_checks_parts() -> None:
    assert naming.v1_log_file_name("fg-0", T1, 2, "0-12-35") == f".fg-0_{T1}.log.2_0-12-35"
    for bad in [("", T1, 1, "0-1-2"), ("a/b", T1, 1, "0-1-2"), ("fg", "2025-01", 1, "0-1-2"), ("fg", T1, 0, "0-1-2"),
                ("fg", T1, 1, "0_1_2"), (".fg", T1, 1, "0-1-2")]:
        with pytest.raises(InputError):
            naming.v1_log_file_name(*bad)


def test_dump_lists_blocks_one_per_line(tmp_path: Path) -> None:
    data, _ = _three_block_file()
    path = tmp_path / ".fg_20250101000000001.log.1_0-1-1"
    path.write_bytes(data[:-5])
    text = v1.dump_log_file(path, decode=True)
    lines = text.splitlines()
    assert lines[0] == f"{path.name} ({len(data) - 5} bytes, 3 blocks)"
    assert lines[1].split()[:5] == ["@0", f"len={len(_data_block(_sample_table()))}", "AVRO_DATA", "v1", f"instant={T1}"]
    assert "rows=2" in lines[1] and "ordering_val:int32" in lines[2]
    assert "CORRUPT" in lines[3] and "runs past" in lines[3]
    assert "0x" not in repr(v1.decode_log_bytes(data)[0])  # deterministic repr


# --------------------------------------------------------------------------------------
# real files
# --------------------------------------------------------------------------------------


def test_real_avro_data_block(real_log: Callable[[str], Path]) -> None:
    (block,) = v1.read_log_file(real_log("valid_log_avro_data"))
    assert block.block_type == BlockType.AVRO_DATA and block.content_version == 3
    assert set(block.header) == {"INSTANT_TIME", "SCHEMA"} and block.footer == {}
    assert block.instant_time == "20250316025828811"
    (row,) = _records(block).to_pylist()
    assert row["uuid"] == "334e26e9-8355-45cc-97c6-c31daf0df330" and row["fare"] == 29.1 and row["ts"] == 1695159649088
    assert row["_hoodie_commit_seqno"] == "20250316025828811_0_2"


def test_real_delete_block(real_log: Callable[[str], Path]) -> None:
    (block,) = v1.read_log_file(real_log("valid_log_delete"))
    assert block.is_delete and block.instant_time == "20250618054714114"
    assert list(block.header) == ["SCHEMA", "INSTANT_TIME"]  # Hudi's hash-map order
    assert _records(block).schema.field("ordering_val").type == pa.int32()
    assert _records(block).column("ordering_val").to_pylist() == [0, 0, 0]  # IntWrapper(0): "no ordering value"
    assert set(_records(block).column("partition_path").to_pylist()) == {"city=san_francisco"}
    assert v1.commit_time_ordering_mask(block.records).to_pylist() == [True] * 3


def test_real_parquet_data_block(real_log: Callable[[str], Path]) -> None:
    (block,) = v1.read_log_file(real_log("valid_log_parquet_data"))
    assert block.block_type == BlockType.PARQUET_DATA and block.num_rows == 1
    assert _records(block).column("rider").to_pylist() == ["rider-A"]


def test_real_rollback_block(real_log: Callable[[str], Path]) -> None:
    path = real_log("valid_log_rollback")
    (block,) = v1.read_log_file(path)
    assert block.is_rollback and block.records is None
    assert (block.instant_time, block.target_instant_time) == ("20250126040936578", "20250126040826878")
    parsed = naming.parse(path.name)
    assert parsed is not None and parsed.version == 2  # a rollback gets its own log file version


def test_real_blocks_re_encode_byte_for_byte(real_log: Callable[[str], Path], tables: Path) -> None:
    """Decode every real Avro data, delete and command block, encode it again (same header
    order), and get the very same bytes."""
    files = [real_log(k) for k in ("valid_log_avro_data", "valid_log_delete", "valid_log_rollback")]
    files += _table_logs(tables, metadata=False) + _table_logs(tables, metadata=True)
    checked = 0
    for f in files:
        data = f.read_bytes()
        for b in v1.read_log_file(f, decode=False):
            if b.block_type not in (BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND):
                continue
            (decoded,) = list(v1.decode_log_bytes(data[b.offset : b.offset + b.length]))
            if b.block_type == BlockType.AVRO_DATA:
                content = v1.encode_avro_records(decoded.records, b.header["SCHEMA"])
            elif b.block_type == BlockType.DELETE:
                content = v1.encode_delete_records(decoded.records)
            else:
                content = b""
            again = v1.encode_block(b.block_type, b.header, content, b.footer)
            assert again == data[b.offset : b.offset + b.length], f"{f.name} @{b.offset}"
            checked += 1
    assert checked >= 40


def test_real_table_logs_decode_and_hfile_blocks_are_cells(tables: Path) -> None:
    data_logs = _table_logs(tables, metadata=False)
    assert data_logs
    for f in data_logs:
        for b in v1.read_log_file(f):
            assert b.block_type in (BlockType.AVRO_DATA, BlockType.DELETE, BlockType.PARQUET_DATA)
            assert b.records is not None and b.num_rows >= 1
    hfile_logs = [
        f
        for f in _table_logs(tables, metadata=True)
        if any(b.block_type == BlockType.HFILE for b in v1.read_log_file(f, decode=False))
    ]
    assert hfile_logs
    cells = [b.records for b in v1.read_log_file(hfile_logs[0]) if b.block_type == BlockType.HFILE]
    assert cells and all(c is not None and c.column_names == ["key", "value"] and c.num_rows for c in cells)
    assert len(hfile_logs) >= 30  # the metadata table's files, record index, ... partitions


def test_real_file_truncated_and_concatenated(real_log: Callable[[str], Path], tmp_path: Path) -> None:
    avro = real_log("valid_log_avro_data").read_bytes()
    delete = real_log("valid_log_delete").read_bytes()
    rollback = real_log("valid_log_rollback").read_bytes()
    for cut in (7, 20, len(avro) // 2, len(avro) - 1):
        blocks = v1.decode_log_bytes(delete + avro[:cut])
        assert [b.block_type for b in blocks] == [BlockType.DELETE, BlockType.CORRUPT]
        _assert_covers(blocks, len(delete) + cut)
    blocks = v1.decode_log_bytes(avro[:300] + delete + avro + rollback)
    assert [b.block_type for b in blocks] == [BlockType.CORRUPT, BlockType.DELETE, BlockType.AVRO_DATA, BlockType.COMMAND]
    undo = v1.encode_command_block(instant_time="20250316025900000", target_instant_time="20250316025828811")
    kept = v1.effective_blocks(v1.decode_log_bytes(delete + avro + undo))
    assert [(b.block_type, b.instant_time) for b in kept] == [(BlockType.DELETE, "20250618054714114")]


# --------------------------------------------------------------------------------------
# hudi-rs reads what lsm_lab writes
# --------------------------------------------------------------------------------------

_V8 = "qs_mor_avro_v8_trips_8i3u1d"
_LIVE_LOG = "20251220210130911"  # sao_paulo's log after the last compaction: one update
_KEY = "7a84095f-737f-40bc-b62f-6b69664712d2"


def _hudi_snapshot(base: Path) -> dict[str, tuple[Any, Any]]:
    hudi = pytest.importorskip("hudi")
    batches = hudi.HudiTableBuilder.from_base_uri(str(base)).build().read()
    table = pa.Table.from_batches(batches)
    return {r["uuid"]: (r["fare"], r["ts"]) for r in table.select(["uuid", "fare", "ts"]).to_pylist()}


@pytest.fixture()
def v8_copy(tables: Path, tmp_path: Path) -> tuple[Path, Path, v1.LogBlock]:
    pytest.importorskip("hudi")
    base = tmp_path / "t"
    shutil.copytree(tables / _V8 / "v8_trips_8i3u1d", base)
    (log,) = (base / "city=sao_paulo").glob(f".*_{_LIVE_LOG}.log.*")
    (block,) = v1.read_log_file(log)
    log.unlink()
    return base, log, block


def _with_fare(block: v1.LogBlock, fare: float) -> pa.Table:
    t = _records(block)
    return t.set_column(t.schema.get_field_index("fare"), "fare", pa.array([fare]))


def test_hudi_rs_reads_lsm_lab_blocks(v8_copy: tuple[Path, Path, v1.LogBlock]) -> None:
    base, log, block = v8_copy
    schema = block.header["SCHEMA"]
    undone = "20251220210130999"
    v1.write_log_file(
        log,
        [
            v1.encode_avro_data_block(_with_fare(block, 555.0), instant_time=undone, schema_json=schema),
            v1.encode_command_block(instant_time="20251220210131000", target_instant_time=undone),
            # schema derived from Arrow, not copied: must read the same
            v1.encode_avro_data_block(_with_fare(block, 123.45), instant_time=_LIVE_LOG, table_name="v8_trips_8i3u1d"),
            v1.encode_avro_data_block(_with_fare(block, 9.0), instant_time=_LIVE_LOG, schema_json=schema)[:-20],
        ],
    )
    ours = v1.effective_blocks(v1.read_log_file(log))
    assert [_records(b).column("fare")[0].as_py() for b in ours] == [123.45]
    assert _hudi_snapshot(base)[_KEY][0] == 123.45


@pytest.mark.parametrize(
    ("ordering", "deleted"),
    [
        (None, True),  # no column: IntWrapper(0), commit-time ordering
        (pa.array([None], pa.int64()), True),  # null: commit-time ordering
        (pa.array([2**60], pa.int64()), True),  # event time later than the record's ts
        (pa.array([5], pa.int64()), False),  # event time earlier: the record stays
    ],
)
def test_hudi_rs_applies_lsm_lab_deletes(v8_copy: tuple[Path, Path, v1.LogBlock], ordering: pa.Array | None, deleted: bool) -> None:
    base, log, block = v8_copy
    keys = {"record_key": [_KEY], "partition_path": ["city=sao_paulo"]}
    if ordering is not None:
        keys["ordering_val"] = ordering
    v1.write_log_file(
        log,
        [
            v1.encode_avro_data_block(_with_fare(block, 1.0), instant_time=_LIVE_LOG, schema_json=block.header["SCHEMA"]),
            v1.encode_delete_block(pa.table(keys), instant_time=_LIVE_LOG, schema_json=block.header["SCHEMA"]),
        ],
    )
    assert (_KEY not in _hudi_snapshot(base)) == deleted
