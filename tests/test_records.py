"""Incoming records: inputs, keys, partition paths, schema evolution, de-duplication, key order."""

from __future__ import annotations

import itertools
import random
import re

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import InputError, PartitionValueError, SchemaError
from lsm_lab.merge import records
from lsm_lab.merge.semantics import MergeMode, MergeSpec, fold, surviving_row

# --------------------------------------------------------------------------- inputs
ROWS = [{"id": "a", "ts": 1}, {"id": "b", "ts": 2}]


@pytest.mark.parametrize("form", ["arrow", "batch", "pandas", "dicts"])
def test_to_arrow_accepts_every_input_form(form: str) -> None:
    table = pa.Table.from_pylist(ROWS)
    data = {"arrow": table, "batch": table.to_batches()[0], "pandas": pd.DataFrame(ROWS), "dicts": ROWS}[form]
    out = records.to_arrow(data)
    assert out.to_pylist() == ROWS
    assert out.schema.metadata is None  # pandas metadata dropped


def test_to_arrow_drops_meta_columns_and_normalises_types() -> None:
    table = pa.table({
        "_hoodie_record_key": ["x"], "_hoodie_commit_time": ["1"], "_lsm_delete": [True],
        "id": pa.array(["a"], pa.large_string()),
        "city": pa.array(["c"]).dictionary_encode(),
        "blob": pa.array([b"z"], pa.large_binary()),
    })
    out = records.to_arrow(table)
    assert out.column_names == ["id", "city", "blob"]
    assert out.schema.types == [pa.string(), pa.string(), pa.binary()]


@pytest.mark.parametrize("bad", ["text", 42, [1, 2], [{"id": "a"}, "b"], {"id": ["a"]}])
def test_to_arrow_rejects_other_inputs(bad: object) -> None:
    with pytest.raises(InputError):
        records.to_arrow(bad)


# --------------------------------------------------------------------------- keys
def test_single_field_keys() -> None:
    table = pa.table({"id": [3, 1, 20]})
    assert records.record_keys(table, ["id"]).to_pylist() == ["3", "1", "20"]


def test_composite_keys() -> None:
    table = pa.table({"a": [1, None, 3, 4], "b": ["x", "y", None, ""]})
    assert records.record_keys(table, ["a", "b"]).to_pylist() == [
        "a:1,b:x", "a:__null__,b:y", "a:3,b:__null__", "a:4,b:__empty__"]


def test_null_keys_rejected() -> None:
    with pytest.raises(SchemaError, match="record key column 'id' has 1 null value"):
        records.record_keys(pa.table({"id": ["a", None]}), ["id"])
    with pytest.raises(SchemaError, match="all null"):
        records.record_keys(pa.table({"a": [1, None], "b": ["x", None]}), ["a", "b"])


def test_missing_key_column() -> None:
    with pytest.raises(SchemaError, match="no record key column 'uuid'"):
        records.record_keys(pa.table({"id": ["a"]}), ["uuid"])
    with pytest.raises(SchemaError, match="columns 'x', 'y'"):
        records.check_columns(pa.table({"id": ["a"]}), ["x", "id", "y"], "record key")


def test_nested_key_rejected() -> None:
    with pytest.raises(SchemaError, match="cannot use a column of type"):
        records.record_keys(pa.table({"id": [[1, 2]]}), ["id"])


# --------------------------------------------------------------------------- partition paths
def test_partition_paths() -> None:
    table = pa.table({"city": ["sf", None, "", "chennai"], "day": [1, 2, 3, None]})
    assert records.partition_paths(table, [], hive_style=True).to_pylist() == ["", "", "", ""]
    assert records.partition_paths(table, ["city"], hive_style=False).to_pylist() == [
        "sf", "__HIVE_DEFAULT_PARTITION__", "__HIVE_DEFAULT_PARTITION__", "chennai"]
    assert records.partition_paths(table, ["city", "day"], hive_style=True).to_pylist() == [
        "city=sf/day=1", "city=__HIVE_DEFAULT_PARTITION__/day=2", "city=__HIVE_DEFAULT_PARTITION__/day=3",
        "city=chennai/day=__HIVE_DEFAULT_PARTITION__"]
    assert records.partition_paths(pa.table({"c": pa.array([], pa.string())}), [], hive_style=True).to_pylist() == []


