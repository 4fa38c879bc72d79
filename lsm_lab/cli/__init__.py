"""Layer 12, the `lsm-lab` command (top of the tree: nothing imports it).

    __init__.py   main(): the entry point; chooses Arrow's allocator before pyarrow loads
    app.py        the parser, the core commands (create, write, read, show, demo) and the one-line errors;
                  every module here adds its commands one way (`app.command_modules`)
    console.py    input and output files, `--option KEY=VALUE`, printing a frame
    merge.py      `lsm-lab merge`, `lsm-lab bench merge`
    services.py   compact, clean, cluster, rollback, savepoint, restore, archive, `lsm-lab show plan`
    lookup.py     `lsm-lab lookup`, `lsm-lab show blooms`, `lsm-lab bench lookup`
    interop.py    `lsm-lab interop ...`, `lsm-lab upgrade`, `lsm-lab show formats`, `lsm-lab bench interop|peers`
    spark.py      `lsm-lab spark ...`, `lsm-lab bench compaction`
    bench.py      `lsm-lab bench storage|cdc|scan|startup|scale` (benchmarks that belong to no command)

Start-up: building the parser imports no pyarrow, numpy or pandas (each command
imports the library when it runs; lsm_lab/cli/console.py says how, and
tests/test_cli_startup.py checks it); `lsm-lab bench startup` measures it.

Arrow reads `ARROW_DEFAULT_MEMORY_POOL` once, when its library loads, so `main`
sets it (to "system", unless the user chose) before anything imports pyarrow;
this module and lsm_lab/allocator.py import no Arrow. Why the command uses the
system allocator: lsm_lab/allocator.py.

Taught in: no chapter (README, "Command line")
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from lsm_lab.allocator import COMMAND_POOL, POOL_VARIABLE


def main(argv: Sequence[str] | None = None) -> int:
    """`lsm-lab ...` (`argv`: the arguments, default the command line's): the allocator chosen, then the command."""
    os.environ.setdefault(POOL_VARIABLE, COMMAND_POOL)
    from lsm_lab.cli.app import main as app_main  # loads pyarrow: only after the variable is set

    return app_main(argv)


__all__ = ["main"]
