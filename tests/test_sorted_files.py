"""RFC-103's promise for the `lsm_tree` layout: every data file is strictly sorted by record key.

Many seeded random writes (inserts, upserts, bulk inserts, deletes with and
without ordering values, keys repeated within and across batches, non-ASCII
keys whose UTF-16 and UTF-8 orders differ) on MERGE_ON_READ and COPY_ON_WRITE
tables; then every file on disk — base files, data logs and delete logs, of
every slice, not only the latest — is read with plain pyarrow and its keys are
compared as UTF-8 bytes in Python.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import lsm_lab
from lsm_lab.filegroup import fsview
from lsm_lab.format import log_v2 as v2

ALPHABET = ["a", "B", "z", "é", "\uffff", "\U0001f600", "0", "-", "~", "ß"]


def _keys(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))) for _ in range(n)]


def _random_writes(table: lsm_lab.Table, rng: random.Random, *, composite: bool, steps: int = 14) -> None:
    universe = _keys(rng, 120)
    for step in range(steps):
        op = rng.choice(["insert", "upsert", "upsert", "bulk_insert", "delete"]) if step else "insert"
        rows: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 60)):
            row = {"id": rng.choice(universe), "city": rng.choice(["sf", "chennai", "são_paulo"]),
                   "ts": rng.randint(0, 20), "v": rng.random()}
            if composite:
                row["n"] = rng.randint(0, 2)
            rows.append(row)
        if op == "delete":
            keep = ["id", "city"] + (["n"] if composite else []) + (["ts"] if rng.random() < 0.5 else [])
            rows = [{k: r[k] for k in keep} for r in rows]
        getattr(table, op)(rows)


def _key_column(path: Path, is_delete: bool) -> list[str]:
    col = v2.delete_key_column(pq.read_schema(path)) if is_delete else "_hoodie_record_key"
    keys: list[str] = pq.read_table(path, columns=[col]).column(col).to_pylist()
    return keys


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
@pytest.mark.parametrize("composite", [False, True])
def test_every_lsm_tree_file_is_strictly_sorted(tmp_table: Callable[..., lsm_lab.Table], table_type: str,
                                                composite: bool) -> None:
    rng = random.Random(20261122 + composite)
    table = tmp_table(record_key=["id", "n"] if composite else "id", partition_by="city", ordering_field="ts",
                      table_type=table_type, layout="lsm_tree", num_buckets=2)
    _random_writes(table, rng, composite=composite)
    files = fsview.list_data_files(table.path)
    kinds = {("delete" if n.is_delete else n.kind) for _, _, n in files}
    assert kinds == ({"base", "log", "delete"} if table_type == "MERGE_ON_READ" else {"base"})
    for _, path, name in files:
        keys = _key_column(path, name.is_delete)
        raw = [k.encode("utf-8") for k in keys]
        bad = [(a, b) for a, b in itertools.pairwise(raw) if not a < b]
        assert not bad, f"{path.name} is not strictly sorted: {bad[:3]}"
        footer = {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}
        assert footer.get("lsm_lab.sorted") == "true", path.name
        if keys:
            assert (footer["hoodie_min_record_key"], footer["hoodie_max_record_key"]) == (keys[0], keys[-1])
    # and a sorted merge of those files gives the same rows as the hash merge
    assert table.read(merge="sorted").sort_by("_hoodie_record_key").equals(
        table.read(merge="hash").sort_by("_hoodie_record_key"))


def test_default_layout_does_not_claim_sorted_files(tmp_table: Callable[..., lsm_lab.Table]) -> None:
    table = tmp_table(layout="default", ordering_field="ts")
    table.insert([{"id": k, "ts": 1} for k in ["c", "a", "b"]])
    table.upsert([{"id": k, "ts": 2} for k in ["b", "a"]])
    files = fsview.list_data_files(table.path)
    assert sorted(n.kind for _, _, n in files) == ["base", "log"]  # the insert's base file, the upsert's log
    for _, path, _ in files:
        footer = {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}
        assert "lsm_lab.sorted" not in footer