@pytest.mark.parametrize("value", ["a/b", "/abs", "a\\b", "..", "x..y", "../up", ".hidden", ".", "nul\x00"])
def test_rejected_partition_values(value: str) -> None:
    table = pa.table({"city": ["ok", value]})
    for hive in (True, False):
        with pytest.raises(PartitionValueError, match="partition column 'city'") as info:
            records.partition_paths(table, ["city"], hive_style=hive)
        assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", ["a.b", "a b", "é", "x=y", "a-b_c", "trailing."])
def test_accepted_partition_values(value: str) -> None:
    assert records.partition_paths(pa.table({"c": [value]}), ["c"], hive_style=False).to_pylist() == [value]


def test_missing_partition_column() -> None:
    with pytest.raises(SchemaError, match="no partition column 'city'"):
        records.partition_paths(pa.table({"id": ["a"]}), ["city"], hive_style=True)


@pytest.mark.parametrize("path", ["/abs", "a//b", "a/../b", "..", ".hidden/x", "a/.b", "a\\b", "./a"])
def test_check_partition_path_rejects(path: str) -> None:
    with pytest.raises(PartitionValueError):
        records.check_partition_path(path)


@pytest.mark.parametrize("path", ["", "a", "city=x/day=1", "a.b/c"])
def test_check_partition_path_accepts(path: str) -> None:
    records.check_partition_path(path)


# --------------------------------------------------------------------------- schema evolution
BASE = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])


def test_first_write_fixes_the_schema_nullable() -> None:
    incoming = pa.schema([pa.field("id", pa.string(), False), ("ts", pa.int64())])
    out = records.evolve_schema(None, incoming)
    assert out.names == ["id", "ts"] and all(f.nullable for f in out)


def test_added_nullable_column_accepted() -> None:
    incoming = pa.schema([("v", pa.float64()), ("id", pa.string()), ("ts", pa.int64()), ("new", pa.string())])
    out = records.evolve_schema(BASE, incoming)
    assert out.names == ["id", "ts", "v", "new"] and out.field("new").nullable


def test_null_typed_values_fit_any_column() -> None:
    incoming = pa.schema([("id", pa.string()), ("ts", pa.null()), ("v", pa.float64())])
    assert records.evolve_schema(BASE, incoming) == BASE


def test_all_null_column_gets_its_type_later() -> None:
    first = records.evolve_schema(None, pa.schema([("id", pa.string()), ("note", pa.null())]))
    later = records.evolve_schema(first, pa.schema([("id", pa.string()), ("note", pa.int64())]))
    assert later.field("note").type == pa.int64()
    with pytest.raises(SchemaError, match="column 'note' changes type from int64 to bool"):
        records.evolve_schema(later, pa.schema([("id", pa.string()), ("note", pa.bool_())]))


@pytest.mark.parametrize("new_type", [pa.bool_(), pa.timestamp("us"), pa.date32()])
def test_type_change_rejected(new_type: pa.DataType) -> None:
    incoming = pa.schema([("id", pa.string()), ("ts", new_type), ("v", pa.float64())])
    with pytest.raises(SchemaError, match=re.escape(f"column 'ts' changes type from int64 to {new_type}")):
        records.evolve_schema(BASE, incoming)


def test_left_out_nullable_column_is_kept() -> None:
    """Hudi's `hoodie.write.set.null.for.missing.columns`: the batch's rows get null (tests/test_schema_evolution.py)."""
    assert records.evolve_schema(BASE, pa.schema([("id", pa.string()), ("ts", pa.int64())])) == BASE


def test_partial_batches_for_deletes() -> None:
    incoming = pa.schema([("id", pa.string()), ("other", pa.string())])
    assert records.evolve_schema(BASE, incoming, partial=True) == BASE
    with pytest.raises(SchemaError, match="changes type"):
        records.evolve_schema(BASE, pa.schema([("id", pa.bool_())]), partial=True)


