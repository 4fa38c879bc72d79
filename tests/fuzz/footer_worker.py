"""The subprocess of tests/fuzz/test_footer_flips.py: flip bits of one data file's footer, run operations, report.

    python footer_worker.py SPEC START RESULTS

SPEC is a JSON file: {"table", "target", "cases": [[offset, bit], ...], "compact": bool, "keys": [...]}.
For each case from START on, the worker appends a line {"i": n, "begin": true} to RESULTS, damages
the target file, runs the operations and appends {"i": n, "outcomes": {op: outcome}}, where an outcome
is "expected", "typed" or a description of anything else.  A process that dies (SIGABRT, SIGSEGV)
leaves a case begun and not finished: the parent counts it and starts a new worker after it.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import lsm_lab
from lsm_lab.errors import LsmLabError
from lsm_lab.table.footer import clear_footer_cache

TIMEOUT_S = 30


def canonical(table: Any) -> list[tuple[Any, ...]]:
    cols = sorted(table.column_names)
    return sorted(zip(*(table.column(c).to_pylist() for c in cols))) if table.num_rows else []


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"operation ran longer than {TIMEOUT_S} s")


def run(op: Any, expected: list[tuple[Any, ...]]) -> str:
    clear_footer_cache()
    signal.alarm(TIMEOUT_S)
    try:
        got = canonical(op())
    except LsmLabError:
        return "typed"
    except Exception as exc:  # noqa: BLE001 - every other exception is a finding
        return f"untyped {type(exc).__name__}: {exc}"[:300]
    finally:
        signal.alarm(0)
    return "expected" if got == expected else f"other rows ({len(got)} rows, {len(expected)} expected)"


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    start = int(sys.argv[2])
    out = open(sys.argv[3], "a")  # noqa: SIM115 - lines are flushed one by one
    signal.signal(signal.SIGALRM, _alarm)
    table, target, keys = Path(spec["table"]), Path(spec["target"]), spec["keys"]
    original = target.read_bytes()
    t = lsm_lab.open_table(table)
    snapshot, found = canonical(t.read()), canonical(t.lookup(keys))
    # a compaction names its new base file in `_hoodie_file_name`: compared without it
    compacted = canonical(t.read().drop_columns(["_hoodie_file_name"]))
    scratch = Path(tempfile.mkdtemp(prefix="footer_flips_"))
    try:
        for i in range(start, len(spec["cases"])):
            offset, bit = spec["cases"][i]
            print(json.dumps({"i": i, "begin": True}), file=out, flush=True)
            damaged = bytearray(original)
            damaged[offset] ^= 1 << bit
            target.write_bytes(bytes(damaged))
            outcomes = {"read": run(t.read, snapshot), "lookup": run(lambda: t.lookup(keys), found)}
            if spec.get("compact"):  # on a copy: a compaction changes the table
                copy = scratch / f"c{i}"
                shutil.copytree(table, copy, symlinks=True)

                def compact_then_read(copy: Path = copy) -> Any:
                    c = lsm_lab.open_table(copy)
                    c.compact(strategy="full")
                    return lsm_lab.open_table(copy).read().drop_columns(["_hoodie_file_name"])

                outcomes["compact"] = run(compact_then_read, compacted)
                shutil.rmtree(copy, ignore_errors=True)
            target.write_bytes(original)
            print(json.dumps({"i": i, "outcomes": outcomes}), file=out, flush=True)
    finally:
        target.write_bytes(original)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
