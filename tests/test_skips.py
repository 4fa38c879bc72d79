"""CI's skip accounting (tests/conftest.py): with LSM_LAB_STRICT_SKIPS=1 a skip not in tests/allowed_skips.toml
fails the run, so a tool that failed to install cannot hide its tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def test_probe_skip() -> None:
    """Passes in a normal run; skips (with a reason no allow-list entry names) when the probe asks."""
    if os.environ.get("LSM_LAB_SKIP_PROBE") == "1":
        pytest.skip("the probe's own skip")


def _probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in ("LSM_LAB_STRICT_SKIPS", "PYTEST_ADDOPTS")}
    full.update(env, LSM_LAB_SKIP_PROBE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path}",
                           f"{TESTS / 'test_skips.py'}::test_probe_skip"], capture_output=True, text=True,
                          env=full, cwd=TESTS.parent, timeout=120)


def test_an_unlisted_skip_fails_a_strict_run(tmp_path: Path) -> None:
    strict = _probe(tmp_path / "a", LSM_LAB_STRICT_SKIPS="1")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    assert "not in tests/allowed_skips.toml" in strict.stdout and "the probe's own skip" in strict.stdout
    relaxed = _probe(tmp_path / "b")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr


def test_every_allowed_skip_says_why() -> None:
    with open(TESTS / "allowed_skips.toml", "rb") as f:
        entries = tomllib.load(f)["skip"]
    assert entries and all(e["test"].startswith("tests/") and e["reason"] and len(e["why"]) > 20 for e in entries)
