"""The merge rules: the per-record fold, the dict model, and the vectorised form."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import InputError, SchemaError
from lsm_lab.merge.semantics import (
    MergeMode,
    MergeSpec,
    fold,
    is_delete,
    model_merge,
    select_winners,
    surviving_row,
)

EVENT = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")
COMMIT = MergeSpec(MergeMode.COMMIT_TIME_ORDERING, key="k", ordering="ts", delete="d")
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])


def rec(ts: int | None, v: int, key: str = "k1") -> dict:
    return {"k": key, "ts": ts, "v": v, "d": False}


def dele(ts: int | None, key: str = "k1") -> dict:
    return {"k": key, "ts": ts, "v": None, "d": True}


def test_docstring_example_event_time_keeps_the_greater_record() -> None:
    rows = [rec(5, 10), rec(7, 12), dele(6)]
    assert surviving_row(fold(rows, EVENT), EVENT) == {"k": "k1", "ts": 7, "v": 12}


def test_docstring_example_commit_time_lets_the_last_delete_win() -> None:
    rows = [rec(5, 10), rec(7, 12), dele(6)]
    assert is_delete(fold(rows, COMMIT), COMMIT)
    assert surviving_row(fold(rows, COMMIT), COMMIT) is None


def test_commit_time_ignores_ordering() -> None:
    assert fold([rec(9, 1), rec(1, 2)], COMMIT)["v"] == 2


def test_event_time_ties_go_to_the_later_source() -> None:
    assert fold([rec(3, 1), rec(3, 2)], EVENT)["v"] == 2


def test_event_time_smaller_ordering_is_ignored() -> None:
    assert fold([rec(3, 1), rec(2, 2)], EVENT)["v"] == 1


def test_null_ordering_compares_lowest() -> None:
    assert fold([rec(None, 1), rec(0, 2)], EVENT)["v"] == 2
    assert fold([rec(0, 1), rec(None, 2)], EVENT)["v"] == 1
    assert fold([rec(None, 1), rec(None, 2)], EVENT)["v"] == 2


def test_delete_with_ordering_follows_the_ordering_rule() -> None:
    assert fold([rec(5, 1), dele(4)], EVENT)["v"] == 1
    assert is_delete(fold([rec(5, 1), dele(5)], EVENT), EVENT)


def test_delete_with_null_ordering_is_unconditional() -> None:
    assert is_delete(fold([rec(100, 1), dele(None)], EVENT), EVENT)


def test_a_record_after_a_delete_by_key_wins_even_with_null_ordering() -> None:
    assert fold([rec(100, 1), dele(None), rec(None, 3)], EVENT)["v"] == 3
    assert fold([rec(100, 1), dele(None), rec(2, 4)], EVENT)["v"] == 4


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
    assert MergeSpec("EVENT_TIME_ORDERING", ordering="ts").mode is MergeMode.EVENT_TIME_ORDERING


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
def test_select_winners_equals_the_fold(rows: list[dict], mode: MergeMode) -> None:
    spec = MergeSpec(mode, key="k", ordering="ts", delete="d")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    w = select_winners(table, spec)
    got = {}
    for r, deleted in zip(w.rows.tolist(), w.deleted.tolist()):
        row = rows[r]
        assert deleted == row["d"]
        got[row["k"]] = row
    groups: dict[str, list[dict]] = {}
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
def test_select_winners_handles_ordering_types(values: list, otype: pa.DataType) -> None:
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="o", delete="d")
    table = pa.table({"k": ["x", "x", "y", "y"], "o": pa.array(values, otype), "d": [False] * 4})
    w = select_winners(table, spec)
    assert w.rows.tolist() == [0, 2]  # 'x': b > a (or 1.5 > 0.5 ...); 'y': a value beats null


def test_utf8_byte_order_equals_python_code_point_order() -> None:
    keys = ["z", "é", "\uffff", "\U0001f600", "a\u0300", "ab", "a", "\u00e9x", "日本", "\x7f"]
    by_arrow = pa.array(keys).take(pa.compute.sort_indices(pa.array(keys))).to_pylist()
    assert by_arrow == sorted(keys) == sorted(keys, key=lambda s: s.encode("utf-8"))
