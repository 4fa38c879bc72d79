"""Stepping through the loser tree: an HTML drawing of one `Step`, and a widget over all of them.

The merge engine already runs as a state machine that records frozen
snapshots (`lsm_lab.merge.loser_tree.trace_merge` → ``list[Step]``); this
module only draws them. Nothing here compares a key or moves a leaf.

One snapshot (`step_html`) has five parts, top to bottom:

    step 7 / 22  [pop]  popped 'c' from leaf 1; parked it at node 2; ...
    comparisons 4 (+0 by source index) · read 5 of 8 records · output 0 rows

                  ┌ champion #2 'c' ┐            the tree: tree[0] on top, node m shows the
                         │                       loser leaf it holds; every box is filled
                  ┌ n1  #0 'c' ┐                 with that leaf's state colour, and what this
                 /            \\                  step touched has a red outline
           ┌ n2 #1 'c' ┐     #0 base             leaves (inputs) on the bottom row, placed
            /        \\                           where the heap puts them: leaf i is
         #1 log 1   #2 log 2                     position k + i, its parent (k + i) // 2

    inputs   #0 base   ~~a~~ ▶c  e  g            each input's keys: read ones struck out, the
             #1 log 1  ▶c  f                     head (the cursor) marked ▶ and coloured by
             #2 log 2  ~~a~~ ▶c                  the leaf's state, pending ones plain
    output   'c' 'e' ...                         the merged rows so far (newest last)
    legend   the six states                      WINNER_WITH_NEW_KEY ... LOSER_POPPED

**Reading the colours.** Green/blue boxes are winners (the champion path),
grey/pink are losers parked at nodes, orange/yellow are popped records
waiting for their input to advance. A pink LOSER_WITH_SAME_KEY at a node is
what lets the next pop skip key comparisons (RFC-103's firstSameKeyIndex):
watch the comparison counter stay still while a same-key group is popped.

**`MergeStepper`** (an ipywidgets ``VBox``) shows that drawing for one step at
a time, with Reset / ◀ Prev / Play / Next ▶ and a slider; ``.index``,
``.step``, ``.html``, ``.next()``, ``.prev()``, ``.reset()`` drive it from
code (the tests click the buttons with ``button.click()``). Build it from
steps, or from inputs and a `MergeSpec` (it then calls `trace_merge` and can
draw every input's full key list with its cursor)::

    MergeStepper(inputs=[base_rows, log1_rows, log2_rows], spec=spec, names=["base", "log 1", "log 2"])

`step_html` / `show_step` draw a single snapshot with no widget (for a static
notebook, a test or a README). All output is one self-contained HTML string
with inline styles and an inline SVG, deterministic for a given step.

Simplified compared with a real debugger: the drawing shows head keys only
(the full head row is in each box's tooltip) and at most a window of each
input's keys around its cursor.

Taught in: notebooks/05_loser_tree.ipynb
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as widgets

from lsm_lab.errors import InputError
from lsm_lab.merge.loser_tree import LeafState, LeafView, Step, trace_merge
from lsm_lab.merge.semantics import MergeSpec
from lsm_lab.viz.style import EXHAUSTED_COLOUR, MOVED_COLOUR, STATE_COLOURS, short_key

_SLOT = 60  # horizontal pixels per in-order position
_ROW = 66  # vertical pixels per tree level
_BOX_W, _BOX_H = 112, 40
_SHORT_STATE = {
    "WINNER_WITH_NEW_KEY": "win·new", "WINNER_WITH_SAME_KEY": "win·same", "WINNER_POPPED": "win·popped",
    "LOSER_WITH_NEW_KEY": "lose·new", "LOSER_WITH_SAME_KEY": "lose·same", "LOSER_POPPED": "lose·popped",
}
_FONT = "font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ascii(markup: str) -> str:
    """Non-ASCII characters as character references, so the HTML reads right in any encoding."""
    return markup.encode("ascii", "xmlcharrefreplace").decode("ascii")


def _short_state(leaf: LeafView) -> str:
    return "exhausted" if leaf.exhausted and not leaf.popped else _SHORT_STATE[leaf.state.value]


def state_colour(leaf: LeafView) -> str:
    """Fill colour of a leaf: its state's colour, or pale grey once its input is exhausted."""
    if leaf.exhausted and not leaf.popped:
        return EXHAUSTED_COLOUR
    return STATE_COLOURS[leaf.state.value]


