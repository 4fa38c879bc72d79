"""The README's Python example runs as written (on a temporary path)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"


def test_first_look_example_runs(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    example = next(b for b in blocks if "create_table" in b and "TripsGenerator" in b)
    code = example.replace('"/tmp/trips"', repr(str(tmp_path / "trips")))
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    table = namespace["table"]
    assert table.read().num_rows == 10_000  # restored to the first insert
    assert [i.action for i in table.instants()][-1] == "restore"
