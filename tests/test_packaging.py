"""Packaging: the slim core installs and runs without any extra, and environment.yml lists what pyproject.toml does.

`pip install lsm_lab` (no extras) must give create / write / read / lookups / compaction and the
`lsm-lab` command in a venv without PySpark, matplotlib, ipywidgets, hudi-rs or moto; a feature that
needs an extra says which one (lsm_lab/extras.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# conda-forge names that differ from PyPI's
CONDA_NAMES = {"python-duckdb": "duckdb"}


def _name(requirement: str) -> str:
    name = re.split(r"[\[<>=!~;\s]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")
    return CONDA_NAMES.get(name, name)


def _pyproject_names() -> set[str]:
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    for reqs in extras.values():
        names |= {_name(r) for r in reqs if not r.startswith("lsm_lab[")}
    return names


def _environment_names() -> set[str]:
    names = set()
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        m = re.match(r"\s*-\s+([^#\s][^#]*)", line)
        if m and not m.group(1).strip().endswith(":") and m.group(1).strip() != "-e .":
            names.add(_name(m.group(1)))
    return names - {"python", "openjdk", "pip"}


def test_environment_yml_lists_what_pyproject_does() -> None:
    assert _environment_names() == _pyproject_names()


def test_the_core_needs_no_extra() -> None:
    core = {_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not core & {"pyspark", "matplotlib", "ipywidgets", "hudi", "moto", "duckdb", "pytest"}
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert "version" in PYPROJECT["project"]["dynamic"]


PROBE = """
import importlib.util, json, sys
from pathlib import Path
import lsm_lab
for extra in ("pyspark", "matplotlib", "ipywidgets", "hudi", "moto", "duckdb", "pytest"):
    assert importlib.util.find_spec(extra) is None, extra + " is installed"
t = lsm_lab.create_table(Path(sys.argv[1]), name="t", record_key="id", partition_by="city", ordering_field="ts")
t.upsert([{"id": "a", "city": "x", "ts": 1, "v": 1.0}, {"id": "b", "city": "y", "ts": 1, "v": 2.0}])
t.upsert([{"id": "a", "city": "x", "ts": 2, "v": 3.0}])
t.delete([{"id": "b", "city": "y", "ts": 2}])
assert t.lookup(["a"]).num_rows == 1
t.compact()
try:
    import lsm_lab.spark
except lsm_lab.MissingDependencyError as exc:
    assert "lsm_lab[spark]" in str(exc), exc
else:
    raise AssertionError("lsm_lab.spark imported without pyspark")
print(json.dumps(sorted(t.read().select(["id", "v"]).to_pylist(), key=lambda r: r["id"])))
"""


@pytest.mark.slow
def test_the_core_installs_and_runs_without_extras(tmp_path: Path) -> None:
    """A fresh venv, `pip install` of the project with no extra (about 15 s with pip's cache).

    The venv gets no pip of its own: this run's pip installs into it (`pip --python`), which saves
    creating one; `--no-compile` leaves the byte-compiling of the dependencies' modules to the imports."""
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ and *.egg-info behind
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "lsm_lab", src / "lsm_lab", ignore=shutil.ignore_patterns("__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py, cli = venv / "bin" / "python", venv / "bin" / "lsm-lab"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-compile", str(src)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), capture_output=True, text=True, timeout=300, cwd=tmp_path)

    probe = run(str(py), "-c", PROBE, str(tmp_path / "t"))
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == '[{"id": "a", "v": 3.0}]'

    version = run(str(cli), "--version")
    assert version.stdout.strip() == f"lsm-lab {PYPROJECT_VERSION()}", version
    assert run(str(py), "-m", "lsm_lab", "--version").stdout == version.stdout

    (tmp_path / "rows.csv").write_text("id,city,ts,v\nk1,x,1,1.5\nk2,y,1,2.5\n", encoding="utf-8")
    assert run(str(cli), "create", str(tmp_path / "c"), "--name", "c", "--key", "id", "--partition-by", "city",
               "--ordering", "ts").returncode == 0
    assert run(str(cli), "write", str(tmp_path / "c"), str(tmp_path / "rows.csv")).returncode == 0
    read = run(str(cli), "read", str(tmp_path / "c"), "--columns", "id,v")
    assert read.returncode == 0 and "k1" in read.stdout and "2.5" in read.stdout, read
    spark = run(str(cli), "spark", "read", str(tmp_path / "c"))  # needs the spark extra: one clear line
    assert spark.returncode == 2 and "lsm_lab[spark]" in spark.stderr and "Traceback" not in spark.stderr, spark


def PYPROJECT_VERSION() -> str:
    text = (ROOT / "lsm_lab" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    assert m, "lsm_lab/__init__.py has no __version__"
    return m.group(1)


def test_opening_a_table_and_the_cli_do_not_import_pandas(tmp_path: Path) -> None:
    """pandas costs ~0.3 s of start-up; only inspection (frames) needs it (issue 33, item 4)."""
    import subprocess
    import sys

    import lsm_lab

    lsm_lab.create_table(tmp_path / "t", name="t", record_key="id")
    code = ("import sys, lsm_lab, lsm_lab.cli.app\n"
            f"t = lsm_lab.open_table({str(tmp_path / 't')!r}); t.completed_writes(); t.latest_slices()\n"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
