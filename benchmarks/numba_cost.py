#!/usr/bin/env python
"""What a numba-compiled kernel would cost every process that merges: RSS and seconds of `import numba`.

    pip install --target /tmp/nbt numba llvmlite       # numba is no dependency of lsm_lab
    PYTHONPATH=/tmp/nbt python benchmarks/numba_cost.py

Prints the process's peak RSS after NumPy and pyarrow (what an lsm_lab worker has
loaded anyway), after `import numba`, and after the first call of one small
`@njit(cache=True)` function (compiled on the first run, loaded from numba's cache
on later ones), with the seconds of each step. docs/PERFORMANCE.md ("Final figures
of the fifth pass") explains why these figures kept numba out: every Spark worker
that merges would start that much larger.
"""

import resource
import sys
import time

import numpy as np
import pyarrow as pa  # noqa: F401 - loaded by every lsm_lab process before it merges
import pyarrow.compute  # noqa: F401


def _mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    base = _mib()
    t0 = time.perf_counter()
    try:
        import numba
    except ImportError:
        print("numba is not installed: pip install --target /tmp/nbt numba llvmlite, then PYTHONPATH=/tmp/nbt")
        return 2
    imported, t1 = _mib(), time.perf_counter()

    @numba.njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]  # numba has no type information
    def total(a: np.ndarray) -> int:
        s = 0
        for x in a:
            s += x
        return s

    total(np.arange(10))
    jitted, t2 = _mib(), time.perf_counter()
    print(f"numba {numba.__version__}, NumPy {np.__version__}")
    print(f"peak RSS: {base:.0f} MiB with NumPy and pyarrow, {imported:.0f} MiB after import numba "
          f"({t1 - t0:.2f} s), {jitted:.0f} MiB after the first jitted call ({t2 - t1:.2f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
