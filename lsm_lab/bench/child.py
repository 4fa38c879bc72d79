"""One benchmark contender in a fresh Python process: the job goes in as JSON, one RESULT line comes out.

    parent: run_child("lsm_lab.bench.scan", job)                 child: python -m lsm_lab.bench.scan --child JOB
      load before ─► subprocess (the command's allocator,           ... runs one contender ...
      this checkout on PYTHONPATH) ─► last "RESULT {...}" line  ◄── print_result({"seconds": …, "peak_rss_bytes": …})
      ─► {"load_1m_before": …, **result}

Each contender pays its own start-up and has its own peak RSS (`VmHWM`), which is what the
benchmarks compare; the parent records the machine's 1-minute load before each one.

Taught in: no chapter (docs/PERFORMANCE.md)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsm_lab.errors import InputError

PREFIX = "RESULT "


def print_result(result: dict[str, Any]) -> None:
    """Inside the child: hand the contender's figures to the parent."""
    print(PREFIX + json.dumps(result), flush=True)


def child_entry(argv: list[str], child_main: Callable[[str], None], command: str) -> None:
    """The `if __name__ == "__main__"` of a bench module: run `child_main(JOB)` for `--child JOB`, else usage."""
    if len(argv) == 3 and argv[1] == "--child":
        child_main(argv[2])
        return
    print(f"usage: … --child JOB_JSON: the child process of `{command}` (run that command instead)", file=sys.stderr)
    sys.exit(2)


def pythonpath() -> str:
    """PYTHONPATH for a child: this checkout first, so the child runs the same code as the parent."""
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    return root if not old else f"{root}{os.pathsep}{old}"


def run_child(module: str, job: dict[str, Any], *, what: str, timeout: float = 7200,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `python -m module --child JOB` and return its RESULT with the load before it.

    `what` names the contender in the error raised when the child fails; `env` adds variables."""
    from lsm_lab.allocator import command_env  # start-up: benchmarks load it when they run

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    proc = subprocess.run([sys.executable, "-m", module, "--child", json.dumps(job)], capture_output=True,
                          text=True, timeout=timeout, check=False,
                          env=command_env({**os.environ, **(env or {}), "PYTHONPATH": pythonpath()}))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)]
    if proc.returncode != 0 or not lines:
        raise InputError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-1000:]}")
    return {"load_1m_before": None if load is None else round(load, 2), **json.loads(lines[-1][len(PREFIX):])}


__all__ = ["PREFIX", "print_result", "pythonpath", "run_child"]
