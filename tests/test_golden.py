"""Golden text tests for what learners read: `trace_merge(...)[i].dump()` and `Table.dump_levels()`.

The texts are compared whole with the files in tests/golden/, so any change to a dump's layout
(a renamed state, a moved column, a lost line) shows up as a diff to review. Instant times (the
wall clock) are replaced by <t1>, <t2>, … in order of appearance; everything else is deterministic
(bucket file ids are derived from the table, partition and bucket).

After an intended change:  LSM_LAB_UPDATE_GOLDEN=1 pytest tests/test_golden.py  and review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lsm_lab
from lsm_lab.merge.loser_tree import trace_merge
from lsm_lab.merge.semantics import MergeMode, MergeSpec

GOLDEN = Path(__file__).resolve().parent / "golden"
INSTANT = re.compile(r"(?<!\d)\d{17}(?!\d)")


def _normalize(text: str) -> str:
    names: dict[str, str] = {}
    return INSTANT.sub(lambda m: names.setdefault(m.group(0), f"<t{len(names) + 1}>"), text)


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("LSM_LAB_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run LSM_LAB_UPDATE_GOLDEN=1 pytest {__file__}"
    want = path.read_text()
    assert text == want, f"{name} changed; if intended, regenerate with LSM_LAB_UPDATE_GOLDEN=1 and review the diff"


def test_trace_merge_dump() -> None:
    # chapter 05's kind of example: a base and two logs, a key in all three (a same-key group), a delete,
    # an input that runs out first, and a tie on the ordering value (the later input wins)
    spec = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="key", ordering="ts", delete="is_delete")

    def rows(*items: tuple[str, int, bool]) -> list[dict[str, Any]]:
        return [{"key": k, "ts": ts, "is_delete": d} for k, ts, d in items]

    inputs = [rows(("apple", 1, False), ("cherry", 1, False), ("kiwi", 1, False), ("plum", 1, False)),
              rows(("apple", 3, False), ("fig", 2, False), ("kiwi", 2, True)),
              rows(("apple", 2, False), ("cherry", 1, False))]
    steps = trace_merge(inputs, spec)
    text = "\n\n".join(step.dump() for step in steps) + "\n"
    assert steps[-1].output_keys == ("apple", "cherry", "fig", "plum")
    _check("trace_merge.txt", text)


def test_dump_levels(tmp_path: Path) -> None:
    table = lsm_lab.create_table(tmp_path / "t", name="golden", record_key="id", ordering_field="ts",
                                 partition_by="city", num_buckets=2)
    table.insert(pa.table({"id": ["a", "b", "c", "d", "e", "f"], "ts": [1] * 6,
                           "city": ["x", "x", "y", "y", "x", "y"], "v": [1, 2, 3, 4, 5, 6]}))
    table.upsert(pa.table({"id": ["a", "d"], "ts": [2, 2], "city": ["x", "y"], "v": [10, 40]}))
    table.delete(pa.table({"id": ["e"], "ts": [3], "city": ["x"], "v": [0]}))  # e shares a's bucket (Java hash)
    before = table.dump_levels()
    table.compact(strategy="full", progress=False)
    after = table.dump_levels()
    assert "L0 (2)" in before and "L0 (2)" not in after
    _check("dump_levels.txt", _normalize(f"before compaction\n{before}\n\nafter full compaction\n{after}\n"))


@pytest.mark.parametrize("name", ["trace_merge.txt", "dump_levels.txt"])
def test_golden_files_are_readable(name: str) -> None:
    text = (GOLDEN / name).read_text()
    assert text.endswith("\n") and not INSTANT.search(text)
