"""The main job: build an lsm_tree MERGE_ON_READ trips table, change it, read it back, check it.

    generate trips ─► create table (lsm_tree, MOR, partitioned by city, ordering ts)
                   ─► insert ─► upsert × rounds ─► delete
                   ─► print the timeline and the LSM levels
                   ─► snapshot read + time-travel read, both checked against a plain dict model

`lsm-lab demo --storage s3` (`make demo-s3`) runs the same job on a local S3
server (moto) and prints the requests (LIST, GET, HEAD, PUT, DELETE) of each step.

The dict model is the whole point of the last step: it applies the same batches
with Python dicts (latest ts wins per key, deletes remove), so the demo proves
its own output rather than just printing it.

Without `--dir` the table goes to a temporary folder that `demo_folder` removes
when the demo ends (`--keep` keeps it and says where); with `--dir` it stays.

`cdc_mode=` (a logging mode of `lsm_lab.create_table(cdc=True, cdc_mode=...)`) makes the same
table a CDC-enabled one, so its writes leave the change stream that `Table.read_cdc` reads.

Taught in: notebooks/00_why_lsm.ipynb, notebooks/13_change_data_capture.ipynb
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from lsm_lab.api import Table, create_table
from lsm_lab.errors import InputError
from lsm_lab.lab.datagen import TripsGenerator
from lsm_lab.lab.s3local import LocalS3
from lsm_lab.services.commit import describe_write
from lsm_lab.timeline.instant import Instant


def _apply(model: dict[str, dict[str, Any]], batch: pa.Table, *, delete: bool = False) -> None:
    for row in batch.to_pylist():
        cur = model.get(row["uuid"])
        if delete:
            if cur is not None and row["ts"] >= cur["ts"]:
                del model[row["uuid"]]
        elif cur is None or row["ts"] >= cur["ts"]:
            model[row["uuid"]] = row


@contextlib.contextmanager
def demo_folder(directory: str | Path | None = None, *, keep: bool = False,
                echo: Callable[[str], None] = print) -> Iterator[Path]:
    """`directory` as given (kept), or a new temporary folder removed on exit unless `keep`."""
    if directory:
        yield Path(directory)
        return
    tmp = Path(tempfile.mkdtemp(prefix="lsm_lab_demo_"))
    try:
        yield tmp
    finally:
        if keep:
            echo(f"kept {tmp} (remove it when done)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
            echo(f"removed {tmp} (--keep or --dir D keeps the table)")


def run_demo(directory: str | Path | None = None, *, rows: int = 100_000, rounds: int = 3, seed: int = 7,
             engine: str = "local", echo: Callable[[str], None] = print, storage: str = "local",
             cdc_mode: str | None = None) -> Table:
    """Run the main job; returns the table. Raises AssertionError if a read disagrees with the model.

    The table is written under `directory`; without one (local storage), under a new temporary folder that
    is kept — the table is the result — and named in the last line printed (`lsm-lab demo` uses
    `demo_folder`, which removes its folder unless --keep).

    `cdc_mode` (None: no CDC logs) creates a CDC-enabled table logging in that mode.

    `storage="s3"` starts a local S3 server (moto, `lsm_lab.lab.s3local`), runs the demo on a bucket
    of it, prints the requests each step sent, and stops the server."""
    if rows < 1 or rounds < 0:
        raise InputError(f"the demo needs at least 1 row and no negative rounds (got rows={rows}, rounds={rounds})")
    if storage not in ("local", "s3"):
        raise InputError(f"the demo runs on storage 'local' or 's3', not {storage!r}")
    if storage == "s3":
        with LocalS3() as s3:
            echo(f"local S3 server (moto) at {s3.endpoint}")
            return _run(f"{s3.new_bucket('demo')}/trips", s3.options(), rows=rows, rounds=rounds, seed=seed,
                        engine=engine, echo=echo, cdc_mode=cdc_mode)
    if directory:
        return _run(Path(directory) / "trips", None, rows=rows, rounds=rounds, seed=seed, engine=engine, echo=echo,
                    cdc_mode=cdc_mode)
    base = Path(tempfile.mkdtemp(prefix="lsm_lab_demo_"))  # the table is the result: kept, and the message says so
    try:
        table = _run(base / "trips", None, rows=rows, rounds=rounds, seed=seed, engine=engine, echo=echo,
                     cdc_mode=cdc_mode)
    except AssertionError as exc:  # a read disagreed with the model: the table is the evidence
        exc.add_note(f"the table is kept in {base} (remove it when done)")
        raise
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    echo(f"kept {base} (a new temporary folder: remove it when done)")
    return table


def _run(path: Any, storage_options: dict[str, str] | None, *, rows: int, rounds: int, seed: int, engine: str,
         echo: Callable[[str], None], cdc_mode: str | None = None) -> Table:
    echo(f"lsm_lab demo: {rows:,} trips, {rounds} upsert rounds, table at {path}")
    gen = TripsGenerator(seed)
    model: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    table = create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                         table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4,
                         storage_options=storage_options, cdc=cdc_mode is not None,
                         cdc_mode=cdc_mode or "DATA_BEFORE_AFTER")
    remote = storage_options is not None
    counts = table.storage.counts

    def cost(before: dict[str, int]) -> str:
        if not remote:
            return ""
        used = counts.since(before)
        return "  [" + " ".join(f"{k} {v}" for k, v in used.items() if v) + "]"

    def write(op: str, batch: pa.Table) -> Instant:
        if engine == "spark":
            from lsm_lab.spark import write_table  # pyspark (the spark extra): only for --engine spark

            return write_table(batch, table.path, op=op, storage_options=storage_options)
        done: Instant = getattr(table, op)(batch)
        return done

    batch = gen.inserts(rows)
    before = counts.snapshot()
    first = write("insert", batch)
    _apply(model, batch)
    model_after_first = dict(model)
    echo(f"  insert     {batch.num_rows:>9,} rows  → {first.begin_time} completed {first.completion_time}"
         f"{cost(before)}")
    for r in range(rounds):
        batch = gen.updates(max(1, rows // 5))
        before = counts.snapshot()
        inst = write("upsert", batch)
        _apply(model, batch)
        echo(f"  upsert #{r + 1}  {batch.num_rows:>9,} rows  → {inst.begin_time}{cost(before)}")
        echo(f"             {describe_write(table.instant_metadata(inst))}")
    batch = gen.deletes(max(1, rows // 50))
    before = counts.snapshot()
    inst = write("delete", batch)
    _apply(model, batch, delete=True)
    echo(f"  delete     {batch.num_rows:>9,} keys  → {inst.begin_time}{cost(before)}")
    echo(f"             {describe_write(table.instant_metadata(inst))}")
    echo(f"  writes took {time.perf_counter() - t0:.1f} s\n")

    echo("Timeline:")
    echo(table.timeline()[["begin_time", "completion_time", "action", "state", "operation",
                           "records_written", "records_deleted"]].to_string(index=False))
    echo("\nLevels (per file group: L1 base file, L0 log files):")
    echo(table.dump_levels())

    t1 = time.perf_counter()
    before = counts.snapshot()
    snap = table.read(columns=["uuid", "ts", "fare", "city"])
    echo(f"\nSnapshot read: {snap.num_rows:,} rows in {time.perf_counter() - t1:.2f} s{cost(before)}")
    _check(snap, model, "snapshot")
    old = table.read(as_of=first.begin_time, columns=["uuid", "ts", "fare", "city"])  # an instant time, as in Hudi
    echo(f"Time travel to instant {first.begin_time} (the insert): {old.num_rows:,} rows")
    _check(old, model_after_first, "time travel")
    echo("\ncheck: snapshot and time-travel reads equal the dict model ✓")
    echo(f"table at {path}" + (" (in memory of the local S3 server, which stops now)" if remote else ""))
    return table


def _check(result: pa.Table, model: dict[str, dict[str, Any]], what: str) -> None:
    got = {r["uuid"]: (r["ts"], r["fare"]) for r in result.to_pylist()}
    want = {k: (v["ts"], v["fare"]) for k, v in model.items()}
    if got != want:
        missing = len(set(want) - set(got))
        extra = len(set(got) - set(want))
        differ = sum(1 for k in set(got) & set(want) if got[k] != want[k])
        raise AssertionError(f"{what} read disagrees with the model: {missing} missing, {extra} extra, "
                             f"{differ} different rows")
