"""Shared machinery of the fuzz suite: template tables, mutations, the outcome check, the counts.

Every case copies (or restores) a small template table, damages one file, runs
an operation under a 30 s alarm and classifies the outcome:

    typed     an LsmLabError (the damage was noticed and named)
    expected  exactly the rows the undamaged table returns

Anything else fails the case: other rows, an untyped exception, a hang.  The
counts per file kind and class are printed at the end of the run.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pytest
from localpath import local

import lsm_lab
from lsm_lab.errors import LsmLabError

COUNTS: Counter[tuple[str, str]] = Counter()  # the run's tally, printed at the end (pytest_terminal_summary)
_CASES: Counter[tuple[str, str]] = Counter()  # this test's outcomes, reported with it (it may run in an xdist worker)
TIMEOUT_S = 30


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"operation ran longer than {TIMEOUT_S} s")


def canonical(table: pa.Table, *, drop: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of every column but `drop` (order-free comparison)."""
    cols = sorted(c for c in table.column_names if c not in drop)
    return sorted(zip(*(table.column(c).to_pylist() for c in cols))) if table.num_rows else []


def outcome(kind: str, expected: list[tuple[Any, ...]], op: Callable[[], pa.Table], what: str, *,
            drop: tuple[str, ...] = (), count_other: bool = False) -> str:
    """Run `op`; 'typed' or 'expected', else an AssertionError describing the case.

    `count_other`: count a case with other rows as 'other rows' and return 'other' instead
    of failing at once (the caller asserts there were none, after the whole run).
    """
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        result = op()
    except LsmLabError:
        _CASES[(kind, "typed")] += 1
        return "typed"
    except Hang as exc:
        raise AssertionError(f"{what}: {exc}") from None
    except Exception as exc:
        raise AssertionError(f"{what}: untyped {type(exc).__name__}: {exc}") from exc
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    try:
        got = canonical(result, drop=drop)
    except UnicodeDecodeError:  # a string value that is not UTF-8: damaged data returned as rows
        got = [("<not UTF-8>",)]
    if got != expected:
        if count_other:
            _CASES[(kind, "other rows")] += 1
            return "other"
        raise AssertionError(f"{what}: other rows ({len(got)} rows, {len(expected)} expected)")
    _CASES[(kind, "expected")] += 1
    return "expected"


def describe(before: bytes, after: bytes) -> str:
    """Where two versions of a file differ, briefly (for failure messages)."""
    if len(after) < len(before) and before.startswith(after):
        return f"[truncated at {len(after)} of {len(before)}]"
    i = next((k for k in range(min(len(before), len(after))) if before[k] != after[k]), min(len(before), len(after)))
    return f"[at byte {i}: {before[max(0, i - 20):i + 40]!r} -> {after[max(0, i - 20):i + 40]!r}]"


# --------------------------------------------------------------------------- mutations
HOSTILE_VALUES: list[Any] = [
    None, 0, -1, 10**30, 1.5, True, "", "x", "../../..", "/etc", "a/../../b",
    "..", ".", "20261122001500123", "00000000000000000", [], {}, [1, 2], {"a": 1}, "\x00", "é" * 300,
]


def deep(n: int = 5000) -> str:
    return "[" * n + "]" * n


def mutate_bytes(data: bytes, rng: random.Random, *, region: tuple[int, int] | None = None) -> bytes:
    """One random byte-level damage (inside `region` when given)."""
    if not data:
        return rng.choice([b"x", b"\x00" * 8, b"{}"])
    lo, hi = region if region else (0, len(data))
    hi = max(lo + 1, min(hi, len(data)))
    pos = rng.randrange(lo, hi)
    choice = rng.randrange(7)
    b = bytearray(data)
    if choice == 0:
        b[pos] ^= 1 << rng.randrange(8)
    elif choice == 1:
        b[pos] = rng.randrange(256)
    elif choice == 2:
        return bytes(b[:pos])
    elif choice == 3:
        return bytes(b[:pos] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 16))) + b[pos:])
    elif choice == 4:
        return bytes(b[:pos] + b[pos + rng.randrange(1, 64):])
    elif choice == 5:
        for i in range(pos, min(len(b), pos + rng.randrange(1, 32))):
            b[i] = 0
    else:
        for i in range(pos, min(len(b), pos + rng.randrange(1, 8))):
            b[i] = 0xFF
    return bytes(b)


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def mutate_json(data: bytes, rng: random.Random) -> bytes:
    """Replace (or delete) one value somewhere in a JSON document; sometimes damage the bytes instead."""
    try:
        doc = json.loads(data)
    except ValueError:
        return mutate_bytes(data, rng)
    r = rng.random()
    if r < 0.15:
        return mutate_bytes(data, rng)
    if r < 0.2:
        return rng.choice([deep().encode(), b"1" * 5000, b"[]", b"null", b'"x"', b"{" * 100])
    paths = [p for p in _paths(doc) if p]
    if not paths:
        return json.dumps(rng.choice(HOSTILE_VALUES)).encode()
    path = rng.choice(paths)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if rng.random() < 0.2 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        value = rng.choice([*HOSTILE_VALUES, "HUGE", "DEEP"])
        marker = "\"__LSM_FUZZ__\""
        parent[path[-1]] = "__LSM_FUZZ__"
        text = json.dumps(doc)
        if value == "HUGE":
            return text.replace(marker, "9" * 5000).encode()
        if value == "DEEP":
            return text.replace(marker, deep()).encode()
        parent[path[-1]] = value
    return json.dumps(doc).encode()


