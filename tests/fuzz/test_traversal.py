"""Path traversal: every metadata field that names a path, pointed outside the table, against every operation.

A sentinel folder sits next to the table.  Each vector writes a hostile value
(`../..` climbing to the sentinel, or its absolute path) into one field of one
metadata file; then each operation runs on a fresh copy.  After every run the
sentinel must be untouched, no untyped exception may escape, and for every
vector at least one operation (the one that uses the field) must refuse with a
typed error.

v1 log headers are absent on purpose: no header value is ever turned into a
path (INSTANT_TIME and TARGET_INSTANT_TIME are only compared with instant times).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from instantfiles import read_instant, write_instant_json
from localpath import local

import lsm_lab
from lsm_lab.errors import LsmLabError
from lsm_lab.services import clean

pytestmark = pytest.mark.slow

Vector = Callable[[Path, Path], None]  # (table, sentinel folder) -> None


def _rows(i: int, n: int = 12) -> list[dict[str, Any]]:
    return [{"id": f"k{j:02d}", "p": "a" if j % 2 else "b", "ts": i, "v": 10 * i + j} for j in range(n)]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("traversal")
    t = lsm_lab.create_table(root / "t", name="tr", record_key="id", partition_by="p", ordering_field="ts",
                             num_buckets=1)
    t.insert(_rows(1))
    t.savepoint()
    t.upsert(_rows(2, 6))
    t.compact(strategy="full")
    t.upsert(_rows(3, 4))
    t.compact(strategy="full", plan_only=True)  # a pending compaction plan
    plan = clean.plan_clean(t, clean.KEEP_LATEST_COMMITS, 1)
    t.active_timeline.request("clean", plan)  # a pending clean plan
    return local(t.path)


def _timeline(t: Path) -> Path:
    return t / ".hoodie" / "timeline"


def _edit_json(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    doc = read_instant(path)
    change(doc)
    write_instant_json(path, doc)


def _latest(t: Path, suffix: str) -> Path:
    return max(p for p in _timeline(t).iterdir() if p.name.endswith(suffix) and not p.name.startswith("."))


def _first_write(t: Path) -> Path:
    return min(p for p in _timeline(t).iterdir() if "_" in p.name and p.name.endswith(".deltacommit"))


def _restore_plan(value_of: Callable[[Path], str], key: str) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        begin = "20991231235959000"
        plan = {"savepointToRestoreTimestamp": "20000101000000000", "version": 1,
                "instantsToRollback": [{"commitTime": "20000101000000000", "action": "deltacommit"}],
                "savepointsToDelete": []}
        if key == "commitTime":
            plan["instantsToRollback"] = [{"commitTime": value_of(sentinel), "action": "deltacommit"}]
        else:
            plan["savepointsToDelete"] = [value_of(sentinel)]
        (_timeline(t) / f"{begin}.restore.requested").write_text(json.dumps(plan))
    return vector


def _clean_path(value_of: Callable[[Path], str]) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        def change(doc: dict[str, Any]) -> None:
            _part, entries = next(iter(doc["filePathsToBeDeletedPerPartition"].items()))
            entries[0]["filePath"] = value_of(sentinel)
        _edit_json(_latest(t, ".clean.requested"), change)
    return vector


def _clean_partition(t: Path, sentinel: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        plans = doc["filePathsToBeDeletedPerPartition"]
        part = next(iter(plans))
        plans["../../outside"] = plans.pop(part)
    _edit_json(_latest(t, ".clean.requested"), change)


def _compaction(field: str, value_of: Callable[[Path], object]) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        def change(doc: dict[str, Any]) -> None:
            doc["operations"][0][field] = value_of(sentinel)
        _edit_json(_latest(t, ".compaction.requested"), change)
    return vector


def _write_stat(field: str, value_of: Callable[[Path], str]) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        def change(doc: dict[str, Any]) -> None:
            stats = next(iter(doc["partitionToWriteStats"].values()))
            stats[0][field] = value_of(sentinel)
        _edit_json(_first_write(t), change)
    return vector


def _write_stat_partition(t: Path, sentinel: Path) -> None:
    def change(doc: dict[str, Any]) -> None:
        stats = doc["partitionToWriteStats"]
        stats["../../outside"] = stats.pop(next(iter(stats)))
    _edit_json(_first_write(t), change)


def _savepoint(kind: str) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        def change(doc: dict[str, Any]) -> None:
            parts = doc["partitionMetadata"]
            if kind == "file":
                next(iter(parts.values()))["savepointDataFile"][0] = "../../outside/sentinel.txt"
            elif kind == "partition":
                parts["../../outside"] = parts.pop(next(iter(parts)))
            else:
                doc["savepointedInstant"] = "../../outside"
        _edit_json(_latest(t, ".savepoint"), change)
    return vector


def _property(key: str, value_of: Callable[[Path], str]) -> Vector:
    def vector(t: Path, sentinel: Path) -> None:
        p = t / ".hoodie" / "hoodie.properties"
        lines = [line for line in p.read_text().splitlines() if not line.startswith(key + "=")]
        p.write_text("\n".join([*lines, f"{key}={value_of(sentinel)}"]) + "\n")
    return vector


def _manifest(t: Path, sentinel: Path) -> None:
    from lsm_lab.timeline.archive import ArchivedTimeline

    table = lsm_lab.open_table(t)
    ArchivedTimeline(t, table.config).append([{"instantTime": "20000101000000000", "completionTime":
                                               "20000101000000001", "action": "clean", "metadata": b"{}",
                                               "plan": None}])
    history = _timeline(t) / "history"
    version = (history / "_version_").read_text().strip()
    manifest = history / f"manifest_{version}"
    _edit_json(manifest, lambda doc: doc["files"][0].__setitem__("fileName", "../../../../outside/sentinel.parquet"))


def _marker_symlink(t: Path, sentinel: Path) -> None:
    temp = t / ".hoodie" / ".temp"
    temp.mkdir(exist_ok=True)
    os.symlink(sentinel, temp / "20991231235959001")  # a marker folder that is a link out of the table
    (_timeline(t) / "20991231235959001.deltacommit.requested").write_text("")


def _timeline_symlink(t: Path, sentinel: Path) -> None:
    history = _timeline(t) / "history"
    if history.exists():
        shutil.rmtree(history)
    os.symlink(sentinel, history)  # the LSM timeline folder is a link out of the table


def _heartbeat_symlink(t: Path, sentinel: Path) -> None:
    beat = t / ".hoodie" / ".heartbeat"
    beat.mkdir(exist_ok=True)
    os.symlink(sentinel / "sentinel.txt", beat / "20991231235959002")
    (_timeline(t) / "20991231235959002.deltacommit.requested").write_text("")


def _up(levels: int) -> Callable[[Path], str]:
    return lambda s: "/".join([".."] * levels + [s.name])


def _up_file(levels: int) -> Callable[[Path], str]:
    return lambda s: "/".join([".."] * levels + [s.name, "sentinel.txt"])


def _absolute_file(s: Path) -> str:
    return str(s / "sentinel.txt")


VECTORS: dict[str, Vector] = {
    "restore plan commitTime (relative)": _restore_plan(_up(3), "commitTime"),
    "restore plan commitTime (absolute)": _restore_plan(str, "commitTime"),
    "restore plan savepointsToDelete": _restore_plan(_up(3), "savepointsToDelete"),
    "clean plan filePath (relative)": _clean_path(_up_file(1)),
    "clean plan filePath (absolute)": _clean_path(_absolute_file),
    "clean plan partition": _clean_partition,
    "compaction plan partitionPath": _compaction("partitionPath", _up(1)),
    "compaction plan fileId": _compaction("fileId", _up(2)),
    "compaction plan dataFilePath": _compaction("dataFilePath", _up_file(2)),
    "compaction plan deltaFilePaths": _compaction("deltaFilePaths", lambda s: [_up_file(2)(s)]),
    "compaction plan baseInstantTime": _compaction("baseInstantTime", _up(2)),
    "commit metadata path": _write_stat("path", _up_file(1)),
    "commit metadata partitionPath": _write_stat("partitionPath", _up(1)),
    "commit metadata fileId": _write_stat("fileId", _up(2)),
    "commit metadata partition key": _write_stat_partition,
    "savepoint savepointDataFile": _savepoint("file"),
    "savepoint partition": _savepoint("partition"),
    "savepoint savepointedInstant": _savepoint("instant"),
    "hoodie.timeline.path (relative)": _property("hoodie.timeline.path", _up(2)),
    "hoodie.timeline.path (absolute)": _property("hoodie.timeline.path", str),
    "hoodie.timeline.history.path": _property("hoodie.timeline.history.path", _up(3)),
    "hoodie.archivelog.folder": _property("hoodie.archivelog.folder", _up(2)),
    "archive manifest fileName": _manifest,
    "marker folder symlink": _marker_symlink,
    "history folder symlink": _timeline_symlink,
    "heartbeat symlink": _heartbeat_symlink,
}

OPERATIONS: dict[str, Callable[[lsm_lab.Table], object]] = {
    "read": lambda t: t.read(),
    "timeline": lambda t: t.timeline(archived=True),
    "upsert": lambda t: t.upsert(_rows(9, 3)),
    "delete": lambda t: t.delete([{"id": "k01", "p": "a", "ts": 9}]),
    "compact": lambda t: t.compact(),
    "clean": lambda t: t.clean(retained=1),
    "rollback": lambda t: t.rollback(),
    "archive": lambda t: t.archive(keep=1),
    "savepoint": lambda t: t.savepoint(),
    "restore": lambda t: t.restore(t.savepoints()[0]["instant"]),
}


def _fingerprint(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("vector", list(VECTORS))
def test_no_metadata_path_leaves_the_table(vector: str, template: Path, tmp_path: Path) -> None:
    typed: dict[str, str] = {}
    for name, operation in OPERATIONS.items():
        case = tmp_path / name
        table = case / "t"
        sentinel = case / "outside"
        shutil.copytree(template, table, symlinks=True)
        (sentinel / "sub").mkdir(parents=True)
        (sentinel / "sentinel.txt").write_text("must survive")
        (sentinel / "sub" / "x.parquet").write_bytes(b"PAR1 must survive PAR1")
        (sentinel / "sentinel.parquet").write_bytes(b"not an archive")
        before = _fingerprint(sentinel)
        try:
            VECTORS[vector](table, sentinel)
        except LsmLabError as exc:  # the vector itself needed an operation that refused
            typed["setup"] = type(exc).__name__
            assert _fingerprint(sentinel) == before
            break
        try:
            operation(lsm_lab.open_table(table))
        except LsmLabError as exc:
            typed[name] = type(exc).__name__
        except Exception as exc:  # noqa: BLE001 - no untyped exception may escape
            pytest.fail(f"{vector} / {name}: untyped {type(exc).__name__}: {exc}")
        assert _fingerprint(sentinel) == before, f"{vector} / {name}: the sentinel outside the table changed"
        assert sentinel.is_dir() and (sentinel / "sub").is_dir()
    if vector not in SILENT:
        assert typed, f"{vector}: no operation refused the hostile value"


# A symlink is not a metadata value: the guard leaves it, and what it points to, alone (no error needed).
SILENT = {"marker folder symlink", "heartbeat symlink"}
