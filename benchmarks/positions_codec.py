"""RECORD_POSITIONS codecs: upstream's position list (NumPy LEB128) against Roaring64 (pyroaring, C).

The list is what native logs carry (format/positions.py); the portable Roaring64 bitmap is what v1
block headers carry, encoded by CRoaring through pyroaring — the fastest codec of this data lsm_lab
has, so it is the baseline. Each size encodes and decodes the same sorted positions (a log of updates
to 1 in 4 base rows), checks the round trip, and prints best-of-`--repeat` times, the list/Roaring
ratio, and ns per position, so that growth with size shows (linear: ns per position stays flat).

Run it:  .venv/bin/python benchmarks/positions_codec.py [--sizes 100000 1000000 4000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from lsm_lab.format import positions as P


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000, 4_000_000], help="positions per log")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is kept)")
    args = ap.parse_args(argv)
    print(f"{'positions':>10} {'list enc':>9} {'roar enc':>9} {'ratio':>6} {'list dec':>9} {'roar dec':>9} {'ratio':>6}"
          f" {'list ns/pos enc+dec':>20} {'bytes list/roar':>16}")
    for n in args.sizes:
        pos = np.sort(np.random.default_rng(1).choice(n * 4, n, replace=False)).astype(np.int64)
        le, text = best(partial(P.encode_position_list, pos), args.repeat)
        re_, bitmap = best(partial(P.encode_positions, pos), args.repeat)
        assert text is not None
        ld, back = best(partial(P.decode_position_list, text), args.repeat)
        rd, back_bitmap = best(partial(P.decode_positions, bitmap), args.repeat)
        assert np.array_equal(back, pos) and np.array_equal(back_bitmap, pos)
        print(f"{n:>10,} {le:>8.3f}s {re_:>8.3f}s {le / re_:>5.2f}x {ld:>8.3f}s {rd:>8.3f}s {ld / rd:>5.2f}x"
              f" {(le + ld) / n * 1e9:>20.0f} {len(text) / len(bitmap):>16.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
