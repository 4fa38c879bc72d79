"""The notebook series is committed clean and follows the chapter template.

Executing the chapters is nbmake's job (`make test` runs `pytest --nbmake notebooks`); this file
checks what a reader sees in the repository without running anything:

* every notebook is stripped (no outputs, execution counts or widget state — the same check as
  `tools/strip_notebooks.py --check`) and uses the `python3` kernel;
* chapters are numbered `NN_name.ipynb` (fastcore style: `03a_name` inserts a topic after 03),
  from 00 with no gap;
* every chapter has, in this order: a title; what you will learn ("By the end of this
  chapter…"); the core invariant in bold; a "Predict before you run" cell followed by the code
  cell that reveals the answer; a checkpoint code cell that asserts; "Test your understanding"
  with at least two questions.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NAME = re.compile(r"^(?P<num>\d{2})(?P<insert>[a-z]?)_[a-z0-9]+(?:_[a-z0-9]+)*\.ipynb$")
ALL = sorted(p for p in NOTEBOOKS.glob("*.ipynb"))
# nbformat.read has no annotations: its signature, once, so the calls below are typed
_nb_read: Callable[..., nbformat.NotebookNode] = nbformat.read


def _strip_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("strip_notebooks", ROOT / "tools" / "strip_notebooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read(path: Path) -> nbformat.NotebookNode:
    return _nb_read(path, as_version=4)


def _text(cell: nbformat.NotebookNode) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _first(cells: list[nbformat.NotebookNode], pred: Callable[[nbformat.NotebookNode], bool],
           start: int = 0) -> int | None:
    return next((i for i in range(start, len(cells)) if pred(cells[i])), None)


def _md(pattern: str, flags: int = re.IGNORECASE) -> Callable[[nbformat.NotebookNode], bool]:
    rx = re.compile(pattern, flags)
    return lambda c: c.cell_type == "markdown" and rx.search(_text(c)) is not None


def test_there_are_chapters() -> None:
    assert ALL, f"no notebooks in {NOTEBOOKS}"


def test_numbered_from_00_without_gaps() -> None:
    numbers: list[int] = []
    inserted: list[bool] = []
    for path in ALL:
        m = NAME.match(path.name)
        assert m, f"{path.name}: chapters are named NN_name.ipynb (lower case, digits, '_'; NNa_ for an insert)"
        numbers.append(int(m["num"]))
        inserted.append(bool(m["insert"]))
    main = sorted({n for n, ins in zip(numbers, inserted) if not ins})
    assert main == list(range(len(main))), f"chapter numbers must run 00, 01, 02, … without gaps: {main}"
    inserts = {n for n, ins in zip(numbers, inserted) if ins}
    assert inserts <= set(main), f"an inserted chapter (NNa_) needs chapter NN: {sorted(inserts - set(main))}"
    assert len({p.name.split("_", 1)[0] for p in ALL}) == len(ALL), "two chapters share a number"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_stripped(path: Path) -> None:
    found = _strip_tool().problems(_nb_read(path, as_version=nbformat.NO_CONVERT))
    assert not found, f"{path.name} is not stripped ({'; '.join(found[:3])}): run `make notebooks-strip`"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_kernelspec(path: Path) -> None:
    nb = _read(path)
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3", f"{path.name}: kernelspec must be python3"
    nbformat.validate(nb)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_chapter_template(path: Path) -> None:
    cells = _read(path).cells
    name = path.name

    assert cells and cells[0].cell_type == "markdown" and _text(cells[0]).lstrip().startswith("# "), \
        f"{name}: the first cell is the title (a markdown '# ' heading)"

    learn = _first(cells, _md(r"by the end of this chapter|you will (learn|be able)"))
    assert learn is not None, f"{name}: say what the reader will learn ('By the end of this chapter you will …')"

    bold = re.compile(r"\*\*(?=\S)(?:(?!\*\*).){20,}?\*\*", re.DOTALL)   # a bold sentence (may hold *italics*)
    invariant = _first(cells, lambda c: c.cell_type == "markdown" and "invariant" in _text(c).lower()
                       and bold.search(_text(c)) is not None)
    assert invariant is not None, f"{name}: state the core invariant in bold (**Core invariant: …**)"

    predict = _first(cells, _md(r"predict"), invariant)
    assert predict is not None, f"{name}: a 'Predict before you run' markdown cell after the invariant"
    assert predict + 1 < len(cells) and cells[predict + 1].cell_type == "code", \
        f"{name}: the predict cell is followed by the code cell that reveals the answer"

    asserting = re.compile(r"^\s*assert\b", re.MULTILINE)
    checkpoint = _first(cells, lambda c: c.cell_type == "code" and "checkpoint" in _text(c).lower()
                        and asserting.search(_text(c)) is not None, predict + 1)
    if checkpoint is None:  # a "## Checkpoint" heading followed by the asserting cell
        heading = _first(cells, _md(r"^#+ .*checkpoint", re.IGNORECASE | re.MULTILINE), predict + 1)
        if heading is not None:
            nxt = _first(cells, lambda c: c.cell_type == "code", heading)
            if nxt is not None and asserting.search(_text(cells[nxt])):
                checkpoint = nxt
    assert checkpoint is not None, f"{name}: a checkpoint code cell with `assert` after the predict cell"

    questions = _first(cells, _md(r"test your understanding"), checkpoint)
    assert questions is not None, f"{name}: a 'Test your understanding' cell after the checkpoint"
    text = _text(cells[questions])
    items = re.findall(r"^\s*(?:\d+\.|[-*])\s+\S", text, re.MULTILINE)
    assert len(items) >= 2 and text.count("?") >= 2, f"{name}: ask at least two questions"

    assert 0 <= learn <= invariant < predict < checkpoint < questions, f"{name}: sections out of order"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_no_output_baked_into_markdown(path: Path) -> None:
    """Instant times change on every run, so markdown must not quote them (outputs show them)."""
    stamp = re.compile(r"\b20\d{15}\b")
    for i, cell in enumerate(_read(path).cells):
        if cell.cell_type == "markdown":
            assert not stamp.search(_text(cell)), f"{path.name}: cell {i} quotes an instant time"


CODE_LINE = re.compile(r"^Code: (.*?)(?:\n\n|\Z)", re.MULTILINE | re.DOTALL)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_code_line_names_real_modules_that_name_the_chapter(path: Path) -> None:
    """`Code: lsm_lab/…` under the title; each module named there ends its docstring with `Taught in: …NN_name…`."""
    import ast

    title = _text(_read(path).cells[0])
    m = CODE_LINE.search(title)
    assert m, f"{path.name}: say under the title which code it teaches ('Code: `lsm_lab/…`')"
    named = re.findall(r"`(lsm_lab/[^`\s]+)", m.group(1))
    assert named, f"{path.name}: the Code line names no lsm_lab path"
    for rel in named:
        target = ROOT / rel
        assert target.exists(), f"{path.name}: the Code line names {rel}, which does not exist"
        if target.suffix == ".py":
            doc = ast.get_docstring(ast.parse(target.read_text())) or ""
            last = doc.strip().splitlines()[-1] if doc.strip() else ""
            assert last.startswith("Taught in:") and f"notebooks/{path.name}" in last, \
                f"{rel}: the last line of its docstring should be 'Taught in: … notebooks/{path.name} …'"


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_answer_key(path: Path) -> None:
    """After the questions, an answer key: one collapsed <details> block per question."""
    cells = _read(path).cells
    questions = _first(cells, _md(r"test your understanding"))
    assert questions is not None
    asked = len(re.findall(r"^\s*\d+\.\s+\S", _text(cells[questions]), re.MULTILINE))
    key = _first(cells, lambda c: c.cell_type == "markdown" and "<details>" in _text(c), questions + 1)
    assert key is not None, f"{path.name}: add an answer key after the questions (collapsed <details> cells)"
    text = _text(cells[key])
    answered = text.count("<details>")
    assert answered == text.count("</details>") == text.count("<summary>") and answered >= asked >= 2, \
        f"{path.name}: {asked} questions, {answered} answers"


def _last_doc_line(path: Path) -> str:
    import ast

    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[-1] if doc.strip() else ""


@pytest.mark.parametrize("path", sorted((ROOT / "lsm_lab").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_says_where_it_is_taught(path: Path) -> None:
    """Each module's docstring ends with `Taught in:` and chapters that exist, or `no chapter (where instead)`."""
    last = _last_doc_line(path)
    assert last.startswith("Taught in:"), f"{path.relative_to(ROOT)}: end the docstring with 'Taught in: …'"
    if last.startswith("Taught in: no chapter ("):
        return
    named = re.findall(r"notebooks/(\S+?\.ipynb)", last)
    assert named, f"{path.relative_to(ROOT)}: 'Taught in:' names no notebooks/NN_….ipynb"
    for name in named:
        assert (NOTEBOOKS / name).exists(), f"{path.relative_to(ROOT)}: names {name}, which does not exist"
