#!/usr/bin/env python
"""What a fresh page costs on this machine: touch N MiB of new memory, count the faults and the system time.

    python benchmarks/page_faults.py            # 400 MiB, right after a 1000 MiB process, then after 8 s idle
    python benchmarks/page_faults.py 200 0      # 200 MiB, no pause

Each measurement runs in a fresh process (an anonymous mapping written once per
4 KiB page). lsm_lab/allocator.py quotes it: on the 2-core virtual machine this
project is measured on, a fault costs ~2 µs, which is why the `lsm-lab` command
keeps Arrow and NumPy on one allocator (docs/PERFORMANCE.md, "Sixth pass", A).
"""

import mmap
import resource
import subprocess
import sys
import time


def touch(mib: int) -> str:
    """Touch `mib` MiB of new memory in this process; one line: seconds, system seconds, faults."""
    n = mib << 20
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    m = mmap.mmap(-1, n)
    for i in range(0, n, mmap.PAGESIZE):
        m[i] = 1
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    faults = r1.ru_minflt - r0.ru_minflt
    system = r1.ru_stime - r0.ru_stime
    per = system / faults * 1e6 if faults else float("nan")
    return f"{mib} MiB touched in {wall:.3f} s: system {system:.3f} s, {faults} faults, {per:.2f} µs a fault"


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(touch(int(argv[1])))
        return 0
    mib = int(argv[0]) if argv else 400
    pause = float(argv[1]) if len(argv) > 1 else 8.0

    def child(size: int, label: str) -> None:
        out = subprocess.run([sys.executable, __file__, "--child", str(size)], capture_output=True, text=True,
                             check=True).stdout.strip()
        print(f"{label:>22}: {out}")

    child(1000, "a 1000 MiB process")
    child(mib, "right after it")
    if pause > 0:
        time.sleep(pause)
        child(mib, f"after {pause:g} s idle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
