"""Mirror tests: every merge engine gives the rows of the dict model (semantics.model_merge).

The Hypothesis strategy builds k sorted sources (k up to 32) over a small key
alphabet so keys are shared by many sources, with deletes with and without
ordering values, equal and null ordering values, empty sources and empty
batches, presented as Tables, RecordBatches, readers or lists of batches, and
merged with tiny batch sizes so the sorted engine crosses batch boundaries.
"""

from __future__ import annotations

import random
from typing import Any, Protocol, TypeVar

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab.errors import InputError, SchemaError
from lsm_lab.merge import (
    ENGINES,
    SORTED_ENGINES,
    MergeMode,
    MergeSpec,
    Source,
    merge_sources,
    merge_to_table,
    model_merge,
)

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])
KEYS = ["a", "b", "bb", "c", "é", "\U0001f600", "k1", "k2", "z"]
Row = dict[str, Any]
MergeCase = tuple[list[list[Row]], list[str], MergeMode, int, bool]  # sources, forms, mode, batch size, read ahead
UnsortedCase = tuple[list[list[Row]], MergeMode, int]  # sources, mode, batch size
Ex = TypeVar("Ex")


class Draw(Protocol):
    """A `draw`: the one of `@st.composite` (`st.DrawFn`) or `st.DataObject.draw`; the helpers take either."""

    def __call__(self, strategy: st.SearchStrategy[Ex], label: object = None) -> Ex: ...


def spec_for(mode: MergeMode) -> MergeSpec:
    return MergeSpec(mode, key="k", ordering="ts", delete="d")


def as_source(rows: list[Row], form: str, chunk: int) -> Source:
    """Present rows as one of the accepted source forms, with empty batches sprinkled in."""
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    if form == "table":
        return table
    if form == "batch":
        return table.combine_chunks().to_batches()[0] if rows else pa.RecordBatch.from_pylist([], schema=SCHEMA)
    batches = [b for i in range(0, len(rows), chunk) for b in table.slice(i, chunk).to_batches()]
    with_empty: list[pa.RecordBatch] = []
    for b in batches:
        with_empty += [b, b.slice(0, 0)]
    if form == "reader":
        return pa.RecordBatchReader.from_batches(SCHEMA, with_empty)
    return iter(with_empty)


def check(sources_rows: list[list[Row]], spec: MergeSpec, engine: str, batch_size: int,
          forms: list[str], read_ahead: bool = False) -> None:
    sources = [as_source(rows, form, max(1, batch_size)) for rows, form in zip(sources_rows, forms)]
    batches = list(merge_sources(sources, spec, engine=engine, batch_size=batch_size, read_ahead=read_ahead))
    assert all(0 < b.num_rows <= batch_size for b in batches)
    rows = [r for b in batches for r in b.to_pylist()]
    keys = [r["k"] for r in rows]
    assert len(keys) == len(set(keys)), f"{engine}: a key was emitted twice"
    if engine in SORTED_ENGINES:
        assert keys == sorted(keys), f"{engine}: output not in key order"
    assert {r["k"]: r for r in rows} == model_merge(sources_rows, spec)


def source_rows(draw: Draw, keys: list[str]) -> list[Row]:
    rows: list[Row] = []
    for key in sorted(draw(st.sets(st.sampled_from(keys), max_size=len(keys)))):
        is_del = draw(st.booleans())
        ts = draw(st.one_of(st.none(), st.integers(0, 3)))
        rows.append({"k": key, "ts": ts, "v": None if is_del else draw(st.integers(0, 999)), "d": is_del})
    return rows


@st.composite
def merge_case(draw: st.DrawFn) -> MergeCase:
    k = draw(st.integers(1, 32))
    keys = KEYS[: draw(st.integers(1, len(KEYS)))]
    sources = [source_rows(draw, keys) for _ in range(k)]
    forms = [draw(st.sampled_from(["table", "batch", "reader", "iter"])) for _ in range(k)]
    mode = draw(st.sampled_from(list(MergeMode)))
    batch_size = draw(st.sampled_from([1, 2, 3, 5, 65_536]))
    return sources, forms, mode, batch_size, draw(st.booleans())


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=merge_case())
def test_engine_equals_the_model(engine: str, case: MergeCase) -> None:
    sources, forms, mode, batch_size, read_ahead = case
    check(sources, spec_for(mode), engine, batch_size, forms, read_ahead)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("mode", list(MergeMode))
def test_engine_on_a_larger_random_slice(engine: str, mode: MergeMode) -> None:
    rnd = random.Random(7)
    universe = [f"key{i:05d}" for i in range(3000)]
    sources = []
    for _ in range(6):
        keys = sorted(rnd.sample(universe, rnd.randint(0, 800)))
        rows = []
        for key in keys:
            is_del = rnd.random() < 0.15
            ts = None if rnd.random() < 0.1 else rnd.randint(0, 5)
            rows.append({"k": key, "ts": ts, "v": None if is_del else rnd.randint(0, 10**6), "d": is_del})
        sources.append(rows)
    check(sources, spec_for(mode), engine, 97, ["table", "iter", "reader", "batch", "table", "iter"])


