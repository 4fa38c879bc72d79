"""Fixtures shared by every test module.

    tmp_table(**kw)     a new, empty lsm_lab table in a fresh temporary folder
    shared_dir          the real Hudi files shipped in data/ (hudi-tables/*.zip, hudi-log-files/)
    real_table(name)    one table of shared/hudi-tables/*.zip, unzipped once per session

Keep this file small and general: fixtures for one module belong in that module.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from azure_server import AzureServer, azure_server  # noqa: F401 - fixture: Azure Blob Storage (Azurite) on 127.0.0.1
from s3_server import S3Server, s3_bucket, s3_server  # noqa: F401 - fixtures: a real S3 server (moto) on 127.0.0.1

import lsm_lab

REPO = Path(__file__).resolve().parents[1]


def _find_shared() -> Path | None:
    from lsm_lab.interop.hudi_tables import find_shared

    return find_shared(REPO)


@pytest.fixture()
def tmp_table(tmp_path: Path) -> Callable[..., lsm_lab.Table]:
    """Factory: `tmp_table(record_key="id", ordering_field="ts", ...)` → a new Table.

    Every call makes a new table in its own folder under `tmp_path`; keyword
    arguments go to `lsm_lab.create_table` (defaults: name "t", key "id").
    """
    count = 0

    def make(**kw: Any) -> lsm_lab.Table:
        nonlocal count
        count += 1
        kw.setdefault("name", "t")
        kw.setdefault("record_key", "id")
        return lsm_lab.create_table(tmp_path / f"table{count}", **kw)

    return make


def _remote_tables(root: str, options: dict[str, str]) -> Callable[..., lsm_lab.Table]:
    """A factory of tables `<root>/table1`, `<root>/table2`, ... on an object store."""
    count = 0

    def make(**kw: Any) -> lsm_lab.Table:
        nonlocal count
        count += 1
        kw.setdefault("name", "t")
        kw.setdefault("record_key", "id")
        return lsm_lab.create_table(f"{root}/table{count}", storage_options=options, **kw)

    return make


@pytest.fixture()
def s3_table(s3_server: S3Server) -> Callable[..., lsm_lab.Table]:  # noqa: F811 - the fixture above
    """Factory like `tmp_table`, but every table lives in a fresh bucket of the test S3 server."""
    return _remote_tables(f"s3://{s3_server.new_bucket()}", s3_server.options())


@pytest.fixture()
def azure_table(azure_server: AzureServer) -> Callable[..., lsm_lab.Table]:  # noqa: F811 - the fixture above
    """Factory like `tmp_table`, but every table lives in a fresh container of the test Azure endpoint (Azurite)."""
    return _remote_tables(f"az://{azure_server.new_container()}", azure_server.options())


@pytest.fixture(params=["local", "s3", "azure"])
def any_table(request: pytest.FixtureRequest) -> Callable[..., lsm_lab.Table]:
    """`tmp_table`, `s3_table` or `azure_table`: the test runs once per storage backend."""
    make: Callable[..., lsm_lab.Table] = request.getfixturevalue(
        f"{request.param}_table" if request.param != "local" else "tmp_table")
    return make


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The real Hudi files: `<repo>/data` (shipped with the repository) or `$LSM_LAB_SHARED`."""
    path = _find_shared()
    if path is None:
        pytest.fail("no real Hudi files: data/hudi-tables is missing from this checkout")
    return path


@pytest.fixture(scope="session")
def real_table(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Factory: `real_table("v8_trips_8i3u1d")` → the unzipped table folder (read-only use, please)."""
    root = tmp_path_factory.mktemp("hudi-tables")
    zips = sorted((shared_dir / "hudi-tables").glob("*.zip"))

    def get(name: str) -> Path:
        target = root / name
        if target.is_dir():
            return target
        for z in zips:
            with zipfile.ZipFile(z) as zf:
                members = [m for m in zf.namelist() if m.startswith(f"{name}/")]
                if members:
                    zf.extractall(root, members=members)  # skips __MACOSX/ resource forks
                    return target
        pytest.fail(f"no table {name!r} in {shared_dir / 'hudi-tables'}: a test names a table the repository does not ship")

    return get


@pytest.fixture()
def hand_edited(monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch off the committed-size check (fsview rule 7) for a test that rewrites a committed file by hand
    to reach a check behind it (a bloom, a footer's claim, a v1 block): the size check would refuse it first."""
    import lsm_lab.table.state

    monkeypatch.setattr(lsm_lab.table.state.TableState, "own_files", property(lambda self: False))


# --------------------------------------------------------------------------- skips are accounted for
# With LSM_LAB_STRICT_SKIPS=1 (.ci/run sets it) a skip that tests/allowed_skips.toml does not list fails
# the run: a tool that failed to install must not turn its tests into silent passes.
_SKIPPED: list[tuple[str, str]] = []


def _allowed_skips() -> list[dict[str, str]]:
    import tomllib

    with open(Path(__file__).with_name("allowed_skips.toml"), "rb") as f:
        return list(tomllib.load(f)["skip"])


def _skip_is_allowed(nodeid: str, reason: str, allowed: list[dict[str, str]]) -> bool:
    from fnmatch import fnmatchcase

    return any(fnmatchcase(nodeid, a["test"]) and a["reason"] in reason for a in allowed)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        _SKIPPED.append((report.nodeid, reason))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    import os

    if os.environ.get("LSM_LAB_STRICT_SKIPS") != "1" or not _SKIPPED:
        return
    allowed = _allowed_skips()
    unexpected = [(n, r) for n, r in _SKIPPED if not _skip_is_allowed(n, r, allowed)]
    if unexpected:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"{len(unexpected)} skip(s) not in tests/allowed_skips.toml (LSM_LAB_STRICT_SKIPS=1):"]
        lines += [f"  {n}: {r}" for n, r in unexpected]
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
