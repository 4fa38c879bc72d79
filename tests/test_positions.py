"""RECORD_POSITIONS: upstream's position list, the portable Roaring64 codec, writers, the position-based merge."""

from __future__ import annotations

import base64
import itertools
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from localpath import local

import lsm_lab
from lsm_lab.errors import CorruptFileError, InputError
from lsm_lab.filegroup import posmerge
from lsm_lab.filegroup import read as reader
from lsm_lab.format import log_v2 as v2
from lsm_lab.format import naming, positions
from lsm_lab.format.log_v1 import blocks
from lsm_lab.format.log_v1 import writer as v1writer
from lsm_lab.storage import TablePath


# --------------------------------------------------------------------------- the codec
def _portable32(values: list[int]) -> bytes:
    """RoaringFormatSpec's portable 32-bit layout for array containers only (no runs), written by hand."""
    by_key: dict[int, list[int]] = {}
    for v in sorted(values):
        by_key.setdefault(v >> 16, []).append(v & 0xFFFF)
    out = struct.pack("<II", 12346, len(by_key))
    for key, lows in by_key.items():
        out += struct.pack("<HH", key, len(lows) - 1)
    offset = len(out) + 4 * len(by_key)
    for lows in by_key.values():
        out += struct.pack("<I", offset)
        offset += 2 * len(lows)
    for lows in by_key.values():
        out += struct.pack(f"<{len(lows)}H", *lows)
    return out


def _portable64(values: list[int]) -> bytes:
    """The 64-bit extension: u64 count, then per high 32 bits a u32 key and a portable 32-bit bitmap (LE)."""
    by_high: dict[int, list[int]] = {}
    for v in sorted(values):
        by_high.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    out = struct.pack("<Q", len(by_high))
    for high, lows in by_high.items():
        out += struct.pack("<I", high) + _portable32(lows)
    return out


@pytest.mark.parametrize("values", [[1, 5], [0, 7, 14, 21], [1, 5, 1 << 33, (1 << 33) + 70_000], [3]])
def test_bytes_follow_the_portable_64_bit_layout(values: list[int]) -> None:
    text = positions.encode_positions(np.array(values))
    assert base64.b64decode(text) == _portable64(values)  # Java's serializePortable writes the same bytes
    assert positions.decode_positions(text).tolist() == sorted(values)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.integers(0, (1 << 40)), max_size=300))
def test_round_trip(values: set[int]) -> None:
    assert positions.decode_positions(positions.encode_positions(np.array(sorted(values), dtype=np.int64))).tolist() \
        == sorted(values)


def test_bad_values_are_typed_errors() -> None:
    with pytest.raises(CorruptFileError, match="RECORD_POSITIONS"):
        positions.decode_positions("not base64!")
    with pytest.raises(CorruptFileError, match="RECORD_POSITIONS"):
        positions.decode_positions(base64.b64encode(b"\x05\x00\x00").decode())
    with pytest.raises(InputError, match="negative"):
        positions.encode_positions(np.array([-1]))
    header = positions.positions_header(np.array([1, 2]), "20260101000000000")
    assert positions.valid_positions(header, "20260101000000000", 2) is not None
    assert positions.valid_positions(header, "20260101000000001", 2) is None  # another base: merge by key
    assert positions.valid_positions(header, "20260101000000000", 3) is None  # not one per record


@pytest.mark.parametrize("form", ["list", "roaring"])
def test_v1_block_headers_carry_and_decode_positions(tmp_path: Path, form: Literal["list", "roaring"]) -> None:
    """v1 headers carry Roaring64 (upstream's `encodePositions` for inline block headers); readers take either."""
    header = positions.positions_header(np.array([2, 9, 40]), "20260101000000000", form=form)
    if form == "roaring":
        assert base64.b64decode(header[positions.RECORD_POSITIONS]) == _portable64([2, 9, 40])
    block = v1writer.encode_delete_block(
        pa.table({"record_key": ["a", "b", "c"], "partition_path": ["", "", ""]}),
        instant_time="20260101000000500",
        extra_header={blocks.HeaderKey.RECORD_POSITIONS: header[positions.RECORD_POSITIONS],
                      blocks.HeaderKey.BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS: header[positions.BASE_FILE_INSTANT]})
    path = tmp_path / ".f1_20260101000000000.log.1_0-0-0"
    v1writer.write_log_file(path, [block])
    read, = blocks.read_log_file(path)
    valid = positions.valid_positions(read.header, "20260101000000000", 3)
    assert valid is not None and valid.tolist() == [2, 9, 40]


# --------------------------------------------------------------------------- writers and the merge
NATIVE_LOGS = {"lsm_lab.log.format.version": "2"}  # (a version 9 table of the default layout writes v1 logs else)


def _table(tmp_path: Path, **kw: Any) -> lsm_lab.Table:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1, properties=NATIVE_LOGS, **kw)
    t.insert([{"id": f"k{j:03d}", "v": j} for j in range(60)])
    return t


def _logs(t: lsm_lab.Table, file_id: str | None = None) -> list[dict[str, str]]:
    fs = next(s for s in t.latest_slices() if file_id in (None, s.file_id))
    return [v2.read_log_header(f.path) for f in fs.log_files]


