"""Start-up: `lsm-lab --help` and every command's --help load no pyarrow/numpy/pandas; `show timeline` loads no
pandas; the rows it prints are pandas' layout; `lsm-lab bench startup` measures what it says.

What a fresh process imports is read from its `sys.modules` (a subprocess per command), never timed here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import lsm_lab
from lsm_lab.bench import startup
from lsm_lab.cli import app
from lsm_lab.cli.console import ENGINES, format_rows, source_constant

ROOT = Path(__file__).resolve().parents[1]

#: what no parser may need: the data libraries, the table API and the merge engines
NOT_FOR_HELP = ("pyarrow", "numpy", "pandas", "matplotlib", "pyspark", "duckdb", "lsm_lab.api", "lsm_lab.merge",
                "lsm_lab.table", "lsm_lab.bench.merge", "lsm_lab.bench.lookup", "lsm_lab.bench.compaction")

# runs lsm_lab.cli.main(argv) in a fresh interpreter, then prints its sys.modules as the last stdout line
PROBE = """\
import json, sys
from lsm_lab.cli import main
try:
    code = main(json.loads(sys.argv[1]))
except SystemExit as exc:
    code = exc.code
print("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def loaded(argv: list[str], cwd: Path) -> tuple[int, set[str], str]:
    """(exit code, the modules loaded, stdout) of `lsm-lab ARGV` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                          cwd=cwd, env=env, check=False, timeout=300)
    line = next(ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("MODULES "))
    got = json.loads(line[len("MODULES "):])
    return int(got["code"] or 0), set(got["modules"]), done.stdout


def heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def _top_commands() -> list[str]:
    sub = next(a for a in app.build_parser(lazy=True)._actions if isinstance(a, argparse._SubParsersAction))
    return sorted(sub.choices)


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in _top_commands()),
                                  ["bench", "startup", "--help"], ["bench", "scale", "--help"],
                                  ["show", "--help"], ["spark", "read", "--help"], ["interop", "compare", "--help"]],
                         ids=" ".join)
def test_help_loads_no_data_library(argv: list[str], tmp_path: Path) -> None:
    code, modules, out = loaded(argv, tmp_path)
    assert code == 0 and out.startswith("usage: lsm-lab")
    assert heavy(modules, NOT_FOR_HELP) == []


def test_show_timeline_loads_no_pandas(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    t.insert([{"id": "a", "v": 1}])
    t.upsert([{"id": "a", "v": 2}, {"id": "b", "v": 3}])
    code, modules, out = loaded(["show", "timeline", str(tmp_path / "t")], tmp_path)
    assert code == 0 and out.count("deltacommit") == 2 and "UPSERT" in out
    assert "pyarrow" in modules  # the table layer reads Parquet footers: loading it is expected
    assert heavy(modules, ("pandas", "matplotlib", "pyspark")) == []
    code, modules, out = loaded(["show", "timeline", str(tmp_path / "t"), "--json"], tmp_path)
    rows = json.loads(out[:out.rindex("MODULES ")])
    assert code == 0 and [r["operation"] for r in rows] == ["INSERT", "UPSERT"] and "pandas" not in modules


def _rows_like_pandas(rows: list[dict[str, Any]]) -> str:
    """What `print_frame` printed for these rows before: pandas' to_string of a frame of them."""
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200,
                           "display.max_colwidth", 60):
        text: str = pd.DataFrame(rows).to_string(index=False)
    return text


