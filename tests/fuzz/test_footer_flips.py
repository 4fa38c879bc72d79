"""Bit flips in every footer byte of a small data file: no process abort, only typed errors or the right rows.

pyarrow turns the column-chunk metadata of a footer into C++ objects only when it is first
asked for, and a C++ exception there used to end the process (SIGABRT, issue 28 finding 6;
`lsm_lab/format/footercheck.py`).  So the cases run in a subprocess (`footer_worker.py`): it
flips one bit of the footer (the Thrift FileMetaData before the trailing length and `PAR1`),
runs a snapshot read and a lookup (and, in the slow variant, a full compaction of a copy
followed by a read), and reports each case as a JSON line.  A worker that dies fails only its
case: the next worker starts after it.  Every case must end as a typed `LsmLabError` or
exactly the rows of the undamaged table.

    default   every footer byte, one bit each (the bit rotates with the offset): ~2k cases, ~20 s
    slow      every footer byte, all 8 bits, of a base file and a log file; one bit per byte
              with a compaction
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import lsm_lab

WORKER = Path(__file__).with_name("footer_worker.py")
ROOT = Path(__file__).resolve().parents[2]
KEYS = ["k001", "k006", "k017", "k404"]


@pytest.fixture(scope="module")
def small_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One partition, a base file of 20 rows and a log file of 3 (footers of ~2 kB)."""
    path = tmp_path_factory.mktemp("footer_flips") / "t"
    t = lsm_lab.create_table(path, name="ff", record_key="id", partition_by="p", num_buckets=1)
    t.insert([{"id": f"k{i:03d}", "p": "a", "v": i} for i in range(20)])
    t.compact(strategy="full")
    t.upsert([{"id": f"k{i:03d}", "p": "a", "v": 100 + i} for i in (1, 2, 17)])
    return path


def _data_files(table: Path) -> tuple[Path, Path]:
    files = [p for p in table.rglob("*.parquet") if ".hoodie" not in p.parts]
    logs = [p for p in files if ".log" in p.name or p.name.startswith(".")]
    bases = [p for p in files if p not in logs]
    assert len(bases) == 1 and len(logs) == 1, files
    return bases[0], logs[0]


def footer_range(data: bytes) -> range:
    """Offsets of the Thrift FileMetaData (before the 4-byte length and `PAR1`)."""
    assert data[-4:] == b"PAR1"
    n = len(data)
    return range(n - 8 - int.from_bytes(data[-8:-4], "little"), n - 8)


def flip_cases(target: Path, bits: str) -> list[tuple[int, int]]:
    offsets = footer_range(target.read_bytes())
    if bits == "all":
        return [(o, b) for o in offsets for b in range(8)]
    return [(o, o % 8) for o in offsets]


def run_cases(table: Path, target: Path, cases: list[tuple[int, int]], work: Path, *,
              compact: bool = False) -> tuple[Counter[str], list[str]]:
    """Run every case in worker subprocesses; (outcome counts, failures)."""
    spec = work / "spec.json"
    spec.write_text(json.dumps({"table": str(table), "target": str(target), "cases": cases, "keys": KEYS,
                                "compact": compact}))
    results = work / "results.jsonl"
    results.write_text("")
    original = target.read_bytes()
    counts: Counter[str] = Counter()
    failures: list[str] = []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    start = 0
    try:
        while start < len(cases):
            proc = subprocess.run([sys.executable, str(WORKER), str(spec), str(start), str(results)],
                                  capture_output=True, text=True, env=env, timeout=3600)
            lines = [json.loads(line) for line in results.read_text().splitlines()]
            finished = {r["i"] for r in lines if "outcomes" in r}
            begun = [r["i"] for r in lines if r.get("begin")]
            if proc.returncode == 0:
                break
            target.write_bytes(original)  # the dead worker could not put it back
            if not begun or begun[-1] in finished:
                raise AssertionError(f"worker failed outside a case (rc {proc.returncode}): {proc.stderr[-2000:]}")
            dead = begun[-1]
            what = proc.stderr.strip().splitlines()[-1:] or [""]
            counts["abort" if proc.returncode == -6 else f"died rc {proc.returncode}"] += 1
            failures.append(f"offset {cases[dead][0]} bit {cases[dead][1]}: process died "
                            f"(rc {proc.returncode}) {what[0][:200]}")
            start = dead + 1
    finally:
        target.write_bytes(original)
    for r in (json.loads(line) for line in results.read_text().splitlines()):
        if "outcomes" not in r:
            continue
        for op, outcome in r["outcomes"].items():
            counts[f"{op} {outcome}" if outcome in ("expected", "typed") else f"{op} FAILED"] += 1
            if outcome not in ("expected", "typed"):
                offset, bit = cases[r["i"]]
                failures.append(f"offset {offset} bit {bit}: {op}: {outcome}")
    return counts, failures


def _check(counts: Counter[str], failures: list[str], n: int, *, only_deaths: bool = False) -> None:
    print(f"\n{n} footer bit flips: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if only_deaths:  # other outcomes are printed, not failed (see the test)
        print("\n".join(failures[:40]))
        failures = [f for f in failures if "process died" in f]
    assert not failures, f"{len(failures)} of {n} cases failed:\n" + "\n".join(failures[:40])


def test_every_footer_byte_one_bit(small_table: Path, tmp_path: Path) -> None:
    base, _ = _data_files(small_table)
    cases = flip_cases(base, "one")
    counts, failures = run_cases(small_table, base, cases, tmp_path)
    _check(counts, failures, len(cases))
    assert counts["read typed"] > 0 and counts["read expected"] > 0  # the flips did reach the reader


@pytest.mark.slow
@pytest.mark.campaign
def test_every_footer_bit(small_table: Path, tmp_path: Path) -> None:
    base, _ = _data_files(small_table)
    cases = flip_cases(base, "all")
    counts, failures = run_cases(small_table, base, cases, tmp_path)
    _check(counts, failures, len(cases))


@pytest.mark.slow
@pytest.mark.campaign
def test_every_footer_bit_of_a_log(small_table: Path, tmp_path: Path) -> None:
    """A v2 log's footer: no process dies.  Its key-value map (the key range that prunes lookups, the
    RECORD_POSITIONS of a positional merge) is trusted as written, so a flip there can give other rows
    or an untyped error (printed, not failed: FORMAT.md, "what a damaged footer can and cannot do")."""
    _, log = _data_files(small_table)
    cases = flip_cases(log, "all")
    counts, failures = run_cases(small_table, log, cases, tmp_path)
    _check(counts, failures, len(cases), only_deaths=True)


@pytest.mark.slow
@pytest.mark.campaign
def test_every_footer_byte_then_compact(small_table: Path, tmp_path: Path) -> None:
    base, _ = _data_files(small_table)
    cases = flip_cases(base, "one")
    counts, failures = run_cases(small_table, base, cases, tmp_path, compact=True)
    _check(counts, failures, len(cases))
