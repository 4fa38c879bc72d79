"""The overlay merge (merge/overlay.py) against the dict model, and against the sorted engine's order.

Keys are drawn so that every branch of the key lookup is taken: keys of one
byte width whose 8-byte prefixes are distinct (integer prefix search), of one
width sharing a prefix (byte search), and of several widths (Arrow's sort);
bases sorted (key-order output) and unsorted, with repeated keys (pre-folded)
and without; logs with repeated keys, deletes with and without ordering values.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab.errors import SchemaError
from lsm_lab.merge import MergeMode, MergeSpec, merge_to_table, model_merge
from lsm_lab.merge.overlay import has_repeated_key, merge_overlay, strictly_sorted

Row = dict[str, Any]
Case = tuple[list[list[Row]], MergeMode, bool]  # sources (base first), merge mode, encode the base's `v`

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])

KEY_SETS = {
    "distinct prefixes": [f"{i:02d}-{j}xxxxxxx" for i in range(6) for j in "ab"][:8],          # width 11
    "shared prefix": [f"order-0000{i}" for i in range(8)],                                   # width 11, one prefix
    "several widths": ["a", "b", "bb", "c", "é", "\U0001f600", "k1", "z"],
    "short": ["a", "b", "c", "d", "e", "f", "g", "h"],                                       # width 1 (< 8 bytes)
}


def spec_for(mode: MergeMode) -> MergeSpec:
    return MergeSpec(mode, key="k", ordering="ts", delete="d")


def row(key: str, draw: st.DrawFn) -> Row:
    is_del = draw(st.booleans())
    return {"k": key, "ts": draw(st.one_of(st.none(), st.integers(0, 3))),
            "v": None if is_del else draw(st.integers(0, 999)), "d": is_del}


@st.composite
def overlay_case(draw: st.DrawFn) -> Case:
    keys = KEY_SETS[draw(st.sampled_from(sorted(KEY_SETS)))]
    base_kind = draw(st.sampled_from(["sorted", "shuffled", "repeats"]))
    base_keys = sorted(draw(st.sets(st.sampled_from(keys))), key=lambda s: s.encode())
    if base_kind == "shuffled":
        base_keys = draw(st.permutations(base_keys))
    elif base_kind == "repeats":
        base_keys = draw(st.lists(st.sampled_from(keys), max_size=12))
    base = [row(k, draw) for k in base_keys]
    logs = [[row(k, draw) for k in draw(st.lists(st.sampled_from(keys), max_size=10))]
            for _ in range(draw(st.integers(0, 4)))]
    return [base, *logs], draw(st.sampled_from(list(MergeMode))), draw(st.booleans())


def tables(sources: list[list[Row]], encode_base: bool = False) -> list[pa.Table]:
    """The sources as tables; `encode_base`: the base's `v` dictionary-encoded (as reads pass meta columns)."""
    out = [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in sources]
    if encode_base:
        base = out[0]
        out[0] = base.set_column(2, "v", pc.dictionary_encode(base.column("v")))
        assert pa.types.is_dictionary(out[0].schema.field("v").type)
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=overlay_case())
def test_overlay_equals_the_model(case: Case) -> None:
    sources, mode, encode_base = case
    spec = spec_for(mode)
    out = merge_overlay(tables(sources, encode_base), spec)
    assert out.schema == pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
    rows = out.to_pylist()
    keys = [r["k"] for r in rows]
    assert len(keys) == len(set(keys)), "a key was emitted twice"
    assert {r["k"]: r for r in rows} == model_merge(sources, spec)
    assert out.schema.names == ["k", "ts", "v"]
    base_keys = [r["k"] for r in sources[0]]
    if base_keys == sorted(set(base_keys), key=lambda s: s.encode()):  # a sorted base: key order out
        assert keys == sorted(keys, key=lambda s: s.encode())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=overlay_case())