def test_timeline_rows_print_as_pandas_printed_them(tmp_path: Path) -> None:
    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", partition_by="city")
    for i in range(4):
        t.upsert([{"id": f"k{j}", "city": ["sf", "chennai"][j % 2], "v": i} for j in range(3 + 40 * i)])
    t.delete([{"id": "k1", "city": "chennai"}])
    t.compact(strategy="full")
    t.archive(keep=2)
    t.upsert([{"id": "k0", "city": "sf", "v": 9}])
    assert t.compact(strategy="full", plan_only=True) is not None  # a requested instant: no completion time
    assert any(r["archived"] for r in t.timeline_rows(archived=True))
    assert any(r["completion_time"] is None for r in t.timeline_rows())
    for archived in (False, True):
        rows = t.timeline_rows(archived=archived)
        frame = t.timeline(archived=archived)
        assert list(frame.columns) == list(rows[0]) and len(frame) == len(rows)
        assert format_rows(rows) == _rows_like_pandas(rows)
    pending: list[dict[str, Any]] = [{"begin_time": "1", "completion_time": None, "action": "commit", "state": "requested", "n": 12345,
                "flag": True},
               {"begin_time": "20", "completion_time": "21", "action": "deltacommit", "state": "completed", "n": 0,
                "flag": False}]
    assert format_rows(pending) == _rows_like_pandas(pending)
    assert format_rows([]) == "(empty)"


def test_constants_read_from_source_equal_the_imported_ones() -> None:
    from lsm_lab.merge import ENGINES as merge_engines
    from lsm_lab.merge.files import MERGE_BATCH_ROWS

    assert merge_engines == ENGINES
    assert source_constant("lsm_lab.merge.files", "MERGE_BATCH_ROWS") == MERGE_BATCH_ROWS


def test_a_benchmark_gets_its_options_when_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    parser = app.build_parser(lazy=True)
    bench = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    merge = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction)).choices["merge"]
    assert "overlap" not in {a.dest for a in merge._actions}  # not yet: bench/merge.py is not imported
    args = parser.parse_args(["bench", "merge", "--rows", "1000", "--overlap", "0.5"])
    assert args.rows == 1000 and args.overlap == 0.5 and callable(args.func)
    args = app.build_parser(lazy=True).parse_args(["bench", "scale", "--rows", "100", "400"])
    assert args.rows == [100, 400] and args.plot is None
    with pytest.raises(SystemExit):
        app.main(["bench", "lookup", "--help"])
    assert "--lookups" in capsys.readouterr().out  # the description and options of bench/lookup.py


@pytest.mark.slow  # a dozen whole processes
def test_bench_startup_measures_every_entry_point() -> None:
    lines: list[str] = []
    result = startup.run(repeats=1, log=lines.append)
    points = {e["entry_point"]: e for e in result["entry_points"]}
    assert list(points) == [label for label, _ in startup.entry_points(Path("T"))]
    assert all(e["seconds"] > 0 and e["min_seconds"] <= e["seconds"] for e in points.values())
    base = points["python -c pass (baseline)"]
    assert all(abs(e["above_python_seconds"] - (e["seconds"] - base["seconds"])) < 1e-3 for e in points.values())
    assert base["heavy_modules"] == [] and points["lsm-lab --help"]["heavy_modules"] == []
    assert {"pyarrow", "lsm_lab.api"} <= set(points["lsm_lab.open_table(T)"]["heavy_modules"])
    assert "pandas" not in points["lsm-lab show timeline T"]["heavy_modules"]
    # the children inherit this process's environment, the Arrow pool included: the result says which
    assert result["children_arrow_pool"] == (os.environ.get("ARROW_DEFAULT_MEMORY_POOL") or "default")
    text = startup.report(result)
    assert all(label in text for label in points) and "target <= 0.2 s" in text and "Paimon" not in text
    assert f"the children's Arrow pool: {result['children_arrow_pool']}" in text


def test_bench_startup_footprint_counts_modules_and_arrow_bytes(tmp_path: Path) -> None:
    """The census wrapper of `bench startup`: the modules a process loaded, and what Arrow's pool allocated in its
    life (none without pyarrow; at least the buffer an array of a million int64 needs with it)."""
    names, allocated = startup.footprint(["-c", "pass"], tmp_path)
    assert "pyarrow" not in names and allocated == 0
    names, allocated = startup.footprint(["-c", "import pyarrow as pa; pa.array(range(1_000_000), pa.int64())"],
                                         tmp_path)
    assert "pyarrow" in names and allocated >= 8_000_000


def test_bench_startup_needs_an_existing_peer(tmp_path: Path) -> None:
    from lsm_lab.errors import InputError

    with pytest.raises(InputError, match="no such interpreter"):
        startup.run(repeats=1, peer_python=tmp_path / "nope" / "python")