def test_conform() -> None:
    table = pa.table({"v": [1.0], "id": ["a"], "extra": [1]})
    out = records.conform(table, pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64())]))
    assert out.to_pylist() == [{"id": "a", "ts": None, "v": 1.0}]


# --------------------------------------------------------------------------- de-duplication
def test_dedupe_by_ordering_ties_to_later_row() -> None:
    table = pa.table({"k": ["b", "a", "b", "a", "b", "c"], "ts": [5, 1, 7, 1, 7, None], "row": range(6)})
    out = records.dedupe(table, "k", "ts")
    assert out.to_pylist() == [{"k": "a", "ts": 1, "row": 3}, {"k": "b", "ts": 7, "row": 4},
                               {"k": "c", "ts": None, "row": 5}]


def test_dedupe_without_ordering_keeps_the_last_row() -> None:
    table = pa.table({"k": ["b", "a", "b", "a"], "ts": [9, 9, 1, 1], "row": range(4)})
    assert records.dedupe(table, "k", None).column("row").to_pylist() == [3, 2]


def test_dedupe_null_ordering_ranks_lowest() -> None:
    table = pa.table({"k": ["a", "a", "a"], "ts": [3, None, None], "row": range(3)})
    assert records.dedupe(table, "k", "ts").column("row").to_pylist() == [0]


def test_dedupe_deletes_without_ordering_win() -> None:
    # a delete without an ordering value removes the key unconditionally, wherever it stands
    for ts in ([None, 5], [5, None]):
        table = pa.table({"k": ["a", "a"], "ts": pa.array(ts, pa.int64())})
        assert records.dedupe(table, "k", "ts", deletes=True).column("ts").to_pylist() == [None]


def test_dedupe_by_partition_and_key() -> None:
    # a record key is unique within its partition: the same key in two partitions is two records
    table = pa.table({"p": ["x", "y", "x", "y"], "k": ["a", "a", "a", "b"], "row": range(4)})
    out = records.dedupe(table, ["p", "k"], None)
    assert out.to_pylist() == [{"p": "x", "k": "a", "row": 2}, {"p": "y", "k": "a", "row": 1},
                               {"p": "y", "k": "b", "row": 3}]


def test_dedupe_empty() -> None:
    empty = pa.table({"k": pa.array([], pa.string())})
    assert records.dedupe(empty, "k", None).num_rows == 0


_keys = st.sampled_from(["a", "b", "bb", "é", "\U0001f600", "Z"])


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.tuples(_keys, st.none() | st.integers(-3, 3)), max_size=25), st.booleans(), st.booleans())
def test_dedupe_equals_folding_the_rows_in_order(rows: list[tuple[str, int | None]], use_ordering: bool,
                                                 deletes: bool) -> None:
    """Dedupe = applying the batch's rows one by one with the merge rules, on top of any stored record."""
    table = pa.table({"k": pa.array([k for k, _ in rows], pa.string()),
                      "ts": pa.array([o for _, o in rows], pa.int64()),
                      "row": pa.array(range(len(rows)), pa.int64())})
    out = records.dedupe(table, "k", "ts" if use_ordering else None, deletes=deletes)
    got_keys = out.column("k").to_pylist()
    assert got_keys == sorted(set(got_keys), key=str.encode)
    mode = MergeMode.EVENT_TIME_ORDERING if use_ordering else MergeMode.COMMIT_TIME_ORDERING
    spec = MergeSpec(mode, key="k", ordering="ts", delete="d")
    winners = {r["k"]: r for r in out.to_pylist()}
    for stored in (None, -2, 0, 2):
        for key in set(got_keys):
            mine = [{"k": key, "ts": o, "d": deletes, "row": i} for i, (k, o) in enumerate(rows) if k == key]
            start = [] if stored is None else [{"k": key, "ts": stored, "d": False, "row": -1}]
            expected = surviving_row(fold(start + mine, spec), spec)
            got = surviving_row(fold([*start, {**winners[key], "d": deletes}], spec), spec)
            assert got == expected, (key, stored, mine)


