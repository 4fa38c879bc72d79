"""The notebooks' helpers: sizes under test, scratch folders inside the repository (or LSM_LAB_SCRATCH), caches."""

from __future__ import annotations

from pathlib import Path

import pytest

from lsm_lab.lab import nbutil

ROOT = Path(__file__).resolve().parents[1]


def test_sizes_follow_the_test_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert nbutil.under_test() and nbutil.size(1000, 10) == 10          # pytest sets PYTEST_CURRENT_TEST
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("LSM_LAB_SMALL", raising=False)
    assert not nbutil.under_test() and nbutil.size([1, 2], [3]) == [1, 2]
    monkeypatch.setenv("LSM_LAB_SMALL", "1")
    assert nbutil.size(1000, 10) == 10


def test_scratch_and_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LSM_LAB_SCRATCH", raising=False)
    assert nbutil.scratch_root() == ROOT / ".scratch"                   # a checkout: the repo's ignored folder
    assert ".scratch/" in (ROOT / ".gitignore").read_text()
    monkeypatch.setenv("LSM_LAB_SCRATCH", str(tmp_path))
    first = nbutil.scratch("ch")
    (first / "table").mkdir()
    again = nbutil.scratch("ch")                                         # a re-run starts empty
    assert again == first == tmp_path / "notebooks" / "ch" and list(again.iterdir()) == []
    kept = nbutil.cache("runs")
    (kept / "data.parquet").write_text("x")
    assert nbutil.cache("runs") == kept and (kept / "data.parquet").exists()   # a cache survives


def test_scratch_is_removed_at_exit_unless_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A chapter's tables go when its kernel exits (atexit), unless LSM_LAB_KEEP_TABLES=1 outside pytest."""
    import atexit

    registered: list[tuple[object, ...]] = []
    monkeypatch.setattr(atexit, "register", lambda *a, **kw: registered.append(a))
    monkeypatch.setenv("LSM_LAB_SCRATCH", str(tmp_path))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("LSM_LAB_KEEP_TABLES", raising=False)
    root = nbutil.scratch("learner")
    assert registered and registered[-1][1] == root                      # a learner's run: removed at exit
    registered.clear()
    monkeypatch.setenv("LSM_LAB_KEEP_TABLES", "1")
    assert nbutil.keep_tables()
    nbutil.scratch("kept")
    assert registered == []                                               # asked to keep: nothing registered
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    assert not nbutil.keep_tables()                                       # under test, always removed


def test_measured_records_are_the_readme_s() -> None:
    """A chapter quotes figures it cannot re-run from docs/measured/, the records the README's section renders."""
    import json

    record = nbutil.measured("spark_linear")
    assert record is not None and record == json.loads((ROOT / "docs/measured/spark_linear.json").read_text())
    merge = nbutil.measured("merge_sample")                          # results_from: the file's content
    assert merge is not None and isinstance(merge["results"], list) and merge["results"]
    assert nbutil.measured("no_such_record") is None