def _names(k: int, names: Sequence[str] | None) -> list[str]:
    if names is not None and len(names) != k:
        raise InputError(f"{len(names)} input names for {k} inputs")
    return [f"#{i} {names[i]}" if names else f"#{i}" for i in range(k)]


def _head(leaf: LeafView) -> str:
    if leaf.exhausted and not leaf.popped:
        return "∅ exhausted"
    return repr(leaf.key) if isinstance(leaf.key, str) else str(leaf.key)


def _tooltip(leaf: LeafView, name: str) -> str:
    row = "" if leaf.row is None else " · " + ", ".join(f"{k}={v!r}" for k, v in leaf.row.items())
    same = f" · first_same=n{leaf.first_same}" if leaf.first_same >= 0 else ""
    return f"{name}: head {_head(leaf)} · {leaf.state.value} · read {leaf.consumed}{same}{row}"


# ------------------------------------------------------------------------------------ tree

def _layout(k: int) -> tuple[dict[int, float], dict[int, int], int]:
    """Heap positions 1..2k-1 → (x slot by in-order traversal, depth, max depth)."""
    xs: dict[int, float] = {}
    depth: dict[int, int] = {}
    counter = 0
    stack: list[tuple[int, int, bool]] = [(1, 0, False)]
    while stack:  # iterative in-order (no recursion limit for big k)
        p, d, seen = stack.pop()
        if p >= 2 * k:
            continue
        if p >= k or seen:  # a leaf, or an internal node whose left subtree is done
            xs[p], depth[p] = counter, d
            counter += 1
            continue
        stack.append((2 * p + 1, d + 1, False))
        stack.append((p, d, True))
        stack.append((2 * p, d + 1, False))
    return xs, depth, max(depth.values(), default=0)


def _fit(text: str, size: int) -> str:
    """Squeeze a label that would overflow its box (monospace: about 0.62 em per character, bold included)."""
    room = _BOX_W - 8
    return f' textLength="{room}" lengthAdjust="spacingAndGlyphs"' if len(text) * size * 0.62 > room else ""


def _box(x: float, y: float, fill: str, lines: Sequence[str], tooltip: str, *, moved: bool, dashed: bool = False,
         gid: str = "") -> str:
    stroke = f'stroke="{MOVED_COLOUR}" stroke-width="3"' if moved else 'stroke="#333" stroke-width="1"'
    dash = ' stroke-dasharray="4 3"' if dashed else ""
    out = [f'<g data-node="{_e(gid)}"><title>{_e(tooltip)}</title>',
           f'<rect x="{x - _BOX_W / 2:.0f}" y="{y - _BOX_H / 2:.0f}" width="{_BOX_W}" height="{_BOX_H}" rx="6" '
           f'fill="{fill}" {stroke}{dash}/>']
    top = y - (len(lines) - 1) * 7
    for i, text in enumerate(lines):
        weight = ' font-weight="bold"' if i == len(lines) - 1 else ""
        size = 10 if i < len(lines) - 1 else 12
        out.append(f'<text x="{x:.0f}" y="{top + 14 * i + 4:.0f}" text-anchor="middle" font-size="{size}"'
                   f'{weight}{_fit(text, size)}>{_e(text)}</text>')
    out.append("</g>")
    return "".join(out)