def mutate_properties(data: bytes, rng: random.Random) -> bytes:
    """Change, drop or duplicate one property line; sometimes damage the bytes."""
    if rng.random() < 0.2:
        return mutate_bytes(data, rng)
    lines = data.decode("utf-8", errors="replace").split("\n")
    idx = [i for i, line in enumerate(lines) if "=" in line and not line.startswith("#")]
    i = rng.choice(idx)
    key = lines[i].split("=", 1)[0]
    r = rng.random()
    if r < 0.2:
        del lines[i]
    elif r < 0.3:
        lines.insert(i + 1, lines[i])
    else:
        value = rng.choice(["", "x", "../../..", "/tmp", "-1", "0", "999999999999999999999", "9" * 400,
                            "COPY_ON_WRITE", "MERGE_ON_READ", "lsm_tree", "default", "1", "2", "6", "8", "10",
                            "json", "avro", "true", "false", "\\u00", "a,b", "..", "timeline/../..", "é"])
        lines[i] = f"{key}={value}"
    return "\n".join(lines).encode()


def parquet_regions(data: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    """(data pages, footer) byte ranges of a Parquet file: footer = metadata + its length + 'PAR1'."""
    n = len(data)
    if n < 12 or data[-4:] != b"PAR1":
        return (0, n), (0, n)
    meta_len = int.from_bytes(data[-8:-4], "little")
    start = max(4, n - 8 - meta_len)
    return (4, start), (start, n)


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Small tables every fuzz case starts from (built once, byte for byte the same in every run).

    A fixed clock and seeded file ids make the templates reproducible, so that a seed
    names the same mutated bytes in every run (`LSM_LAB_FUZZ_SEED=n` explores others).
    """
    import datetime as dt
    import uuid

    from lsm_lab.timeline import clock

    ids = random.Random(20261125)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clock, "_now", lambda: dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        mp.setattr(uuid, "uuid4", lambda: uuid.UUID(int=ids.getrandbits(128), version=4))
        return _build_templates(tmp_path_factory.mktemp("fuzz_templates"))


def _build_templates(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    # v9 MOR lsm_tree: base files, v2 data and delete logs, a completed and a pending compaction, a pending clean
    t = lsm_lab.create_table(root / "v9", name="fz", record_key="id", partition_by="p", ordering_field="ts",
                             num_buckets=2)
    t.insert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 1, "v": i} for i in range(40)])
    t.upsert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 2, "v": 100 + i} for i in range(0, 40, 3)])
    t.compact(strategy="full")
    t.upsert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 3, "v": 200 + i} for i in range(0, 40, 5)])
    t.delete([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 4} for i in range(0, 40, 7)])
    t.upsert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 5, "v": 300 + i} for i in range(1, 40, 6)])
    t.compact(strategy="full", plan_only=True)
    from lsm_lab.services import clean

    plan = clean.plan_clean(t, clean.KEEP_LATEST_COMMITS, 1)
    assert clean.files_in_plan(plan), "the template needs cleanable files"
    t.active_timeline.request("clean", plan)
    out["v9"] = local(t.path)
    # v8 compatibility table: v1 (#HUDI#) data and delete logs
    c = lsm_lab.create_table(root / "v8", name="fz8", record_key="id", partition_by="p", ordering_field="ts",
                             table_version=8, layout="default", num_buckets=1)
    c.insert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 1, "v": i} for i in range(30)])
    c.upsert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 2, "v": 100 + i} for i in range(0, 30, 4)])
    c.delete([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 3} for i in range(0, 30, 9)])
    c.upsert([{"id": f"k{i:03d}", "p": "a" if i % 2 else "b", "ts": 4, "v": 200 + i} for i in range(1, 30, 5)])
    out["v8"] = local(c.path)
    return out


@pytest.fixture()
def fresh(tmp_path: Path, templates: dict[str, Path]) -> Callable[[str], Path]:
    """Factory: a private copy of a template table."""
    count = 0

    def copy(name: str) -> Path:
        nonlocal count
        count += 1
        dst = tmp_path / f"{name}_{count}"
        shutil.copytree(templates[name], dst, symlinks=True)
        return dst

    return copy


@pytest.fixture(autouse=True)
def _report_outcomes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Attach this test's outcome counts to its report: the process that prints the summary (pytest's own, or
    pytest-xdist's controller) adds them up in `pytest_runtest_logreport`."""
    _CASES.clear()
    yield
    if _CASES:
        request.node.user_properties.append(("fuzz_outcomes", [[k, c, n] for (k, c), n in sorted(_CASES.items())]))
        _CASES.clear()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "teardown":
        return
    for name, value in report.user_properties:
        if name == "fuzz_outcomes":
            for kind, case, n in cast("list[tuple[str, str, int]]", value):
                COUNTS[(kind, case)] += n


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not COUNTS:
        return
    kinds = sorted({k for k, _ in COUNTS})
    terminalreporter.write_sep("=", "fuzz outcomes (typed error / expected rows)")
    for kind in kinds:
        other = COUNTS[(kind, "other rows")]
        terminalreporter.write_line(f"{kind:<28} typed {COUNTS[(kind, 'typed')]:>5}   "
                                    f"expected {COUNTS[(kind, 'expected')]:>5}"
                                    + (f"   other rows {other:>4} (xfail sub-case)" if other else ""))
    total_t = sum(v for (_, c), v in COUNTS.items() if c == "typed")
    total_e = sum(v for (_, c), v in COUNTS.items() if c == "expected")
    total_o = sum(v for (_, c), v in COUNTS.items() if c == "other rows")
    terminalreporter.write_line(f"{'total':<28} typed {total_t:>5}   expected {total_e:>5}   other rows {total_o:>4}"
                                f"   cases {total_t + total_e + total_o}")
