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

HARNESS = Path(__file__).resolve().parents[1] / "benchmarks" / "crash_test.py"


def load_harness():
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
