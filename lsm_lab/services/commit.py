"""One write, from its transaction to its commit, and the inline services after it — for every engine.

    run_write(table, op, schema, write_files)
      ├─ first write of a table? leave the note that lets create_table start over if it fails
      ├─ WriteTransaction (occ.py): requested → inflight, the snapshot the write started from
      │     write_files(txn) → WriteStats         ← where the rows move: the library's threads, or Spark tasks
      ├─ under the table lock: the schema committed meanwhile + this write's new columns
      └─ commit: conflict check, completed instant (commit metadata with the schema)
    after_write(table)
      └─ inline compaction when due (hoodie.compact.inline*), then clean, then archive

`Table._write` (api.py) and `lsm_lab.spark.write.write_table` both call these, so a
change to how a write commits, or to the inline services, is made once; only the
`write_files` callback (and the compaction runner) differ.

Simplified compared with Apache Hudi: Hudi's `BaseHoodieWriteClient` drives
startCommit → write → commit → `runTableServicesInline` with many more hooks
(pre-commit validators, metadata-table updates, post-commit callbacks); lsm_lab keeps
the steps that change what a reader sees.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from lsm_lab.filegroup import fsview
from lsm_lab.filegroup import write as writer
from lsm_lab.services import archiver, clean, compaction, occ
from lsm_lab.services.compaction import OperationRunner
from lsm_lab.services.lock import table_lock
from lsm_lab.table.state import TableState
from lsm_lab.timeline.instant import COMMIT, DELTA_COMMIT, REPLACE_COMMIT, Instant
from lsm_lab.timeline.metadata import WriteStat, commit_metadata, summarize

WriteFiles = Callable[[occ.WriteTransaction], list[WriteStat]]


INPUT_RECORDS_KEY = "lsm_lab.input.records"  # extraMetadata: the rows a write was handed


def describe_write(metadata: Mapping[str, Any]) -> str:
    """What a completed write did, in words: rows in, then inserted / updated / deleted, and why fewer.

        upsert: 4 rows in → 2 inserted, 1 updated; 1 row repeated a key of the batch (one version kept)
        delete: 2 keys in → 0 deleted; 2 named no live row

    From the commit's write statistics (`numInserts`, `numUpdateWrites`, `numDeletes`: deletes that
    remove a live row) and the input count lsm_lab records; a write by another engine (no input
    count) says only what it wrote.
    """
    totals = summarize(metadata)
    op = str(metadata.get("operationType") or "write").lower()
    raw = (metadata.get("extraMetadata") or {}).get(INPUT_RECORDS_KEY)
    given = int(raw) if raw is not None and str(raw).isdigit() else None
    if op == "delete":
        done = totals["records_deleted"]
        text = f"{done:,} deleted"
        if given is not None:
            text = f"delete: {given:,} key{'s' if given != 1 else ''} in → " + text
            if given > done:
                n = given - done
                text += f"; {n:,} named no live row (not in the table, or repeated in the batch)"
            return text
        return "delete: " + text
    inserted, updated = totals["records_inserted"], totals["records_updated"]
    text = f"{inserted:,} inserted, {updated:,} updated"
    if totals["records_deleted"]:
        text += f", {totals['records_deleted']:,} deleted"
    replaced = sum(len(ids or []) for ids in (metadata.get("partitionToReplaceFileIds") or {}).values())
    if replaced:  # an overwrite (services/overwrite.py): the old rows went with their file groups
        text += f", {replaced:,} file group{'s' if replaced != 1 else ''} replaced"
    if given is None:
        return f"{op}: {text}"
    text = f"{op}: {given:,} row{'s' if given != 1 else ''} in → {text}"
    folded = given - inserted - updated
    if folded > 0:
        text += (f"; {folded:,} row{'s' if folded != 1 else ''} repeated a key of the batch "
                 "(one version per key is written: the highest ordering value, else the last)")
    return text


def note_first_write(table: TableState) -> None:
    """Before a write checks its input: if this is the table's first write and it fails (bad input, a crash),
    `create_table` may start over (`fsview.abandoned_table`)."""
    if table.schema is None and not table.completed_writes():
        fsview.mark_first_write(table.path)


def run_write(table: TableState, op: str, batch_schema: pa.Schema | Callable[[], pa.Schema], write_files: WriteFiles,
              *, input_rows: int | Callable[[], int] | None = None,
              replaced: Callable[[], Mapping[str, list[str]]] | None = None) -> Instant:
    """Run one optimistic write of operation `op` whose rows have `batch_schema` (empty: a delete on a table
    without a schema); `write_files(txn)` writes the data files and returns their stats. Returns the
    completed instant (`ConflictError` when another writer won). The caller has called `note_first_write`
    before it checked its input (a rejected first batch must leave the table re-creatable). `input_rows`
    (the rows handed in) is kept in the commit's `extraMetadata` (`lsm_lab.input.records`) for `describe_write`.
    A streamed write (filegroup/stream_write.py) knows its schema and input rows only once `write_files` has
    read the stream: it passes both as callables, asked after `write_files`.  `replaced` (an overwrite,
    services/overwrite.py) makes the instant a `replacecommit` whose `partitionToReplaceFileIds` it gives,
    asked after `write_files`."""
    current = table.schema
    action = REPLACE_COMMIT if replaced is not None else DELTA_COMMIT if table.config.is_mor else COMMIT
    with occ.WriteTransaction(table.path, table.active_timeline, action, {"operationType": op.upper()}) as txn:
        txn.begin(table.latest_completion)
        stats = write_files(txn)
        batch_schema = batch_schema() if callable(batch_schema) else batch_schema
        input_rows = input_rows() if callable(input_rows) else input_rows
        schema = batch_schema if len(batch_schema) else (current or pa.schema([]))
        with table_lock(table.path):  # the schema committed meanwhile, plus this write's new columns
            if len(schema):
                schema = occ.merge_schemas(table.schema, schema)
            extra = {writer.SCHEMA_KEY: writer.schema_to_text(schema)} if len(schema) else {}
            if input_rows is not None:
                extra[INPUT_RECORDS_KEY] = str(input_rows)
            meta = commit_metadata(stats, operation=op, extra=extra)
            if replaced is not None:
                meta["partitionToReplaceFileIds"] = {p: list(ids) for p, ids in replaced().items()}
            return txn.commit(meta)


def after_write(table: TableState, *, runner: OperationRunner | None = None, progress: bool | None = None,
                extra_metadata: Mapping[str, str] | None = None) -> None:
    """The inline table services of hoodie.properties after a write: compaction when due (its operations run
    by `runner`: the library's, or Spark tasks), cleaning, archival."""
    due, _ = compaction.inline_due(table)
    if due:
        compaction.compact(table, strategy=compaction.inline_strategy(table.config.props), progress=progress,
                           runner=runner, extra_metadata=extra_metadata)
    clean.maybe_clean(table)
    archiver.maybe_archive(table)


__all__ = ["WriteFiles", "after_write", "run_write"]
