"""Crash test: a writer killed with SIGKILL at random moments, again and again.

    parent                                         child (a fresh process each round)
    ──────                                         ─────────────────────────────────
    spawn child(start = batches applied so far) ─► open the table, print "ready"
    wait for "ready", sleep a random time          loop i = start, start+1, ...:
                                                     batch i: one upsert or delete commit (a pure function of i)
                                                     append "i" to the ack file      ◄─ acknowledged
                                                     every 3rd batch: compact (hybrid / log / full)
                                                     every 5th: cluster (plan only every 10th)
                                                     every 7th: clean, every 11th: archive
    SIGKILL ──────────────────────────────────────► (dies anywhere: inside a write, a compaction,
                                                     a rollback, a clean, an archival ...)
    open the table, read the snapshot: it must equal the state after batches 0..a or 0..a+1
    (a = last acknowledged batch; a+1 may have committed just before the ack), check that
    every data file belongs to an instant on the timeline, then go on from that state.

After the last kill the parent writes once more itself and compacts, so the
table must also still accept writes and table services after all that.

`--stream` hands every batch to the table as a stream (a generator of 2-row record
batches, `buffer_rows=2`: several chunks, one commit; filegroup/stream_write.py), with a
pause between chunks, so that kills also land in the middle of reading a stream.

Run it:  .venv/bin/python benchmarks/crash_test.py --kills 200
(`tests/test_crash.py` runs a short version of the same loop.)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

KEYS = 40
PARTS = ("a", "b", "c")


# --------------------------------------------------------------------------- the workload (pure functions of i)
def batch(i: int) -> tuple[str, list[dict[str, Any]]]:
    """(operation, rows) of batch i — one commit; ts = i, so every batch is newer than the ones before."""
    rng = random.Random(i * 7919 + 1)
    keys = rng.sample(range(KEYS), 6)
    if i % 4 == 3:
        rows = []
        for k in keys[:3]:
            row: dict[str, Any] = {"id": f"k{k:02d}", "p": PARTS[k % 3]}
            if rng.random() < 0.7:
                row["ts"] = i  # an ordered delete; otherwise a delete by key (null ordering value)
            rows.append(row)
        return "delete", rows
    rows = [{"id": f"k{k:02d}", "p": PARTS[k % 3], "ts": i, "v": rng.randrange(1_000_000)} for k in keys]
    rows.append({"id": "marker", "p": "a", "ts": i, "v": i})  # every upsert batch changes the state
    return "upsert", rows


def model(n: int) -> dict[str, tuple[Any, ...]]:
    """The table's content after batches 0..n-1."""
    state: dict[str, tuple[Any, ...]] = {}
    for i in range(n):
        op, rows = batch(i)
        for r in rows:
            if op == "delete":
                state.pop(r["id"], None)
            else:
                state[r["id"]] = (r["p"], r["ts"], r["v"])
    return state


def create(path: Any, layout: str = "lsm_tree") -> None:
    import lsm_lab

    props: dict[str, Any] = {"hoodie.keep.min.commits": "6", "hoodie.keep.max.commits": "9",
                             "hoodie.compaction.hybrid.log.file.num.threshold": "2"}
    lsm_lab.create_table(path, name="crash", record_key="id", partition_by="p", ordering_field="ts",
                         num_buckets=2, layout=layout, **props)


# --------------------------------------------------------------------------- child
STREAM_ENV = "LSM_LAB_CRASH_STREAM"  # "1": the child writes every batch as a stream (--stream)


def _as_stream(rows: list[dict[str, Any]]) -> Any:
    """A batch's rows as a generator of 2-row record batches, pausing between them (a slow source)."""
    import pyarrow as pa

    table = pa.Table.from_pylist(rows)
    for b in table.to_batches(max_chunksize=2):
        yield b
        time.sleep(0.02)


