"""The hash merge's map (merge/keymap.py) and its linearity: the log keys are hashed into one table, once per merge.

No timing is asserted: the linear cost is shown by counting work with spies (how many
tables are built, how many keys each holds, how many base keys are probed), which is
the same on any machine. The timed comparison is ``benchmarks/hash_scaling.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lsm_lab.merge import MergeMode, MergeSpec, hashmerge, merge_sources, merge_to_table, model_merge
from lsm_lab.merge.keymap import KeyMap, hash_keys

TEXT = st.text(alphabet=st.sampled_from(["a", "b", "z", "é", "\U0001f600", "\x00"]), max_size=20)


def arrow(keys: list[str], form: str) -> pa.Array | pa.ChunkedArray:
    """The keys as a string, large_string, sliced (non-zero offset) or chunked array."""
    if form == "large":
        return pa.array(keys, type=pa.large_string())
    if form == "sliced":
        return pa.array(["pad", *keys, "pad"]).slice(1, len(keys))
    if form == "chunked":
        half = len(keys) // 2
        return pa.chunked_array([pa.array(keys[:half], type=pa.string()), pa.array(keys[half:], type=pa.string())])
    return pa.array(keys, type=pa.string())


FORMS = st.sampled_from(["plain", "large", "sliced", "chunked"])


@settings(max_examples=300, deadline=None)
@given(built=st.lists(TEXT, unique=True, max_size=60), probes=st.lists(TEXT, max_size=60),
       form_a=FORMS, form_b=FORMS)
def test_find_is_a_dict_lookup(built: list[str], probes: list[str], form_a: str, form_b: str) -> None:
    probes = probes + built[::2]  # some hits for sure
    where = {k: i for i, k in enumerate(built)}
    got = KeyMap(arrow(built, form_a)).find(arrow(probes, form_b))
    assert got.tolist() == [where.get(k, -1) for k in probes]


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(TEXT.filter(bool), min_size=1, max_size=30))
def test_the_hash_depends_on_the_bytes_only(keys: list[str]) -> None:
    # keys of one width take the grid path, keys of mixed widths the word-by-word path: the same hash
    alone = np.concatenate([hash_keys(pa.array([k])) for k in keys])
    assert hash_keys(pa.array(keys)).tolist() == alone.tolist()
    assert hash_keys(pa.array(keys, type=pa.large_string())).tolist() == alone.tolist()


def test_keys_of_one_width_find_keys_of_mixed_widths() -> None:
    uuids = [f"{i:032x}" for i in range(1000)]
    m = KeyMap(pa.array(uuids))
    assert m.find(pa.array(["x", uuids[7], "", uuids[999]])).tolist() == [-1, 7, -1, 999]
    mixed = KeyMap(pa.array(["x", *uuids[:10]]))
    assert mixed.find(pa.array(uuids[:12])).tolist() == [*range(1, 11), -1, -1]


def test_memory_is_a_few_bytes_per_key() -> None:
    n = 10_000
    m = KeyMap(pa.array([f"key-{i}" for i in range(n)]))
    assert 8 * n + 4 * 2 * n <= m.nbytes <= 8 * n + 4 * 4 * n  # hashes + 2n..4n int32 slots


# ---- linearity: one table of the log keys per merge, whatever the number of base batches ----

SCHEMA = pa.schema([("k", pa.string()), ("ts", pa.int64()), ("v", pa.int64()), ("d", pa.bool_())])


def _rows(keys: list[str], ts: int) -> list[dict[str, Any]]:
    return [{"k": k, "ts": ts, "v": i, "d": i % 7 == 0} for i, k in enumerate(keys)]


@pytest.mark.parametrize("mode", list(MergeMode))
@pytest.mark.parametrize("base_batches", [1, 5, 40])
def test_the_log_map_is_built_once_per_merge(monkeypatch: pytest.MonkeyPatch, mode: MergeMode,
                                             base_batches: int) -> None:
    built: list[int] = []  # keys in each table built
    probed: list[int] = []  # keys in each probe

    class Spy(KeyMap):
        def __init__(self, keys: pa.Array | pa.ChunkedArray) -> None:
            built.append(len(keys))
            super().__init__(keys)

        def find(self, keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
            probed.append(len(keys))
            return super().find(keys)

    def no_index_in(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the hash merge must not rebuild a set of the log keys per call")

    monkeypatch.setattr(hashmerge, "KeyMap", Spy)
    monkeypatch.setattr(pc, "index_in", no_index_in)
    batch = 25
    base_keys = [f"k{i:05d}" for i in range(batch * base_batches)]
    log1 = [f"k{i:05d}" for i in range(0, batch * base_batches + 300, 3)]  # updates and inserts
    log2 = [f"k{i:05d}" for i in range(0, batch * base_batches + 300, 5)]
    spec = MergeSpec(mode, key="k", ordering="ts", delete="d")
    sources = [_rows(base_keys, 1), _rows(log1, 2), _rows(log2, 0)]
    tables = [pa.Table.from_pylist(rows, schema=SCHEMA) for rows in sources]

    stats: dict[str, Any] = {}
    streamed = tables[0].to_batches(max_chunksize=batch)  # a list of batches: the base is streamed
    out = pa.Table.from_batches(list(merge_sources([streamed, *tables[1:]], spec, engine="hash",
                                                   batch_size=batch, stats=stats)))
    assert {r["k"]: r for r in out.to_pylist()} == model_merge(sources, spec)
    distinct_log_keys = len(set(log1) | set(log2))
    assert built == [distinct_log_keys]  # one table, of the folded log records
    assert probed == [batch] * base_batches  # each base key probed once
    assert stats == {"map_records": distinct_log_keys, "map_bytes": stats["map_bytes"], "map_probes": base_batches}

    built.clear()
    probed.clear()
    whole = merge_to_table(tables, spec, engine="hash", batch_size=batch)  # a base in memory: one probe
    assert {r["k"]: r for r in whole.to_pylist()} == model_merge(sources, spec)
    assert built == [distinct_log_keys]
    assert probed == [len(base_keys)]
