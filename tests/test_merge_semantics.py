"""The merge rules: the per-record fold, the dict model, and the vectorised form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import InputError, SchemaError
from lsm_lab.merge.semantics import MergeMode, MergeSpec, fold, is_delete, model_merge, select_winners, surviving_row

EVENT = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")
COMMIT = MergeSpec(MergeMode.COMMIT_TIME_ORDERING, key="k", ordering="ts", delete="d")
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])


def rec(ts: int | None, v: int, key: str = "k1") -> dict[str, Any]:
    return {"k": key, "ts": ts, "v": v, "d": False}


def dele(ts: int | None, key: str = "k1") -> dict[str, Any]:
    return {"k": key, "ts": ts, "v": None, "d": True}


def won(rows: Iterable[Mapping[str, Any]], spec: MergeSpec) -> Mapping[str, Any]:
    """`fold(rows, spec)`, which is None only for no rows: every test here folds at least one."""
    state = fold(rows, spec)
    assert state is not None
    return state


def test_docstring_example_event_time_keeps_the_greater_record() -> None:
    rows = [rec(5, 10), rec(7, 12), dele(6)]
    assert surviving_row(fold(rows, EVENT), EVENT) == {"k": "k1", "ts": 7, "v": 12}


def test_docstring_example_commit_time_lets_the_last_delete_win() -> None:
    rows = [rec(5, 10), rec(7, 12), dele(6)]
    assert is_delete(won(rows, COMMIT), COMMIT)
    assert surviving_row(fold(rows, COMMIT), COMMIT) is None


def test_commit_time_ignores_ordering() -> None:
    assert won([rec(9, 1), rec(1, 2)], COMMIT)["v"] == 2


def test_event_time_ties_go_to_the_later_source() -> None:
    assert won([rec(3, 1), rec(3, 2)], EVENT)["v"] == 2


def test_event_time_smaller_ordering_is_ignored() -> None:
    assert won([rec(3, 1), rec(2, 2)], EVENT)["v"] == 1


def test_null_ordering_compares_lowest() -> None:
    assert won([rec(None, 1), rec(0, 2)], EVENT)["v"] == 2
    assert won([rec(0, 1), rec(None, 2)], EVENT)["v"] == 1
    assert won([rec(None, 1), rec(None, 2)], EVENT)["v"] == 2


def test_delete_with_ordering_follows_the_ordering_rule() -> None:
    assert won([rec(5, 1), dele(4)], EVENT)["v"] == 1
    assert is_delete(won([rec(5, 1), dele(5)], EVENT), EVENT)


def test_delete_with_null_ordering_is_unconditional() -> None:
    assert is_delete(won([rec(100, 1), dele(None)], EVENT), EVENT)


def test_a_record_after_a_delete_by_key_wins_even_with_null_ordering() -> None:
    assert won([rec(100, 1), dele(None), rec(None, 3)], EVENT)["v"] == 3
    assert won([rec(100, 1), dele(None), rec(2, 4)], EVENT)["v"] == 4


def test_model_merge_drops_deleted_keys_and_folds_repeats_inside_a_source() -> None:
    base = [rec(1, 1, "a"), rec(1, 1, "b")]
    log = [dele(None, "a"), rec(2, 5, "b"), rec(2, 6, "b"), rec(0, 7, "c")]
    assert model_merge([base, log], EVENT) == {
        "b": {"k": "b", "ts": 2, "v": 6},
        "c": {"k": "c", "ts": 0, "v": 7},
    }


def test_event_time_needs_an_ordering_column() -> None:
    with pytest.raises(InputError):
        MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k")


def test_mode_accepts_its_string_value() -> None:
    spec = MergeSpec("EVENT_TIME_ORDERING", ordering="ts")  # type: ignore[arg-type]  # the string form under test
    assert spec.mode is MergeMode.EVENT_TIME_ORDERING


@pytest.mark.parametrize("schema, message", [
    (pa.schema([("x", pa.string()), ("ts", pa.int64()), ("d", pa.bool_())]), "missing key column"),
    (pa.schema([("k", pa.int64()), ("ts", pa.int64()), ("d", pa.bool_())]), "must be a string"),
    (pa.schema([("k", pa.string()), ("ts", pa.int64())]), "missing delete column"),
    (pa.schema([("k", pa.string()), ("ts", pa.int64()), ("d", pa.int8())]), "must be bool"),
    (pa.schema([("k", pa.string()), ("d", pa.bool_())]), "missing ordering column"),
])
def test_check_schema_names_the_problem(schema: pa.Schema, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        EVENT.check_schema(schema)


def test_output_schema_drops_the_delete_column() -> None:
    assert EVENT.output_schema(SCHEMA).names == ["k", "ts", "v"]


# ---- the vectorised form equals the fold ---------------------------------------------

row_st = st.builds(
    lambda key, ts, is_del, v: {"k": key, "ts": ts, "v": None if is_del else v, "d": is_del},
    st.sampled_from(["a", "b", "c", "d"]),
    st.one_of(st.none(), st.integers(-2, 2)),
    st.booleans(),
    st.integers(0, 99),
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(row_st, max_size=30), mode=st.sampled_from(list(MergeMode)))
def test_select_winners_equals_the_fold(rows: list[dict[str, Any]], mode: MergeMode) -> None:
    spec = MergeSpec(mode, key="k", ordering="ts", delete="d")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    w = select_winners(table, spec)
    got = {}
    for r, deleted in zip(w.rows.tolist(), w.deleted.tolist()):
        row = rows[r]
        assert deleted == row["d"]
        got[row["k"]] = row
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["k"], []).append(row)
    want = {key: fold(rs, spec) for key, rs in groups.items()}
    assert list(got) == sorted(want)
    assert got == want


@pytest.mark.parametrize("values, otype", [
    (["b", "a", "b", None], pa.string()),
    ([1.5, 0.5, 1.5, None], pa.float64()),
    ([10, 1, 10, None], pa.timestamp("us")),
    ([3, 1, 3, None], pa.uint64()),
])
def test_select_winners_handles_ordering_types(values: list[Any], otype: pa.DataType) -> None:
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="o", delete="d")
    table = pa.table({"k": ["x", "x", "y", "y"], "o": pa.array(values, otype), "d": [False] * 4})
    w = select_winners(table, spec)
    assert w.rows.tolist() == [0, 2]  # 'x': b > a (or 1.5 > 0.5 ...); 'y': a value beats null


def test_utf8_byte_order_equals_python_code_point_order() -> None:
    keys = ["z", "é", "\uffff", "\U0001f600", "a\u0300", "ab", "a", "\u00e9x", "日本", "\x7f"]
    by_arrow = pa.array(keys).take(pa.compute.sort_indices(pa.array(keys))).to_pylist()
    assert by_arrow == sorted(keys) == sorted(keys, key=lambda s: s.encode("utf-8"))


# ---- integer prefixes of equal-width keys ----------------------------------------------

@st.composite
def fixed_keys(draw: st.DrawFn) -> list[bytes]:
    """Equal-width byte keys over a tiny alphabet (NUL and 0xff included) with a shared stem, so
    prefixes tie for different keys and common prefixes are long."""
    width = draw(st.integers(1, 30))
    stem = draw(st.binary(max_size=width))
    alphabet = draw(st.sampled_from([b"ab", b"\x00a", b"\x00\xff", b"xyz"]))
    tails = draw(st.lists(st.lists(st.sampled_from(list(alphabet)), min_size=width, max_size=width), max_size=40))
    return [(stem + bytes(t))[:width] for t in tails]


@settings(max_examples=400, deadline=None)
@given(keys=fixed_keys(), hint=st.booleans())
def test_prefix_sort_equals_a_stable_byte_sort(keys: list[bytes], hint: bool) -> None:
    import numpy as np

    from lsm_lab.merge.semantics import common_prefix_length, prefix_sort

    def shared(words: list[bytes]) -> int:
        return next((i for i in range(len(words[0])) if len({w[i] for w in words}) > 1), len(words[0]))

    width = len(keys[0]) if keys else 1
    fixed = np.frombuffer(b"".join(keys), dtype=f"S{width}")  # raw bytes: NumPy would strip trailing NULs
    common = shared(keys) if hint and keys else None
    if keys:
        assert common_prefix_length(fixed) == (shared(keys) if len(keys) > 1 else 0)
    order, starts = prefix_sort(fixed, common)
    want = sorted(range(len(keys)), key=lambda i: keys[i])  # Python's sort is stable
    assert order.tolist() == want
    assert starts.tolist() == [i == 0 or keys[want[i]] != keys[want[i - 1]] for i in range(len(want))]


@settings(max_examples=400, deadline=None)
@given(keys=fixed_keys(), presort=st.booleans(), dup=st.integers(0, 40))
def test_first_unsorted_finds_the_first_pair_out_of_order(keys: list[bytes], presort: bool, dup: int) -> None:
    import numpy as np

    from lsm_lab.merge.semantics import first_unsorted

    if presort:
        keys = sorted(set(keys))
        if 0 < dup < len(keys):
            keys[dup] = keys[dup - 1]  # one repeat: not strictly increasing
    if not keys:
        return
    fixed = np.frombuffer(b"".join(keys), dtype=f"S{len(keys[0])}")
    want = next((i for i in range(len(keys) - 1) if keys[i] >= keys[i + 1]), -1)
    assert first_unsorted(fixed) == want


clean_row_st = st.builds(
    lambda key, ts, v: {"k": key, "ts": ts, "v": v, "d": False},
    st.sampled_from(["aaaaaaaaaaaa1", "aaaaaaaaaaaa2", "baaaaaaaaaaa1", "b", "c"]),
    st.integers(-2, 2),
    st.integers(0, 99),
)


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(clean_row_st, max_size=30))
def test_select_winners_without_deletes_or_nulls_equals_the_fold(rows: list[dict[str, Any]]) -> None:
    """The event-time path that compares only the rows of repeated keys (no delete, no null ordering)."""
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    w = select_winners(table, spec)
    got = {rows[r]["k"]: rows[r] for r in w.rows.tolist()}
    assert not w.deleted.any() and not w.reset.any()
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row["k"], []).append(row)
    want = {key: fold(rs, spec) for key, rs in groups.items()}
    assert list(got) == sorted(want) and got == want


# ---- Arrow to NumPy without pandas ---------------------------------------------------

@pytest.mark.parametrize("array", [
    pa.array([True, False, True, True, False, False, True, False, True, True, False]).slice(3),
    pa.array([True, False, True]),
    pa.array([1, -2, 3, 4, 5], pa.int64()).slice(1, 3),
    pa.array([1, 2, 3], pa.int32()),
    pa.array([2**64 - 1, 0], pa.uint64()),
    pa.array([1.5, -0.25, 3.0], pa.float64()).slice(1),
    pa.array([1, None, 3], pa.int64()),  # nulls: through Arrow
    pa.array([1, 2], pa.int8()),  # one byte wide: through Arrow
    pa.chunked_array([pa.array([True]), pa.array([False, True])]),
])
def test_to_numpy_equals_arrow(array: pa.Array | pa.ChunkedArray) -> None:
    import numpy as np

    from lsm_lab.merge.semantics import to_numpy

    got = to_numpy(array)
    want = array.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype
    assert np.array_equal(got, want, equal_nan=got.dtype.kind == "f")


def test_indices_array_shares_the_numpy_memory() -> None:
    import numpy as np

    from lsm_lab.merge.semantics import indices_array

    rows = np.array([3, 1, 2], dtype=np.int64)
    arr = indices_array(rows)
    assert arr.type == pa.int64() and arr.to_pylist() == [3, 1, 2]
    assert arr.buffers()[1].address == rows.ctypes.data
    assert indices_array(np.array([0, 1], dtype=np.int32)).to_pylist() == [0, 1]


def test_a_file_merge_does_not_import_pandas(tmp_path: Path) -> None:
    """``pa.array`` and ``Array.to_numpy`` import pandas on first use (0.17 s of CPU): the sorted
    merge of files (the bench's ``sorted`` contender) must not pay it."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    paths = []
    for i in range(3):  # written here: building tables from Python lists imports pandas
        keys = [f"key{j:05d}" for j in range(i, 3000, 2)]
        paths.append(str(tmp_path / f"r{i}.parquet"))
        pq.write_table(pa.table({"k": keys, "ts": list(range(len(keys))), "v": [float(i)] * len(keys)}), paths[-1])
    code = f"""
import sys
from lsm_lab.merge.files import merge_parquet_files
assert 'pandas' not in sys.modules
stats = merge_parquet_files({str(tmp_path / "out.parquet")!r}, {paths!r}, key="k", ordering="ts", batch_size=256)
assert stats["rows_out"] == 3000, stats
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
