"""Benchmark: lsm_lab against the fastest peers, Apache Paimon (Rust reader/writer) and hudi-rs.

The upsert workload of issue 16, the same bytes for every contender: a bulk
insert of `rows` trips, `rounds` upserts of 10%, a delete of 1%; 3 partitions
(city) × 4 buckets; the ordering column `ts` decides between versions of a key.

    TripsGenerator ──► work/data/NN_<op>.parquet ──┬─► python -m lsm_lab.bench.peers  (lsm_lab, this venv)
                                                   └─► paimon_worker.py  (pypaimon + pypaimon-rust, .venv-peers)
    each prints {"write_s", "read_s", "rows"} and writes the snapshot's keys ──► same keys? ratios

Each contender runs as its own process, one after the other, so that the
"whole process" time includes interpreter start, imports and reading the
workload files, as a user would see it; write and read are also timed inside the
process. The read is a snapshot of the partition and key columns on both sides
(lsm_lab `read(columns=...)`, Paimon `with_projection`). Paimon merges its
sorted runs by key; lsm_lab merges a file slice by the logs' RECORD_POSITIONS
where every log carries them (its format's, and Hudi's, position-based merge:
filegroup/posmerge.py), else by key. So that both kinds of merge are on the record,
a second lsm_lab process then reads the table twice more each way, alternated,
and reports the read merged by key (positions ignored) beside a repeat of the
timed read. pypaimon pins pyarrow < 20 and lsm_lab needs 25+, hence the separate
venv (`make bench-peers` creates `.venv-peers`). The hudi-rs figure is the MOR
snapshot of the version-8 interop table (`lsm_lab.bench.interop.mor_read`),
measured in the same run.

Simplified compared with a full benchmark: one run per contender (no medians;
the printed ratios are from the same run), no memory figures, a local disk.

Taught in: notebooks/10_sorted_vs_hash_on_spark.ipynb
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lsm_lab.allocator import command_env
from lsm_lab.api import Table, create_table, open_table
from lsm_lab.errors import InputError
from lsm_lab.lab.datagen import TripsGenerator

KEY, PARTITION, ORDERING, BUCKETS = "uuid", "city", "ts", 4
WORKER = Path(__file__).with_name("paimon_worker.py")


def default_peer_python() -> Path | None:
    """The peers' interpreter: $LSM_LAB_PEER_PYTHON, else .venv-peers/bin/python under the working folder."""
    env = os.environ.get("LSM_LAB_PEER_PYTHON")
    candidate = Path(env) if env else Path.cwd() / ".venv-peers" / "bin" / "python"
    return candidate if candidate.is_file() else None


def write_workload(folder: Path, rows: int, *, rounds: int = 3, update_fraction: float = 0.1,
                   delete_fraction: float = 0.01, seed: int = 16) -> list[Path]:
    """The workload as Parquet files in write order; an `_op` column says upsert or delete."""
    folder.mkdir(parents=True, exist_ok=True)
    gen = TripsGenerator(seed)
    batches = [("upsert", gen.inserts(rows))]
    batches += [("upsert", gen.updates(max(1, int(rows * update_fraction)))) for _ in range(rounds)]
    batches.append(("delete", gen.deletes(max(1, int(rows * delete_fraction)))))
    paths = []
    for i, (op, table) in enumerate(batches):
        path = folder / f"{i:02d}_{op}.parquet"
        pq.write_table(table.append_column("_op", pa.repeat(pa.scalar(op, pa.string()), table.num_rows)), path)
        paths.append(path)
    return paths


def workload_table(table_dir: Path) -> Table:
    """lsm_lab's table for the workload: MERGE_ON_READ, lsm_tree, partitioned by city, BUCKETS buckets."""
    return create_table(table_dir, name="trips", record_key=KEY, partition_by=PARTITION, ordering_field=ORDERING,
                        table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=BUCKETS)


