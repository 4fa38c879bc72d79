"""The loser-tree stepper: buttons, Play and slider drive the drawn step; every snapshot draws every leaf."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from lsm_lab.errors import InputError
from lsm_lab.merge import MergeMode, MergeSpec
from lsm_lab.merge.loser_tree import LeafState, trace_merge
from lsm_lab.viz import MergeStepper, show_step, state_legend_html, step_html, tree_svg
from lsm_lab.viz.style import MOVED_COLOUR, STATE_COLOURS

SPEC = MergeSpec(MergeMode.EVENT_TIME_ORDERING, key="k", ordering="ts", delete="d")


def rows(source: int, keys: str, *, deletes: str = "") -> list[dict[str, Any]]:
    return [{"k": k, "ts": source, "v": 10 * source + i, "d": k in deletes} for i, k in enumerate(keys)]


# base + four logs; 'c' is in every input, 'a' is deleted by log 2
INPUTS = [rows(0, "acegh"), rows(1, "cf"), rows(2, "ac", deletes="a"), rows(3, "bcj"), rows(4, "c")]
NAMES = ["base", "log 1", "log 2", "log 3", "log 4"]


def drawn_step(markup: str) -> int:
    match = re.search(r'class="lsm-lab-step" data-step="(\d+)"', markup)
    assert match, "no step drawn"
    return int(match.group(1))


@pytest.fixture()
def stepper() -> MergeStepper:
    return MergeStepper(inputs=INPUTS, spec=SPEC, names=NAMES)


def test_buttons_move_the_drawn_step(stepper: MergeStepper) -> None:
    assert stepper.index == 0 and drawn_step(stepper.html) == 0
    first = stepper.html
    stepper.next_button.click()
    assert stepper.index == 1 and drawn_step(stepper.html) == 1 and stepper.html != first
    assert stepper.step is stepper.steps[1]
    for _ in range(3):
        stepper.next_button.click()
    assert stepper.index == 4 and drawn_step(stepper.html) == 4
    stepper.prev_button.click()
    assert stepper.index == 3 and drawn_step(stepper.html) == 3
    stepper.reset_button.click()
    assert stepper.index == 0 and stepper.html == first


def test_ends_clamp_and_disable_buttons(stepper: MergeStepper) -> None:
    assert stepper.prev_button.disabled and stepper.reset_button.disabled and not stepper.next_button.disabled
    stepper.prev()
    assert stepper.index == 0
    last = len(stepper.steps) - 1
    stepper.index = 10_000
    assert stepper.index == last and stepper.step.action == "done"
    assert stepper.next_button.disabled
    stepper.next_button.click()
    assert stepper.index == last


def test_play_and_slider_stay_in_sync(stepper: MergeStepper) -> None:
    stepper.play.value = 5  # what the Play widget does on each tick
    assert stepper.slider.value == 5 and stepper.index == 5 and drawn_step(stepper.html) == 5
    stepper.slider.value = 2
    assert stepper.play.value == 2 and drawn_step(stepper.html) == 2
    stepper.next_button.click()
    assert stepper.play.value == stepper.slider.value == 3
    stepper.play.playing = True
    stepper.reset_button.click()
    assert not stepper.play.playing and stepper.play.value == 0
    assert stepper.play.max == stepper.slider.max == len(stepper.steps) - 1


def test_the_widget_only_draws_trace_merge_steps(stepper: MergeStepper) -> None:
    steps = trace_merge(INPUTS, SPEC)
    assert [s.dump() for s in stepper.steps] == [s.dump() for s in steps]
    from_steps = MergeStepper(steps, names=NAMES)
    for i in (0, 7, len(steps) - 1):
        from_steps.index = i
        stepper.index = i
        assert f'data-comparisons="{steps[i].comparisons}"' in from_steps.html
        assert f'data-comparisons="{steps[i].comparisons}"' in stepper.html
    assert stepper.step.output_keys == ("b", "c", "e", "f", "g", "h", "j")


def test_every_snapshot_draws_every_leaf_node_and_state() -> None:
    steps = trace_merge(INPUTS, SPEC)
    keys = [[r["k"] for r in inp] for inp in INPUTS]
    k = len(INPUTS)
    for step in steps:
        markup = step_html(step, names=NAMES, input_keys=keys, total=len(steps))
        assert drawn_step(markup) == step.index
        assert 'data-node="champion"' in markup
        for m in range(1, k):
            assert f'data-node="n{m}"' in markup
        for leaf in step.leaves:
            assert f'data-node="leaf{leaf.source}"' in markup and f'data-leaf="{leaf.source}"' in markup
            assert html.escape(NAMES[leaf.source]) in markup
            if not leaf.exhausted:
                assert html.escape(repr(leaf.key)) in markup
                assert STATE_COLOURS[leaf.state.value] in markup
        assert f'data-comparisons="{step.comparisons}"' in markup
        for key in step.output_keys[-10:]:
            assert f">{key}<" in markup


def test_moved_nodes_are_outlined_and_all_six_states_are_reached() -> None:
    steps = trace_merge(INPUTS, SPEC)
    seen = {leaf.state for s in steps for leaf in s.leaves}
    assert seen == set(LeafState)
    pop = next(s for s in steps if s.action == "pop" and s.moved_nodes)
    assert MOVED_COLOUR in step_html(pop)
    quiet = next(s for s in steps if s.action == "emit")
    assert MOVED_COLOUR not in tree_svg(quiet.tree, quiet.leaves)


def test_cursor_lanes_show_consumed_head_and_pending() -> None:
    steps = trace_merge(INPUTS, SPEC)
    keys = [[r["k"] for r in inp] for inp in INPUTS]
    late = next(s for s in steps if s.leaves[0].consumed == 3 and not s.leaves[0].popped)
    markup = step_html(late, input_keys=keys)
    match = re.search(r'<tr data-leaf="0">(.*?)</tr>', markup)
    assert match is not None
    lane = match.group(1)
    assert lane.count("line-through") == 2  # 'a', 'c' read
    assert "&#9654; &#x27;e&#x27;" in lane  # the head, 'e'
    assert "read 3 / 5" in lane


def test_single_snapshot_helpers() -> None:
    steps = trace_merge(INPUTS, SPEC)
    picture = show_step(steps[3], names=NAMES)
    assert picture._repr_html_() == step_html(steps[3], names=NAMES)
    assert repr(picture) == steps[3].dump()
    legend = state_legend_html()
    assert all(state.value in legend for state in LeafState)
    widget = MergeStepper(steps)
    assert widget._repr_html_() == widget.html
    assert widget.html.isascii()  # non-ASCII drawn as character references


def test_odd_shapes_and_escaping() -> None:
    spec = MergeSpec(key="k", delete="d")
    one = trace_merge([[{"k": "<b>", "d": False}]], spec)
    markup = step_html(one[0])
    assert "&lt;b&gt;" in markup and "<b>'" not in markup
    none = trace_merge([], spec)
    assert "(no inputs)" in step_html(none[-1])
    big = trace_merge([[{"k": f"{i:02d}", "d": False}] for i in range(9)], spec)
    markup = step_html(big[0])
    assert all(f'data-node="leaf{i}"' in markup for i in range(9))


def test_bad_arguments() -> None:
    with pytest.raises(InputError):
        MergeStepper()
    with pytest.raises(InputError):
        MergeStepper([])
    with pytest.raises(InputError, match="names"):
        MergeStepper(inputs=INPUTS, spec=SPEC, names=["base"])