@pytest.mark.parametrize("engine", ENGINES)
def test_every_source_holds_the_same_key(engine: str) -> None:
    sources = [[{"k": "same", "ts": i % 3, "v": i, "d": False}] for i in range(32)]
    for mode in MergeMode:
        check(sources, spec_for(mode), engine, 4, ["table"] * 32)


@pytest.mark.parametrize("engine", ENGINES)
def test_no_sources_and_empty_sources(engine: str) -> None:
    spec = spec_for(MergeMode.EVENT_TIME_ORDERING)
    assert list(merge_sources([], spec, engine=engine)) == []
    empty = pa.Table.from_pylist([], schema=SCHEMA)
    out = merge_to_table([empty, empty], spec, engine=engine)
    assert out.num_rows == 0 and out.schema.names == ["k", "ts", "v"]
    with pytest.raises(InputError, match="no source has a schema"):
        merge_to_table([iter([])], spec, engine=engine)


def test_non_ascii_keys_come_out_in_utf8_byte_order() -> None:
    keys = ["z", "é", "\uffff", "\U0001f600", "a\u0300", "ab", "a", "日本"]
    spec = spec_for(MergeMode.COMMIT_TIME_ORDERING)
    half = sorted(keys)
    sources = [[{"k": key, "ts": 0, "v": i, "d": False} for i, key in enumerate(half) if i % 2 == j]
               for j in range(2)]
    for engine in SORTED_ENGINES:
        out = merge_to_table([pa.Table.from_pylist(s, schema=SCHEMA) for s in sources], spec, engine=engine)
        got = out.column("k").to_pylist()
        assert got == sorted(keys, key=lambda s: s.encode("utf-8")), engine


# ---- the hash engine accepts unsorted input and repeated keys --------------------------

@st.composite
def unsorted_case(draw: st.DrawFn) -> UnsortedCase:
    k = draw(st.integers(1, 6))
    row = st.builds(lambda key, ts, d, v: {"k": key, "ts": ts, "v": None if d else v, "d": d},
                    st.sampled_from(KEYS[:5]), st.one_of(st.none(), st.integers(0, 3)),
                    st.booleans(), st.integers(0, 99))
    sources = [draw(st.lists(row, max_size=12)) for _ in range(k)]
    mode = draw(st.sampled_from(list(MergeMode)))
    return sources, mode, draw(st.sampled_from([1, 3, 100]))


@settings(max_examples=150, deadline=None)
@given(case=unsorted_case())
def test_hash_accepts_unsorted_sources_with_repeated_keys(case: UnsortedCase) -> None:
    sources, mode, batch_size = case
    spec = spec_for(mode)
    tables = [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in sources]
    out = merge_to_table(tables, spec, engine="hash", batch_size=batch_size)
    assert {r["k"]: r for r in out.to_pylist()} == model_merge(sources, spec)
    assert out.num_rows == len(model_merge(sources, spec))


# ---- errors ------------------------------------------------------------------------------

def rows_of(keys: list[str]) -> list[Row]:
    return [{"k": key, "ts": 0, "v": 1, "d": False} for key in keys]


@pytest.mark.parametrize("engine", SORTED_ENGINES)
def test_unsorted_input_names_the_source(engine: str) -> None:
    good = pa.Table.from_pylist(rows_of(["a", "b", "c"]), schema=SCHEMA)
    bad = pa.Table.from_pylist(rows_of(["a", "c", "b"]), schema=SCHEMA)
    with pytest.raises(InputError, match="source 1"):
        merge_to_table([good, bad], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine=engine)


@pytest.mark.parametrize("engine", SORTED_ENGINES)
def test_unsorted_across_a_batch_boundary_is_detected(engine: str) -> None:
    good = pa.Table.from_pylist(rows_of(["a", "b", "c"]), schema=SCHEMA)
    bad = pa.Table.from_pylist(rows_of(["b", "d", "a", "e"]), schema=SCHEMA)
    with pytest.raises(InputError, match="source 1"):
        merge_to_table([good, bad], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine=engine, batch_size=2)


@pytest.mark.parametrize("engine", SORTED_ENGINES)
def test_a_key_twice_in_one_source_is_rejected(engine: str) -> None:
    bad = pa.Table.from_pylist(rows_of(["a", "b", "b"]), schema=SCHEMA)
    with pytest.raises(InputError, match="source 0"):
        merge_to_table([bad], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine=engine)


def test_unknown_engine_lists_the_engines() -> None:
    with pytest.raises(InputError, match="sorted, loser_tree, hash, heapq"):
        merge_sources([], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine="quick")


