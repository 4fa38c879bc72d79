"""Which allocator Arrow uses in lsm-lab's own processes (the `lsm-lab` command and its benchmark workers).

pyarrow takes every buffer it decodes, builds or takes into from one memory pool:
mimalloc in the wheels installed here. NumPy allocates its temporaries with the C
library's `malloc`. A merge or a write interleaves the two:

    Parquet decode ──► Arrow buffers ──► NumPy temporaries (sort, winners) ──► Arrow take ──► Parquet encode
         (pool)                              (malloc)                         (pool)

With two allocators each keeps its own free memory: pages one has freed are not
reused by the other, and mimalloc returns freed pages to the kernel soon after, so
that their next use is a fresh page fault. On the 2-core virtual machine this
project is measured on a fault costs ~2 µs (400 MiB touched: 102,400 faults, 0.2 s
of system time; `python benchmarks/page_faults.py`). With Arrow on the C library's
allocator both share one heap: an 8M-row merge took 1.42 s instead of 1.98 s with 50 MiB less peak memory, and the
peers workload's writes 0.95 s instead of 1.1–1.4 s (docs/PERFORMANCE.md, sixth
pass). Spark tasks showed no difference either way.

Arrow reads `ARROW_DEFAULT_MEMORY_POOL` once, when its library loads. So:

    lsm-lab ...            the entry point (lsm_lab/cli/__init__.py) sets it to "system" before pyarrow loads
    benchmark workers      started with `command_env()`: the same value
    import lsm_lab         changes nothing: a library does not choose its host process's allocator
                           (a notebook or a service can set the variable before starting Python)

A value the user has set is always kept. (`pyarrow.set_memory_pool` after the
load is not the same: it redirects pyarrow's Python-level allocations only, while
Arrow's C++ internals keep the pool chosen at load; measured, it was slower and
larger than either pool alone.)

Simplified compared with Apache Hudi: Hudi runs on the JVM, whose heap and
off-heap buffers follow the JVM's own settings; there is nothing like this to choose.

Taught in: no chapter (docs/PERFORMANCE.md, "Sixth pass", section A, has the measurements)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import cast

POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
# read by the command's entry point (lsm_lab/cli/__init__.py) before pyarrow loads: this module imports
# pyarrow only inside pool_in_use
COMMAND_POOL = "system"


def command_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that works as the `lsm-lab` command does (a benchmark worker):
    `env` (default: this process's) with Arrow's pool set to the command's, unless it chooses one."""
    out = dict(os.environ if env is None else env)
    out.setdefault(POOL_VARIABLE, COMMAND_POOL)
    return out


def pool_in_use() -> str:
    """The name of the pool Arrow allocates from in this process ("system", "mimalloc", "jemalloc")."""
    import pyarrow as pa  # (not at module level: the entry point reads this module before Arrow loads)

    return cast("str", pa.default_memory_pool().backend_name)


__all__ = ["COMMAND_POOL", "POOL_VARIABLE", "command_env", "pool_in_use"]
