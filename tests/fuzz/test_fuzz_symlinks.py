"""Symbolic links at every folder of a table: a sequence of writes and services changes nothing outside it.

For each template table (fuzzkit.templates: v9 lsm_tree and v8 compatibility)
and each folder it holds — every partition folder, `.hoodie`, the timeline and
its history, `.hoodie/.temp`, `.hoodie/.heartbeat`, `.hoodie/.key_index`, …,
enumerated from the template, not hard-coded — one case moves the folder's
content to a canary tree beside the table and leaves a link to it in its place
(what "moved to another disk and linked" looks like).  One more case links the
folder of a partition no write has created yet, and one per pending instant of
the template (a compaction plan, a clean plan) links its heartbeat file to a
file of the canary tree (a service taking over the plan would truncate it).  Then writes and services run
one after the other on a freshly opened table:

    upsert · insert into a new partition · delete · compact (full) · compact (log) ·
    cluster · clean (retained 1) · archive · savepoint · restore · rollback

Every step either works or raises an `LsmLabError` (any other exception fails
the case), and afterwards the canary tree must be byte for byte what it was:
no file written, replaced, truncated or deleted through a link out of the table
(lsm_lab/storage/paths.py, "Symbolic links planted in a local table").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import COUNTS
from spies import fingerprint

import lsm_lab
from lsm_lab.errors import LsmLabError

pytestmark = pytest.mark.slow

KEYS = 40


def _rows(ts: int, ids: range, part: str | None = None) -> list[dict[str, Any]]:
    return [{"id": f"k{i:03d}", "p": part or ("a" if i % 2 else "b"), "ts": ts, "v": 1000 * ts + i} for i in ids]


STEPS: list[tuple[str, Callable[[lsm_lab.Table], object]]] = [
    ("upsert", lambda t: t.upsert(_rows(10, range(0, KEYS, 4)))),
    ("insert new partition", lambda t: t.insert(_rows(11, range(100, 104), part="zz"))),
    ("delete", lambda t: t.delete([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 12} for i in (1, 2)])),
    ("compact full", lambda t: t.compact(strategy="full")),
    ("upsert again", lambda t: t.upsert(_rows(13, range(1, KEYS, 5)))),
    ("compact log", lambda t: t.compact(strategy="log")),
    ("cluster", lambda t: t.cluster()),
    ("clean", lambda t: t.clean(retained=1)),
    ("archive", lambda t: t.archive(keep=1)),
    ("savepoint", lambda t: t.savepoint()),
    ("upsert after savepoint", lambda t: t.upsert(_rows(14, range(2, KEYS, 6)))),
    ("restore", lambda t: t.restore(t.savepoints()[-1]["instant"]) if t.savepoints() else None),
    ("rollback", lambda t: t.rollback()),
    ("read", lambda t: t.read()),
]



def _folders(table: Path) -> list[str]:
    """Every folder of the table (relative, links not followed), a partition folder not written yet, and the
    heartbeat file of every pending instant (a file link: `heartbeat:<instant>`)."""
    found = sorted(str(p.relative_to(table)) for p in table.rglob("*") if p.is_dir() and not p.is_symlink())
    pending = lsm_lab.open_table(table).active_timeline.pending()
    return [*found, "p=zz", *(f"heartbeat:{i.begin_time}" for i in pending)]


def _plant(table: Path, folder: str, canary: Path) -> None:
    """Move `table/folder`'s content to the canary tree and put a link to it in its place.

    `heartbeat:<instant>`: link that instant's heartbeat file to the canary's `victim.txt`.
    """
    if folder.startswith("heartbeat:"):
        beat = table / ".hoodie" / ".heartbeat" / folder.split(":", 1)[1]
        beat.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(canary / "victim.txt", beat)
        return
    here = table / folder
    there = canary / "linked" / folder.replace("/", "__")
    if here.is_dir():
        shutil.move(str(here), str(there))
    else:
        there.mkdir(parents=True)
    os.symlink(there, here)


@pytest.mark.parametrize("template", ["v9", "v8"])
def test_links_at_every_folder_change_nothing_outside(template: str, templates: dict[str, Path],
                                                      tmp_path: Path) -> None:
    folders = _folders(templates[template])
    for required in (".hoodie", ".hoodie/timeline", "p=a", "p=b"):
        assert required in folders, f"the template {template} has no {required}"
    failures: list[str] = []
    for n, folder in enumerate(folders):
        case = tmp_path / f"case{n}"
        table = case / "t"
        shutil.copytree(templates[template], table, symlinks=True)
        canary = case / "outside"
        (canary / "linked").mkdir(parents=True)
        (canary / "victim.txt").write_text("must survive\n")
        _plant(table, folder, canary)
        before = fingerprint(canary)
        for step, op in STEPS:
            try:
                op(lsm_lab.open_table(table))
                COUNTS[("symlink " + step, "expected")] += 1
            except LsmLabError:
                COUNTS[("symlink " + step, "typed")] += 1
            except Exception as exc:  # noqa: BLE001 - no untyped exception may escape
                failures.append(f"{template} {folder} / {step}: untyped {type(exc).__name__}: {exc}")
            if fingerprint(canary) != before:
                failures.append(f"{template} {folder} / {step}: the canary tree outside the table changed")
                break
    assert not failures, "\n".join(failures)