# --------------------------------------------------------------------------- key order
def test_sort_by_key_is_utf8_byte_order() -> None:
    keys = ["b", "\U0001f600", "é", "A", "a", "\uffff", "z", "", "ab"]
    rng = random.Random(7)
    rng.shuffle(keys)
    out = records.sort_by_key(pa.table({"_hoodie_record_key": keys}))
    got = out.column("_hoodie_record_key").to_pylist()
    assert got == sorted(keys, key=lambda k: k.encode("utf-8"))
    assert records.is_strictly_sorted(out.column("_hoodie_record_key"))


def test_is_strictly_sorted() -> None:
    assert records.is_strictly_sorted(pa.array([], pa.string()))
    assert records.is_strictly_sorted(pa.array(["a"]))
    assert records.is_strictly_sorted(pa.chunked_array([["a", "b"], ["c"]]))
    assert not records.is_strictly_sorted(pa.array(["a", "a"]))
    assert not records.is_strictly_sorted(pa.array(["b", "a"]))
    # UTF-8 byte order, not UTF-16 (where the surrogate pair of U+1F600 sorts below U+FFFF)
    assert records.is_strictly_sorted(pa.array(["\uffff", "\U0001f600"]))
    assert not records.is_strictly_sorted(pa.array(["\U0001f600", "\uffff"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.uuids().map(str),
                          st.text(alphabet="ab\x00é", max_size=10)), max_size=60),
       st.integers(min_value=0, max_value=3), st.booleans())
def test_key_sort_indices_equal_arrows_stable_sort(keys: list[str], skip: int, large: bool) -> None:
    """The 8-byte-prefix fast path and its fallback both give Arrow's stable sort, sliced and large arrays too."""
    import numpy as np
    import pyarrow.compute as pc

    from lsm_lab.merge.records import key_sort_indices
    arr = pa.array(["zz"] * skip + keys, pa.large_string() if large else pa.string()).slice(skip)
    assert np.array_equal(key_sort_indices(arr), pc.sort_indices(arr).to_numpy())


def test_key_sort_indices_takes_the_fast_path_on_distinct_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    import pyarrow.compute as pc

    from lsm_lab.merge import records
    keys = pa.array([str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(500)])
    expected = pc.sort_indices(keys).to_numpy().tolist()
    monkeypatch.setattr(pc, "sort_indices", None)  # records' pc (the same module): Arrow's sort is not called (it would fail)
    assert records.key_sort_indices(keys).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.lists(st.tuples(st.integers(0, 399), st.sampled_from(["", "0", "~", "\x00", "é"]),
                                                 st.booleans()), min_size=1, max_size=9),
       st.integers(min_value=0, max_value=3))
def test_key_sort_indices_sorts_only_the_ties_with_arrow(seed: int, extra: list[tuple[int, str, bool]],
                                                         skip: int) -> None:
    """A few keys sharing an 8-byte prefix with another (or repeating it) among distinct-prefix keys: Arrow sorts
    only those, and the result is still Arrow's stable sort of the whole array."""
    import numpy as np
    import pyarrow.compute as pc

    from lsm_lab.merge import records
    rng = random.Random(seed)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(400)]
    for at, tail, cut in extra:  # same first 8 bytes as keys[at], then something else (or the same key again)
        keys.insert(rng.randrange(len(keys) + 1), keys[at][:8] + tail if cut else keys[at])
    arr = pa.array(["zz"] * skip + keys).slice(skip)
    sizes: list[int] = []
    real = pc.sort_indices

    def spy(a: pa.Array) -> pa.Array:
        sizes.append(len(a))
        return real(a)

    expected = pc.sort_indices(arr).to_numpy()
    pc.sort_indices = spy  # records' pc is this same module
    try:
        got = records.key_sort_indices(arr)
    finally:
        pc.sort_indices = real
    assert np.array_equal(got, expected)
    assert sizes and max(sizes) <= 2 * len(extra) < len(keys)  # only the tied keys went to Arrow (<= 5% of them)


def test_one_array_keeps_a_single_chunk_without_a_copy() -> None:
    one = pa.chunked_array([pa.array(["a", "b"])])
    assert records.one_array(one).buffers()[2].address == one.chunk(0).buffers()[2].address
    assert records.one_array(pa.chunked_array([["a"], ["b", "c"]])).equals(pa.array(["a", "b", "c"]))
    assert records.one_array(pa.chunked_array([], pa.string())).equals(pa.array([], pa.string()))
    plain = pa.array([1, 2])
    assert records.one_array(plain) is plain