def test_sorted_sources_give_the_sorted_engines_rows_in_its_order(case: Case) -> None:
    sources, mode, encode_base = case
    spec = spec_for(mode)
    # the sorted engine needs every source sorted without repeats: keep the last row of each key
    ordered = []
    for rows in sources:
        last = {r["k"]: r for r in rows}
        ordered.append([last[k] for k in sorted(last, key=lambda s: s.encode())])
    expected = merge_to_table(tables(ordered), spec, engine="sorted")
    assert merge_overlay(tables(ordered, encode_base), spec).equals(expected)


@pytest.mark.parametrize("mode", list(MergeMode))
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_larger_slice_of_uuid_like_keys(mode: MergeMode, shuffle: bool) -> None:
    rnd = random.Random(16)
    universe = [f"{rnd.getrandbits(128):032x}" for _ in range(5000)]     # one width, distinct prefixes
    base_keys = sorted(rnd.sample(universe, 3000))
    if shuffle:
        rnd.shuffle(base_keys)
    sources = [[{"k": k, "ts": rnd.randint(0, 5), "v": rnd.randint(0, 10**6), "d": False} for k in base_keys]]
    for _ in range(4):
        keys = rnd.sample(universe, 700)
        sources.append([{"k": k, "ts": None if rnd.random() < 0.1 else rnd.randint(0, 5),
                         "v": rnd.randint(0, 10**6), "d": rnd.random() < 0.15} for k in keys])
    spec = spec_for(mode)
    out = merge_overlay(tables(sources), spec)
    assert {r["k"]: r for r in out.to_pylist()} == model_merge(sources, spec)
    if not shuffle:
        assert out.column("k").to_pylist() == sorted(out.column("k").to_pylist())


def test_repeated_key_check_is_exact() -> None:
    rnd = random.Random(3)
    keys = [f"{rnd.getrandbits(128):032x}" for _ in range(2000)]
    assert not has_repeated_key(pa.array(keys))
    assert has_repeated_key(pa.array([*keys, keys[1234]]))
    assert has_repeated_key(pa.array(["ab", "c", "ab"])) and not has_repeated_key(pa.array(["ab", "c", "abc"]))
    assert not has_repeated_key(pa.array(["x"])) and not has_repeated_key(pa.array([], pa.string()))
    # keys that differ only after byte 8, or only in the last (padded) word
    assert not has_repeated_key(pa.array(["prefix--1", "prefix--2", "prefix--3"]))
    assert strictly_sorted(pa.array(["a", "b"])) and not strictly_sorted(pa.array(["a", "a"]))


def test_keys_holding_nul_bytes_and_large_strings() -> None:
    spec = spec_for(MergeMode.COMMIT_TIME_ORDERING)
    keys = ["a\x00", "a\x01", "b\x00"]
    base = pa.table({"k": pa.array(keys, pa.large_string()), "ts": [1, 1, 1], "v": [1, 2, 3],
                     "d": [False] * 3})
    log = pa.table({"k": pa.array(["a\x00", "a\x02"], pa.large_string()), "ts": [2, 2], "v": [10, 20],
                    "d": [False, False]})
    out = merge_overlay([base, log], spec)
    assert out.column("k").to_pylist() == ["a\x00", "a\x01", "a\x02", "b\x00"]
    assert out.column("v").to_pylist() == [10, 2, 20, 3]


def test_null_keys_raise_naming_the_source() -> None:
    good = pa.Table.from_pylist([{"k": "a", "ts": 1, "v": 1, "d": False}], schema=SCHEMA)
    bad = pa.table({"k": pa.array([None], pa.string()), "ts": [1], "v": [1], "d": [False]}, schema=SCHEMA)
    with pytest.raises(SchemaError, match="source 1"):
        merge_overlay([good, bad], spec_for(MergeMode.COMMIT_TIME_ORDERING))


def test_only_a_base() -> None:
    spec = spec_for(MergeMode.EVENT_TIME_ORDERING)
    base = pa.Table.from_pylist([{"k": "b", "ts": 1, "v": 1, "d": False}, {"k": "a", "ts": 1, "v": 2, "d": True}],
                                schema=SCHEMA)
    assert merge_overlay([base], spec).to_pylist() == [{"k": "b", "ts": 1, "v": 1}]
    assert np.array_equal(merge_overlay([base.slice(0, 0)], spec).num_rows, 0)