@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_updates_and_deletes_carry_positions_inserts_do_not(tmp_path: Path, layout: str) -> None:
    t = _table(tmp_path, layout=layout)
    base = t.latest_slices()[0]
    t.upsert([{"id": f"k{j:03d}", "v": -j} for j in (50, 3, 17)])       # updates, out of order
    t.delete(["k004", "k059"])
    t.upsert([{"id": "k001", "v": 1}, {"id": "new", "v": 2}])  # bucket index: insert + update in one log
    h1, h2, h3 = _logs(t, base.file_id)
    assert positions.decode_position_list(h1[positions.RECORD_POSITIONS]).tolist() == [3, 17, 50]
    assert h1[positions.BASE_FILE_INSTANT] == base.base_instant
    assert positions.decode_position_list(h2[positions.RECORD_POSITIONS]).tolist() == [4, 59]
    if layout == "lsm_tree":
        assert positions.RECORD_POSITIONS not in h3  # "new" is in no base row: the block carries no positions
    else:  # key-lookup index: "new" went to a new file group, the update alone to this log
        assert positions.decode_position_list(h3[positions.RECORD_POSITIONS]).tolist() == [1]
    log1 = next(s for s in t.latest_slices() if s.file_id == base.file_id).log_files[0]  # rows in position order
    assert pq.read_table(log1.path).column("id").to_pylist() == ["k003", "k017", "k050"]


def test_positions_off_by_property(tmp_path: Path) -> None:
    t = _table(tmp_path, **{posmerge.KEY_WRITE_POSITIONS: "false"})
    t.upsert([{"id": "k001", "v": 0}])
    assert positions.RECORD_POSITIONS not in _logs(t)[0]


def _by_position_used(t: lsm_lab.Table) -> bool:
    ctx = t.read_context()
    fs = t.latest_slices()[0]
    needed = reader.needed_columns(ctx, None)
    sources, _ = reader.load_sources(ctx, fs, needed)
    return posmerge.merge_sources(ctx.spec, ctx.completion_of, ctx.read_time, fs, sources, needed) is not None


ops = st.lists(st.tuples(st.sampled_from(["upsert", "delete"]),
                         st.lists(st.integers(0, 59), min_size=1, max_size=8, unique=True)), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, layout=st.sampled_from(["lsm_tree", "default"]), version=st.sampled_from([10, 9]))
def test_position_merge_equals_key_merge_and_the_dict_model(tmp_path_factory: pytest.TempPathFactory,
                                                            ops: list[tuple[str, list[int]]], layout: str,
                                                            version: int) -> None:
    t = _table(tmp_path_factory.mktemp("p"), layout=layout, table_version=version)
    model = {f"k{j:03d}": j for j in range(60)}
    for step, (op, keys) in enumerate(ops):
        names = [f"k{j:03d}" for j in keys]
        if op == "delete":
            t.delete(names)
            for n in names:
                model.pop(n, None)
        else:
            t.upsert([{"id": n, "v": 1000 * (step + 1) + j} for n, j in zip(names, keys, strict=True)])
            model.update({n: 1000 * (step + 1) + j for n, j in zip(names, keys, strict=True)})
    # every write here updates or deletes keys of the base (re-inserting a deleted key is an update of the base)
    assert _by_position_used(t)
    ctx = t.read_context()
    fs = t.latest_slices()[0]
    by_pos = reader.read_slice(ctx, fs)
    by_key = reader.read_slice(ctx, fs, positions=False)
    assert by_pos.sort_by("_hoodie_record_key").equals(by_key.sort_by("_hoodie_record_key"))
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == model


def test_falls_back_to_key_merge(tmp_path: Path) -> None:
    t = _table(tmp_path, ordering_field=None)
    t.upsert([{"id": "k001", "v": 0}])
    assert _by_position_used(t)
    t.upsert([{"id": "brand-new", "v": 9}])   # a log without positions: the whole slice merges by key
    assert not _by_position_used(t)
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}["brand-new"] == 9
    t.compact(strategy="full")                # a new base: older positions would be stale, new logs count anew
    t.upsert([{"id": "k002", "v": -2}])
    assert _by_position_used(t)
    t2 = lsm_lab.create_table(tmp_path / "ev", name="ev", record_key="id", ordering_field="ts", num_buckets=1)
    t2.insert([{"id": "a", "ts": 1, "v": 1}, {"id": "b", "ts": 1, "v": 1}])
    t2.upsert([{"id": "a", "ts": 0, "v": 2}])   # event time: a lower ordering value loses — merged by key
    assert not _by_position_used(t2)
    assert {r["id"]: r["v"] for r in t2.read(columns=["id", "v"]).to_pylist()} == {"a": 1, "b": 1}


