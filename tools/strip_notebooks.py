#!/usr/bin/env python3
"""Strip notebooks before commit: outputs, execution counts, widget state, run-time cell metadata.

    python tools/strip_notebooks.py notebooks            # strip every notebook under notebooks/ in place
    python tools/strip_notebooks.py a.ipynb b.ipynb      # or the given files
    python tools/strip_notebooks.py --check notebooks    # change nothing; exit 1 if any notebook is not stripped

What is removed, and why:

* code cells' ``outputs`` and ``execution_count``: outputs hold instant times, temp paths and
  images that change on every run, so diffs would be noise (the chapters run in CI instead);
* notebook ``metadata.widgets``: the saved state of ipywidgets (the loser-tree stepper) — large,
  and stale as soon as the kernel is gone;
* run-time cell metadata (``execution``, ``ExecuteTime``, ``collapsed``, ``scrolled``) that Jupyter
  front ends add while a notebook runs.

Everything a reader wrote is kept: sources, cell ids, tags, the kernelspec. A stripped notebook
is written with nbformat's usual layout (one-space indent, trailing newline), so stripping twice
changes nothing. `make notebooks-strip` runs this on notebooks/; `tests/test_notebooks_clean.py`
runs the same check as ``--check``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

RUNTIME_CELL_KEYS = ("execution", "ExecuteTime", "collapsed", "scrolled")
RUNTIME_NOTEBOOK_KEYS = ("widgets",)


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """What makes `nb` not stripped (empty when it is clean)."""
    found = []
    for key in RUNTIME_NOTEBOOK_KEYS:
        if key in nb.metadata:
            found.append(f"notebook metadata has {key!r}")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            if cell.get("outputs"):
                found.append(f"cell {i} has outputs")
            if cell.get("execution_count") is not None:
                found.append(f"cell {i} has an execution count")
        for key in RUNTIME_CELL_KEYS:
            if key in cell.get("metadata", {}):
                found.append(f"cell {i} metadata has {key!r}")
    return found


def strip(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove outputs, execution counts, widget state and run-time metadata from `nb` (in place)."""
    for key in RUNTIME_NOTEBOOK_KEYS:
        nb.metadata.pop(key, None)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for key in RUNTIME_CELL_KEYS:
            cell.get("metadata", {}).pop(key, None)
    return nb


def notebooks(paths: list[str]) -> list[Path]:
    """The .ipynb files named, or found under the folders named (checkpoints skipped), sorted."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += [p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
        elif path.suffix == ".ipynb" and path.is_file():
            found.append(path)
        else:
            raise SystemExit(f"strip_notebooks: {raw}: not a notebook or a folder")
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=["notebooks"], help="notebooks or folders (default: notebooks)")
    parser.add_argument("--check", action="store_true", help="only report; exit 1 if a notebook is not stripped")
    args = parser.parse_args(argv)

    dirty = 0
    for path in notebooks(args.paths):
        nb = nbformat.read(path, as_version=nbformat.NO_CONVERT)
        found = problems(nb)
        if not found:
            continue
        dirty += 1
        if args.check:
            print(f"{path}: not stripped ({'; '.join(found[:3])}{' …' if len(found) > 3 else ''})")
        else:
            nbformat.write(strip(nb), path)
            print(f"{path}: stripped")
    if args.check and dirty:
        print(f"{dirty} notebook(s) need stripping: run `make notebooks-strip`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
