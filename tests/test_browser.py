"""Chapter 05's step-through widget in a real browser: Voilà serves the notebook, Chromium clicks the buttons.

    voila notebooks/05_loser_tree.ipynb  (127.0.0.1, a free port, small data)
        ▲ HTTP + the widgets' websocket
    chromium --headless  (Debian's package, driven by Playwright; no browser is downloaded)
        click Next ▶ / ◀ Prev / ⇤ Reset  →  the drawing must show the step the MergeStepper says;
        it opens at step 0, no label overflows its box, every character has a glyph in the installed fonts

Voilà runs the whole chapter in a kernel and renders only its outputs, widgets included (no notebook
UI to click through), which makes it the quickest and steadiest way to reach the widget. What
the browser shows is compared with `trace_merge` on chapter 05's own inputs, computed here: the
step number, its action, its description and its comparison count. A screenshot of the stepper
after the clicks is saved under test-artifacts/browser/ (ignored by git).

Needs `chromium` (apt) and the `playwright` and `voila` packages (the dev extra); without chromium
the test is skipped and says how to install it.
"""

from __future__ import annotations

import html
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lsm_lab import MergeSpec
from lsm_lab.merge.loser_tree import Step, trace_merge

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "05_loser_tree.ipynb"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage"]

pytestmark = pytest.mark.slow


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _chapter_steps() -> list[Step]:
    """The steps of chapter 05's first merge (cell c05-02): base `aceg`, log 1 `cf`, log 2 `ac` deleting `a`."""
    names = ["base", "log 1", "log 2"]

    def rows(keys: str, source: int, deleted: str = "") -> list[dict[str, Any]]:
        return [{"key": k, "from": names[source], "deleted": k in deleted} for k in keys]

    return trace_merge([rows("aceg", 0), rows("cf", 1), rows("ac", 2, deleted="a")],
                       MergeSpec(key="key", delete="deleted"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _chromium()
    if found is None:
        pytest.skip("browser test skipped: no chromium on PATH (Debian: apt-get install -y chromium; "
                    ".ci/run installs it when it runs as root)")
    return found


@pytest.fixture(scope="module")
def voila_url(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    pytest.importorskip("voila", reason="voila is not installed (pip install -e '.[dev]')")
    port = _free_port()
    work = tmp_path_factory.mktemp("voila")
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PYTEST_CURRENT_TEST": "tests/test_browser.py (voila kernel)",   # the chapter's small sizes
           "LSM_LAB_SCRATCH": str(work / "scratch"), "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
           "JUPYTER_DATA_DIR": str(work / "data"), "JUPYTER_CONFIG_DIR": str(work / "config")}
    log = (work / "voila.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "voila", str(CHAPTER), "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1",
         "--show_tracebacks=True", "--ServerApp.open_browser=False"],
        cwd=CHAPTER.parent, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                pytest.fail(f"voila exited with {server.returncode}: {(work / 'voila.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    break                                   # listening: the page request waits for the kernel
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"voila did not answer on {url}: {(work / 'voila.log').read_text()[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _overflowing(drawing: Any) -> list[str]:
    """The SVG labels of the tree whose rendered width exceeds their box's."""
    found: list[str] = drawing.first.evaluate("""el => [...el.querySelectorAll('g[data-node]')].flatMap(g => {
        const box = g.querySelector('rect').getBBox().width;
        return [...g.querySelectorAll('text')].filter(t => t.getBBox().width > box + 0.5).map(t => t.textContent);
    })""")
    return found


def _missing_glyphs(text: str) -> list[str]:
    """Characters of `text` that no font fontconfig knows has (Chromium on Linux finds fallbacks through
    fontconfig, so these would render as empty boxes). Empty when `fc-list` is missing."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return []
    missing = []
    for ch in sorted({c for c in text if ord(c) > 127 and not c.isspace()}):
        fonts = subprocess.run([fc_list, f":charset={ord(ch):x}", "family"], capture_output=True, text=True,
                               timeout=30).stdout
        if not fonts.strip():
            missing.append(f"{ch} U+{ord(ch):04X}")
    return missing


def test_the_widgets_characters_have_glyphs() -> None:
    """Every non-ASCII character the stepper draws or labels a button with is in an installed font (⏮ was not,
    in Debian's default fonts): checked without a browser, on every step of chapter 05's merge."""
    if shutil.which("fc-list") is None:
        pytest.skip("fc-list (fontconfig) is not installed")
    from lsm_lab.viz.merge_widget import MergeStepper, step_html

    text = "".join(html.unescape(step_html(s)) for s in _chapter_steps())
    stepper = MergeStepper(_chapter_steps())
    text += "".join(b.description for b in (stepper.reset_button, stepper.prev_button, stepper.next_button))
    assert _missing_glyphs(text) == []


def test_stepper_buttons_in_chromium(chromium: str, voila_url: str) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
    steps = _chapter_steps()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1400})
            page.set_default_timeout(30_000)
            page.goto(voila_url, timeout=180_000)   # voila runs the whole chapter before it sends the page
            nxt = page.get_by_role("button", name="Next ▶")
            prev = page.get_by_role("button", name="◀ Prev")
            reset = page.get_by_role("button", name="⇤ Reset")
            nxt.wait_for(timeout=120_000)
            stepper = page.locator(".widget-vbox", has=nxt).last
            drawing = stepper.locator(".lsm-lab-step")

            def shown() -> dict[str, Any]:
                drawing.first.wait_for()
                return {"step": int(drawing.get_attribute("data-step") or -1),
                        "action": drawing.get_attribute("data-action"),
                        "comparisons": int(drawing.locator("[data-comparisons]").get_attribute("data-comparisons")
                                           or -1),
                        "text": drawing.inner_text()}

            def expect(i: int) -> None:
                stepper.locator(f'.lsm-lab-step[data-step="{i}"]').wait_for()   # re-rendered on every click
                got, want = shown(), steps[i]
                assert (got["step"], got["action"], got["comparisons"]) == (want.index, want.action,
                                                                           want.comparisons), (got, want)
                assert html.unescape(want.description) in got["text"], (got["text"][:300], want.description)

            drawing.first.wait_for()
            expect(0)                               # opens at step 0: no later cell drives the shown stepper
            labels = stepper.inner_text() + "".join(b.inner_text() for b in (nxt, prev, reset))
            assert prev.is_disabled() and reset.is_disabled() and nxt.is_enabled()
            for i in range(1, 6):
                nxt.click()
                expect(i)
            prev.click()
            expect(4)
            page.screenshot(path=str(ARTIFACTS / "chapter05_stepper_step4.png"), full_page=False)
            stepper.screenshot(path=str(ARTIFACTS / "chapter05_stepper.png"))
            for i in range(5, len(steps)):          # each click waits for the kernel's answer
                nxt.click()
                expect(i)
                assert _overflowing(drawing) == [], f"step {i}: labels wider than their boxes"
                labels += drawing.inner_text()
            assert _missing_glyphs(labels) == [], "characters no installed font has (shown as empty boxes)"
            assert nxt.is_disabled() and steps[-1].action == "done"
            assert "output so far (" + str(len(steps[-1].output)) + ")" in shown()["text"]
            reset.click()
            expect(0)
        finally:
            browser.close()
    assert (ARTIFACTS / "chapter05_stepper.png").stat().st_size > 10_000
