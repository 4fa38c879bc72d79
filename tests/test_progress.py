"""Progress bars appear only where a person watches: a terminal or a live notebook, never a pipe, a file or a
saved notebook; and never for work shorter than `progress.MIN_SECONDS`."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lsm_lab import progress

ROOT = Path(__file__).resolve().parents[1]


def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "LSM_LAB_PROGRESS")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


SLOW_LOOP = textwrap.dedent("""
    import sys, time
    from lsm_lab.progress import progress
    for _ in progress(range(12), desc="slow", unit="step"):
        time.sleep(float(sys.argv[1]))
    print("done")
""")


def _run_in_pty(seconds_per_step: float) -> str:
    """Run SLOW_LOOP with stdout and stderr on a pseudo-terminal, as in a shell; return what it drew."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a 100-column terminal (a bare pty has width 0), then python on it
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        os.execve(sys.executable, [sys.executable, "-c", SLOW_LOOP, str(seconds_per_step)], _child_env())
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_terminal_shows_a_bar_for_long_work_only() -> None:
    long = _run_in_pty(0.15)             # 1.8 s > MIN_SECONDS
    assert "done" in long
    assert "slow:" in long and "\r" in long, long
    short = _run_in_pty(0.0)             # instant: no bar even on a terminal
    assert "done" in short
    assert "slow:" not in short, short


def test_pipe_shows_no_bar_even_for_long_work() -> None:
    out = subprocess.run([sys.executable, "-c", SLOW_LOOP, "0.15"], capture_output=True, text=True,
                         env=_child_env(), check=True)
    assert out.stdout.strip() == "done"
    assert out.stderr == ""


def test_cli_merge_into_a_file_writes_no_bar(tmp_path: Path) -> None:
    # `lsm-lab merge ... > f 2>&1`: stdout and stderr are a file, not a terminal
    log = tmp_path / "log.txt"
    base = pq.read_table(ROOT / "data" / "sample" / "inserts.parquet").sort_by("uuid")
    update = base.slice(0, 40).set_column(1, "ts", pa.array([2**40] * 40, pa.int64()))
    inputs = [str(tmp_path / "base.parquet"), str(tmp_path / "update.parquet")]
    pq.write_table(base, inputs[0])
    pq.write_table(update, inputs[1])
    with log.open("w") as f:
        subprocess.run([sys.executable, "-m", "lsm_lab.cli.app", "merge", str(tmp_path / "out.parquet"), *inputs,
                        "--key", "uuid", "--ordering", "ts"], stdout=f, stderr=subprocess.STDOUT,
                       env=_child_env(), check=True)
    text = log.read_text()
    assert text.startswith("merged 2 file(s)"), text
    assert "\r" not in text and "%|" not in text


def test_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LSM_LAB_PROGRESS", raising=False)
    assert not progress.enabled(100)                      # pytest sets PYTEST_CURRENT_TEST
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress.enabled(100)                      # not a terminal, not a notebook
    assert progress.new_bar(total=100, desc="x") is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Tty())
    assert progress.enabled(100)
    assert not progress.enabled(3)                        # too few steps
    monkeypatch.setenv("LSM_LAB_PROGRESS", "0")
    assert not progress.enabled(100)
    monkeypatch.setenv("LSM_LAB_PROGRESS", "1")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.enabled(3)
    assert list(progress.progress(range(5), desc="forced")) == [0, 1, 2, 3, 4]


def test_a_saved_notebook_keeps_no_bar(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent("""
        import os, time
        os.environ.pop("PYTEST_CURRENT_TEST", None)   # a learner's kernel, not a test's
        from lsm_lab.progress import progress, in_notebook
        assert in_notebook()
        total = 0
        for i in progress(range(12), desc="slow", unit="step"):
            time.sleep(0.15)
            total += i
        print("sum", total)
    """))]
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute(env=_child_env())
    outputs = nb.cells[0].outputs
    shown = [o for o in outputs if o.output_type == "display_data"]
    assert shown, "the bar was displayed while the loop ran (through a display handle)"
    for o in shown:                                       # ... and blanked when it closed
        assert o.data.get("text/plain", "") == "" and "application/vnd.jupyter.widget-view+json" not in o.data, o
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert text == "sum 66\n", outputs


def test_cli_write_into_a_file_writes_no_bar(tmp_path: Path) -> None:
    # `lsm-lab write … > f 2>&1` (the example): a long enough write, still no bar in the file
    log = tmp_path / "log.txt"
    table = tmp_path / "trips"
    env = _child_env()
    cli = [sys.executable, "-m", "lsm_lab.cli.app"]
    with log.open("w") as f:
        subprocess.run([*cli, "create", str(table), "--name", "trips", "--key", "uuid", "--partition-by", "city",
                        "--ordering", "ts"], stdout=f, stderr=subprocess.STDOUT, env=env, check=True)
        subprocess.run([*cli, "write", str(table), str(ROOT / "data" / "sample" / "inserts.parquet"), "--op", "insert"],
                       stdout=f, stderr=subprocess.STDOUT, env=env, check=True)
        failed = subprocess.run([*cli, "write", str(table), str(tmp_path / "missing.parquet"), "--op", "upsert"],
                                stdout=f, stderr=subprocess.STDOUT, env=env, check=False)
    text = log.read_text()
    assert failed.returncode != 0 and "error:" in text, text
    assert "\r" not in text and "%|" not in text, text


def test_a_script_is_not_a_notebook_and_does_not_import_ipython() -> None:
    # deciding "no notebook" must not import IPython (0.1-0.3 s of a first read's start-up)
    code = ("import sys; from lsm_lab.progress import in_notebook, progress\n"
            "assert not in_notebook()\n"
            "assert list(progress(range(20), desc='x')) == list(range(20))\n"
            "print('IPython' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_child_env(), check=True)
    assert done.stdout.strip() == "False"
    # an IPython that is loaded but runs no kernel (a terminal IPython, `import IPython` in a script) is no notebook
    code = "import IPython; from lsm_lab.progress import in_notebook; print(in_notebook())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_child_env(), check=True)
    assert done.stdout.strip() == "False"


def test_a_write_into_one_file_group_shows_a_bar_by_rows(tmp_path: Path) -> None:
    """One big file group (a 2M-row insert into an unpartitioned table) still shows a bar (issue 34, item 9)."""
    code = textwrap.dedent(f"""
        import lsm_lab
        from lsm_lab import progress
        progress.MIN_SECONDS = 0
        t = lsm_lab.create_table({str(tmp_path / 't')!r}, name="t", record_key="id", num_buckets=1)
        t.insert([{{"id": str(i)}} for i in range(5000)])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=_child_env(LSM_LAB_PROGRESS="1"))
    assert "insert " in done.stderr and "row" in done.stderr and "5.00k" in done.stderr, done.stderr