@pytest.mark.parametrize("engine", ENGINES)
def test_mismatched_schemas_raise(engine: str) -> None:
    a = pa.Table.from_pylist(rows_of(["a"]), schema=SCHEMA)
    b = a.cast(pa.schema([("k", pa.string()), ("ts", pa.int32()), ("v", pa.int64()), ("d", pa.bool_())]))
    with pytest.raises(SchemaError, match="source 1"):
        merge_to_table([a, b], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_null_key_raises(engine: str) -> None:
    t = pa.Table.from_pylist([{"k": None, "ts": 0, "v": 1, "d": False}], schema=SCHEMA)
    with pytest.raises(SchemaError, match="null record key"):
        merge_to_table([t], spec_for(MergeMode.COMMIT_TIME_ORDERING), engine=engine)


def test_missing_key_column_raises() -> None:
    t = pa.table({"x": ["a"], "d": [False]})
    with pytest.raises(SchemaError, match="missing key column"):
        merge_sources([t], spec_for(MergeMode.COMMIT_TIME_ORDERING))


def test_large_string_keys_and_read_ahead() -> None:
    schema = pa.schema([("k", pa.large_string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])
    a = pa.Table.from_pylist(rows_of(["a", "c", "e"]), schema=schema)
    b = pa.Table.from_pylist(rows_of(["b", "c", "d"]), schema=schema)
    spec = spec_for(MergeMode.COMMIT_TIME_ORDERING)
    out = merge_to_table([a, b], spec, engine="sorted", batch_size=1, read_ahead=True)
    assert out.column("k").to_pylist() == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize("engine", ENGINES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_equal_width_keys_with_nul_bytes(engine: str, data: st.DataObject) -> None:
    """Keys of one byte width take the NumPy fixed-width path; NUL bytes must order like bytes."""
    alphabet = ["\x00\x00", "\x00a", "\x00b", "a\x00", "a\x01", "ab", "é"]  # "é" is 2 bytes in UTF-8
    k = data.draw(st.integers(1, 6))
    sources = [source_rows(data.draw, alphabet) for _ in range(k)]
    mode = data.draw(st.sampled_from(list(MergeMode)))
    check(sources, spec_for(mode), engine, data.draw(st.sampled_from([1, 2, 4, 100])), ["table"] * k)


def test_sorted_engine_can_be_abandoned_midway() -> None:
    """Closing the iterator early stops its reader and resolver threads (no hang, no error)."""
    import threading

    spec = spec_for(MergeMode.COMMIT_TIME_ORDERING)
    tables = [pa.Table.from_pylist(rows_of([f"k{i:04d}" for i in range(j, 2000, 3)]), schema=SCHEMA)
              for j in range(3)]
    before = threading.active_count()
    it = merge_sources(tables, spec, engine="sorted", batch_size=16, read_ahead=True)
    first = next(it)
    assert first.num_rows > 0
    it.close()  # type: ignore[attr-defined]
    assert threading.active_count() <= before


def _long_keys(draw: Draw) -> list[str]:
    """Equal-width keys that share long prefixes and differ only far beyond 8 bytes (or only early):
    the integer prefixes of the sorted engine tie for different keys, and must fall back to the keys."""
    width = draw(st.sampled_from([9, 12, 21, 30]))
    stem = draw(st.sampled_from(["", "k", "key-0000", "2024-01-01T00:"]))
    tails = draw(st.sets(st.text(alphabet="ab\x00z", min_size=width, max_size=width), min_size=1, max_size=12))
    return sorted({(stem + t)[:width] for t in tails} | {(t + stem)[:width] for t in tails})


@pytest.mark.parametrize("engine", SORTED_ENGINES)
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fixed_width_keys_sharing_prefixes(engine: str, data: st.DataObject) -> None:
    """The order-preserving uint64 prefixes (semantics.key_prefixes) against the dict model, with and
    without deletes and null ordering values (the repeated-keys-only winner path needs neither)."""
    keys = _long_keys(data.draw)
    k = data.draw(st.integers(1, 8))
    clean = data.draw(st.booleans())
    sources = []
    for _ in range(k):
        rows = []
        for key in sorted(data.draw(st.sets(st.sampled_from(keys), max_size=len(keys)))):
            is_del = False if clean else data.draw(st.booleans())
            ts = data.draw(st.integers(0, 3) if clean else st.one_of(st.none(), st.integers(0, 3)))
            rows.append({"k": key, "ts": ts, "v": None if is_del else data.draw(st.integers(0, 999)), "d": is_del})
        sources.append(rows)
    mode = data.draw(st.sampled_from(list(MergeMode)))
    check(sources, spec_for(mode), engine, data.draw(st.sampled_from([1, 3, 7, 100])), ["table"] * k,
          read_ahead=data.draw(st.booleans()))
