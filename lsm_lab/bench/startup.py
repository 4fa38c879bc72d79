"""What a fresh process pays before it does anything: the start-up of each entry point of lsm_lab.

    lsm-lab bench startup [--repeats 5] [--peer-python P [--rows 1000000]] [--json OUT]

Each entry point runs as a whole Python process, `repeats` times in turn, and the
median wall time is kept; `python -c pass` (the bare interpreter) is measured in
the same run as the baseline, so the figures above it are lsm_lab's own:

    python -c pass                                   the baseline
    python -c "import lsm_lab"                       the package (errors only; the rest is lazy)
    python -c "import lsm_lab; lsm_lab.open_table(T)"  the table layer and pyarrow
    lsm-lab --help                                   the parser only (target <= 0.2 s)
    lsm-lab show timeline T                          no pandas
    lsm-lab read T                                   a small table, printed (pandas prints it)

One more run of each, inside a small wrapper that prints `sys.modules` at exit
(`python -X importtime` misses what `importlib.import_module` loads, as
`lsm_lab.__getattr__` does), lists which heavy modules it loaded (pyarrow, numpy,
pandas, matplotlib, pyspark, duckdb, the merge engines, the table API): what each
entry point pays for. The same wrapper gives, for lsm_lab's read against Paimon (below),
how many modules it loaded and the bytes Arrow's pool allocated in its life: in a
fresh process most of those bytes are fresh pages, which the kernel zeroes on first touch.

With `--peer-python` (the peers' venv of `lsm-lab bench peers`, `make bench-peers`)
the whole-process snapshot read of a `--rows` table is compared with Apache
Paimon's Rust reader as a whole process: the workload of `bench peers` (bulk
insert, 3 x 10% upserts, 1% deletes) is written once by each side, then each
read runs `repeats` times, alternated, as a user's `python -c` would run it:

    python -c "import lsm_lab; lsm_lab.open_table(T).read()"        every column
    peer python: pypaimon catalog -> table (read.native.enabled) -> to_arrow()  every column

The ratio lsm_lab / Paimon is of medians of the same run (issue 33's target <= 0.6x);
both must return the same number of rows.

**Environment.**  Every child inherits this process's environment. Run as the `lsm-lab`
command, that includes `ARROW_DEFAULT_MEMORY_POOL=system`, which the command sets before
pyarrow loads (lsm_lab/allocator.py): the children's Arrow (pypaimon's too) then allocates
from the C library, not from mimalloc, as a plain `python -c` would. `children_arrow_pool`
in the result names the pool the children were given ("default": pyarrow's own choice).

**Bytecode.**  Before timing, lsm_lab's modules are compiled to `__pycache__` (what
`pip install` does for an installed package, and what the first run of a source checkout
leaves behind; an interpreter reads that cache even under `PYTHONDONTWRITEBYTECODE`).
On a machine that sets `PYTHONDONTWRITEBYTECODE=1` (the one these figures come from
does) every process would otherwise compile lsm_lab's 300 modules again (about 0.25 s
of a 1.2 s read), while the peer's packages were compiled by pip; `bytecode_compiled`
in the result says it was done.

Simplified compared with a real start-up profile: wall time of whole processes
(fork, exec, imports, the command), medians of a few runs on a shared machine
(the 1-minute load is printed); no per-import breakdown (run `python -X importtime`
for that).

Taught in: no chapter (docs/PERFORMANCE.md, "Start-up")
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsm_lab.allocator import POOL_VARIABLE
from lsm_lab.errors import InputError

#: the modules whose loading start-up is about (a prefix matches its submodules too)
HEAVY = ("pyarrow", "numpy", "pandas", "matplotlib", "pyspark", "duckdb", "lsm_lab.merge", "lsm_lab.api")

#: rows of the small table of `open_table`, `show timeline` and `read`
SMALL_ROWS = 1_000

#: the folder holding the `lsm_lab` package this process runs (the children must run the same code)
_CODE_ROOT = str(Path(__file__).resolve().parents[2])

#: the Paimon side of the whole-process read: run by the peers' interpreter, imports nothing of lsm_lab
PAIMON_READ = """\
import sys
from pathlib import Path
from pypaimon import CatalogFactory
catalog = CatalogFactory.create({"warehouse": Path(sys.argv[1]).resolve().as_uri()})
table = catalog.get_table("bench.trips").copy({"read.native.enabled": "true"})
rb = table.new_read_builder()
print(rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows)
"""

#: runs `python -c CODE ARGS` or `python -m MODULE ARGS` (its own arguments: -c|-m, CODE|MODULE, ARGS) and
#: prints the loaded modules' names on stderr at exit (after a SystemExit too), and the bytes Arrow's default
#: pool allocated in the process's life (0 without pyarrow)
CENSUS = """\
import atexit, json, runpy, sys
def _census():
    pa = sys.modules.get("pyarrow")
    allocated = getattr(pa.default_memory_pool(), "total_bytes_allocated", lambda: 0)() if pa else 0
    sys.stderr.write("\\nARROW_BYTES " + str(allocated) + "\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
atexit.register(_census)
mode, target, *rest = sys.argv[1:]
sys.argv = [target if mode == "-m" else "-c", *rest]
if mode == "-m":
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})
"""

LSM_LAB_READ = "import sys, lsm_lab; print(lsm_lab.open_table(sys.argv[1]).read().num_rows)"


def entry_points(table: Path) -> list[tuple[str, list[str]]]:
    """(label, the arguments after `python`) of every entry point, the baseline first."""
    return [("python -c pass (baseline)", ["-c", "pass"]),
            ("import lsm_lab", ["-c", "import lsm_lab"]),
            ("lsm_lab.open_table(T)", ["-c", "import sys, lsm_lab; lsm_lab.open_table(sys.argv[1])", str(table)]),
            ("lsm-lab --help", ["-m", "lsm_lab", "--help"]),
            ("lsm-lab show timeline T", ["-m", "lsm_lab", "show", "timeline", str(table)]),
            ("lsm-lab read T", ["-m", "lsm_lab", "read", str(table)])]


def _env() -> dict[str, str]:
    """This process's environment with its lsm_lab first on PYTHONPATH (the children run in another folder)."""
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": _CODE_ROOT if not old else f"{_CODE_ROOT}{os.pathsep}{old}"}