def tree_svg(tree: Sequence[int], leaves: Sequence[LeafView], *, names: Sequence[str] | None = None,
             moved_nodes: Sequence[int] = (), moved_leaves: Sequence[int] = ()) -> str:
    """The loser tree as an inline SVG: champion on top, nodes with their losers, leaves at the bottom."""
    k = len(leaves)
    if k == 0:
        return '<svg width="200" height="40"><text x="10" y="24">(no inputs)</text></svg>'
    labels = _names(k, names)
    xs, depth, max_depth = _layout(k)
    width = max(len(xs) * _SLOT + _BOX_W - _SLOT + 20, _BOX_W + 140)
    left = (width - (len(xs) - 1) * _SLOT) / 2

    def px(p: int) -> float:
        return left + xs[p] * _SLOT

    def py(p: int) -> float:
        row = max_depth + 1 if p >= k else depth[p] + 1  # leaves share the bottom row
        return 28 + row * _ROW

    height = int(py(k) + _BOX_H / 2 + 12) if k > 1 else int(28 + _ROW + _BOX_H / 2 + 12)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height}" '
             f'style="{_FONT}" data-k="{k}">']
    root = 1
    champ_x, champ_y = px(root), 28.0
    # edges first, under the boxes
    parts.append(f'<line x1="{champ_x:.0f}" y1="{champ_y:.0f}" x2="{px(root):.0f}" y2="{py(root):.0f}" '
                 'stroke="#888" stroke-width="1.2"/>')
    for p in range(2, 2 * k):
        parts.append(f'<line x1="{px(p):.0f}" y1="{py(p):.0f}" x2="{px(p // 2):.0f}" y2="{py(p // 2):.0f}" '
                     'stroke="#888" stroke-width="1.2"/>')
    # champion: tree[0]
    c = leaves[tree[0]]
    parts.append(_box(champ_x, champ_y, state_colour(c), [f"tree[0] · {_short_state(c)}",
                                                          f"{labels[c.source]} {short_key(_head(c), 12)}"],
                      _tooltip(c, labels[c.source]), moved=0 in moved_nodes, gid="champion"))
    # internal nodes: node m holds the loser leaf tree[m]
    for m in range(1, k):
        leaf = leaves[tree[m]]
        parts.append(_box(px(m), py(m), state_colour(leaf), [f"node {m} · {_short_state(leaf)}",
                                                             f"{labels[leaf.source]} {short_key(_head(leaf), 12)}"],
                          _tooltip(leaf, labels[leaf.source]), moved=m in moved_nodes, gid=f"n{m}"))
    # leaves: the inputs' heads
    for i, leaf in enumerate(leaves):
        p = k + i
        parts.append(_box(px(p), py(p), state_colour(leaf), [labels[i], short_key(_head(leaf), 12)],
                          _tooltip(leaf, labels[i]), moved=i in moved_leaves,
                          dashed=leaf.exhausted and not leaf.popped, gid=f"leaf{i}"))
    parts.append("</svg>")
    return _ascii("".join(parts))


# ------------------------------------------------------------------------------------ tables

def _chip(text: str, fill: str, *, bold: bool = False, strike: bool = False, outline: bool = False,
          tooltip: str = "") -> str:
    style = [f"background:{fill}", "padding:1px 5px", "margin:1px", "border-radius:4px", "display:inline-block",
             "border:1px solid " + ("#333" if outline else "#ccc")]
    if bold:
        style.append("font-weight:bold")
    if strike:
        style.append("text-decoration:line-through; color:#999")
    title = f' title="{_e(tooltip)}"' if tooltip else ""
    return f'<span style="{"; ".join(style)}"{title}>{_e(text)}</span>'


def state_legend_html() -> str:
    """The six leaf states with their colours (plus 'exhausted' and 'moved this step')."""
    chips = [_chip(state.value, STATE_COLOURS[state.value]) for state in LeafState]
    chips.append(_chip("exhausted", EXHAUSTED_COLOUR))
    chips.append(f'<span style="border:3px solid {MOVED_COLOUR}; padding:0 5px; border-radius:4px">'
                 "touched by this step</span>")
    return _ascii(f'<div style="margin-top:4px">{" ".join(chips)}</div>')


def _lane(leaf: LeafView, keys: Sequence[Any] | None, window: int) -> str:
    """One input's keys with the cursor: consumed (struck out), head (▶, state colour), pending."""
    fill = state_colour(leaf)
    if keys is None:
        if leaf.exhausted and not leaf.popped:
            return _chip("∅ exhausted", EXHAUSTED_COLOUR)
        return _chip("▶ " + short_key(_head(leaf), 14), fill, bold=True, outline=True) + (
            " <i>(popped)</i>" if leaf.popped else "")
    head = len(keys) if leaf.exhausted and not leaf.popped else max(leaf.consumed - 1, 0)
    lo = max(0, head - 2)
    hi = min(len(keys), head + window)
    cells = []
    if lo > 0:
        cells.append(f'<span style="color:#999">… {lo} read …</span>')
    for j in range(lo, hi):
        text = short_key(repr(keys[j]) if isinstance(keys[j], str) else keys[j], 14)
        if j < head:
            cells.append(_chip(text, "#ffffff", strike=True))
        elif j == head:
            mark = "▶ " + text + (" (popped)" if leaf.popped else "")
            cells.append(_chip(mark, fill, bold=True, outline=True, tooltip=leaf.state.value))
        else:
            cells.append(_chip(text, "#ffffff"))
    if hi < len(keys):
        cells.append(f'<span style="color:#999">… {len(keys) - hi} more</span>')
    if head >= len(keys):
        cells.append(_chip("∅ exhausted", EXHAUSTED_COLOUR))
    return " ".join(cells)


