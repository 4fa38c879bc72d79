"""`lsm-lab`: every command has --help; create/write/read/show on a temp table; mistakes end in one `error:` line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest

from lsm_lab import open_table
from lsm_lab.cli.app import build_parser, main


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LSM_LAB_DEBUG", raising=False)


def _commands(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append([*prefix, name])
                out.extend(_commands(sub, [*prefix, name]))
    return out


COMMANDS = _commands(build_parser(), [])


def test_the_documented_commands_exist() -> None:
    assert {"demo", "create", "write", "read", "show"} <= {c[0] for c in COMMANDS}


@pytest.mark.parametrize("command", [[], *COMMANDS], ids=lambda c: " ".join(c) or "lsm-lab")
def test_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: lsm-lab") and len(out.splitlines()) > 3


ROWS = [
    {"id": "a", "city": "sf", "ts": 1, "fare": 1.5},
    {"id": "b", "city": "sf", "ts": 1, "fare": 2.5},
    {"id": "c", "city": "chennai", "ts": 1, "fare": 3.5},
]


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def test_create_write_read_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trips"
    out = _run(capsys, "create", path, "--name", "trips", "--key", "id", "--partition-by", "city",
               "--ordering", "ts", "--buckets", "2", "--option", "hoodie.some.option=x=y")
    assert out.startswith("created Table(")
    table = open_table(path)
    assert table.config.props["hoodie.some.option"] == "x=y" and table.config.num_buckets == 2

    # the three input formats
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "in.parquet")
    assert "insert: 3 rows" in _run(capsys, "write", path, tmp_path / "in.parquet", "--op", "insert")
    (tmp_path / "up.csv").write_text("id,city,ts,fare\na,sf,2,10.0\nd,sf,2,4.0\n")
    assert "upsert: 2 rows" in _run(capsys, "write", path, tmp_path / "up.csv")
    (tmp_path / "del.jsonl").write_text('{"id": "b", "city": "sf"}\n')
    _run(capsys, "write", path, tmp_path / "del.jsonl", "--op", "delete")
    (tmp_path / "bulk.json").write_text('{"id": "e", "city": "chennai", "ts": 5, "fare": 6.0}\n')
    _run(capsys, "write", path, tmp_path / "bulk.json", "--op", "bulk_insert")

    # read: to files of each format, with columns, time travel and engines
    _run(capsys, "read", path, "--out", tmp_path / "out.parquet")
    got = pq.read_table(tmp_path / "out.parquet")
    assert sorted(zip(got.column("id").to_pylist(), got.column("fare").to_pylist())) == [
        ("a", 10.0), ("c", 3.5), ("d", 4.0), ("e", 6.0)]
    _run(capsys, "read", path, "--columns", "id, fare", "--out", tmp_path / "out.csv", "--merge", "hash")
    assert pcsv.read_csv(tmp_path / "out.csv").column_names == ["id", "fare"]
    first = table.completed_writes()[0].completion_time
    assert first is not None
    _run(capsys, "read", path, "--as-of", first, "--columns", "id,fare", "--out", tmp_path / "old.jsonl")
    old = [json.loads(line) for line in (tmp_path / "old.jsonl").read_text().splitlines()]
    assert sorted((r["id"], r["fare"]) for r in old) == [("a", 1.5), ("b", 2.5), ("c", 3.5)]
    printed = _run(capsys, "read", path, "--columns", "id,ts", "--json", "--limit", "0")
    assert sorted(r["id"] for r in json.loads(printed)) == ["a", "c", "d", "e"]
    assert "a" in _run(capsys, "read", path, "--read-optimized", "--limit", "2")

    # show
    out = _run(capsys, "show", "timeline", path)
    assert out.count("deltacommit") == 4 and "completed" in out
    timeline = json.loads(_run(capsys, "show", "timeline", path, "--json"))
    assert [r["operation"] for r in timeline] == ["INSERT", "UPSERT", "DELETE", "BULK_INSERT"]
    fsview = json.loads(_run(capsys, "show", "fsview", path, "--json"))
    assert {r["partition"] for r in fsview} == {"city=sf", "city=chennai"}
    assert "L1: base" in _run(capsys, "show", "levels", path)
    levels_then = _run(capsys, "show", "levels", path, "--as-of", first)  # only the insert: base files
    assert "L1: base" in levels_then and "L0 (0): []" in levels_then and "L0 (1)" not in levels_then
    assert json.loads(_run(capsys, "show", "levels", path, "--json"))
    footers = json.loads(_run(capsys, "show", "footers", path, "--json"))
    # table version 10: no block-type footer key, the name says what a log holds (FileNameParser)
    assert {r.get("hudi.log.block_type") for r in footers} == {None}
    assert {r["file"].split(".")[-2] for r in footers if r.get("log.VERSION")} == {"log", "deletes"}
    assert "hoodie_min_record_key" in _run(capsys, "show", "footers", path)


def test_no_hive_style_and_cow(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t"
    _run(capsys, "create", path, "--name", "t", "--key", "id,n", "--partition-by", "city", "--type",
         "COPY_ON_WRITE", "--layout", "default", "--no-hive-style")
    (tmp_path / "in.csv").write_text("id,n,city\na,1,sf\na,2,sf\n")
    _run(capsys, "write", path, tmp_path / "in.csv")
    table = open_table(path)
    assert not table.config.is_mor and table.partitions() == ["sf"]
    assert sorted(table.read().column("_hoodie_record_key").to_pylist()) == ["id:a,n:1", "id:a,n:2"]


def _error(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> str:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, (captured.out, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


def test_user_mistakes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t"
    missing = tmp_path / "missing"
    assert "no such folder" in _error(capsys, "read", missing)
    assert "no such folder" in _error(capsys, "show", "timeline", missing)
    assert "no such file" in _error(capsys, "show", "footers", missing)
    assert "not a table" in _error(capsys, "read", tmp_path)
    assert "table_type" in _error(capsys, "create", path, "--name", "t", "--key", "id", "--type", "BOGUS")
    assert "key=value" in _error(capsys, "create", path, "--name", "t", "--key", "id", "--option", "novalue")
    assert "num_buckets" in _error(capsys, "create", path, "--name", "t", "--key", "id", "--buckets", "0")
    _run(capsys, "create", path, "--name", "t", "--key", "id", "--partition-by", "city")
    assert "already exists" in _error(capsys, "create", path, "--name", "t", "--key", "id")
    assert "no such file" in _error(capsys, "write", path, tmp_path / "nope.csv")
    (tmp_path / "rows.txt").write_text("id\na\n")
    assert "unknown file type" in _error(capsys, "write", path, tmp_path / "rows.txt")
    (tmp_path / "nokey.csv").write_text("uuid,city\na,sf\n")
    assert "record key column 'id'" in _error(capsys, "write", path, tmp_path / "nokey.csv")
    (tmp_path / "bad.csv").write_text('id,city\n"a,sf\nb\n')
    assert "cannot read csv file" in _error(capsys, "write", path, tmp_path / "bad.csv")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    assert "bad.parquet" in _error(capsys, "write", path, tmp_path / "bad.parquet")
    (tmp_path / "slash.csv").write_text("id,city\na,x/y\n")
    assert "partition" in _error(capsys, "write", path, tmp_path / "slash.csv")
    (tmp_path / "ok.csv").write_text("id,city\na,sf\n")
    _run(capsys, "write", path, tmp_path / "ok.csv")
    assert "unknown column 'nope'" in _error(capsys, "read", path, "--columns", "id,nope")
    assert "not an instant time" in _error(capsys, "read", path, "--as-of", "yesterday")
    assert "unknown output type" in _error(capsys, "read", path, "--out", tmp_path / "out.xlsx")
    assert "--limit must be 0" in _error(capsys, "read", path, "--limit", "-1")
    assert "cannot show 'bogus'" in _error(capsys, "show", "bogus", path)
    assert "at least 1 row" in _error(capsys, "demo", "--rows", "0", "--dir", tmp_path / "demo")
    assert "check: snapshot and time-travel reads equal" in _run(capsys, "demo", "--rows", "5", "--rounds", "0",
                                                                 "--dir", tmp_path / "d")
    assert "already exists" in _error(capsys, "demo", "--rows", "5", "--dir", tmp_path / "d")


@pytest.mark.parametrize("argv", [["frobnicate"], ["read"], ["write", "x"], ["write", "t", "f", "--op", "merge"],
                                  ["create", "t"], ["demo", "--rows", "many"]])
def test_argument_mistakes_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_every_command_and_option_has_help_text() -> None:
    import argparse

    from lsm_lab.cli.app import build_parser

    missing: list[tuple[str, str]] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                for name, sub in action.choices.items():
                    if not helps.get(name):
                        missing.append((path, name))
                    walk(sub, f"{path} {name}")
            elif not action.help and action.dest != "help":
                missing.append((path, action.dest))

    walk(build_parser(), "lsm-lab")
    assert missing == []


def test_every_feature_command_is_registered() -> None:
    """The feature packages' commands (and every benchmark) are always there: a broken import fails, not hides."""
    import argparse

    from lsm_lab.cli.app import build_parser

    def choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return dict(sub.choices)

    top = choices(build_parser())
    assert {"demo", "create", "write", "read", "show", "merge", "bench", "compact", "clean", "rollback",
            "savepoint", "restore", "archive", "lookup", "spark"} <= set(top)
    assert set(choices(top["bench"])) == {"merge", "interop", "lookup", "compaction", "peers", "storage", "latency",
                                          "cdc", "scan", "startup", "scale", "write-stream", "metadata"}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("verb", ["compact", "cluster"])