def replay(table: Table, files: list[Path]) -> Iterator[tuple[Path, int, float, float]]:
    """Write the workload's files in order (the first as a bulk insert): (file, rows, wall s, CPU s) per write.

    CPU seconds are `time.process_time()`: every thread of this process."""
    for i, f in enumerate(files):
        data = pq.read_table(f)
        op = data.column("_op")[0].as_py() if data.num_rows else "upsert"
        data = data.drop_columns(["_op"])
        wall, cpu = time.perf_counter(), time.process_time()
        if op == "delete":
            table.delete(data)
        elif i == 0:
            table.bulk_insert(data)
        else:
            table.upsert(data)
        yield f, data.num_rows, time.perf_counter() - wall, time.process_time() - cpu


def lsm_lab_worker(data_dir: Path, table_dir: Path, out_keys: Path) -> dict[str, Any]:
    """lsm_lab's side: the same writes (first a bulk insert) and a snapshot read, timed."""
    table = workload_table(table_dir)
    write_s = sum(wall for _, _, wall, _ in replay(table, sorted(data_dir.glob("*.parquet"))))
    t0, c0 = time.perf_counter(), time.process_time()
    result = table.read(columns=[PARTITION, KEY])
    read_s, read_cpu_s = time.perf_counter() - t0, time.process_time() - c0  # CPU: every thread of the process
    pq.write_table(result, out_keys)
    return {"write_s": round(write_s, 3), "read_s": round(read_s, 3), "read_cpu_s": round(read_cpu_s, 3),
            "rows": result.num_rows}


def reread_worker(table_dir: Path, keys: Path) -> dict[str, Any]:
    """Two more reads each way of the table `lsm_lab_worker` wrote, alternated, in a process of their own (the
    first worker's whole-process time stays that of a user's writes and one read): merged by key
    (RECORD_POSITIONS ignored, as Paimon's reader merges by key) and as timed (by position where the logs
    allow); the minimum of two each, so neither is favoured by running second. Both must give the keys
    the timed read wrote to `keys`."""
    table = open_table(table_dir)
    want = _sorted_keys(keys)

    def timed(by_key: bool) -> float:
        t0 = time.perf_counter()
        got = table.read(columns=[PARTITION, KEY], positions=not by_key)
        wall = time.perf_counter() - t0
        if not _sorted_keys_of(got).equals(want):
            raise InputError(f"the read {'by key' if by_key else 'repeated'} gave other rows than the timed read")
        return wall

    by_key, again = [], []
    for _ in range(2):
        by_key.append(timed(True))
        again.append(timed(False))
    return {"read_by_key_s": round(min(by_key), 3), "read_again_s": round(min(again), 3)}


#: the folder holding the `lsm_lab` package this process runs (the worker must run the same code)
_CODE_ROOT = str(Path(__file__).resolve().parents[2])


