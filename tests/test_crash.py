"""Crash safety, short version: a writer doing upserts, deletes and compactions, SIGKILLed again and again.

After every kill the table must open, read exactly the state after a prefix of
the acknowledged batches (the last one may have committed just before its
acknowledgement), keep no data file of an instant it does not know, and accept
new writes.  The loop lives in `benchmarks/crash_test.py`, which runs the long
version (>= 200 kills):  .venv/bin/python benchmarks/crash_test.py --kills 200
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from s3_server import S3Server

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "crash_test.py"


def load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lsm_lab_crash_test", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_workload_model_is_deterministic() -> None:
    harness = load_harness()
    assert harness.batch(5) == harness.batch(5)
    assert harness.model(8) == harness.model(8) and harness.model(8) != harness.model(7)
    assert harness.batch(3)[0] == "delete" and harness.batch(4)[0] == "upsert"


def test_sigkill_loop(tmp_path: Path) -> None:
    harness = load_harness()
    stats = harness.run(10, workdir=tmp_path, seed=7, max_delay=1.0, verbose=False)
    assert stats["kills"] == 10
    assert stats["batches"] > 0  # the writers made progress between kills (how much depends on the load)


def test_sigkill_loop_default_layout_with_clustering(tmp_path: Path) -> None:
    """The key-lookup layout, where clustering replaces file groups (the loop clusters every 5th batch)."""
    harness = load_harness()
    stats = harness.run(8, workdir=tmp_path, seed=11, max_delay=1.5, verbose=False, layout="default")
    assert stats["kills"] == 8
    assert stats["batches"] > 0


def test_sigkill_loop_streamed_writes(tmp_path: Path) -> None:
    """Every batch written as a stream (several chunks, one commit): a kill in the middle of reading the stream
    or of writing its files leaves the table at its last commit, and the next writer rolls the write back."""
    harness = load_harness()
    stats = harness.run(8, workdir=tmp_path, seed=5, max_delay=1.2, verbose=False, stream=True)
    assert stats["kills"] == 8
    assert stats["batches"] > 0
    # the writers spilled into the run's folder (their TMPDIR): each swept its killed predecessors' spill
    # folders; what the last ones left has a dead owner, so one more sweep leaves none
    from lsm_lab.filegroup.spill import SPILL_PREFIX, sweep_spill_folders

    sweep_spill_folders(tmp_path / "tmp")
    assert not [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(SPILL_PREFIX)]


def test_sigkill_loop_s3(tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same loop with the table on a real S3 server: commits are create-if-absent PUTs, the lock is the
    storage-based one, heartbeats are judged by age (short lease and tolerance here, so the next writer
    takes over a killed one's lock and rolls its write back within seconds)."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("LSM_LAB_LOCK_VALIDITY_S", "2")
    monkeypatch.setenv("LSM_LAB_HEARTBEAT_INTERVAL_S", "0.5")
    monkeypatch.setenv("LSM_LAB_HEARTBEAT_TOLERANCE_S", "3")
    harness = load_harness()
    stats = harness.run(6, workdir=tmp_path, seed=11, max_delay=2.0, verbose=False,
                        location=f"s3://{s3_server.new_bucket()}/table")
    assert stats["kills"] == 6
    assert stats["batches"] > 0
