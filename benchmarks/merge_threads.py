#!/usr/bin/env python
"""Where one k-way merge's time goes, thread by thread: wall time, and user/system CPU of each thread.

    python benchmarks/merge_threads.py RUNS_DIR [--repeat 3]

RUNS_DIR holds sorted runs (`run_*.parquet`, key `key`, ordering `ts`), such as the cached inputs of
`lsm-lab bench merge --data-dir D` (D/runs_v2_n8000000_k8_o0.3_s42). Each repeat runs
`merge_parquet_files` in a fresh process (as `lsm-lab` runs: the C library's allocator for Arrow) and
samples /proc/self/task/*/stat every 5 ms. Seventh pass (docs/PERFORMANCE.md): with a writer queue of one
row group the reader, resolver and writer threads kept ~1.45 of 2 cores busy; with the queue of 4 and 3
rounds in flight, ~1.7.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def child(runs: list[str]) -> None:
    from lsm_lab.merge.files import merge_parquet_files

    tick = os.sysconf("SC_CLK_TCK")
    names: dict[int, str] = {}
    seen: dict[str, tuple[str, float, float]] = {}
    stop = threading.Event()

    def cpu(tid: str) -> tuple[float, float]:
        fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / tick, int(fields[12]) / tick

    def sample() -> None:
        while not stop.is_set():
            for t in threading.enumerate():
                if t.native_id is not None:
                    names[t.native_id] = t.name.rsplit("_", 1)[0]
            for tid in os.listdir("/proc/self/task"):
                try:
                    seen[tid] = (names.get(int(tid), "other"), *cpu(tid))
                except OSError:  # the thread ended between the listing and the read
                    pass
            time.sleep(0.005)

    base = {tid: cpu(tid) for tid in os.listdir("/proc/self/task")}
    monitor = threading.Thread(target=sample, name="monitor")
    monitor.start()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        merge_parquet_files(Path(tmp) / "out.parquet", runs, key="key", ordering="ts")
        wall = time.perf_counter() - t0
    stop.set()
    monitor.join()
    by_thread: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for tid, (name, user, system) in seen.items():
        u0, s0 = base.get(tid, (0.0, 0.0))
        by_thread[name][0] += user - u0
        by_thread[name][1] += system - s0
    print(json.dumps({"wall": wall, "threads": by_thread}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs_dir", help="folder of sorted runs run_*.parquet (key, ts)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    runs = sorted(str(p) for p in Path(args.runs_dir).glob("run_*.parquet"))
    if not runs:
        print(f"no run_*.parquet in {args.runs_dir}", file=sys.stderr)
        return 2
    if args.child:
        child(runs)
        return 0
    env = dict(os.environ)
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # as the `lsm-lab` command runs (lsm_lab/allocator.py)
    for _ in range(args.repeat):
        out = subprocess.run([sys.executable, __file__, args.runs_dir, "--child"], env=env, check=True,
                             capture_output=True, text=True).stdout
        rec = json.loads(out.strip().splitlines()[-1])
        total = sum(u + s for u, s in rec["threads"].values())
        parts = "  ".join(f"{name} {u:.2f}+{s:.2f}" for name, (u, s) in sorted(rec["threads"].items())
                          if u + s >= 0.01)
        print(f"wall {rec['wall']:.2f} s  cpu {total:.2f} s ({total / rec['wall']:.2f} cores)  user+sys: {parts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
