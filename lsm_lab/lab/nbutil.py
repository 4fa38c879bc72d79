"""Small helpers the notebook chapters share: test-size detection, a seeded scale, scratch and cache folders.

Every chapter runs twice in its life: under `make test` (nbmake sets
`PYTEST_CURRENT_TEST`; the data must be small and the run quick) and in a
learner's Jupyter (full size).  `size(full, test)` picks the number to use.

    scratch("07_compaction")   a fresh, empty folder for the chapter's tables; emptied again on the
                               next run of the chapter, removed when the kernel exits (the tables are
                               there while the kernel runs; LSM_LAB_KEEP_TABLES=1 keeps them afterwards)
    cache("10_runs")           a folder that survives re-runs: data that is slow to make and never changes
    measured("spark_linear")   a record of the README's generated Measured section (docs/measured/), for
                               figures a chapter quotes but cannot re-run

Both live in the repository's own ignored `.scratch/` folder when lsm_lab runs from a
checkout (so nothing piles up in the system temp folder), else under the temp folder.
`LSM_LAB_SCRATCH=DIR` puts them elsewhere; `LSM_LAB_SMALL=1` gives test sizes outside pytest.
Tables are removed when the chapter's kernel exits because nothing after the chapter reads them
(a series run left 625 MB of them before; the caches, which a re-run does read, stay).

Taught in: every chapter (notebooks/00_why_lsm.ipynb … notebooks/13_change_data_capture.ipynb)
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from lsm_lab.interop.hudi_tables import find_shared

T = TypeVar("T")  # an int, a list of ints: whatever a chapter scales
SEED = 42
_REPO = Path(__file__).resolve().parents[2]


def under_test() -> bool:
    """True when the notebook runs under pytest/nbmake (small data, no waiting), or with LSM_LAB_SMALL=1."""
    return "PYTEST_CURRENT_TEST" in os.environ or os.environ.get("LSM_LAB_SMALL") == "1"


def size(full: T, test: T) -> T:
    """`test` under pytest (or LSM_LAB_SMALL=1), `full` for a learner."""
    return test if under_test() else full


def scratch_root() -> Path:
    """Where chapters put their tables: $LSM_LAB_SCRATCH, else `<checkout>/.scratch`, else the temp folder."""
    env = os.environ.get("LSM_LAB_SCRATCH")
    if env:
        return Path(env)
    if (_REPO / "pyproject.toml").is_file() and os.access(_REPO, os.W_OK):
        return _REPO / ".scratch"
    return Path(tempfile.gettempdir()) / "lsm_lab_scratch"


def keep_tables() -> bool:
    """True with LSM_LAB_KEEP_TABLES=1 (outside pytest): a chapter's tables outlive its kernel."""
    return os.environ.get("LSM_LAB_KEEP_TABLES") == "1" and "PYTEST_CURRENT_TEST" not in os.environ


def scratch(name: str) -> Path:
    """A fresh, empty folder for a chapter's tables, removed at kernel exit unless `keep_tables()`."""
    root = scratch_root() / "notebooks" / name
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    if not keep_tables():
        atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


def cache(name: str) -> Path:
    """A folder kept across runs, for inputs that are slow to make and depend only on their parameters."""
    root = scratch_root() / "cache" / name
    root.mkdir(parents=True, exist_ok=True)
    return root


def measured(name: str) -> dict[str, Any] | None:
    """The README's record `docs/measured/<name>.json` (command, date, load, source, results), or None when
    lsm_lab does not run from a checkout; a chapter quotes figures it cannot re-run from it, never by hand."""
    path = _REPO / "docs" / "measured" / f"{name}.json"
    if not path.is_file():
        return None
    record: dict[str, Any] = json.loads(path.read_text())
    if "results_from" in record:
        record["results"] = json.loads((_REPO / record["results_from"]).read_text())
    return record


def shared_folder() -> Path | None:
    """The folder with real Hudi tables: the copy in the repository's `data/` (or `LSM_LAB_SHARED`)."""
    return find_shared()
