"""Test helpers that record what code did: which column chunks a reader decoded, what a folder holds."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from lsm_lab.format import parquet_read


def columns_read(monkeypatch: pytest.MonkeyPatch, method: str = "read_row_group") -> list[list[str]]:
    """The `columns=` of every `CheckedParquetFile.<method>` call from now on (the calls still run)."""
    asked: list[list[str]] = []
    real = getattr(parquet_read.CheckedParquetFile, method)

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(list(kwargs.get("columns") or []))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(parquet_read.CheckedParquetFile, method, spy)
    return asked


def fingerprint(folder: Path) -> dict[str, tuple[str, str]]:
    """Every entry below `folder` (links not followed): its kind and content hash (a canary: did anything change?)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            out[rel] = ("dir", "")
        else:
            out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out
