"""`lsm-lab demo --engine spark`: the main job's writes on local Spark, checked against the dict model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lsm_lab.cli.app import build_parser
from lsm_lab.lab.demo import run_demo

pytestmark = pytest.mark.spark


def test_demo_on_spark(spark: Any, tmp_path: Path) -> None:
    lines: list[str] = []
    table = run_demo(tmp_path, rows=3000, rounds=1, engine="spark", echo=lines.append)
    assert any("equal the dict model" in line for line in lines)
    ops = list(table.timeline()["operation"])
    assert ops == ["INSERT", "UPSERT", "DELETE"]


def test_spark_commands_are_registered() -> None:
    parser = build_parser()
    args = parser.parse_args(["bench", "compaction", "--engine", "spark", "--rows", "1000", "--k", "1", "4"])
    assert args.rows == 1000 and args.k == [1, 4] and args.engine == "spark"
    args = parser.parse_args(["spark", "compact", "/tmp/t", "--merge", "hash", "--master", "spark://h:7077"])
    assert args.merge == "hash" and args.master == "spark://h:7077"
