"""The twin-table sequence: every write kind and service, run on a local table and on a remote one.

The local table is checked against a dict model elsewhere (test_table_model.py), so a remote table that
gives the same rows after every step is right. Instant times differ between the two tables, so rows are
compared without the meta columns that hold them. Used by test_s3_tables.py and test_azure_tables.py.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import lsm_lab

INSTANT_COLUMNS = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name")


def rows(table: pa.Table, drop: tuple[str, ...] = INSTANT_COLUMNS) -> list[tuple]:
    """Rows as sorted tuples of strings, without the columns that name instants (they differ per table)."""
    cols = [c for c in table.column_names if c not in drop]
    return sorted(tuple(str(r[c]) for c in cols) for r in table.select(cols).to_pylist())


def batch(i: int, n: int = 30) -> list[dict[str, Any]]:
    return [{"id": f"k{(i * 7 + j) % 50:02d}", "city": ("a", "b", "c")[j % 3], "ts": i, "v": i * 1000 + j}
            for j in range(n)]


def run_sequence(table: lsm_lab.Table) -> dict[str, Any]:
    """Writes, deletes and every service; returns what was observed along the way."""
    seen: dict[str, Any] = {"instants": []}
    for i in range(4):
        seen["instants"].append(table.upsert(batch(i)))
    table.delete([{"id": "k03", "city": "a"}, {"id": "k10", "city": "b"}])
    seen["after_delete"] = rows(table.read())
    table.compact(strategy="log")
    seen["after_log_compaction"] = rows(table.read())
    table.upsert(batch(5))
    table.compact(strategy="full")
    seen["after_full_compaction"] = rows(table.read())
    seen["ro"] = rows(table.read_optimized())
    sp = table.savepoint(seen["instants"][-1])
    assert sp.is_completed
    table.upsert(batch(6))
    table.upsert(batch(7))
    failed = table.upsert(batch(8))
    table.rollback(failed)  # rolls back the latest completed write
    seen["after_rollback"] = rows(table.read())
    table.restore(seen["instants"][-1])
    seen["after_restore"] = rows(table.read())
    table.upsert(batch(9))
    table.compact(strategy="full")
    seen["time_travel"] = [rows(table.read(as_of=i)) for i in table.completed_writes()]
    seen["incremental"] = rows(table.read_incremental(table.completed_writes()[-3].completion_time))
    table.delete_savepoint(seen["instants"][-1])
    table.clean(retained=1)
    seen["after_clean"] = rows(table.read())
    return seen


TWIN_OPTIONS: dict[str, Any] = dict(name="twin", record_key="id", partition_by="city", ordering_field="ts",
                                   num_buckets=2, **{"hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6"})

STEPS = ("after_delete", "after_log_compaction", "after_full_compaction", "ro", "after_rollback", "after_restore",
         "after_clean", "time_travel", "incremental")