def _reference_partition_paths(table: pa.Table, fields: list[str], hive_style: bool) -> list[str]:
    """Row by row, as the format page defines them: the text of each value, "" or null as the default partition."""
    out = []
    for row in table.select(fields).to_pylist() if fields else [{}] * table.num_rows:
        pieces = []
        for f in fields:
            v = row[f]
            text = DEFAULT if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
            text = DEFAULT if text == "" else text
            pieces.append(f"{f}={text}" if hive_style else text)
        out.append("/".join(pieces))
    return out


DEFAULT = records.DEFAULT_PARTITION


def _partition_columns(rows: list[tuple[str | None, int | None, bool | None]], chunks: int) -> pa.Table:
    """Columns c (text), n (integers), b (booleans) and d (c dictionary-encoded) of `rows`, in `chunks` chunks."""
    cols = {"c": pa.array([r[0] for r in rows], pa.string()), "n": pa.array([r[1] for r in rows], pa.int64()),
            "b": pa.array([r[2] for r in rows], pa.bool_()),
            "d": pa.array([r[0] for r in rows], pa.string()).dictionary_encode()}
    cut = max(1, len(rows) // chunks)
    return pa.table({k: pa.chunked_array([v[i:i + cut] for i in range(0, len(v), cut)] or [v], v.type)
                     for k, v in cols.items()})


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["", "sf", "chennai", "são_paulo"])),
                          st.one_of(st.none(), st.integers(-3, 3)), st.one_of(st.none(), st.booleans())),
                max_size=30),
       st.lists(st.sampled_from(["c", "n", "b", "d"]), min_size=1, max_size=3, unique=True), st.booleans(),
       st.integers(1, 4))
def test_partition_paths_equal_a_row_by_row_reference(rows: list[tuple[str | None, int | None, bool | None]],
                                                      fields: list[str], hive: bool, chunks: int) -> None:
    """Folder names built once per distinct value (then taken per row) equal the row-by-row definition, for
    strings, integers, booleans, an already dictionary-encoded column, nulls and "", in chunked columns."""
    table = _partition_columns(rows, chunks)
    got = records.partition_paths(table, fields, hive_style=hive).to_pylist()
    assert got == _reference_partition_paths(table, fields, hive)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["", "sf", "chennai", "são_paulo"])),
                          st.one_of(st.none(), st.integers(-3, 3)), st.one_of(st.none(), st.booleans())),
                max_size=30),
       st.lists(st.sampled_from(["c", "n", "b", "d"]), max_size=3, unique=True), st.booleans(), st.integers(1, 4))
def test_partition_codes_are_the_partition_paths_encoded(rows: list[tuple[str | None, int | None, bool | None]],
                                                         fields: list[str], hive: bool, chunks: int) -> None:
    """`partition_codes` decodes to `partition_paths` (and the row-by-row definition), each folder name once in
    its dictionary ("" and null, both the default partition, share one entry), for one field, several or none."""
    table = _partition_columns(rows, chunks)
    codes = records.partition_codes(table, fields, hive_style=hive)
    assert isinstance(codes, pa.DictionaryArray) and codes.indices.null_count == 0
    names = codes.dictionary.to_pylist()
    assert len(names) == len(set(names))
    assert codes.cast(pa.string()).to_pylist() == _reference_partition_paths(table, fields, hive)
    assert codes.cast(pa.string()).equals(records.partition_paths(table, fields, hive_style=hive))


def test_partition_codes_check_the_values_as_partition_paths_do() -> None:
    with pytest.raises(PartitionValueError, match="city"):
        records.partition_codes(pa.table({"city": ["ok", "a/b"]}), ["city"], hive_style=False)
    with pytest.raises(PartitionValueError, match="255"):
        records.partition_codes(pa.table({"city": ["x" * 256]}), ["city"], hive_style=False)
    with pytest.raises(SchemaError, match="city"):
        records.partition_codes(pa.table({"x": [1]}), ["city"], hive_style=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from(["", "a", "b,c", "é"])), st.integers(-2, 2)),
                min_size=1, max_size=30),
       st.lists(st.integers(0, 30), max_size=4), st.sampled_from([["s"], ["i"], ["s", "i"], ["i", "s"]]))
