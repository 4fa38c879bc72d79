"""The README's blocks work when pasted in order (issue 34, item 1).

Every ```bash and ```python block of README.md runs, in the order the README shows them, in a fresh
folder that looks like a clone after `make demo` (`.venv` and `data/` linked in), with a temporary
HOME, the venv's `bin` on PATH (as `source .venv/bin/activate` leaves it) and no AWS_* variables:
bash blocks with `bash -eo pipefail`, python blocks with the venv's python, each in its own process.
Paths under `/tmp/` go to the test's temporary folder; the S3 blocks talk to the test's local S3
server (tests/s3_server.py) instead of 127.0.0.1:9000, in a bucket of their own.

A block that cannot run here is marked in the README by the line before its fence:
`<!-- readme-test: skip (the reason) -->` (make targets, Spark, a server that runs until stopped).
Code blocks without a language are refused, so no block escapes the test unnoticed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from s3_server import S3Server, s3_server  # noqa: F401 - fixture: a real S3 server (moto) on 127.0.0.1

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SKIP = re.compile(r"<!-- readme-test: skip \((.+)\) -->")
README_ENDPOINT = "http://127.0.0.1:9000"


@dataclass
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    skip: str | None  # the reason, when marked


def readme_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(\w*)\s*", lines[i])
        if fence is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        before = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = SKIP.fullmatch(before.strip())
        blocks.append(Block(fence.group(1), "\n".join(body) + "\n", start + 1, marker.group(1) if marker else None))
        i += 1
    return blocks


def test_every_block_has_a_language_and_skips_say_why() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert blocks
    for b in blocks:
        assert b.lang in ("bash", "python"), f"README.md:{b.line}: a code block without bash/python is not tested"
    skipped = [b for b in blocks if b.skip]
    assert all(len(b.skip or "") > 10 for b in skipped)
    assert len(skipped) <= 7, "as few skipped blocks as possible"


@pytest.mark.slow
def test_readme_blocks_run_in_order(tmp_path: Path, s3_server: S3Server) -> None:  # noqa: F811
    venv_bin = Path(sys.executable).parent
    work, home, tmp = tmp_path / "clone", tmp_path / "home", tmp_path / "tmp"
    for d in (work, home, tmp):
        d.mkdir()
    (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (work / "data").symlink_to(REPO / "data", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "LSM_LAB_", "PYTEST_"))}
    env.update(HOME=str(home), PATH=f"{venv_bin}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(REPO),
               LSM_LAB_PROGRESS="0", AWS_EC2_METADATA_DISABLED="true")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    ran: list[int] = []
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.skip:
            continue
        code = (block.code.replace("/tmp/", f"{tmp}/").replace(README_ENDPOINT, s3_server.endpoint)
                .replace('Bucket="lake"', f'Bucket="{bucket}"').replace("s3://lake/", f"s3://{bucket}/"))
        if block.lang == "python" and "TripsGenerator" in code:  # the first look: check where it left the table
            code += "\nassert table.read().num_rows == 10_000\nassert table.instants()[-1].action == 'restore'\n"
        if block.lang == "bash":
            argv = ["bash", "-eo", "pipefail", "-c", code]
        else:
            script = tmp_path / f"readme_{block.line}.py"
            script.write_text(code, encoding="utf-8")
            argv = [str(venv_bin / "python"), str(script)]
        proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, (f"README.md:{block.line} ({block.lang}) failed:\n{proc.stdout[-3000:]}\n"
                                      f"{proc.stderr[-3000:]}")
        ran.append(block.line)
    assert len(ran) >= 6