def _run(cmd: list[str], cwd: Path, what: str) -> tuple[float, str, str]:
    """Run one whole process in `cwd`; (wall seconds, stdout, stderr). A failure is an InputError naming it."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cwd, env=_env())
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise InputError(f"bench startup: {what} failed (exit {done.returncode}): {done.stderr.strip()[-1000:]}")
    return wall, done.stdout, done.stderr


def heavy_modules(loaded: list[str]) -> list[str]:
    """The `HEAVY` modules among the names `loaded` (a module or one of its submodules)."""
    return [h for h in HEAVY if any(n == h or n.startswith(h + ".") for n in loaded)]


def loaded_modules(args: list[str], cwd: Path) -> list[str]:
    """The modules `python ARGS` has loaded when it exits (ARGS: `-c CODE ...` or `-m MODULE ...`)."""
    return footprint(args, cwd)[0]


def footprint(args: list[str], cwd: Path) -> tuple[list[str], int]:
    """The modules `python ARGS` has loaded when it exits, and the bytes Arrow's pool allocated in its life."""
    _, _, err = _run([sys.executable, "-c", CENSUS, *args], cwd, " ".join(args[:2]))
    lines = err.splitlines()
    line = next((ln for ln in reversed(lines) if ln.startswith("MODULES ")), None)
    allocated = next((ln for ln in reversed(lines) if ln.startswith("ARROW_BYTES ")), None)
    if line is None or allocated is None:
        raise InputError(f"bench startup: {' '.join(args[:2])} printed no module list")
    names: list[str] = json.loads(line[len("MODULES "):])
    return names, int(allocated.split()[1])


