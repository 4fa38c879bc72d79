"""Peak memory of a k-way merge against the number of rows N: sorted, hash and DuckDB (issue 33, item 2).

    python benchmarks/merge_memory.py [--rows 1000000 4000000 16000000] [--k 8] [--batch 32768 65536 16384]
                                      [--contenders sorted hash duckdb io_floor] [--mmap-threshold 262144]
                                      [--env VAR=VALUE[,VAR=VALUE] ...]
                                      [--plot memory.png] [--json OUT]

Each (N, contender, batch) runs in its own process, as `lsm-lab bench merge` runs its
contenders (`lsm_lab.bench.merge.run_contender`: the child's VmHWM, Arrow on the C library's
allocator as the `lsm-lab` command has it), on the same k sorted runs of N rows in total
(30% of the rows update a key of another run).  The sorted engine's memory should not depend
on N: it holds, per input, the batch being merged and the one read ahead, a few rounds in
flight and the writer's queued row groups, all O(k x batch).  The hash engine holds the map
of the log records (O(N)); DuckDB sorts, spilling past its memory limit.  `io_floor` merges
nothing: it reads the k files one after another and writes their rows with the merge's writer
(`lsm-lab bench merge`'s floor), so its curve is what reading and writing alone cost.

`--batch` runs the sorted engine once per merge batch (the hash engine and DuckDB have no
such knob: they run once).  `--mmap-threshold BYTES` adds a run of the sorted engine with
glibc's `MALLOC_MMAP_THRESHOLD_` fixed at BYTES (buffers that large are mapped and unmapped,
never kept in the heap): what the RSS is once the C library keeps no freed batches.
`--env VAR=VALUE[,VAR=VALUE]` (repeatable) adds a run of the sorted engine at the first batch with
those variables set, e.g. `ARROW_DEFAULT_MEMORY_POOL=jemalloc` (Arrow's other pools shipped in the
wheel) or `MALLOC_ARENA_MAX=1`; the contenders of one N run one after another, so a busy minute
falls on each alike.
`--heap` instead runs the sorted engine once per N in a child that samples, every 50 ms, Arrow's bytes in
use and glibc's heap (`mallinfo2`: the bytes its heaps hold, and of them in use), and prints the most of
each and the heap at the end: what grows with N, live data or memory the C library keeps for reuse (Linux
with glibc >= 2.33 only), the merge's CPU seconds, and the most each thread's malloc arena held (the
reader, resolver and encoder threads and the main one: glibc keeps one arena per thread, and one arena's
free memory is not reused by another thread; x86-64 only, see `_Arenas`).
The last column is the peak over the peak at the smallest N (the issue's target for the
sorted engine: <= 1.2 at the largest N).  `--plot FILE` draws peak RSS against N (matplotlib).

Taught in: no chapter (docs/PERFORMANCE.md, "Seventh pass: merge memory and object-store requests")
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsm_lab.allocator import command_env
from lsm_lab.bench.merge import KEY, ORDERING, make_runs, peak_rss_bytes, run_contender
from lsm_lab.merge.files import MERGE_BATCH_ROWS

CONTENDERS = ("sorted", "hash", "duckdb", "io_floor")


def parse_env(spec: str) -> dict[str, str]:
    """`VAR=VALUE[,VAR=VALUE]` -> {VAR: VALUE}."""
    out: dict[str, str] = {}
    for part in spec.split(","):
        name, eq, value = part.partition("=")
        if not eq or not name:
            raise SystemExit(f"--env: expected VAR=VALUE, got {part!r}")
        out[name] = value
    return out


def run(rows: Sequence[int], k: int, batches: Sequence[int], contenders: Sequence[str], *,
        mmap_threshold: int | None, data_dir: str, overlap: float = 0.3,
        envs: Sequence[dict[str, str]] = ()) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="lsm_lab_merge_memory_") as tmp:  # merged outputs, removed at the end
        out_dir = Path(tmp)
        records: list[dict[str, Any]] = []
        for n in rows:
            ds = make_runs(data_dir, n, k, overlap)
            jobs: list[tuple[str, int | None, dict[str, str] | None, str]] = []
            for c in contenders:
                if c == "sorted":
                    jobs += [("sorted", b, None, f"sorted b={b}") for b in batches]
                    if mmap_threshold:
                        jobs.append(("sorted", batches[0], {"MALLOC_MMAP_THRESHOLD_": str(mmap_threshold)},
                                     f"sorted b={batches[0]} mmap>={mmap_threshold}"))
                    for extra in envs:
                        jobs.append(("sorted", batches[0], extra,
                                     f"sorted b={batches[0]} " + ",".join(f"{k_}={v_}" for k_, v_ in extra.items())))
                else:
                    jobs.append((c, None, None, c))
            for contender, batch, env, label in jobs:
                print(f"N={n:,} {label} ...", file=sys.stderr, flush=True)
                rec = run_contender(contender, ds, out_dir, batch_size=batch, env=env)
                rec.update(rows=ds.rows, label=label)
                records.append(rec)
    return records


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


#: glibc's `struct malloc_state` on x86-64 (glibc 2.26 on; measured on 2.36): the offset of `system_mem`, the
#: bytes an arena holds.  A non-main arena's heaps are aligned to HEAP_MAX_SIZE (64 MiB), and each starts
#: with a `heap_info` whose first field points to its arena.
_SYSTEM_MEM, _HEAP_MAX = 2184, 64 << 20


class _Arenas:
    """Which glibc arena each Python thread allocates from, and the bytes each arena holds (`--heap`).

    glibc gives every thread an arena of its own (up to 8 per core): the memory one arena holds
    free is not lent to another thread.  A thread's arena is found from one of its chunks (the heap
    it lies in points to the arena); the main thread uses the main arena (not reachable from a
    chunk: its size is the total of `mallinfo2` minus the others').  Reads glibc's private structs
    (x86-64 only, checked against `mallinfo2`'s total; `ok` False when they do not add up).
    """

    def __init__(self, libc: Any) -> None:
        self.libc = libc
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        self.of_thread: dict[str, int] = {}  # thread name -> arena address (non-main arenas only)
        self.ok = os.uname().machine == "x86_64"

    def note_thread(self) -> None:
        """Called on a new thread: remember its arena."""
        chunk = self.libc.malloc(64)
        self.libc.free(chunk)
        if chunk is None:
            return
        heap = chunk & ~(_HEAP_MAX - 1)
        # a non-main arena's heap is a mapping of its own that starts at that aligned address; a chunk of the
        # main arena (the brk heap) is in no such mapping (and the aligned address may not be mapped at all)
        with open("/proc/self/maps") as maps:  # (the brk heap is named "[heap]" there)
            if not any(line.startswith(f"{heap:x}-") and not line.rstrip().endswith("[heap]") for line in maps):
                return
        self.of_thread[threading.current_thread().name] = ctypes.c_size_t.from_address(heap).value  # ar_ptr

    def sizes(self, total: int) -> dict[str, int]:
        """Bytes held per thread's arena now (threads sharing an arena: the first name), and by the rest
        (the main arena, and arenas of threads Python did not start) as 'main+other'."""
        out: dict[str, int] = {}
        seen: set[int] = set()
        for name, arena in list(self.of_thread.items()):
            if arena in seen:
                continue
            seen.add(arena)
            held = ctypes.c_size_t.from_address(arena + _SYSTEM_MEM).value
            if held % 4096 or held > total:
                self.ok = False
            out[name] = held
        rest = total - sum(out.values())
        if rest < 0:
            self.ok = False
        out["main+other"] = rest
        return out


def heap_child(spec_json: str) -> None:
    """Inside the child: merge the runs with the sorted engine while a thread samples the memory; print one
    RESULT line with the sample at the RSS peak and the last one (MiB), the most each thread's malloc
    arena held (`_Arenas`), and the merge's CPU seconds (user + system)."""
    import pyarrow as pa

    from lsm_lab.merge.files import merge_parquet_files

    job = json.loads(spec_json)
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2  # glibc >= 2.33 (mallinfo's ints wrap past 2 GiB)
    arenas = _Arenas(libc)
    real_run = threading.Thread.run

    def run_noting_arena(self: threading.Thread) -> None:  # every thread started from here on
        arenas.note_thread()
        real_run(self)

    threading.Thread.run = run_noting_arena  # type: ignore[method-assign]
    page = os.sysconf("SC_PAGE_SIZE")
    mib = 1 << 20
    samples: list[dict[str, float]] = []
    arena_most: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        t0 = time.perf_counter()
        with open("/proc/self/statm", "rb") as statm:
            while True:
                statm.seek(0)
                mi = libc.mallinfo2()  # summed over every arena
                samples.append({"t": time.perf_counter() - t0, "rss": int(statm.read().split()[1]) * page / mib,
                                "arrow": pa.total_allocated_bytes() / mib, "heap": (mi.arena + mi.hblkhd) / mib,
                                "heap_used": (mi.uordblks + mi.hblkhd) / mib, "heap_free": mi.fordblks / mib})
                for name, held in arenas.sizes(mi.arena).items():
                    name = name.rstrip("_0123456789") or name  # "lsm-merge-read_0" -> "lsm-merge-read"
                    arena_most[name] = max(arena_most.get(name, 0.0), held / mib)
                if done.wait(0.05):
                    return

    sampler = threading.Thread(target=sample, daemon=True, name="sampler")
    sampler.start()
    cpu0 = os.times()
    merge_parquet_files(job["out"], job["paths"], key=KEY, ordering=ORDERING, engine="sorted",
                        batch_size=job["batch_size"])
    cpu1 = os.times()
    done.set()
    sampler.join()
    most = {name: max(r[name] for r in samples) for name in ("rss", "arrow", "heap", "heap_used", "heap_free")}
    arena_most.pop("sampler", None)
    print("RESULT " + json.dumps({"max": most, "last": samples[-1], "vmhwm": peak_rss_bytes() / mib,
                                  "seconds": samples[-1]["t"], "samples": len(samples),
                                  "cpu_seconds": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
                                  "arenas": arena_most if arenas.ok else None}), flush=True)


def heap_run(rows: Sequence[int], k: int, batch: int, data_dir: str, overlap: float = 0.3) -> list[dict[str, Any]]:
    """`--heap`: one sampled sorted merge per N, each in its own process (the `lsm-lab` command's pool)."""
    with tempfile.TemporaryDirectory(prefix="lsm_lab_merge_heap_") as tmp:  # merged outputs, removed at the end
        out_dir = Path(tmp)
        records = []
        for n in rows:
            ds = make_runs(data_dir, n, k, overlap)
            job = {"paths": list(ds.paths), "out": str(out_dir / f"heap_{n}.parquet"), "batch_size": batch}
            print(f"N={n:,} sorted b={batch}, sampled ...", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, __file__, "--heap-child", json.dumps(job)], capture_output=True,
                                  text=True, env=command_env())
            Path(str(job["out"])).unlink(missing_ok=True)  # hundreds of MiB each: one N's output at a time
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not lines:
                raise SystemExit(f"N={n}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
            records.append({"rows": ds.rows, **json.loads(lines[-1][len("RESULT "):])})
    return records


def heap_table(records: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'N':>12}{'seconds':>9}{'cpu s':>7}{'VmHWM':>7} | most while merging: {'Arrow':>6}{'heap used':>10}"
             f"{'heap':>6} | at the end: {'heap':>5}{'free':>6}   (MiB; glibc's heap: in use + free)"]
    for r in records:
        m, e = r["max"], r["last"]
        lines.append(f"{r['rows']:>12,}{r['seconds']:>9.2f}{r.get('cpu_seconds', float('nan')):>7.2f}"
                     f"{r['vmhwm']:>7.0f} | {'':>19}{m['arrow']:>6.0f}"
                     f"{m['heap_used']:>10.0f}{m['heap']:>6.0f} | {'':>12}{e['heap']:>5.0f}{e['heap_free']:>6.0f}")
    names = list(dict.fromkeys(name for r in records for name in (r.get("arenas") or {})))
    if names:
        lines.append("most each thread's malloc arena held (MiB; main+other: the main thread's and threads not "
                     "started from Python):")
        lines.append(f"{'N':>12}" + "".join(f"{name:>22}" for name in names))
        for r in records:
            held = r.get("arenas") or {}
            lines.append(f"{r['rows']:>12,}" + "".join(
                f"{held[name]:>22.0f}" if name in held else f"{'-':>22}" for name in names))
    return "\n".join(lines)


def table(records: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'contender':<48}{'N':>12}{'seconds':>9}{'cpu s':>8}{'peak MiB':>10}{'/ first N':>10}{'load':>6}"]
    first: dict[str, float] = {}
    for r in records:
        if "error" in r:
            lines.append(f"{r['label']:<48}{r['rows']:>12,}  error: {r['error']}")
            continue
        mib = r["peak_rss_bytes"] / 2**20
        base = first.setdefault(r["label"], mib)
        lines.append(f"{r['label']:<48}{r['rows']:>12,}{r['seconds']:>9.2f}{r['cpu_seconds']:>8.2f}{mib:>10.0f}"
                     f"{mib / base:>10.2f}{r['load_1m_before']:>6.1f}")
    return "\n".join(lines)


def plot(records: Sequence[dict[str, Any]], out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label in dict.fromkeys(r["label"] for r in records):
        pts = [(r["rows"], r["peak_rss_bytes"] / 2**20) for r in records if r["label"] == label and "error" not in r]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("rows merged (N, k runs)")
    ax.set_ylabel("peak RSS (MiB)")
    ax.set_title("k-way merge: peak memory against N")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 4_000_000, 16_000_000])
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--batch", type=int, nargs="+", default=[MERGE_BATCH_ROWS, 65_536, 16_384],
                   help="sorted engine merge batches (hash runs at the default, MERGE_BATCH_ROWS)")
    p.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    p.add_argument("--mmap-threshold", type=int, default=None, metavar="BYTES",
                   help="also run sorted with glibc's MALLOC_MMAP_THRESHOLD_ fixed at BYTES")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE[,VAR=VALUE]",
                   help="also run sorted (first batch) with these variables set; repeatable")
    p.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "lsm_lab_bench"))
    p.add_argument("--plot", metavar="FILE", help="write a plot of peak RSS against N")
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--heap", action="store_true",
                   help="sample the sorted merge's RSS, Arrow bytes and glibc heap (first batch) instead")
    p.add_argument("--heap-child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.heap_child:
        heap_child(args.heap_child)
        return 0
    if args.heap:
        heap = heap_run(args.rows, args.k, args.batch[0], args.data_dir)
        print(f"merge memory, sampled: k={args.k}, overlap 0.3, sorted b={args.batch[0]}")
        print(heap_table(heap))
        if args.json:
            Path(args.json).write_text(json.dumps(heap, indent=2))
        return 0
    records = run(args.rows, args.k, args.batch, args.contenders, mmap_threshold=args.mmap_threshold,
                  data_dir=args.data_dir, envs=[parse_env(e) for e in args.env])
    print(f"merge memory: k={args.k}, overlap 0.3, cores={os.cpu_count()}")
    print(table(records))
    if args.plot:
        plot(records, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=2, default=str))
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
