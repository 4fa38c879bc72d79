"""The README's *Measured* section is generated from docs/measured/ records, so that its numbers cannot drift.

`tools/measured.py render` fills `docs/measured/section.md`'s holes from the records (each the command, date,
load and the benchmark's own `--json` output, or figures transcribed with their source); these tests fail when
README.md differs from that rendering, when a record lacks its command (or date, load, source), and check that a
changed number in a record does change the rendering.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "docs" / "measured"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("measured_tool", ROOT / "tools" / "measured.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _tool()
RECORDS = sorted(FOLDER.glob("*.json"))


def test_readme_is_the_rendering() -> None:
    """README.md between the markers is exactly what the records render to (`python tools/measured.py render`)."""
    section = TOOL.render()
    current = TOOL.readme_part((ROOT / "README.md").read_text())
    assert current == section, "README.md's Measured section differs from docs/measured/: python tools/measured.py render"
    assert TOOL.main(["check"]) == 0


def test_the_section_is_between_the_markers() -> None:
    text = (ROOT / "README.md").read_text()
    measured = text.index("## Measured\n")
    assert measured < text.index(TOOL.BEGIN) < text.index(TOOL.END) < text.index("\n## ", measured + 1)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_every_record_says_how_it_was_measured(path: Path) -> None:
    """A command a reader can run, when, how busy the machine was, and whether the numbers are a run's or transcribed."""
    data = json.loads(path.read_text())
    for key in ("command", "date", "load", "source"):
        assert isinstance(data.get(key), str) and data[key].strip(), f"{path.name}: no {key}"
    assert data["source"] == "run" or data["source"].startswith("transcribed from "), path.name
    if data["source"] == "run":
        assert "results" in data, f"{path.name}: a run's record keeps the benchmark's output"
    assert ("results" in data) != ("results_from" in data), f"{path.name}: results or results_from, one of them"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "measured"
    shutil.copytree(FOLDER, folder)
    return folder


def test_a_record_without_its_command_is_refused(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    record = folder / "cdc.json"
    data = json.loads(record.read_text())
    del data["command"]
    record.write_text(json.dumps(data))
    with pytest.raises(TOOL.MeasuredError, match=r"cdc\.json: the record has no 'command'"):
        TOOL.render(folder)
    data["command"] = "lsm-lab bench cdc"
    data["source"] = "remembered"
    record.write_text(json.dumps(data))
    with pytest.raises(TOOL.MeasuredError, match="source is 'run' or 'transcribed from"):
        TOOL.render(folder)


def test_a_changed_number_changes_the_section(tmp_path: Path) -> None:
    """Drift is caught: the rendering follows the record, so README.md would differ from it."""
    folder = _copy(tmp_path)
    before = TOOL.render(folder)
    record = folder / "storage.json"
    data = json.loads(record.read_text())
    data["results"]["s3"]["read"]["requests"]["GET"] += 1000
    record.write_text(json.dumps(data))
    after = TOOL.render(folder)
    assert after != before and str(data["results"]["s3"]["read"]["requests"]["GET"]) in after


def test_every_record_is_quoted_and_every_hole_filled(tmp_path: Path) -> None:
    section = TOOL.render()
    assert "{{" not in section and "}}" not in section
    folder = _copy(tmp_path)
    (folder / "unused.json").write_text(json.dumps({"command": "true", "date": "today", "load": "0.0",
                                                    "source": "run", "results": {}}))
    with pytest.raises(TOOL.MeasuredError, match="records never quoted: unused"):
        TOOL.render(folder)


def test_holes_are_expressions_over_records_only(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    template = folder / "section.md"
    for bad, message in [("{{ __import__('os').getcwd() }}", "names '__import__'"),
                         ("{{ cdc.__class__ }}", "private attribute"),
                         ("{{ [x for x in cdc.results] }}", "ListComp"),
                         ("{{ cdc.results.no_such_field }}", "no field 'no_such_field'")]:
        template.write_text(bad + "\n")
        with pytest.raises(TOOL.MeasuredError, match=re.escape(message)):
            TOOL.render(folder)


def test_verdicts_follow_their_numbers() -> None:
    assert TOOL.met(0.5, 0.5) == "met" and TOOL.met(0.51, 0.5) == "not met"


# Numbers in answer keys that are not measurements: the question's givens, an upstream target.
GIVENS = {
    "04_log_format_v2.ipynb": {"10×"},                                       # RFC-103's hoped-for ratio
    "07_compaction.ipynb": {"2 GiB", "10 MiB", "100 MiB", "30 MiB", "1 GiB", "512 MiB", "40 MiB"},  # the question
}
FIGURE = re.compile(r"(?<![\w.])\d[\d.,]*\s?(?:%|×|x\b|s\b|ms\b|KiB|MiB|GiB|MB|GB)")


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_answer_keys_quote_no_measured_figure(path: Path) -> None:
    """The chapters' rule, extended to answer keys: a measured number is printed from the run (a computed
    Markdown cell) or asserted, never typed into the static answer key, where it would drift from the output."""
    from collections.abc import Callable

    import nbformat

    read: Callable[..., nbformat.NotebookNode] = nbformat.read     # nbformat.read has no annotations
    found: list[str] = []
    for cell in read(path, as_version=4).cells:
        if cell.cell_type == "markdown" and "<details>" in cell.source:
            found += [m.group(0) for m in FIGURE.finditer(cell.source)]
    stray = sorted(set(found) - GIVENS.get(path.name, set()))
    assert not stray, (f"{path.name}: the answer key states {stray}: print it from the run, assert it, or phrase "
                       "it without the number (or list a question's given in GIVENS)")


def test_run_stores_a_command_s_json_with_date_and_load(tmp_path: Path) -> None:
    """`tools/measured.py run NAME -- CMD` keeps the command as typed, its JSON, the date and the load."""
    import sys

    argv = [sys.executable, "-c", "import json, sys; json.dump({'seconds': 1.5}, open(sys.argv[1], 'w'))", "{json}"]
    path = TOOL.run_record("probe", argv, tmp_path)
    record = json.loads(path.read_text())
    assert record["results"] == {"seconds": 1.5} and record["source"] == "run"
    assert record["command"].endswith(" OUT") and re.fullmatch(r"[\d.]+–[\d.]+", record["load"])
    printed = TOOL.run_record("printed", [sys.executable, "-c", "print('building'); print('[1, 2]')"], tmp_path)
    assert json.loads(printed.read_text())["results"] == [1, 2]
    with pytest.raises(TOOL.MeasuredError, match="exited with 3; no record written"):
        TOOL.run_record("failed", [sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    assert not (tmp_path / "failed.json").exists()