def test_record_keys_of_a_chunked_column_equal_the_combined_ones(rows: list[tuple[str | None, int]],
                                                                 cuts: list[int], fields: list[str]) -> None:
    """The keys keep the column's chunks (no combined copy) and are the keys of the same column as one chunk,
    the same errors included (a null or empty single-field key)."""
    s = [r[0] for r in rows]
    i = [r[1] for r in rows]
    bounds = [0, *sorted(min(c, len(rows)) for c in cuts), len(rows)]
    chunked = pa.table({"s": pa.chunked_array([pa.array(s[a:b], pa.string()) for a, b in itertools.pairwise(bounds)]),
                        "i": pa.chunked_array([pa.array(i[a:b], pa.int64()) for a, b in itertools.pairwise(bounds)])})
    combined = chunked.combine_chunks()
    try:
        expected = records.record_keys(combined, fields)
    except SchemaError as exc:
        with pytest.raises(SchemaError, match=re.escape(str(exc))):
            records.record_keys(chunked, fields)
        return
    got = records.record_keys(chunked, fields)
    assert records.one_array(got).equals(records.one_array(expected))
    if fields == ["s"]:  # one string field: the column itself, chunks and buffers
        assert isinstance(got, pa.ChunkedArray) and got.num_chunks == chunked.column("s").num_chunks
        assert all(g.buffers()[2] is None or g.buffers()[2].address == c.buffers()[2].address
                   for g, c in zip(got.chunks, chunked.column("s").chunks))


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32), st.lists(st.tuples(st.integers(0, 199), st.sampled_from(["", "0", "~", "é"]),
                                                 st.booleans()), max_size=30),
       st.lists(st.integers(0, 260), max_size=5), st.floats(0.05, 1.0))
def test_prefix_sort_of_some_rows_of_chunked_keys_is_arrows_sort(seed: int, extra: list[tuple[int, str, bool]],
                                                                 cuts: list[int], share: float) -> None:
    """Some rows (ascending) of a chunked key column, sorted from the column's prefixes (`key_prefixes`, chunk
    by chunk) and only their tied keys (`prefix_sort_indices`, as a bucket write sorts a file group): Arrow's
    stable sort of those rows' keys, with few ties, many (the whole sort) or repeated keys."""
    import numpy as np
    import pyarrow.compute as pc
    rng = random.Random(seed)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(200)]
    for at, tail, cut in extra:  # same first 8 bytes as keys[at], then something else (or the same key again)
        keys.insert(rng.randrange(len(keys) + 1), keys[at][:8] + tail if cut else keys[at])
    bounds = [0, *sorted(min(c, len(keys)) for c in cuts), len(keys)]
    column = pa.chunked_array([pa.array(keys[a:b], pa.string()) for a, b in itertools.pairwise(bounds)], pa.string())
    rows = np.array(sorted(rng.sample(range(len(keys)), max(1, int(share * len(keys))))), dtype=np.int64)
    prefixes = records.key_prefixes(column)
    assert prefixes is not None and len(prefixes) == len(keys)
    asked: list[int] = []

    def keys_at(at: np.ndarray | None) -> pa.Array:
        picked = rows if at is None else rows[at]
        asked.append(len(picked))
        return pa.array([keys[i] for i in picked], pa.string())

    got = records.prefix_sort_indices(prefixes[rows], keys_at)
    expected = pc.sort_indices(pa.array([keys[i] for i in rows], pa.string())).to_numpy()
    assert np.array_equal(got, expected)
    assert all(n <= 2 * len(extra) for n in asked) or asked == [len(rows)]  # the tied keys, or all at once
    assert records.key_prefixes(pa.chunked_array([], pa.string())) is not None
    assert records.key_prefixes(pa.chunked_array([pa.array(["a", None])])) is None  # a null: no prefixes
