"""Progress bars for long work, and silence everywhere else.

    for fs in progress(slices, desc="read", unit="slice"): ...
    with bar(total=rows, desc="merge", unit="row") as b:  b.update(n)   # b is None when no bar

A bar is worth showing only to a person who is watching.  So a bar appears
only when all of these hold:

    someone watches?      stderr is a terminal (tqdm's own `\\r` bar), or this is a
                          Jupyter kernel (an ipywidgets bar)          — never a pipe or a file
    long enough?          at least `min_items` steps, and the work has run for
                          MIN_SECONDS before anything is drawn (tqdm's `delay`)
    not a test?           no PYTEST_CURRENT_TEST (pytest and nbmake set it)
    not switched off?     LSM_LAB_PROGRESS is not "0" ("1" forces bars on)

In a notebook the bar is displayed through a display handle and replaced by an
empty output when it closes, so a notebook executed and saved (nbconvert,
nbmake, a learner pressing "save") keeps no frozen `0%| | 0/12` line.

Simplified compared with Apache Hudi (which logs progress, it draws no bars):
nothing here is about correctness, and a bar never changes what runs.

Taught in: no chapter (progress bars; README, environment variables)
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

MIN_SECONDS = 1.0
"""Work that ends sooner than this draws nothing (tqdm's `delay`)."""


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where a widget bar can be shown), False in a terminal or a script."""
    if "IPython" not in sys.modules:  # a kernel has imported it; a script need not pay its import (~0.1 s)
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def enabled(count: int | None, min_items: int = 8) -> bool:
    """Whether work of `count` steps (None: unknown) should show a bar, by the rules above."""
    flag = os.environ.get("LSM_LAB_PROGRESS")
    if flag == "0":
        return False
    if flag == "1":
        return True
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    if not (_stderr_is_terminal() or in_notebook()):
        return False
    return count is None or count >= min_items


def _notebook_bar_class() -> Any:
    from IPython.display import display
    from tqdm.notebook import tqdm as notebook_tqdm

    class NotebookBar(notebook_tqdm):
        """A widget bar shown through a display handle, and blanked out when it closes."""

        _handle: Any = None

        def display(self, msg: Any = None, pos: Any = None, close: bool = False, bar_style: Any = None,
                    check_delay: bool = True) -> None:
            self.displayed = True  # the parent never displays; the handle below does
            super().display(msg, pos, close=close, bar_style=bar_style, check_delay=False)
            if check_delay and not close and self._handle is None:
                self._handle = display(self.container, display_id=True)

        def close(self) -> None:
            super().close()
            if self._handle is not None:
                self._handle.update({"text/plain": ""}, raw=True)
                self._handle = None

    return NotebookBar


def new_bar(*, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
            force: bool | None = None, min_items: int = 8) -> Any:
    """A tqdm bar (terminal or notebook widget), or None when no bar should be drawn.

    `force=True` / `False` overrides the automatic decision (a command's `--progress` / `--quiet`);
    even a forced bar is drawn only where someone can see it and after MIN_SECONDS.
    """
    show = enabled(total, min_items) if force is None else force and (
        os.environ.get("LSM_LAB_PROGRESS") == "1" or _stderr_is_terminal() or in_notebook())
    if not show:
        return None
    kwargs = {"total": total, "desc": desc, "unit": unit, "unit_scale": unit_scale, "leave": False,
              "delay": MIN_SECONDS}
    if in_notebook():
        return _notebook_bar_class()(**kwargs)
    from tqdm import tqdm

    return tqdm(file=sys.stderr, **kwargs)


@contextlib.contextmanager
def bar(*, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
        force: bool | None = None) -> Iterator[Any]:
    """`new_bar` as a context manager that always closes the bar (None when there is none)."""
    b = new_bar(total=total, desc=desc, unit=unit, unit_scale=unit_scale, force=force, min_items=1)
    try:
        yield b
    finally:
        if b is not None:
            b.close()


def progress(items: Iterable[T], *, desc: str, unit: str = "it", total: int | None = None,
             min_items: int = 8) -> Iterator[T]:
    """Iterate `items`, with a bar when the work is long enough to deserve one."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    b = new_bar(total=total, desc=desc, unit=unit, min_items=min_items)
    if b is None:
        yield from items
        return
    try:
        for item in items:
            yield item
            b.update(1)
    finally:
        b.close()
