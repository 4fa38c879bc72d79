"""Progress bars for long work, and silence for short work and tests.

    progress(items, desc="read", unit="slice")

shows a tqdm bar (a terminal bar, or a widget in Jupyter via `tqdm.auto`) only
when it helps: at least `min_items` steps, not under pytest/nbmake (so test
logs and committed notebooks stay clean), and not when `LSM_LAB_PROGRESS=0`.
`LSM_LAB_PROGRESS=1` forces bars on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def enabled(count: int | None, min_items: int = 8) -> bool:
    flag = os.environ.get("LSM_LAB_PROGRESS")
    if flag == "0":
        return False
    if flag == "1":
        return True
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    return count is None or count >= min_items


def progress(items: Iterable[T], *, desc: str, unit: str = "it", total: int | None = None,
             min_items: int = 8) -> Iterator[T]:
    """Iterate `items`, with a bar when the work is long enough to deserve one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if not enabled(total, min_items):
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, unit=unit, total=total, leave=False)
