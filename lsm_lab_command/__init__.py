"""The `lsm-lab` command's entry point: it chooses Arrow's allocator before pyarrow is loaded, then runs `lsm_lab.cli`.

Arrow reads `ARROW_DEFAULT_MEMORY_POOL` once, when its library loads, and `import lsm_lab`
loads it; so the choice is made here, in a module that imports nothing of lsm_lab's
first. Why the command uses the system allocator: lsm_lab/allocator.py. A value the
user has set is kept.

Taught in: no chapter (README, "Environment variables")
"""

from __future__ import annotations

import os
from collections.abc import Sequence

POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
COMMAND_POOL = "system"


def main(argv: Sequence[str] | None = None) -> int:
    """`lsm-lab ...` (`argv`: the arguments, default the command line's): the allocator chosen, then
    `lsm_lab.cli.main`."""
    os.environ.setdefault(POOL_VARIABLE, COMMAND_POOL)
    from lsm_lab.cli import main as cli_main  # loads pyarrow: only after the variable is set

    return cli_main(argv)


__all__ = ["COMMAND_POOL", "POOL_VARIABLE", "main"]
