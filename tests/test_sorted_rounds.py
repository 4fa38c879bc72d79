"""The sorted engine can resolve a large round in parts (`round_rows`, `ROUND_BATCHES`; off by default):
same rows, smaller rounds.

k sorted sources whose batches end at nearly the same keys (the common case: runs of alike key
spread) make one round of about k batches followed by slivers; split, each part holds about one
batch of rows. The parts must give exactly the rows of the unsplit merge and of the dict model,
whatever the keys (fixed-width keys take NumPy's path, mixed widths Arrow's).
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsm_lab.merge import MergeMode, MergeSpec, model_merge
from lsm_lab.merge.semantics import prepare_sources
from lsm_lab.merge.sorted import merge_sorted

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])
Row = dict[str, Any]


def merged(sources: list[list[Row]], spec: MergeSpec, batch_size: int, round_rows: int | None,
           read_ahead: bool = False) -> tuple[list[Row], dict[str, Any]]:
    inputs, schema = prepare_sources([pa.Table.from_pylist(rows, schema=SCHEMA) for rows in sources], spec,
                                     batch_size)
    assert schema is not None
    stats: dict[str, Any] = {}
    batches = list(merge_sorted(inputs, schema, spec, batch_size, read_ahead=read_ahead, stats=stats,
                                round_rows=round_rows))
    assert all(0 < b.num_rows <= batch_size for b in batches)
    return [r for b in batches for r in b.to_pylist()], stats


@st.composite
def case(draw: st.DrawFn) -> tuple[list[list[Row]], MergeMode, int, int, bool]:
    width = draw(st.sampled_from([None, 3, 9]))  # None: keys of mixed widths
    universe = draw(st.sets(st.integers(0, 400), min_size=1, max_size=120))
    keys = [f"{i:0{width}d}" if width else "x" * (i % 4) + str(i) for i in universe]
    sources = []
    for _ in range(draw(st.integers(1, 6))):
        chosen = draw(st.sets(st.sampled_from(keys), max_size=len(keys)))
        rows = []
        for key in sorted(chosen, key=lambda s: s.encode("utf-8")):
            d = draw(st.booleans())
            rows.append({"k": key, "ts": draw(st.one_of(st.none(), st.integers(0, 3))),
                         "v": None if d else draw(st.integers(0, 99)), "d": d})
        sources.append(rows)
    mode = draw(st.sampled_from(list(MergeMode)))
    return sources, mode, draw(st.sampled_from([2, 7, 32])), draw(st.sampled_from([1, 3, 10, 50])), draw(st.booleans())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=case())
def test_rounds_in_parts_give_the_rows_of_one_round_and_of_the_model(
        c: tuple[list[list[Row]], MergeMode, int, int, bool]) -> None:
    sources, mode, batch_size, round_rows, read_ahead = c
    spec = MergeSpec(mode, key="k", ordering="ts", delete="d")
    whole, _ = merged(sources, spec, batch_size, 0)
    parts, stats = merged(sources, spec, batch_size, round_rows, read_ahead)
    assert parts == whole
    assert {r["k"]: r for r in parts} == model_merge(sources, spec)
    keys = [r["k"].encode("utf-8") for r in parts]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert stats["rounds"] >= 1 or not whole


def test_a_round_of_k_batches_is_resolved_in_parts_of_about_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """8 runs of alike spread keys, batches of 1,000 rows: unsplit, one round takes nearly 8,000 rows; with
    `round_rows` 1,000 it comes in parts of about 1,000."""
    from lsm_lab.merge import sorted as engine

    rng = random.Random(33)
    universe = sorted(f"{rng.getrandbits(64):016x}" for _ in range(40_000))
    sources = [[{"k": key, "ts": r, "v": r, "d": False} for key in sorted(rng.sample(universe, 4_000))]
               for r in range(8)]
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")
    real = engine._resolve
    sizes: list[int] = []

    def spy(pieces: list[Any], spec_: MergeSpec, horizon: bytes) -> pa.Table:
        sizes.append(sum(p.rows.num_rows for p in pieces))
        return real(pieces, spec_, horizon)

    monkeypatch.setattr(engine, "_resolve", spy)
    by_limit = {}
    for round_rows in (0, 1_000, None):  # never split; parts of ~1,000 rows; the default
        sizes.clear()
        rows, stats = merged(sources, spec, 1_000, round_rows)
        assert {r["k"]: r for r in rows} == model_merge(sources, spec)
        assert stats["rounds"] == len(sizes)
        by_limit[round_rows] = list(sizes)
    assert max(by_limit[0]) > 6_000  # one round takes nearly every input's whole batch
    assert max(by_limit[1_000]) <= 1_300 and sum(by_limit[1_000]) == sum(by_limit[0]) == 32_000
    assert by_limit[None] == by_limit[0]  # the default: ROUND_BATCHES 0, never split
    monkeypatch.setattr(engine, "ROUND_BATCHES", 1)  # on: only rounds above MIN_ROUND_ROWS (32,768) are split
    sizes.clear()
    merged(sources, spec, 1_000, None)
    assert sizes == by_limit[0]  # (these are all smaller)
    monkeypatch.setattr(engine, "MIN_ROUND_ROWS", 1_000)
    sizes.clear()
    merged(sources, spec, 1_000, None)
    assert sizes == by_limit[1_000]


def test_the_environment_turns_rounds_in_parts_on(monkeypatch: pytest.MonkeyPatch) -> None:
    from lsm_lab.errors import InputError
    from lsm_lab.merge import sorted as engine

    sources = [[{"k": f"{i:05d}", "ts": r, "v": i, "d": False} for i in range(r, 3_000, 2)] for r in range(3)]
    spec = MergeSpec(MergeMode.COMMIT_TIME_ORDERING, key="k", ordering="ts", delete="d")
    _, whole = merged(sources, spec, 500, None)
    monkeypatch.setattr(engine, "MIN_ROUND_ROWS", 1)
    monkeypatch.setenv(engine.ROUND_BATCHES_VARIABLE, "1")
    rows, parts = merged(sources, spec, 500, None)
    assert parts["rounds"] > whole["rounds"] and {r["k"]: r for r in rows} == model_merge(sources, spec)
    monkeypatch.setenv(engine.ROUND_BATCHES_VARIABLE, "lots")
    with pytest.raises(InputError, match="LSM_LAB_MERGE_ROUND_BATCHES"):
        merged(sources, spec, 500, None)
