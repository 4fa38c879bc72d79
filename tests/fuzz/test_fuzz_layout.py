"""Damage a table at the level of whole files and folders, and check the outcome: a typed error or the right rows.

The byte-level fuzz cases (test_fuzz_files.py) damage the inside of one file.
These move whole files, as a careless copy, a sync tool or a hand at the shell
would (Hudi's rule decides what is part of the table: the files a completed
instant committed, with the size it recorded):

    swap two data files          every pair of data files of the template   → typed error (size / provenance)
    copy a partition folder      p=a → p=a_backup, then read and upsert     → the folder is ignored
    delete a partition folder    each partition folder                      → typed error, never fewer rows
    drop in an unlisted file     a data file under a completed instant's time, not in its commit → ignored

Every case runs a snapshot read, a partition-filtered read, an incremental read
from the first commit and a lookup of every key; each must give a typed error
or exactly the rows of the undamaged table (`fuzzkit.outcome`).
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from fuzzkit import canonical, outcome

import lsm_lab
from lsm_lab.filegroup import fsview

pytestmark = pytest.mark.slow

DROP = ("_hoodie_commit_seqno",)


def _data_files(path: Path) -> list[Path]:
    return sorted(p for _, p, _ in fsview.list_data_files(path))


def _operations(path: Path) -> dict[str, Callable[[], pa.Table]]:
    """The reads every case runs, on a freshly opened table (nothing cached from before the damage)."""

    def first_commit() -> str:
        t = lsm_lab.open_table(path)
        return str(t.completed_writes()[0].begin_time)

    def lookup() -> pa.Table:
        t = lsm_lab.open_table(path)
        return t.lookup([f"k{i:03d}" for i in range(40)])

    return {
        "read": lambda: lsm_lab.open_table(path).read(),
        "filtered": lambda: lsm_lab.open_table(path).read(filter=[("p", "=", "a")]),
        "incremental": lambda: lsm_lab.open_table(path).read_incremental(first_commit()),
        "lookup": lookup,
    }


def _expected(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    return {name: canonical(op(), drop=DROP) for name, op in _operations(path).items()}


def _check_all(kind: str, path: Path, expected: dict[str, list[tuple[Any, ...]]], what: str) -> list[str]:
    return [outcome(kind, expected[name], op, f"{what} / {name}", drop=DROP)
            for name, op in _operations(path).items()]


@pytest.mark.parametrize("template", ["v9", "v8"])
def test_swapped_data_files(template: str, templates: dict[str, Path], fresh: Callable[[str], Path]) -> None:
    """Swapping the contents of any two data files is a typed error or changes nothing a read returns."""
    expected = _expected(templates[template])
    names = [p.relative_to(templates[template]) for p in _data_files(templates[template])]
    pairs = list(itertools.combinations(names, 2))
    assert len(pairs) >= 20
    typed = 0
    for a, b in pairs:
        path = fresh(template)
        fa, fb = path / a, path / b
        tmp = fa.with_name(fa.name + ".swap")
        fa.rename(tmp)
        fb.rename(fa)
        tmp.rename(fb)
        results = _check_all("swap two files", path, expected, f"swap {a} <-> {b}")
        typed += results.count("typed")
        shutil.rmtree(path)
    assert typed, "no swap was noticed at all"


@pytest.mark.parametrize("template", ["v9", "v8"])
def test_copied_partition_folder(template: str, templates: dict[str, Path], fresh: Callable[[str], Path]) -> None:
    """A copy of a partition folder (`p=a_backup`) is not part of the table: reads and writes ignore it."""
    path = fresh(template)
    expected = _expected(templates[template])
    shutil.copytree(path / "p=a", path / "p=a_backup")
    for name, op in _operations(path).items():
        assert canonical(op(), drop=DROP) == expected[name], name
    t = lsm_lab.open_table(path)
    assert {f.partition for f in t.uncommitted_files()} == {"p=a_backup"}
    if template == "v9":  # an upsert then leaves one version of each key (v8 tables are Hudi's to write)
        t.upsert([{"id": "k001", "p": "a", "ts": 9, "v": -1}])
        keys = lsm_lab.open_table(path).read(columns=["id"]).column("id").to_pylist()
        assert len(keys) == len(set(keys))
        assert "p=a_backup" not in set(lsm_lab.open_table(path).read().column("_hoodie_partition_path").to_pylist())


@pytest.mark.parametrize("template", ["v9", "v8"])
@pytest.mark.parametrize("partition", ["p=a", "p=b"])
def test_deleted_partition_folder(template: str, partition: str, templates: dict[str, Path],
                                  fresh: Callable[[str], Path]) -> None:
    """A partition folder deleted by hand is a typed error on every read that needs it, never fewer rows."""
    path = fresh(template)
    expected = _expected(templates[template])
    shutil.rmtree(path / partition)
    results = _check_all("delete partition folder", path, expected, f"rm -r {partition}")
    assert results.count("typed") >= 3, results  # every read that covers the partition noticed


def test_unlisted_file_is_ignored(templates: dict[str, Path], fresh: Callable[[str], Path]) -> None:
    """A data file no commit lists, named with a completed instant's time, is not read."""
    path = fresh("v9")
    expected = _expected(templates["v9"])
    src = next(p for p in _data_files(path) if p.parent.name == "p=a" and p.name.endswith(".parquet")
               and ".log." not in p.name)
    stray = src.with_name("99999999-0000-0000-0000-000000000000-0" + src.name[src.name.index("_"):])
    shutil.copy(src, stray)
    for name, op in _operations(path).items():
        assert canonical(op(), drop=DROP) == expected[name], name
    assert [f.path.name for f in lsm_lab.open_table(path).uncommitted_files()] == [stray.name]
