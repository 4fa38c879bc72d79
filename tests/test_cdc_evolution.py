"""`read_cdc` gives every image in the table's latest schema, whatever schema a row was written under.

A row written under an older schema (int → long, long → double beyond 2^53, float → string, a struct that
gained a field, a column added later) has its before image cast by Hudi's evolution rules
(merge/evolution.py), from CDC logs of each mode and from inferred instants alike; the images equal
what a snapshot read of the same instant gives in the latest schema.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lsm_lab
from lsm_lab.merge import evolution

OLD = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("i", pa.int32()), ("big", pa.int64()),
                 ("f", pa.float32()), ("s", pa.struct([("a", pa.int32())]))])
NEW = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("i", pa.int64()), ("big", pa.float64()),
                 ("f", pa.string()), ("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
                 ("added", pa.string())])


@pytest.mark.parametrize("mode", ["DATA_BEFORE_AFTER", "DATA_BEFORE", "OP_KEY_ONLY", None])
def test_before_images_of_older_rows_come_in_the_latest_schema(tmp_path: Path, mode: str | None) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", ordering_field="ts", layout="default",
                             cdc=mode is not None, cdc_mode=mode or "DATA_BEFORE_AFTER")
    old = pa.table({"id": ["x", "y"], "ts": [1, 1], "i": [1, 2], "big": [2**60 + 1, 5], "f": [1.5, 2.5],
                    "s": [{"a": 1}, {"a": 2}]}, schema=OLD)
    t.insert(old)
    t.upsert(pa.table({"id": ["x"], "ts": [2], "i": [10], "big": [0.5], "f": ["z"], "s": [{"a": 7, "b": "q"}],
                       "added": ["new"]}, schema=NEW))
    t.delete([{"id": "y"}])
    changes = t.read_cdc(None)
    image = changes.schema.field("before").type
    assert image == pa.struct([pa.field(f.name, f.type) for f in NEW])
    ops = changes.column("op").to_pylist()
    keys = changes.column("record_key").to_pylist()
    before = {(op, k): b for op, k, b in zip(ops, keys, changes.column("before").to_pylist()) if b is not None}
    # the old rows as the latest schema reads them: Hudi's casts (big rounds as Java's long → double does)
    want = {r["id"]: r for r in pa.table({
        f.name: (evolution.cast_to(old.column(f.name), f.type) if f.name in old.column_names
                 else pa.nulls(old.num_rows, f.type)) for f in NEW}).to_pylist()}
    assert before[("u", "x")] == want["x"] and before[("d", "y")] == want["y"]
    assert before[("u", "x")]["big"] == float(2**60) and before[("u", "x")]["s"] == {"a": 1, "b": None}
    assert before[("u", "x")]["f"] == "1.5" and before[("u", "x")]["added"] is None
    after = [a for op, a in zip(ops, changes.column("after").to_pylist()) if op == "u"]
    assert after == [{"id": "x", "ts": 2, "i": 10, "big": 0.5, "f": "z", "s": {"a": 7, "b": "q"}, "added": "new"}]
    assert bool(changes.column("inferred")[0].as_py()) == (mode is None)