def small_table(folder: Path) -> Path:
    """The small table of the entry points: an insert of SMALL_ROWS trips and an upsert of a tenth."""
    from lsm_lab.api import create_table  # start-up: on first use
    from lsm_lab.lab.datagen import TripsGenerator  # start-up: on first use

    path = folder / "small"
    t = create_table(path, name="trips", record_key="uuid", partition_by="city", ordering_field="ts",
                     table_type="MERGE_ON_READ", layout="lsm_tree", num_buckets=4)
    gen = TripsGenerator(7)
    t.insert(gen.inserts(SMALL_ROWS))
    t.upsert(gen.updates(SMALL_ROWS // 10))
    return path


def measure_entry_points(folder: Path, repeats: int, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Every entry point `repeats` times in turn (medians), then once more for the modules it loads."""
    points = entry_points(small_table(folder))
    walls: dict[str, list[float]] = {label: [] for label, _ in points}
    for i in range(repeats):
        for label, args in points:
            walls[label].append(_run([sys.executable, *args], folder, label)[0])
        log(f"  round {i + 1}/{repeats}: " + ", ".join(f"{label.split(' (')[0]} {w[-1]:.2f} s"
                                                      for label, w in walls.items()))
    out = []
    base = statistics.median(walls[points[0][0]])
    for label, args in points:
        med = statistics.median(walls[label])
        out.append({"entry_point": label, "command": " ".join(["python", *args]), "seconds": round(med, 4),
                    "min_seconds": round(min(walls[label]), 4), "above_python_seconds": round(med - base, 4),
                    "heavy_modules": heavy_modules(loaded_modules(args, folder))})
    return out


def peer_read(folder: Path, rows: int, peer: Path, repeats: int, log: Callable[[str], None]) -> dict[str, Any]:
    """lsm_lab's and Paimon's (Rust reader) snapshot read of the same `rows`-row workload, as whole processes."""
    from lsm_lab.bench import peers  # the workload of `bench peers` and its Paimon writer

    data = folder / "data"
    log(f"writing the {rows:,}-row workload (bench peers') with lsm_lab and with Paimon …")
    peers.write_workload(data, rows)
    _run([sys.executable, "-m", "lsm_lab.bench.peers", str(data), str(folder / "lsm_lab"),
          str(folder / "lsm_lab_keys.parquet")], folder, "the lsm_lab writer")
    _run([str(peer), str(peers.WORKER), str(data), str(folder / "paimon"), str(folder / "paimon_keys.parquet"),
          "--key", peers.KEY, "--partition", peers.PARTITION, "--ordering", peers.ORDERING,
          "--buckets", str(peers.BUCKETS), "--native"], folder, "the Paimon writer")
    cmds = {"lsm_lab": [sys.executable, "-c", LSM_LAB_READ, str(folder / "lsm_lab")],
            "paimon_rust": [str(peer), "-c", PAIMON_READ, str(folder / "paimon")]}
    walls: dict[str, list[float]] = {name: [] for name in cmds}
    counts: dict[str, set[int]] = {name: set() for name in cmds}
    for i in range(repeats):
        for name, cmd in cmds.items():  # alternated: neither side always runs on a warmer page cache
            wall, out, _ = _run(cmd, folder, f"the {name} read")
            walls[name].append(wall)
            counts[name].add(int(out.split()[-1]))
        log(f"  read {i + 1}/{repeats}: " + ", ".join(f"{n} {w[-1]:.2f} s" for n, w in walls.items()))
    mine, theirs = (statistics.median(walls[n]) for n in cmds)
    if len(counts["lsm_lab"] | counts["paimon_rust"]) != 1:
        raise InputError(f"bench startup: the two reads returned different row counts: {counts}")
    names, allocated = footprint(cmds["lsm_lab"][1:], folder)  # one more lsm_lab read: what it loaded and allocated
    return {"rows_written": rows, "rows_read": counts["lsm_lab"].pop(), "lsm_lab_s": round(mine, 3),
            "paimon_rust_s": round(theirs, 3), "ratio": round(mine / theirs, 3),
            "lsm_lab_modules": len(names), "lsm_lab_own_modules": sum(n.split(".")[0] == "lsm_lab" for n in names),
            "lsm_lab_arrow_mib_allocated": round(allocated / 2**20, 1),
            "commands": {n: " ".join(c[:2]) + " ..." for n, c in cmds.items()}}


def compile_bytecode() -> bool:
    """Compile the running lsm_lab's modules to `__pycache__` (as pip does at install); False when the
    folder cannot be written (the runs then pay the compilation, as such an install would)."""
    import compileall

    try:
        return bool(compileall.compile_dir(Path(_CODE_ROOT) / "lsm_lab", quiet=1, workers=1))
    except OSError:
        return False


def run(*, repeats: int = 5, peer_python: Path | None = None, rows: int = 1_000_000,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure every entry point; with `peer_python`, also the whole-process read against Paimon's."""
    if repeats < 1 or rows < 1:
        raise InputError(f"--repeats and --rows must be at least 1, got {repeats} and {rows}")
    if peer_python is not None:
        peer_python = Path(os.path.abspath(peer_python))  # not resolved: a venv's python is a symlink
        if not peer_python.is_file():
            raise InputError("no such interpreter (run `make bench-peers`, which creates .venv-peers)",
                             path=peer_python)
    folder = Path(tempfile.mkdtemp(prefix="lsm_lab_bench_startup_"))
    try:
        compiled = compile_bytecode()
        load = os.getloadavg()[0]
        log(f"start-up: {repeats} fresh process(es) per entry point …")
        result: dict[str, Any] = {"repeats": repeats, "python": sys.version.split()[0], "cpus": os.cpu_count(),
                                  "load_1m_before": round(load, 2), "bytecode_compiled": compiled,
                                  "children_arrow_pool": os.environ.get(POOL_VARIABLE) or "default",
                                  "entry_points": measure_entry_points(folder, repeats, log)}
        if peer_python is not None:
            result["peer_read"] = peer_read(folder, rows, peer_python, repeats, log)
        result["load_1m_after"] = round(os.getloadavg()[0], 2)
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(result: dict[str, Any]) -> str:
    """The figures as text: one line per entry point, then the read against Paimon's if measured."""
    lines = [f"start-up of each entry point: median of {result['repeats']} whole process(es); python "
             f"{result['python']}, {result['cpus']} CPUs, load (1 min) {result['load_1m_before']} before, "
             f"{result['load_1m_after']} after; the children's Arrow pool: {result.get('children_arrow_pool', '?')}",
             f"{'entry point':<28}{'seconds':>9}{'min':>8}{'above python':>14}  heavy modules loaded"]
    for e in result["entry_points"]:
        lines.append(f"{e['entry_point']:<28}{e['seconds']:>9.3f}{e['min_seconds']:>8.3f}"
                     f"{e['above_python_seconds']:>+14.3f}  {', '.join(e['heavy_modules']) or '-'}")
    helped = next((e for e in result["entry_points"] if e["entry_point"] == "lsm-lab --help"), None)
    if helped is not None:
        lines.append(f"lsm-lab --help: {helped['seconds']:.3f} s (target <= 0.2 s)")
    if "peer_read" in result:
        p = result["peer_read"]
        lines.append(f"snapshot read of the {p['rows_written']:,}-row upsert workload ({p['rows_read']:,} rows), "
                     f"whole process: lsm_lab {p['lsm_lab_s']:.3f} s, Paimon Rust reader {p['paimon_rust_s']:.3f} s, "
                     f"lsm_lab/Paimon = {p['ratio']:.2f}x (target <= 0.6x)")
        if "lsm_lab_modules" in p:
            lines.append(f"lsm_lab's read loaded {p['lsm_lab_modules']} modules ({p['lsm_lab_own_modules']} of lsm_lab) "
                         f"and allocated {p['lsm_lab_arrow_mib_allocated']:,.1f} MiB of Arrow memory")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=int, default=5, help="whole processes per entry point, median reported "
                                                          "(default 5)")
    p.add_argument("--peer-python", help="the peers' interpreter (.venv-peers/bin/python, `make bench-peers`): "
                                         "also compare the whole-process snapshot read with Paimon's Rust reader")
    p.add_argument("--rows", type=int, default=1_000_000,
                   help="with --peer-python: rows of the workload's bulk insert (default 1000000)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")


def run_from_args(args: argparse.Namespace) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    result = run(repeats=args.repeats, peer_python=Path(args.peer_python) if args.peer_python else None,
                 rows=args.rows, log=log)
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


__all__ = ["HEAVY", "add_arguments", "entry_points", "footprint", "heavy_modules", "loaded_modules", "report", "run",
           "run_from_args"]
