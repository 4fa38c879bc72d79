"""Small helpers the notebook chapters share: test-size detection, a seeded scale, a scratch folder.

Every chapter runs twice in its life: under `make test` (nbmake sets
`PYTEST_CURRENT_TEST`; the data must be small and the run quick) and in a
learner's Jupyter (full size).  `size(full, test)` picks the number to use, and
`scratch(name)` gives a fresh folder for the chapter's tables so that
re-running a notebook never trips over the previous run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from lsm_lab.interop.hudi_tables import find_shared

SEED = 42


def under_test() -> bool:
    """True when the notebook runs under pytest/nbmake (small data, no waiting)."""
    return "PYTEST_CURRENT_TEST" in os.environ or os.environ.get("LSM_LAB_SMALL") == "1"


def size(full: int, test: int) -> int:
    """`test` under pytest, `full` for a learner."""
    return test if under_test() else full


def scratch(name: str) -> Path:
    """A fresh, empty folder for a chapter's tables (under the system temp folder)."""
    root = Path(tempfile.gettempdir()) / "lsm_lab_notebooks" / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return root


def shared_folder() -> Path | None:
    """The folder with real Hudi tables: the copy in the repository's `data/` (or `LSM_LAB_SHARED`)."""
    return find_shared()