def test_dry_run_prints_the_plan_and_saves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   verb: str) -> None:
    """`--dry-run` prints what `--plan-only` would save, and leaves every file as it was (issue 34, item 7)."""
    import lsm_lab
    from lsm_lab.services import clustering, compaction

    root = tmp_path / "t"
    t = lsm_lab.create_table(root, name="t", record_key="id", num_buckets=2)
    t.insert([{"id": f"k{i}", "v": i} for i in range(40)])
    t.upsert([{"id": f"k{i}", "v": -i} for i in range(0, 40, 3)])
    before = _tree(root)
    assert main([verb, str(root), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[dry run]" in out and "dry run: nothing saved" in out
    assert _tree(root) == before                                      # not a byte written
    dry_compaction = compaction.plan(t) if verb == "compact" else None
    dry_clustering = clustering.plan(t) if verb == "cluster" else None
    assert (dry_compaction or dry_clustering) is not None
    assert main([verb, str(root), "--plan-only"]) == 0               # the saved plan is the dry run's
    out = capsys.readouterr().out
    assert "saved as" in out and "[requested]" in out
    saved = lsm_lab.open_table(root)
    if dry_compaction is not None:
        (_, plan), = compaction.plans(saved, include_completed=False)
        assert plan.operations == dry_compaction.operations
    if dry_clustering is not None:
        (_, cplan), = clustering.pending_plans(saved.active_timeline)
        assert [g.slices for g in cplan.groups] == [g.slices for g in dry_clustering.groups]
    with pytest.raises(SystemExit):
        main([verb, str(root), "--dry-run", "--plan-only"])       # one or the other


def test_dry_run_with_nothing_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import lsm_lab

    t = lsm_lab.create_table(tmp_path / "t", name="t", record_key="id", num_buckets=1)
    t.insert([{"id": "a", "v": 1}])
    assert main(["compact", str(t.path), "--dry-run"]) == 0
    assert capsys.readouterr().out.strip() == "nothing to compact"
