"""The RFC-103 loser tree: tournament invariants, the six states, steps, comparison counts."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.errors import InputError
from lsm_lab.merge import MergeMode, MergeSpec, merge_to_table, model_merge
from lsm_lab.merge.loser_tree import LeafState, LoserTree, MergeIterator, comparisons_bound, trace_merge

SPEC = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")
SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])


def stream(keys: list[str], source: int = 0) -> list[tuple[str, str]]:
    return [(key, f"{key}@{source}") for key in keys]


def check_tournament(tree: LoserTree[str, str]) -> None:
    """A settled tree: tree[0] is the smallest (key, source) head, every leaf appears once."""
    assert sorted(tree.tree) == list(range(tree.k))
    live = [(leaf.key, leaf.source) for leaf in tree.leaves if not leaf.exhausted]
    champ = tree.leaves[tree.tree[0]]
    if live:
        assert (champ.key, champ.source) == min(live)
        assert champ.state in (LeafState.WINNER_WITH_NEW_KEY, LeafState.WINNER_WITH_SAME_KEY)
    for node in range(1, tree.k):
        assert tree.leaves[tree.tree[node]].state.value.startswith("LOSER_")


def drain(tree: LoserTree[str, str]) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    while not tree.is_exhausted():
        check_tournament(tree)
        out.extend(tree.pop_group())
        tree.advance_popped()
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sets(st.sampled_from("abcdefghij")), min_size=1, max_size=20))
def test_pops_every_record_in_key_then_source_order(inputs: list[set[str]]) -> None:
    tree = LoserTree([stream(sorted(keys), i) for i, keys in enumerate(inputs)])
    got = [(key, src) for key, src, _ in drain(tree)]
    assert got == sorted((key, i) for i, keys in enumerate(inputs) for key in keys)


def test_group_pop_finds_same_keys_without_comparing_keys() -> None:
    k = 16
    tree = LoserTree([stream(["same"], i) for i in range(k)])
    built = tree.comparisons
    group = tree.pop_group()
    assert [src for _, src, _ in group] == list(range(k))
    assert tree.comparisons == built  # the whole group came out through first_same jumps
    tree.advance_popped()
    assert tree.is_exhausted()


@pytest.mark.parametrize("k", [2, 3, 4, 5, 7, 8, 9, 16, 17, 32, 33])
def test_comparisons_per_record_at_most_ceil_log2_k(k: int) -> None:
    rnd = random.Random(k)
    keys = [f"{i:08d}" for i in rnd.sample(range(10**7), 400 * k)]
    parts = [sorted(keys[i::k]) for i in range(k)]
    tree = LoserTree([stream(p, i) for i, p in enumerate(parts)])
    n = len(drain(tree))
    assert n == len(keys)
    assert tree.comparisons / n <= math.ceil(math.log2(k)) == comparisons_bound(k)


def test_unsorted_input_raises_naming_the_source() -> None:
    with pytest.raises(InputError, match="source 1"):
        drain(LoserTree([stream(["a", "b"]), stream(["c", "a"], 1)]))


def test_merge_iterator_interface() -> None:
    rows: list[list[dict[str, Any]]] = [[{"k": "a", "ts": 1, "v": 1, "d": False}, {"k": "b", "ts": 1, "v": 2, "d": False}],
            [{"k": "a", "ts": 2, "v": 3, "d": False}, {"k": "b", "ts": None, "v": None, "d": True}]]
    it = MergeIterator([[(r["k"], r) for r in src] for src in rows], SPEC)
    assert it.is_valid() and it.key() == "a" and it.value() == {"k": "a", "ts": 2, "v": 3}
    it.next()
    assert not it.is_valid()  # 'b' ends in a delete-by-key


def test_no_inputs() -> None:
    tree: LoserTree[str, str] = LoserTree([])
    assert tree.is_exhausted() and tree.peek() is None
    assert trace_merge([], SPEC)[-1].action == "done"


# ---- steps -----------------------------------------------------------------------------------

row_st = st.builds(lambda ts, d, v: (ts, d, v), st.one_of(st.none(), st.integers(0, 2)), st.booleans(),
                   st.integers(0, 9))


@st.composite
def small_inputs(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    k = draw(st.integers(1, 9))
    out = []
    for _ in range(k):
        keys = sorted(draw(st.sets(st.sampled_from("abcdef"))))
        src: list[dict[str, Any]] = []
        for key in keys:
            ts, d, v = draw(row_st)
            src.append({"k": key, "ts": ts, "v": None if d else v, "d": d})
        out.append(src)
    return out


@settings(max_examples=150, deadline=None)
@given(inputs=small_inputs())
def test_steps_are_consistent_snapshots(inputs: list[list[dict[str, Any]]]) -> None:
    steps = trace_merge(inputs, SPEC)
    assert steps[0].action == "init" and steps[-1].action == "done"
    assert [s.index for s in steps] == list(range(len(steps)))
    comps = [s.comparisons for s in steps]
    assert comps == sorted(comps)
    for s in steps:
        assert {leaf.state for leaf in s.leaves} <= set(LeafState)
        assert len(s.tree) == len(inputs) and sorted(s.tree) == list(range(len(inputs)))
        assert s.leaves[s.tree[0]].state.value.startswith("WINNER_")
        assert all(s.leaves[m].source == m for m in range(len(s.leaves)))
        assert s.dump().startswith(f"step {s.index} [{s.action}]")
    # output grows only at emit steps, and the final output equals the engine's rows
    for before, after in itertools.pairwise(steps):
        assert len(after.output) - len(before.output) == (1 if after.action == "emit" and
                                                         after.description.startswith("emitted") else 0)
    final = steps[-1]
    tables = [pa.Table.from_pylist(src, schema=SCHEMA) for src in inputs]
    assert [dict(r) for r in final.output] == merge_to_table(tables, SPEC, engine="loser_tree").to_pylist()
    assert dict(zip(final.output_keys, map(dict, final.output))) == model_merge(inputs, SPEC)


def test_step_is_frozen_and_dump_shows_the_tree() -> None:
    inputs = [[{"k": "a", "ts": 1, "v": 1, "d": False}], [{"k": "a", "ts": 2, "v": 2, "d": False}],
              [{"k": "b", "ts": 0, "v": 3, "d": False}]]
    steps = trace_merge(inputs, SPEC)
    with pytest.raises(dataclasses.FrozenInstanceError):
        steps[0].comparisons = 99  # type: ignore[misc]
    text = steps[0].dump()
    assert "tree[0] = champion #0" in text and "n1:" in text and "LOSER_WITH_SAME_KEY" in text
    pops = [s for s in steps if s.action == "pop"]
    assert "same key" in pops[0].description  # leaf 1 reached through first_same
    assert any(leaf.state is LeafState.WINNER_WITH_SAME_KEY for leaf in pops[0].leaves)
    assert any(leaf.state is LeafState.LOSER_POPPED for leaf in pops[0].leaves)
    assert steps[-1].output_keys == ("a", "b")