def test_benchmark_agrees_on_a_small_slice() -> None:
    import importlib.util  # the benchmark script is no package module

    spec = importlib.util.spec_from_file_location("positions_bench", Path(__file__).resolve().parents[1]
                                                  / "benchmarks" / "positions_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.run(3000, 3, 1)  # raises when a way differs or the slice does not merge by position
    assert out["logs"] == 3 and 0 < out["result_rows"] < 3000


def test_cached_base_keys_are_the_files_keys_in_row_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer remembers a new base's keys as written; they equal a cold read, and positions do not change."""
    t = _table(tmp_path)
    base = t.latest_slices()[0].base_file
    assert base is not None
    warm = posmerge.base_keys(base)                        # seeded by the write of the base, not read
    posmerge.forget_base_keys()
    cold = posmerge.base_keys(base)                        # read from the file (and cached again)
    assert warm.combine_chunks().equals(cold.combine_chunks())
    assert cold.to_pylist() == pq.read_table(base.path, columns=["_hoodie_record_key"]).column(0).to_pylist()
    t.upsert([{"id": f"k{j:03d}", "v": -j} for j in (42, 7)])
    posmerge.forget_base_keys()
    t.upsert([{"id": f"k{j:03d}", "v": -j} for j in (42, 7)])   # same batch, cold cache
    h1, h2 = _logs(t)
    assert h1[positions.RECORD_POSITIONS] == h2[positions.RECORD_POSITIONS]
    assert positions.decode_position_list(h2[positions.RECORD_POSITIONS]).tolist() == [7, 42]
    monkeypatch.setattr(posmerge, "BASE_KEY_CACHE_BYTES", 1)  # too small for any column: nothing is kept
    posmerge.forget_base_keys()
    posmerge.base_keys(base)
    assert not posmerge._base_keys


# --------------------------------------------------------------------------- event time: the overlay by position
def _overlaid_by_position(t: lsm_lab.Table, monkeypatch: pytest.MonkeyPatch) -> tuple[pa.Table, int]:
    """`read()` of the table, and how many slices `posmerge.overlay_by_position` merged."""
    used = []
    real = posmerge.overlay_by_position

    def spy(*args: object) -> pa.Table | None:
        out = real(*args)  # type: ignore[arg-type]
        used.append(out is not None)
        return out

    monkeypatch.setattr(posmerge, "overlay_by_position", spy)
    try:
        return t.read(), sum(used)
    finally:
        monkeypatch.setattr(posmerge, "overlay_by_position", real)


event_ops = st.lists(st.tuples(st.sampled_from(["upsert", "delete_rows", "delete_keys"]),
                               st.lists(st.tuples(st.integers(0, 39), st.one_of(st.none(), st.integers(0, 9))),
                                        min_size=1, max_size=8, unique_by=lambda kt: kt[0])),
                     min_size=1, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=event_ops, layout=st.sampled_from(["lsm_tree", "default"]))
def test_event_time_overlay_by_position_equals_the_key_merges(tmp_path_factory: pytest.TempPathFactory,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              ops: list[tuple[str, list[tuple[int, int | None]]]],
                                                              layout: str) -> None:
    """Event-time ordering: logs of updates and deletes with positions (lower, equal, higher and null ordering
    values; deletes by key and with an ordering value) give the rows and order of the merges by key."""
    t = lsm_lab.create_table(tmp_path_factory.mktemp("ev"), name="ev", record_key="id", ordering_field="ts",
                             num_buckets=1, layout=layout)
    t.insert([{"id": f"k{j:03d}", "ts": 5, "v": j} for j in range(40)])
    for step, (op, rows) in enumerate(ops):
        if op == "upsert":
            t.upsert(pa.table({"id": [f"k{j:03d}" for j, _ in rows], "ts": pa.array([ts for _, ts in rows], pa.int64()),
                               "v": [100 * (step + 1) + j for j, _ in rows]}))
        elif op == "delete_rows":
            t.delete(pa.table({"id": [f"k{j:03d}" for j, _ in rows], "ts": pa.array([ts for _, ts in rows], pa.int64())}))
        else:
            t.delete([f"k{j:03d}" for j, _ in rows])
    got, used = _overlaid_by_position(t, monkeypatch)
    fs = t.latest_slices()[0]
    ctx = t.read_context()
    has_positions = all(positions.RECORD_POSITIONS in v2.read_log_header(f.path) for f in fs.log_files)
    assert used == (1 if has_positions else 0)
    by_key = reader.read_slice(ctx, fs, positions=False).select(got.column_names)
    assert got.equals(by_key.cast(got.schema))  # same rows, same order (base order: key order when sorted)
    streamed = t.read(merge="hash")
    assert got.sort_by("id").equals(streamed.sort_by("id").cast(got.schema))


def test_event_time_overlay_by_position_keeps_the_higher_ordering_value(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    t = lsm_lab.create_table(tmp_path / "ev", name="ev", record_key="id", ordering_field="ts", num_buckets=1)
    t.insert([{"id": k, "ts": 5, "v": 0} for k in "abcde"])
    t.upsert([{"id": "a", "ts": 4, "v": 1}, {"id": "b", "ts": 6, "v": 1}, {"id": "c", "ts": 5, "v": 1}])
    t.upsert([{"id": "b", "ts": 5, "v": 2}, {"id": "d", "ts": 7, "v": 2}])
    t.delete(pa.table({"id": ["d", "e"], "ts": pa.array([6, 9], pa.int64())}))
    got, used = _overlaid_by_position(t, monkeypatch)
    assert used == 1
    assert got.select(["id", "v"]).to_pylist() == [{"id": "a", "v": 0}, {"id": "b", "v": 1}, {"id": "c", "v": 1},
                                                   {"id": "d", "v": 2}]


def test_event_time_overlay_by_position_takes_dictionary_text_with_nulls(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A few-valued text column, read dictionary-encoded from the base, with nulls in the base and in the logs,
    and values the base never held: the overlay takes its dictionary indices (the text is decoded once, for the
    output rows) and gives the rows and order of the merge by key and the values of a dict model."""
    t = lsm_lab.create_table(tmp_path / "ev", name="ev", record_key="id", ordering_field="ts", num_buckets=1)
    model = {f"k{j:03d}": (5, [None, "sf", "nyc"][j % 3]) for j in range(60)}
    t.insert([{"id": k, "ts": ts, "city": c} for k, (ts, c) in model.items()])
    for step, cities in enumerate(([None, "la", "sf", "rome"], ["paris", None])):
        rows = {f"k{j:03d}": (4 if (j + step) % 5 == 0 else 6 + step, cities[j % len(cities)])
                for j in range(step, 60, 3 + step)}
        t.upsert([{"id": k, "ts": ts, "city": c} for k, (ts, c) in rows.items()])
        model.update({k: v for k, v in rows.items() if v[0] >= model[k][0]})  # a lower ordering value loses
    t.delete(pa.table({"id": ["k001", "k002"], "ts": pa.array([9, 1], pa.int64())}))
    del model["k001"]  # k002's delete carries a lower ordering value: it loses
    encoded = []
    real = posmerge._swapped_indices

    def spy(values: pa.ChunkedArray, *args: Any) -> pa.Array:
        encoded.append(values.type)
        return real(values, *args)

    monkeypatch.setattr(posmerge, "_swapped_indices", spy)
    got, used = _overlaid_by_position(t, monkeypatch)
    assert used == 1 and pa.dictionary(pa.int32(), pa.string()) in encoded
    assert {r["id"]: (r["ts"], r["city"]) for r in got.select(["id", "ts", "city"]).to_pylist()} == model
    fs = t.latest_slices()[0]
    by_key = reader.read_slice(t.read_context(), fs, positions=False).select(got.column_names)
    assert got.equals(by_key.cast(got.schema))


@pytest.mark.parametrize("ordering", [None, "ts"])
def test_positions_that_name_other_rows_are_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        ordering: str | None) -> None:
    """A RECORD_POSITIONS that decodes fine but names other base rows (damaged, or a hostile file) must not put
    one record's values under another's key: the slice is merged by key, and the rows are the dict model's."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field=ordering, num_buckets=1)
    t.insert([{"id": f"k{j:03d}", "ts": 5, "v": j} for j in range(40)])
    t.upsert([{"id": f"k{j:03d}", "ts": 6, "v": -j} for j in (3, 17, 30)])
    t.delete(["k020"])
    model = {f"k{j:03d}": j for j in range(40)} | {f"k{j:03d}": -j for j in (3, 17, 30)}
    del model["k020"]
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} == model
    real = positions.valid_positions

    def shifted(*args: object, **kw: object) -> np.ndarray | None:
        pos = real(*args, **kw)  # type: ignore[arg-type]
        return None if pos is None else pos + 1  # still sorted, in range: rows next to the right ones

    monkeypatch.setattr(positions, "valid_positions", shifted)
    used, got = [], None
    for fn in ("overlay_by_position", "merge_sources"):
        orig = getattr(posmerge, fn)

        def record(*a: Any, _o: Any = orig, **k: Any) -> Any:
            used.append(_o(*a, **k))
            return used[-1]

        monkeypatch.setattr(posmerge, fn, record)
    got = {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}
    assert got == model
    assert used and all(u is None for u in used)  # every slice fell back to the merge by key
    monkeypatch.setattr(posmerge, "positions_name_their_keys", lambda *a: True)  # the check removed: wrong rows
    assert {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()} != model


def test_read_with_positions_off_merges_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Table.read(positions=False)`: the same rows, and neither position merge is asked."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts", num_buckets=1)
    t.insert([{"id": f"k{j:03d}", "ts": 5, "v": j} for j in range(40)])
    t.upsert([{"id": f"k{j:03d}", "ts": 6, "v": -j} for j in (3, 17, 30)])
    by_position, used = _overlaid_by_position(t, monkeypatch)
    assert used == 1
    asked: list[str] = []
    for fn in ("overlay_by_position", "merge_sources"):
        monkeypatch.setattr(posmerge, fn, lambda *a, _n=fn, **k: asked.append(_n))
    by_key = t.read(positions=False)
    assert asked == [] and by_key.equals(by_position)
    with pytest.raises(lsm_lab.LsmLabError):
        t.read(positions="no")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- native logs: upstream's position list
def _ref_encode_list(values: list[int]) -> str | None:
    """Upstream's native-log encoding, written plainly: a big-endian int32 count, then per value (in the
    order given) its unsigned LEB128 bytes, low 7 bits first, 0x80 on every byte but the last; Base64.
    Nothing (None) when a value is negative."""
    if any(v < 0 for v in values):
        return None
    out = bytearray(struct.pack(">i", len(values)))
    for v in values:
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
    return base64.b64encode(bytes(out)).decode("ascii")


def _ref_decode_list(text: str) -> list[int]:
    """The strict reading, byte by byte: ValueError on a negative count, a missing byte, a varlong wider than
    64 bits, a value that is negative as a Java long, or bytes left over."""
    raw = base64.b64decode(text, validate=True)
    if len(raw) < 4:
        raise ValueError("no count")
    (count,) = struct.unpack(">i", raw[:4])
    if count < 0:
        raise ValueError("negative count")
    at, out = 4, []
    for _ in range(count):
        value, shift = 0, 0
        while True:
            if at == len(raw):
                raise ValueError("truncated")
            if shift >= 70:
                raise ValueError("more than ten bytes")
            byte = raw[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if value >= 1 << 64:
            raise ValueError("wider than 64 bits")
        if value >= 1 << 63:
            raise ValueError("negative as a long")
        out.append(value)
    if at != len(raw):
        raise ValueError("trailing bytes")
    return out


def test_position_list_example_from_the_issue() -> None:
    assert positions.decode_position_list("AAAABwEDCw0UFxg=").tolist() == [1, 3, 11, 13, 20, 23, 24]
    assert positions.encode_position_list([1, 3, 11, 13, 20, 23, 24]) == "AAAABwEDCw0UFxg="
    assert _ref_decode_list("AAAABwEDCw0UFxg=") == [1, 3, 11, 13, 20, 23, 24]
    header = {positions.RECORD_POSITIONS: "AAAABwEDCw0UFxg=", positions.BASE_FILE_INSTANT: "20260101000000000"}
    found = positions.valid_positions(header, "20260101000000000", 7)
    assert found is not None and found.tolist() == [1, 3, 11, 13, 20, 23, 24]
    assert found.dtype == np.int64


positions_in_file_order = st.lists(st.one_of(st.integers(0, 200), st.integers(0, (1 << 63) - 1)), max_size=200)


@settings(max_examples=150, deadline=None)
@given(positions_in_file_order)
def test_position_list_matches_the_reference_both_ways(values: list[int]) -> None:
    """Unsorted, repeated, up to 2**63 - 1: the same bytes as the reference, and each decodes the other's."""
    mine = positions.encode_position_list(np.array(values, dtype=np.int64))
    ref = _ref_encode_list(values)
    assert mine is not None and mine == ref
    assert _ref_decode_list(mine) == values
    assert positions.decode_position_list(ref).tolist() == values
    assert positions.decode_any(ref).tolist() == values
    bitmap = positions.encode_positions(np.array(sorted(set(values)), dtype=np.int64))
    assert positions.decode_any(bitmap).tolist() == sorted(set(values))  # an older lsm_lab native log


@settings(max_examples=300, deadline=None)
@given(count=st.integers(-3, 12), body=st.binary(max_size=40))
def test_position_list_decoder_accepts_and_rejects_what_the_reference_does(count: int, body: bytes) -> None:
    text = base64.b64encode(struct.pack(">i", count) + body).decode("ascii")
    try:
        expected: list[int] | None = _ref_decode_list(text)
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(CorruptFileError, match="RECORD_POSITIONS"):
            positions.decode_position_list(text)
    else:
        assert positions.decode_position_list(text).tolist() == expected


def test_negative_positions_give_no_list_and_no_entries() -> None:
    assert positions.encode_position_list([3, -1, 4]) is None
    assert _ref_encode_list([3, -1, 4]) is None
    assert positions.positions_header(np.array([3, -1, 4]), "20260101000000000") == {}  # neither entry
    assert positions.encode_position_list([]) == _ref_encode_list([]) == "AAAAAA=="


@pytest.mark.parametrize(("raw", "problem"), [
    (struct.pack(">i", -1), "negative count"),
    (struct.pack(">i", 3) + b"\x01\x02", "truncated"),
    (struct.pack(">i", 2) + b"\x01\x82", "truncated"),                    # the last varlong never ends
    (struct.pack(">i", 1) + b"\x01\x02", "trailing"),
    (struct.pack(">i", 1) + b"\x01\x80", "trailing"),
    (struct.pack(">i", 0) + b"\x00", "trailing"),
    (struct.pack(">i", 1) + b"\x80" * 10 + b"\x00", "longer than 64 bits"),  # eleven bytes
    (struct.pack(">i", 1) + b"\xff" * 9 + b"\x02", "longer than 64 bits"),   # ten bytes, bit 64 set
    (struct.pack(">i", 1) + b"\xff" * 9 + b"\x01", "negative"),              # 2**64 - 1: -1 as a long
    (b"\x00\x00", "shorter than its 4-byte count"),
])
def test_malformed_position_lists_are_corrupt_files(raw: bytes, problem: str) -> None:
    text = base64.b64encode(raw).decode("ascii")
    with pytest.raises(CorruptFileError, match=problem) as err:
        positions.decode_position_list(text, path="p/f_1.log.parquet")
    assert err.value.path == "p/f_1.log.parquet"
    with pytest.raises(ValueError):
        _ref_decode_list(text)


def test_neither_form_is_a_corrupt_file() -> None:
    header = {positions.RECORD_POSITIONS: base64.b64encode(struct.pack(">i", 5) + b"\x01").decode(),
              positions.BASE_FILE_INSTANT: "20260101000000000"}
    with pytest.raises(CorruptFileError, match="neither a position list .* nor a portable Roaring64") as err:
        positions.valid_positions(header, "20260101000000000", 5, path="f.log.parquet")
    assert err.value.path == "f.log.parquet"
    with pytest.raises(CorruptFileError, match="not Base64"):
        positions.decode_position_list("not base64!")
    ten_byte_zero = base64.b64encode(struct.pack(">i", 1) + b"\x80" * 9 + b"\x00").decode()  # padded 0: valid
    assert positions.decode_position_list(ten_byte_zero).tolist() == [0] == _ref_decode_list(ten_byte_zero)


def test_a_large_position_list_round_trips() -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(0, 3_000_000, 1_000_000, dtype=np.int64)  # arrival order, repeats
    text = positions.encode_position_list(values)
    assert text is not None
    assert np.array_equal(positions.decode_position_list(text), values)
    head = positions.encode_position_list(values[:2000])
    assert head is not None and _ref_decode_list(head) == values[:2000].tolist()


def _base_rows(t: lsm_lab.Table) -> dict[str, int]:
    """Each key's row number in the (single) slice's base file."""
    base = t.latest_slices()[0].base_file
    assert base is not None
    return {k: i for i, k in enumerate(pq.read_table(base.path, columns=["_hoodie_record_key"]).column(0).to_pylist())}


def _is_delete(path: TablePath) -> bool:
    parsed = naming.parse(path.name)
    assert parsed is not None, path
    return parsed.is_delete


def _key_column(rows: pa.Table, path: TablePath) -> list[str]:
    return [str(k) for k in rows.column(v2.delete_key_column(rows.schema) if _is_delete(path)
                                        else "_hoodie_record_key").to_pylist()]


def _log_keys(path: TablePath) -> list[str]:
    return _key_column(pq.read_table(local(path)), path)


@pytest.mark.parametrize("version", [10, 9])
@pytest.mark.parametrize("layout", ["lsm_tree", "default"])
def test_native_logs_written_carry_the_list_in_file_order(tmp_path: Path, layout: str, version: int) -> None:
    """Data and delete logs written by lsm_lab: the reference decoder reads one base row per record, in the
    file's row order (and the entries' instant is the base's)."""
    t = _table(tmp_path, layout=layout, table_version=version)
    rows_of = _base_rows(t)
    base = t.latest_slices()[0]
    t.upsert([{"id": f"k{j:03d}", "v": -j} for j in (50, 3, 17, 44)])
    t.delete(["k059", "k004", "k020"])
    logs = t.latest_slices()[0].log_files
    assert len(logs) == 2 and _is_delete(logs[1].path)
    for f in logs:
        header = v2.read_log_header(f.path)
        assert header[positions.BASE_FILE_INSTANT] == base.base_instant
        assert _ref_decode_list(header[positions.RECORD_POSITIONS]) == [rows_of[k] for k in _log_keys(f.path)]


def _hook_log_writes(m: pytest.MonkeyPatch, rewrite: Callable[[pa.Table, bool], tuple[pa.Table, str]]) -> None:
    """Make every native log lsm_lab writes (within `m`) a log another writer could have written:
    `rewrite(rows, is_delete)` gives its rows (any order, repeats) and its RECORD_POSITIONS text; the file
    carries no sorted flag. The commit then records the file as written."""
    for name in ("write_data_log", "write_delete_log"):
        real: Callable[..., int] = getattr(v2, name)

        def hooked(path: object, rows: pa.Table, *, _real: Callable[..., int] = real,
                   _delete: bool = name == "write_delete_log", **kw: Any) -> int:
            assert positions.RECORD_POSITIONS in kw["extra"]  # the case under test: lsm_lab would write positions
            rows, text = rewrite(rows, _delete)
            extra = {**kw.pop("extra"), positions.RECORD_POSITIONS: text}
            kw["is_sorted"] = False
            return _real(path, rows, extra=extra, **kw)

        m.setattr(v2, name, hooked)


def _keys_of(rows: pa.Table, is_delete: bool) -> list[str]:
    return [str(k) for k in rows.column(v2.delete_key_column(rows.schema) if is_delete
                                        else "_hoodie_record_key").to_pylist()]


def _positional_read(t: lsm_lab.Table, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, object], int]:
    """`read()` as {id: v}, and how many slices either position merge merged."""
    used: list[bool] = []
    with monkeypatch.context() as m:
        for fn in ("overlay_by_position", "merge_sources"):
            orig: Callable[..., pa.Table | None] = getattr(posmerge, fn)

            def spy(*a: object, _o: Callable[..., pa.Table | None] = orig, **k: object) -> pa.Table | None:
                out = _o(*a, **k)
                used.append(out is not None)
                return out

            m.setattr(posmerge, fn, spy)
        return {str(r["id"]): r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}, sum(used)


upstream_ops = st.lists(st.tuples(st.sampled_from(["upsert", "delete"]),
                                  st.lists(st.integers(0, 29), min_size=1, max_size=6, unique=True)),
                        min_size=1, max_size=3)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=upstream_ops, ordering=st.sampled_from([None, "ts"]), version=st.sampled_from([10, 9]),
       data=st.data())
def test_upstream_style_unsorted_repeated_positions_read_as_the_dict_model(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
        ops: list[tuple[str, list[int]]], ordering: str | None, version: int, data: st.DataObject) -> None:
    """Every log written as upstream's default layout may write it: records in arrival order, some twice
    (with other values), RECORD_POSITIONS in that file order. The slice still merges by position, and the
    rows are the dict model's (the later record of a log wins: equal ordering values) and the key merge's."""
    t = lsm_lab.create_table(tmp_path_factory.mktemp("up"), name="t", record_key="id", ordering_field=ordering,
                             num_buckets=1, layout="default", table_version=version, properties=NATIVE_LOGS)
    t.insert([{"id": f"k{j:03d}", "ts": 5, "v": j} for j in range(30)])
    model: dict[str, int] = {f"k{j:03d}": j for j in range(30)}
    rows_of = _base_rows(t)
    for step, (op, keys) in enumerate(ops, start=1):
        names = [f"k{j:03d}" for j in keys]
        picks = data.draw(st.permutations(range(len(names))).flatmap(
            lambda p: st.lists(st.integers(0, len(p) - 1), max_size=4).map(lambda extra: [*p, *extra])))
        written: list[pa.Table] = []

        def rewrite(rows: pa.Table, is_delete: bool, _picks: list[int] = picks, _step: int = step,
                    _written: list[pa.Table] = written) -> tuple[pa.Table, str]:
            rows = rows.take(pa.array(_picks, pa.int64()))
            if not is_delete:
                at = rows.schema.get_field_index("v")
                rows = rows.set_column(at, "v", pa.array([1000 * _step + i for i in range(rows.num_rows)],
                                                         rows.schema.field(at).type))
            _written.append(rows)
            text = positions.encode_position_list([rows_of[k] for k in _keys_of(rows, is_delete)])
            assert text is not None
            return rows, text

        with monkeypatch.context() as m:
            _hook_log_writes(m, rewrite)
            if op == "delete":
                t.delete(names)
            else:
                t.upsert([{"id": n, "ts": 5, "v": -j} for n, j in zip(names, keys, strict=True)])
        rows, = written
        if op == "delete":
            for n in names:
                model.pop(n, None)
        else:
            for k, v in zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(), strict=True):
                model[str(k)] = v
    got, used = _positional_read(t, monkeypatch)
    assert used == 1  # merged by position, not sent back to the key merge
    assert got == model
    fs = t.latest_slices()[0]
    for f in fs.log_files:  # as written: file order, one position per record
        assert _ref_decode_list(v2.read_log_header(f.path)[positions.RECORD_POSITIONS]) \
            == [rows_of[k] for k in _keys_of(pq.read_table(local(f.path)), _is_delete(f.path))]
    by_key = reader.read_slice(t.read_context(), fs, positions=False)
    by_pos = reader.read_slice(t.read_context(), fs)
    assert by_pos.sort_by("_hoodie_record_key").equals(by_key.sort_by("_hoodie_record_key"))


def test_upstream_style_positions_with_event_time_ordering(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unsorted, repeated positions under event-time ordering: the fold decides as it does by key."""
    t = lsm_lab.create_table(tmp_path / "ev", name="ev", record_key="id", ordering_field="ts", num_buckets=1,
                             layout="default")
    t.insert([{"id": k, "ts": 5, "v": 0} for k in "abcdef"])
    rows_of = _base_rows(t)

    def rewrite(rows: pa.Table, is_delete: bool) -> tuple[pa.Table, str]:
        assert not is_delete and rows.column("id").to_pylist() == ["b", "d", "e"]  # in position order
        # b twice (ts 7 then 8: the second wins), e twice (ts 6 then 3: the first wins), d loses to the base
        again = rows.take(pa.array([0, 2]))
        again = again.set_column(again.schema.get_field_index("ts"), "ts", pa.array([8, 3], pa.int64()))
        again = again.set_column(again.schema.get_field_index("v"), "v", pa.array([20, 10], pa.int64()))
        rows = pa.concat_tables([rows, again]).take(pa.array([2, 0, 1, 3, 4]))  # e b d b e: arrival order
        text = positions.encode_position_list([rows_of[k] for k in _keys_of(rows, False)])
        assert text is not None and text == _ref_encode_list([4, 1, 3, 1, 4])
        return rows, text

    with monkeypatch.context() as m:
        _hook_log_writes(m, rewrite)
        t.upsert(pa.table({"id": ["e", "b", "d"], "ts": pa.array([6, 7, 4], pa.int64()), "v": [1, 2, 3]}))
    got, used = _positional_read(t, monkeypatch)
    assert used == 1
    assert got == {"a": 0, "b": 20, "c": 0, "d": 0, "e": 1, "f": 0}
    by_key = reader.read_slice(t.read_context(), t.latest_slices()[0], positions=False)
    assert {r["id"]: r["v"] for r in by_key.to_pylist()} == got


@pytest.mark.parametrize("ordering", [None, "ts"])
def test_older_roaring64_native_logs_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                ordering: str | None) -> None:
    """A native log whose RECORD_POSITIONS is a Roaring64 bitmap (lsm_lab before the list form) merges by
    position as before."""
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field=ordering, num_buckets=1)
    t.insert([{"id": f"k{j:03d}", "ts": 5, "v": j} for j in range(40)])
    rows_of = _base_rows(t)

    def as_bitmap(rows: pa.Table, is_delete: bool) -> tuple[pa.Table, str]:
        pos = [rows_of[k] for k in _keys_of(rows, is_delete)]
        assert pos == sorted(pos)  # lsm_lab's logs are in position order: the bitmap's order
        return rows, positions.encode_positions(np.array(pos))

    with monkeypatch.context() as m:
        _hook_log_writes(m, as_bitmap)
        t.upsert([{"id": f"k{j:03d}", "ts": 6, "v": -j} for j in (30, 3, 17)])
        t.delete(["k020", "k001"])
    model: dict[str, int] = {f"k{j:03d}": j for j in range(40)} | {f"k{j:03d}": -j for j in (3, 17, 30)}
    del model["k020"], model["k001"]
    for f in t.latest_slices()[0].log_files:
        text = v2.read_log_header(f.path)[positions.RECORD_POSITIONS]
        with pytest.raises(CorruptFileError):
            positions.decode_position_list(text)  # not the list form
        assert positions.decode_positions(text).tolist() == [rows_of[k] for k in _log_keys(f.path)]
    got, used = _positional_read(t, monkeypatch)
    assert used == 1 and got == model


def test_last_of_each_keeps_the_last_row_of_a_repeated_position() -> None:
    at, rows = posmerge.last_of_each(np.array([4, 1, 3, 1, 4, 9], dtype=np.int64))
    assert dict(zip(at.tolist(), rows.tolist(), strict=True)) == {1: 3, 3: 2, 4: 4, 9: 5}
    at, rows = posmerge.last_of_each(np.array([0, 2, 5], dtype=np.int64))
    assert at.tolist() == [0, 2, 5] and rows.tolist() == [0, 1, 2]


def test_unsorted_positions_past_the_base_fall_back_to_the_key_merge(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A list whose out-of-range row is not its last entry: no IndexError, the slice merges by key."""
    t = _table(tmp_path, layout="default", ordering_field=None)
    with monkeypatch.context() as m:
        _hook_log_writes(m, lambda rows, _d: (rows, _ref_encode_list([1_000, 2]) or ""))
        t.upsert([{"id": "k001", "v": -1}, {"id": "k002", "v": -2}])
    assert not _by_position_used(t)
    got = {r["id"]: r["v"] for r in t.read(columns=["id", "v"]).to_pylist()}
    assert got["k001"] == -1 and got["k002"] == -2


_SWAP_TYPES = {"string": (pa.string(), st.one_of(st.none(), st.text(max_size=6))),
               "int64": (pa.int64(), st.one_of(st.none(), st.integers(-(2**40), 2**40))),
               "list": (pa.list_(pa.int32()), st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3))),
               "struct": (pa.struct([("a", pa.string())]), st.one_of(st.none(), st.fixed_dictionaries(
                   {"a": st.one_of(st.none(), st.text(max_size=3))})))}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), kind=st.sampled_from(sorted(_SWAP_TYPES)), chunks=st.integers(1, 3))
def test_a_log_winner_takes_its_base_rows_place_in_every_column_type(data: st.DataObject, kind: str,
                                                                     chunks: int) -> None:
    """`posmerge._swapped` (Arrow's replace kernel for flat types, one gather for nested ones) against a list
    model: row `where[i]` of the base holds log row `winners[i]`, every other row is the base's; then only the rows
    `kept` stay (a gather from base and logs side by side), or all of them."""
    type_, values = _SWAP_TYPES[kind]
    base = data.draw(st.lists(values, min_size=1, max_size=30))
    logs = data.draw(st.lists(values, min_size=1, max_size=10))
    where = sorted(data.draw(st.sets(st.integers(0, len(base) - 1), min_size=1, max_size=len(base))))
    winners = data.draw(st.lists(st.integers(0, len(logs) - 1), min_size=len(where), max_size=len(where)))
    cut = sorted(data.draw(st.lists(st.integers(0, len(base)), min_size=chunks - 1, max_size=chunks - 1)))
    bounds = [0, *cut, len(base)]
    base_col = pa.chunked_array([pa.array(base[a:b], type_) for a, b in itertools.pairwise(bounds)], type_)
    kept = data.draw(st.none() | st.sets(st.integers(0, len(base) - 1)).map(sorted))  # None: no row dropped
    got = posmerge._swapped(base_col, np.array(where, dtype=np.int64), pa.chunked_array([pa.array(logs, type_)]),
                            np.array(winners, dtype=np.int64), type_,
                            None if kept is None else np.array(kept, dtype=np.int64))
    want = list(base)
    for at, w in zip(where, winners):
        want[at] = logs[w]
    assert got.type == type_ and got.to_pylist() == (want if kept is None else [want[i] for i in kept])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), chunks=st.integers(1, 3))
def test_a_log_winner_takes_its_place_in_a_dictionary_encoded_base_column(data: st.DataObject, chunks: int) -> None:
    """`posmerge._swapped` of a base column read dictionary-encoded (each chunk its own dictionary, as Parquet row
    groups give them; nulls; log values the base never held): still encoded (the caller decodes the final rows),
    and row `where[i]` holds log row `winners[i]`, every other row the base's."""
    values = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "dd", ""]))
    base = data.draw(st.lists(values, min_size=1, max_size=30))
    logs = data.draw(st.lists(st.one_of(values, st.text(max_size=3)), min_size=1, max_size=10))
    where = sorted(data.draw(st.sets(st.integers(0, len(base) - 1), min_size=1, max_size=len(base))))
    winners = data.draw(st.lists(st.integers(0, len(logs) - 1), min_size=len(where), max_size=len(where)))
    cut = sorted(data.draw(st.lists(st.integers(0, len(base)), min_size=chunks - 1, max_size=chunks - 1)))
    bounds = [0, *cut, len(base)]
    encoded = pa.dictionary(pa.int32(), pa.string())
    base_col = pa.chunked_array([pa.array(base[a:b], pa.string()).dictionary_encode()
                                 for a, b in itertools.pairwise(bounds)], encoded)
    kept = data.draw(st.none() | st.sets(st.integers(0, len(base) - 1)).map(sorted))  # None: no row dropped
    got = posmerge._swapped(base_col, np.array(where, dtype=np.int64), pa.chunked_array([pa.array(logs, pa.string())]),
                            np.array(winners, dtype=np.int64), pa.string(),
                            None if kept is None else np.array(kept, dtype=np.int64))
    want = list(base)
    for at, w in zip(where, winners):
        want[at] = logs[w]
    assert got.type == encoded and got.to_pylist() == (want if kept is None else [want[i] for i in kept])
