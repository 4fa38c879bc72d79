"""The command's allocator (lsm_lab/allocator.py, lsm_lab/cli/__init__.py): Arrow on the system pool in `lsm-lab` and its
benchmark workers, unless Arrow's own variable chooses; `import lsm_lab` alone changes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lsm_lab import allocator
from lsm_lab.bench import merge as bench_merge

# stands in for lsm_lab.cli.app: reports the pool Arrow loaded with, once the entry point has run
_PROBE = """
import sys, types
fake = types.ModuleType("lsm_lab.cli.app")
def main(argv=None):
    import pyarrow as pa
    print(pa.default_memory_pool().backend_name)
    return 0
fake.main = main
sys.modules["lsm_lab.cli.app"] = fake
import lsm_lab.cli
sys.exit(lsm_lab.cli.main())
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != allocator.POOL_VARIABLE}
    return {**env, **extra}


def _run(code: str, env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_the_command_loads_arrow_on_the_system_allocator() -> None:
    assert _run(_PROBE, _env()) == "system"


def test_the_entry_point_reads_no_arrow() -> None:
    """`import lsm_lab.cli` must not load pyarrow, or the pool could no longer be chosen."""
    code = "import sys, lsm_lab.cli; print('pyarrow' in sys.modules)"
    assert _run(code, _env()) == "False"


def test_a_pool_the_user_chose_is_kept() -> None:
    assert _run(_PROBE, _env(ARROW_DEFAULT_MEMORY_POOL="mimalloc")) == "mimalloc"
    assert allocator.command_env({"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"})[allocator.POOL_VARIABLE] == "jemalloc"
    assert allocator.command_env({})[allocator.POOL_VARIABLE] == "system"


def test_importing_the_library_changes_nothing() -> None:
    code = ("import json, pyarrow as pa; before = pa.default_memory_pool().backend_name; import lsm_lab; "
            "print(json.dumps([before, lsm_lab.__name__ and pa.default_memory_pool().backend_name]))")
    before, after = json.loads(_run(code, _env()))
    assert after == before != "system"  # the wheels' default (mimalloc or jemalloc) is kept


def test_the_entry_point_runs_the_command() -> None:
    out = subprocess.run([sys.executable, "-m", "lsm_lab", "--help"], capture_output=True, text=True,
                         env=_env(), check=True).stdout
    assert "usage: lsm-lab" in out and "bench" in out


def test_benchmark_workers_run_as_the_command(tmp_path: object) -> None:
    """A merge bench child reports the pool it ran with: the command's (fails when started with the parent's
    environment only)."""
    from pathlib import Path

    root = Path(str(tmp_path))
    ds = bench_merge.make_runs(root / "data", 2_000, 2, 0.3)
    rec = bench_merge.run_contender("sorted", ds, root / "out")
    assert rec["arrow_pool"] == "system", rec