def _output_html(step: Step, columns: Sequence[str] | None, max_output: int) -> str:
    n = len(step.output)
    fresh = step.action == "emit" and step.description.startswith("emitted")
    if n == 0:
        return '<i style="color:#777">(nothing emitted yet)</i>'
    shown = list(range(max(0, n - max_output), n))
    cols = list(columns) if columns is not None else list(step.output[-1].keys())[:5]
    head = "".join(f'<th style="text-align:left; padding:1px 8px">{_e(c)}</th>' for c in cols)
    rows = []
    if shown[0] > 0:
        rows.append(f'<tr><td colspan="{len(cols)}" style="color:#999">… {shown[0]} earlier row(s)</td></tr>')
    for i in shown:
        style = ' style="background:#fff3b0; font-weight:bold"' if fresh and i == n - 1 else ""
        cells = "".join(f'<td style="padding:1px 8px">{_e(step.output[i].get(c))}</td>' for c in cols)
        rows.append(f"<tr{style}>{cells}</tr>")
    return f'<table style="border-collapse:collapse; {_FONT}"><tr>{head}</tr>{"".join(rows)}</table>'


def step_html(step: Step, *, names: Sequence[str] | None = None, input_keys: Sequence[Sequence[Any]] | None = None,
              columns: Sequence[str] | None = None, total: int | None = None, window: int = 8,
              max_output: int = 10) -> str:
    """One snapshot as self-contained HTML: header and counters, tree (SVG), inputs with cursors, output, legend.

    `names` labels the inputs (e.g. ``["base", "log 1"]``); `input_keys` (each
    input's full key list) lets the inputs row show every cursor in context;
    `columns` picks the output columns (default: the first five); `total` is the
    number of steps, shown as "step i / total".
    """
    k = len(step.leaves)
    labels = _names(k, names)
    if input_keys is not None and len(input_keys) != k:
        raise InputError(f"{len(input_keys)} key lists for {k} inputs")
    of = f" / {total - 1}" if total else ""
    read = sum(leaf.consumed for leaf in step.leaves)
    header = (f'<div style="font-size:14px"><b>step {step.index}{of}</b> '
              f'<code style="background:#eee; padding:1px 4px">{_e(step.action)}</code> {_e(step.description)}</div>'
              f'<div style="color:#333">comparisons <b data-comparisons="{step.comparisons}">{step.comparisons}</b>'
              f" (+{step.tie_breaks} decided by source index) · {read} record(s) read · "
              f"{len(step.output)} row(s) out</div>")
    tree = tree_svg(step.tree, step.leaves, names=names, moved_nodes=step.moved_nodes,
                    moved_leaves=step.moved_leaves)
    lanes = []
    for i, leaf in enumerate(step.leaves):
        keys = None if input_keys is None else input_keys[i]
        count = f"read {leaf.consumed}" + (f" / {len(keys)}" if keys is not None else "")
        same = f" · first_same n{leaf.first_same}" if leaf.first_same >= 0 else ""
        lanes.append(f'<tr data-leaf="{i}"><th style="text-align:left; padding:2px 8px; white-space:nowrap">'
                     f'{_e(labels[i])}</th><td style="padding:2px 4px">{_lane(leaf, keys, window)}</td>'
                     f'<td style="color:#555; padding:2px 8px; white-space:nowrap">{_e(leaf.state.value)} · '
                     f"{_e(count)}{_e(same)}</td></tr>")
    inputs = f'<table style="border-collapse:collapse; {_FONT}">{"".join(lanes)}</table>'
    section = '<div style="margin-top:8px; font-weight:bold">{}</div>'
    return _ascii(f'<div class="lsm-lab-step" data-step="{step.index}" data-action="{_e(step.action)}" '
            f'style="{_FONT}; line-height:1.5">'
            f"{header}{tree}{section.format('inputs (cursor ▶ = head record)')}{inputs}"
            f"{section.format(f'output so far ({len(step.output)})')}{_output_html(step, columns, max_output)}"
            f"{state_legend_html()}</div>")


