"""The merge-engine policy (lsm_lab/merge/policy.py): one default per layout, one checked list of engines, one
fallback to hash that is never silent when it surprises."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from lsm_lab.errors import InputError, SchemaError
from lsm_lab.merge import ENGINES, SORTED_ENGINES, MergeSpec, check_engine, choose_engine, merge_to_table_safely


def test_unknown_engines_are_refused_with_the_choices() -> None:
    assert check_engine(None) is None and check_engine("hash") == "hash"
    with pytest.raises(InputError, match="choose one of: sorted, loser_tree, hash, heapq"):
        check_engine("bubble")
    assert set(SORTED_ENGINES) < set(ENGINES) and "hash" not in SORTED_ENGINES


@pytest.mark.parametrize(("requested", "lsm", "inputs_sorted", "chosen", "logged"), [
    (None, True, True, "sorted", False),
    (None, False, True, "hash", False),       # the default layout merges by hash
    (None, False, False, "hash", False),
    (None, True, False, "hash", True),        # an lsm_tree slice whose footer does not promise order: say so
    ("sorted", False, False, "hash", True),   # asked for, and not possible: say so
    ("loser_tree", True, True, "loser_tree", False),
    ("hash", True, True, "hash", False),
])
def test_choose_engine(caplog: pytest.LogCaptureFixture, requested: str | None, lsm: bool, inputs_sorted: bool,
                       chosen: str, logged: bool) -> None:
    caplog.set_level(logging.WARNING, logger="lsm_lab.merge")
    assert choose_engine(requested, lsm=lsm, inputs_sorted=inputs_sorted, where="fg-1") == chosen
    assert any("fg-1" in r.getMessage() for r in caplog.records) == logged


@pytest.mark.parametrize("engine", SORTED_ENGINES)
def test_a_sorted_engine_meeting_unsorted_input_falls_back_to_hash(caplog: pytest.LogCaptureFixture,
                                                                   engine: str) -> None:
    caplog.set_level(logging.WARNING, logger="lsm_lab.merge")
    spec = MergeSpec(key="k")
    base = pa.table({"k": ["a", "c", "b"], "v": [1, 2, 3], "_lsm_delete": [False] * 3})  # out of order
    log = pa.table({"k": ["b"], "v": [30], "_lsm_delete": [False]})
    calls = []

    def sources() -> list[pa.Table]:
        calls.append(1)
        return [base, log]

    out = merge_to_table_safely(sources, spec, engine, where="fg-2")
    assert dict(zip(out.column("k").to_pylist(), out.column("v").to_pylist())) == {"a": 1, "b": 30, "c": 2}
    assert len(calls) == 2 and any("fg-2" in r.getMessage() for r in caplog.records)
    with pytest.raises(SchemaError):  # errors other than order are never retried
        merge_to_table_safely(lambda: [pa.table({"x": [1]})], spec, "hash")
