"""Test helpers that record what a reader asked pyarrow for (which column chunks were decoded)."""

from __future__ import annotations

from typing import Any

import pytest

from lsm_lab.layout import parquet_io


def columns_read(monkeypatch: pytest.MonkeyPatch, method: str = "read_row_group") -> list[list[str]]:
    """The `columns=` of every `CheckedParquetFile.<method>` call from now on (the calls still run)."""
    asked: list[list[str]] = []
    real = getattr(parquet_io.CheckedParquetFile, method)

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append(list(kwargs.get("columns") or []))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(parquet_io.CheckedParquetFile, method, spy)
    return asked
