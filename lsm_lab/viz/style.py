"""Shared look of every lsm_lab picture: one palette, one figure type, short names.

Every figure in `lsm_lab.viz` takes its colours from the fixed lists below, in
a fixed order, so the same table always gives the same picture (no colour
cycle state, no random jitter):

* **instants** are coloured in time order from `INSTANT_PALETTE` (up to ten,
  Tableau's qualitative palette); a table with more instants gets an evenly
  sampled *viridis* ramp instead, so colour then reads as age (dark = old);
* **actions** (commit, deltacommit, compaction, ...) have one colour each in
  `ACTION_COLOURS`;
* **leaf states** of the loser tree have one colour each in `STATE_COLOURS`
  (used by the merge widget's HTML as well).

`VizFigure` is a plain `matplotlib.figure.Figure` built without pyplot (so it
works headless and never leaks into pyplot's list of open figures) with a
`_repr_png_`, so a notebook shows it even when pyplot was never imported.

Taught in: notebooks/01_build_a_table.ipynb, notebooks/03_sorted_writes_and_levels.ipynb
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence

from matplotlib.colors import to_hex
from matplotlib.figure import Figure

INSTANT_PALETTE: tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
)

ACTION_COLOURS: Mapping[str, str] = {
    "commit": "#1f77b4",
    "deltacommit": "#2ca02c",
    "compaction": "#ff7f0e",
    "logcompaction": "#bcbd22",
    "replacecommit": "#9467bd",
    "clustering": "#e377c2",
    "clean": "#8c564b",
    "rollback": "#d62728",
    "restore": "#7f7f7f",
    "savepoint": "#17becf",
    "indexing": "#aec7e8",
    "schemacommit": "#c5b0d5",
}
OTHER_ACTION_COLOUR = "#c7c7c7"

# Okabe-Ito based, light enough for black text.
STATE_COLOURS: Mapping[str, str] = {
    "WINNER_WITH_NEW_KEY": "#7fd3b4",
    "WINNER_WITH_SAME_KEY": "#9fd0f0",
    "WINNER_POPPED": "#f2bf55",
    "LOSER_WITH_NEW_KEY": "#d9d9d9",
    "LOSER_WITH_SAME_KEY": "#e3a9cb",
    "LOSER_POPPED": "#f5ec8a",
}
EXHAUSTED_COLOUR = "#f4f4f4"
MOVED_COLOUR = "#d62728"

DELETE_HATCH = "////"
PENDING_HATCH = "xx"


class VizFigure(Figure):
    """A matplotlib Figure that also knows how to show itself as PNG in IPython."""

    def _repr_png_(self) -> bytes:
        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def new_figure(width: float, height: float) -> VizFigure:
    """A constrained-layout figure of `width` x `height` inches, without pyplot."""
    return VizFigure(figsize=(width, height), layout="constrained")


def instant_colours(instants: Iterable[str]) -> dict[str, str]:
    """Instant time → colour, assigned in time order (deterministic)."""
    ordered = sorted(set(instants), key=lambda t: (t + "000") if len(t) == 14 else t)
    if len(ordered) <= len(INSTANT_PALETTE):
        return {t: INSTANT_PALETTE[i] for i, t in enumerate(ordered)}
    from matplotlib import colormaps

    ramp = colormaps["viridis"]
    n = len(ordered)
    return {t: to_hex(ramp(0.05 + 0.9 * i / (n - 1))) for i, t in enumerate(ordered)}


def action_colour(action: str) -> str:
    return ACTION_COLOURS.get(action, OTHER_ACTION_COLOUR)


def short_id(file_id: str, width: int = 13) -> str:
    """`00000000-cd76-5330-…-0` → `00000000-cd76` (enough to tell file groups apart)."""
    return file_id if len(file_id) <= width else file_id[:width] + "…"


def short_key(key: object, width: int = 10) -> str:
    text = str(key)
    return text if len(text) <= width else text[: width - 1] + "…"


def group_label(partition: str, file_id: str) -> str:
    return f"{partition}/{short_id(file_id)}" if partition else short_id(file_id)


def legend_subset(items: Sequence[str], limit: int = 12) -> list[str]:
    """At most `limit` items: all of them, or the first and last ones around an ellipsis."""
    if len(items) <= limit:
        return list(items)
    head = (limit - 1) // 2
    return [*list(items[:head]), "…", *list(items[-(limit - 1 - head):])]