def _run_process(cmd: list[str], what: str, cwd: Path, *, ours: bool = False) -> tuple[dict[str, Any], float]:
    """Run a worker in `cwd` (a folder without an `lsm_lab` package: `python -m` puts the working folder
    first on `sys.path`, so a worker started inside a checkout would import that checkout's code, not
    this process's), with this process's `lsm_lab` first on PYTHONPATH.  `ours`: an lsm_lab worker, run
    as the `lsm-lab` command runs (its Arrow allocator, lsm_lab/allocator.py); a peer keeps its own defaults."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (_CODE_ROOT, os.environ.get("PYTHONPATH")) if p)}
    if ours:
        env = command_env(env)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    wall = time.perf_counter() - t0
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        raise InputError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return json.loads(lines[-1]), wall


def _sorted_keys(path: Path) -> pa.Table:
    return _sorted_keys_of(pq.read_table(path))


def _sorted_keys_of(raw: pa.Table) -> pa.Table:
    t = pa.table({c: raw.column(c).cast(pa.string()) for c in (PARTITION, KEY)})  # nullability differs by engine
    return t.take(pc.sort_indices(t, sort_keys=[(PARTITION, "ascending"), (KEY, "ascending")]))


OUTPUTS = ("lsm_lab", "paimon_rust", "paimon_python", "interop")  # what a run writes next to its data


def clear_earlier_run(folder: Path) -> None:
    """Remove what an earlier run wrote in a kept work folder (its tables and key lists; nothing else),
    so that `--dir D` can be run again: the writers create their tables afresh."""
    for name in OUTPUTS:
        shutil.rmtree(folder / name, ignore_errors=True)
        (folder / f"{name}_keys.parquet").unlink(missing_ok=True)


def run(*, rows: int = 1_000_000, peer_python: Path | None = None, hudi: bool = True,
        work_dir: str | os.PathLike[str] | None = None, pure_python_paimon: bool = False) -> dict[str, Any]:
    """Run every contender on the same workload; the work folder is removed afterwards unless given."""
    peer = peer_python or default_peer_python()
    if peer is None:
        raise InputError("no peers' interpreter: run `make bench-peers` (creates .venv-peers with pypaimon, "
                         "pypaimon-rust and pyarrow<20) or pass --peer-python / set LSM_LAB_PEER_PYTHON")
    # the workers run in the work folder: a relative path would name another file there. Absolute, not
    # resolved: a venv's python is a symlink whose target does not know the venv's packages.
    peer = Path(os.path.abspath(peer))
    if not peer.is_file():
        raise InputError(f"the peers' interpreter {peer} does not exist (run `make bench-peers`, which creates "
                         ".venv-peers, or pass --peer-python)")
    own = work_dir is None
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_peers_")) if work_dir is None else Path(work_dir).resolve()
    if not own:
        clear_earlier_run(folder)
    try:
        data = folder / "data"
        write_workload(data, rows)
        report: dict[str, Any] = {"rows": rows, "cpus": os.cpu_count(), "contenders": {}}
        runs = {"lsm_lab": [sys.executable, "-m", "lsm_lab.bench.peers", str(data), str(folder / "lsm_lab"),
                            str(folder / "lsm_lab_keys.parquet")],
                "paimon_rust": [str(peer), str(WORKER), str(data), str(folder / "paimon_rust"),
                                str(folder / "paimon_rust_keys.parquet"), "--key", KEY, "--partition", PARTITION,
                                "--ordering", ORDERING, "--buckets", str(BUCKETS), "--native"]}
        if pure_python_paimon:
            runs["paimon_python"] = [*runs["paimon_rust"][:3], str(folder / "paimon_python"),
                                     str(folder / "paimon_python_keys.parquet"), *runs["paimon_rust"][5:-1]]
        keys: dict[str, pa.Table] = {}
        for name, cmd in runs.items():
            figures, wall = _run_process(cmd, name, folder, ours=name == "lsm_lab")
            figures["process_s"] = round(wall, 3)
            report["contenders"][name] = figures
            keys[name] = _sorted_keys(folder / f"{name}_keys.parquet")
        mine = report["contenders"]["lsm_lab"]
        rereads, _ = _run_process([sys.executable, "-m", "lsm_lab.bench.peers", "--reread", str(folder / "lsm_lab"),
                                   str(folder / "lsm_lab_keys.parquet")], "lsm_lab re-reads", folder, ours=True)
        mine.update(rereads)
        for name in runs:
            if name == "lsm_lab":
                continue
            theirs = report["contenders"][name]
            theirs["same_keys"] = bool(keys[name].equals(keys["lsm_lab"]))
            theirs["ratios"] = {k: round(mine[k] / theirs[k], 2) if theirs.get(k) and k in mine else None
                                for k in ("write_s", "read_s", "process_s", "read_cpu_s")}
            if theirs.get("read_s") and "read_by_key_s" in mine:
                theirs["ratios"]["read_by_key_s"] = round(mine["read_by_key_s"] / theirs["read_s"], 2)
                theirs["ratios"]["read_again_s"] = round(mine["read_again_s"] / theirs["read_s"], 2)
        if hudi:
            from lsm_lab.bench.interop import mor_read  # start-up: the lsm_lab worker (this module) never needs it

            m = mor_read(rows, update_fraction=0.1, rounds=2, repeat=1, work_dir=folder / "interop")
            if "hudi_rs_v1_read_s" in m:
                report["hudi_rs"] = {"lsm_lab_read_s": m["lsm_lab_v1_read_s"], "hudi_rs_read_s": m["hudi_rs_v1_read_s"],
                                     "same_keys": m["hudi_rs_same_keys"], "ratio": m["lsm_lab_over_hudi_rs"]}
        return report
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def format_report(report: dict[str, Any]) -> str:
    lines = [f"upsert workload: {report['rows']:,} trips bulk-inserted, 3 × 10% upserts, 1% deleted; "
             f"{PARTITION} partitions × {BUCKETS} buckets; {report['cpus']} CPUs",
             f"{'contender':<15} {'write s':>8} {'read s':>8} {'process s':>10} {'rows':>10}  lsm_lab/peer (write, read, process)"]
    for name, f in report["contenders"].items():
        ratio = ""
        if "ratios" in f:
            r = f["ratios"]
            ratio = f"{r['write_s']}×, {r['read_s']}×, {r['process_s']}×  (same keys: {f['same_keys']})"
        lines.append(f"{name:<15} {f['write_s']:>8} {f['read_s']:>8} {f['process_s']:>10} {f['rows']:>10,}  {ratio}")
    cpu = [f"{name} {f['read_cpu_s']} s" for name, f in report["contenders"].items() if "read_cpu_s" in f]
    if cpu:  # CPU seconds of the read (all threads): what a loaded machine distorts least
        cpu_ratio = next((f["ratios"]["read_cpu_s"] for f in report["contenders"].values()
                          if f.get("ratios", {}).get("read_cpu_s") is not None), None)
        lines.append(f"read CPU seconds: {', '.join(cpu)}"
                     + (f"; lsm_lab/peer = {cpu_ratio}×" if cpu_ratio is not None else ""))
    mine = report["contenders"].get("lsm_lab", {})
    if "read_by_key_s" in mine:  # the timed read merges by position where the logs carry RECORD_POSITIONS
        ratios = next((f["ratios"] for f in report["contenders"].values() if "read_by_key_s" in f.get("ratios", {})),
                      None)
        lines.append(f"lsm_lab reads again in its process (min of 2, alternated): by position {mine['read_again_s']} s"
                     f", by key as Paimon merges {mine['read_by_key_s']} s"
                     + (f"; over Paimon's read: {ratios['read_again_s']}×, {ratios['read_by_key_s']}×" if ratios else ""))
    if "hudi_rs" in report:
        h = report["hudi_rs"]
        lines.append(f"MOR snapshot of the version-8 interop table (v1 logs): lsm_lab {h['lsm_lab_read_s']} s, "
                     f"hudi-rs {h['hudi_rs_read_s']} s, lsm_lab/hudi-rs = {h['ratio']}× (same keys: {h['same_keys']})")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:
    """The lsm_lab workers: DATA_DIR TABLE_DIR OUT_KEYS, or --reread TABLE_DIR KEYS; each prints one JSON line."""
    if argv[:1] == ["--reread"]:
        table_dir, keys = (Path(a) for a in argv[1:])
        print(json.dumps(reread_worker(table_dir, keys)))
        return 0
    data_dir, table_dir, out_keys = (Path(a) for a in argv)
    print(json.dumps(lsm_lab_worker(data_dir, table_dir, out_keys)))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


__all__ = ["default_peer_python", "format_report", "lsm_lab_worker", "reread_worker", "run", "write_workload"]