def child(path: str, start: int, ack: str) -> None:
    os.environ["TQDM_DISABLE"] = "1"
    import pyarrow as pa

    import lsm_lab

    table = lsm_lab.open_table(path)
    # pyarrow loads pandas on its first conversion of Python rows (~0.3 s, more under load): done before
    # "ready", so that the random delay measures writing, not start-up
    pa.Table.from_pylist([{"id": "warm-up"}])
    print("ready", flush=True)
    fd = os.open(ack, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    strategies = ("hybrid", "log", "full")
    i = start
    while True:
        op, rows = batch(i)
        if os.environ.get(STREAM_ENV) == "1":
            getattr(table, op)(_as_stream(rows), buffer_rows=2)  # a stream in chunks, one commit ...
        else:
            getattr(table, op)(rows)  # one batch, one commit ...
        os.write(fd, f"{i}\n".encode())  # ... acknowledged once it landed
        if i % 3 == 2:
            table.compact(strategy=strategies[(i // 3) % 3])
        if i % 5 == 4:  # clustering: every file group counts as small
            table.cluster(plan_only=i % 10 == 4, options={"hoodie.clustering.plan.strategy.small.file.limit": "1"
                                                           + "0" * 12})
        if i % 7 == 6:
            table.clean(retained=3)
        if i % 11 == 10:
            table.archive()
        i += 1


# --------------------------------------------------------------------------- parent
def _snapshot(table: Any) -> dict[str, tuple[Any, ...]]:
    rows = table.read(columns=["id", "p", "ts", "v"]).to_pylist()
    return {r["id"]: (r["p"], r["ts"], r["v"]) for r in rows}


def _check_files(table: Any) -> None:
    from lsm_lab.filegroup import fsview

    known = {i.begin_time for i in table.instants()} | set(table.completion_map())
    orphans = [p for _, p, n in fsview.list_data_files(table.path) if n.instant not in known]
    if orphans:
        raise AssertionError(f"data files of no instant on the timeline: {orphans[:3]}")


def run(kills: int, *, workdir: Path | None = None, seed: int = 0, max_delay: float = 1.5,
        verbose: bool = True, layout: str = "lsm_tree", location: str | None = None,
        stream: bool = False) -> dict[str, Any]:
    """Kill a writer `kills` times; raises AssertionError on the first inconsistency. Returns a summary.

    `location` puts the table on an object store (`s3://bucket/prefix`, credentials from the
    AWS_* environment variables, which the writer processes inherit) instead of `workdir`; `stream`: the
    writers hand every batch over as a stream (several chunks, one commit).

    Without `workdir` the table lives in a new temporary folder, removed when the run ends, unless the
    run found an inconsistency (AssertionError): then the table is the evidence, kept, and the error says
    where."""
    root = Path(workdir or tempfile.mkdtemp(prefix="lsm_lab_crash_"))
    try:
        stats = _run_in(root, kills, seed=seed, max_delay=max_delay, verbose=verbose, layout=layout,
                        location=location, stream=stream)
    except AssertionError as exc:
        if workdir is None:
            exc.add_note(f"the table is kept in {root} (remove it when done)")
        raise
    except BaseException:
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
        raise
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return stats


def _run_in(root: Path, kills: int, *, seed: int, max_delay: float, verbose: bool, layout: str,
            location: str | None, stream: bool) -> dict[str, Any]:
    import lsm_lab

    rng = random.Random(seed)
    path: Any = location if location else root / "table"
    ack = root / "acks"
    if location is None and path.exists():
        shutil.rmtree(path)
    ack.unlink(missing_ok=True)
    create(path, layout)
    applied = 0  # batches the table holds
    states = {0: model(0)}
    started = time.monotonic()
    stats: dict[str, Any] = {"kills": 0, "batches": 0, "unacked_commits": 0, "pending_at_kill": 0,
                             "killed_in": {}}
    spill = root / "tmp"  # the children's temporary folder: a killed stream writer's spill stays inside `root`
    spill.mkdir(exist_ok=True)
    env = dict(os.environ, TQDM_DISABLE="1", PYTHONUNBUFFERED="1", TMPDIR=str(spill),
               **{STREAM_ENV: "1" if stream else "0"})
    for k in range(kills):
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(path), str(applied), str(ack)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        assert proc.stdout is not None and proc.stderr is not None  # both PIPE
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            proc.kill()
            raise AssertionError(f"child did not start: {line!r} {proc.stderr.read()}")
        time.sleep(rng.uniform(0.0, max_delay))
        if proc.poll() is not None:
            raise AssertionError(f"child died on its own (exit {proc.returncode}):\n{proc.stderr.read()}")
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stats["kills"] += 1
        acked = [int(x) for x in ack.read_text().split()] if ack.exists() else []
        # the last batch known to be in: acknowledged, or matched after an earlier kill without an ack
        last = max(acked[-1] if acked else -1, applied - 1)
        table = lsm_lab.open_table(path)
        pending = [i for i in table.instants() if not i.is_completed]
        stats["pending_at_kill"] += bool(pending)
        for inst in pending:  # "compaction requested" is a plan waiting; "... inflight" was cut short
            what = f"{inst.action} {inst.state.value}"
            stats["killed_in"][what] = stats["killed_in"].get(what, 0) + 1
        _check_files(table)
        got = _snapshot(table)
        matched = None
        for n in (last + 1, last + 2):  # the acknowledged prefix, or one more batch committed but not acked
            if n not in states:
                states[n] = model(n)
            if got == states[n]:
                matched = n
                break
        if matched is None:
            raise AssertionError(f"kill {k}: the snapshot is no prefix of the acknowledged batches "
                                 f"(last acknowledged {last}, {len(got)} rows)")
        stats["unacked_commits"] += matched - (last + 1)
        applied = matched
        stats["batches"] = applied
        if verbose and (k + 1) % 10 == 0:
            print(f"kill {k + 1}/{kills}: {applied} batches applied, {time.monotonic() - started:.0f} s, "
                  f"killed inside {stats['killed_in']}", flush=True)
    table = lsm_lab.open_table(path)
    op, rows = batch(applied)
    getattr(table, op)(rows)
    table.compact(strategy="full")
    if _snapshot(table) != model(applied + 1):
        raise AssertionError("the table did not accept a final write correctly")
    _check_files(table)
    stats["final_rows"] = len(_snapshot(table))
    stats["instants_active"] = len(table.instants())
    stats["instants_archived"] = len(table.archived_instants())
    stats["seconds"] = round(time.monotonic() - started, 1)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Kill an lsm_lab writer with SIGKILL again and again and check "
                                                 "that the table always holds a prefix of the acknowledged batches.")
    parser.add_argument("--kills", type=int, default=200, help="number of kills (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    parser.add_argument("--max-delay", type=float, default=1.5, help="longest time a child runs before the kill (s)")
    parser.add_argument("--dir", help="keep the table in this folder")
    parser.add_argument("--layout", choices=["lsm_tree", "default"], default="lsm_tree",
                        help="table layout: lsm_tree (bucket index) or default (key-lookup index)")
    parser.add_argument("--location", help="put the table here instead (s3://bucket/prefix; AWS_* variables)")
    parser.add_argument("--stream", action="store_true",
                        help="write every batch as a stream of 2-row batches (several chunks, one commit)")
    parser.add_argument("--child", nargs=3, metavar=("PATH", "START", "ACKS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return 0
    stats = run(args.kills, workdir=Path(args.dir) if args.dir else None, seed=args.seed, max_delay=args.max_delay,
                layout=args.layout, location=args.location, stream=args.stream)
    print(json.dumps(stats, indent=2))
    print(f"OK: {stats['kills']} kills, every snapshot a prefix of the acknowledged batches")
    return 0


if __name__ == "__main__":
    sys.exit(main())