class StepPicture:
    """A single snapshot that a notebook displays as HTML (and prints as `Step.dump()`)."""

    def __init__(self, step: Step, **options: Any) -> None:
        self.step = step
        self.options = options

    def _repr_html_(self) -> str:
        return step_html(self.step, **self.options)

    def __repr__(self) -> str:
        return self.step.dump()


def show_step(step: Step, **options: Any) -> StepPicture:
    """Wrap `step` so that a notebook cell ending with it draws it (options as for `step_html`)."""
    return StepPicture(step, **options)


# ------------------------------------------------------------------------------------ widget

class MergeStepper(widgets.VBox):
    """Reset / ◀ Prev / Play / Next ▶ and a slider over the steps of a loser-tree merge.

    Give `steps` (from `trace_merge`), or `inputs` (lists of row dicts, each
    sorted by key, base first) and `spec`: the stepper then runs `trace_merge`
    itself and shows every input's keys around its cursor.
    """

    def __init__(self, steps: Sequence[Step] | None = None, *,
                 inputs: Sequence[Sequence[Mapping[str, Any]]] | None = None, spec: MergeSpec | None = None, names: Sequence[str] | None = None,
                 columns: Sequence[str] | None = None, interval: int = 900, window: int = 8) -> None:
        if steps is None:
            if inputs is None or spec is None:
                raise InputError("MergeStepper needs steps, or inputs and a MergeSpec")
            steps = trace_merge(inputs, spec)
        self.steps: tuple[Step, ...] = tuple(steps)
        if not self.steps:
            raise InputError("MergeStepper needs at least one step")
        self.input_keys = None if inputs is None or spec is None else [[r[spec.key] for r in inp] for inp in inputs]
        self._options: dict[str, Any] = {"names": names, "input_keys": self.input_keys, "columns": columns,
                                         "total": len(self.steps), "window": window}
        last = len(self.steps) - 1
        self.play = widgets.Play(value=0, min=0, max=last, step=1, interval=interval, description="Play",
                                 show_repeat=False)
        self.slider = widgets.IntSlider(value=0, min=0, max=last, description="step",
                                        layout=widgets.Layout(width="420px"))
        self._link = widgets.link((self.play, "value"), (self.slider, "value"))
        self.reset_button = widgets.Button(description="⇤ Reset", tooltip="back to step 0",
                                           layout=widgets.Layout(width="90px"))
        self.prev_button = widgets.Button(description="◀ Prev", tooltip="previous step",
                                          layout=widgets.Layout(width="80px"))
        self.next_button = widgets.Button(description="Next ▶", tooltip="next step",
                                          layout=widgets.Layout(width="80px"))
        self.reset_button.on_click(lambda _: self.reset())
        self.prev_button.on_click(lambda _: self.prev())
        self.next_button.on_click(lambda _: self.next())
        self.view = widgets.HTML()
        self.slider.observe(self._on_index, names="value")
        controls = widgets.HBox([self.reset_button, self.prev_button, self.play, self.next_button, self.slider])
        super().__init__([controls, self.view])
        self._render()

    # ---- state
    @property
    def index(self) -> int:
        """The step shown (the slider's value; Play moves the slider)."""
        return int(self.slider.value)

    @index.setter
    def index(self, value: int) -> None:
        self.slider.value = min(max(int(value), 0), len(self.steps) - 1)

    @property
    def step(self) -> Step:
        return self.steps[self.index]

    @property
    def html(self) -> str:
        """The current drawing (what the HTML view shows)."""
        return str(self.view.value)

    # ---- moves
    def next(self) -> None:
        self.index = self.index + 1

    def prev(self) -> None:
        self.index = self.index - 1

    def reset(self) -> None:
        self.play.playing = False
        self.index = 0

    # ---- drawing
    def _on_index(self, change: Mapping[str, Any]) -> None:
        self._render()

    def _render(self) -> None:
        i = self.index
        self.view.value = step_html(self.steps[i], **self._options)
        self.prev_button.disabled = i == 0
        self.reset_button.disabled = i == 0
        self.next_button.disabled = i == len(self.steps) - 1

    def _repr_html_(self) -> str:
        """Static fallback (nbconvert, GitHub): the current step's drawing."""
        return self.html


__all__ = ["MergeStepper", "StepPicture", "show_step", "state_legend_html", "step_html", "tree_svg"]
