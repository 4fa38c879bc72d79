"""Pictures and widgets: matplotlib figures of a table's levels, key ranges, timeline,
compaction and benchmarks, and the loser-tree step-through widget.

Everything here only draws what the library computed (file groups, footers,
the timeline, `trace_merge` steps, benchmark records); see each module's
docstring for how to read its picture:

    levels.py        plot_levels, plot_key_ranges, levels_frame, level_files
    timeline.py      plot_timeline
    plan.py          plot_plan (a compaction: levels before and after)
    bench.py         plot_bench, plot_merge_bench, plot_lookup_bench, load_records
    merge_widget.py  MergeStepper, step_html, show_step

Figures are `matplotlib.figure.Figure` objects made without pyplot, so they
work headless (Agg) and show themselves in a notebook. `write_figures` saves
the three main pictures of a table (used by ``lsm-lab demo --figures DIR``).

Taught in: notebooks/01_build_a_table.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from lsm_lab.extras import require

require("viz", "lsm_lab.viz")  # before the submodules import matplotlib: one clear line when it is missing

from lsm_lab.viz.bench import load_records, plot_bench, plot_lookup_bench, plot_merge_bench  # noqa: E402
from lsm_lab.viz.levels import KeyScale, LevelFile, level_files, levels_frame, plot_key_ranges, plot_levels  # noqa: E402
from lsm_lab.viz.merge_widget import MergeStepper, StepPicture, show_step, state_legend_html, step_html, tree_svg  # noqa: E402
from lsm_lab.viz.plan import plot_plan  # noqa: E402
from lsm_lab.viz.timeline import plot_timeline  # noqa: E402

if TYPE_CHECKING:
    from lsm_lab.api import Table


def write_figures(table: Table, out_dir: str | os.PathLike[str], *, dpi: int = 110) -> list[Path]:
    """Write levels.png, key_ranges.png and timeline.png of `table` into `out_dir`; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in (("levels.png", plot_levels(table)), ("key_ranges.png", plot_key_ranges(table)),
                      ("timeline.png", plot_timeline(table))):
        path = out / name
        fig.savefig(path, dpi=dpi, metadata={"Software": None})
        paths.append(path)
    return paths


__all__ = [
    "KeyScale",
    "LevelFile",
    "MergeStepper",
    "StepPicture",
    "level_files",
    "levels_frame",
    "load_records",
    "plot_bench",
    "plot_key_ranges",
    "plot_levels",
    "plot_lookup_bench",
    "plot_merge_bench",
    "plot_plan",
    "plot_timeline",
    "show_step",
    "state_legend_html",
    "step_html",
    "tree_svg",
    "write_figures",
]
