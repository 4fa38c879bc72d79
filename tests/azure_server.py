"""A real Azure Blob Storage endpoint for tests: Azurite on 127.0.0.1 and a free port.

Azurite is Microsoft's Azure Storage emulator (an npm package). `.ci/run`
installs it into the repository's ignored `.tools/azurite/` (or set
`LSM_LAB_AZURITE` to an `azurite-blob` executable, or put one on PATH); without
it the Azure tests are skipped with a message saying how to get it.

Used as a pytest plugin (see `conftest.py`): the session fixture
`azure_server` starts one blob service for the whole run, in memory, with
telemetry off (it would try to reach the internet), and stops it at the end;
`new_container()` makes a fresh container and `options()` gives the
`storage_options` that point lsm_lab at it. Traffic stays on the loopback
address. The account is Azurite's well-known development account
(`devstoreaccount1`); its key is public and fixed by Azurite.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ACCOUNT = "devstoreaccount1"
#: Azurite's documented development key (not a secret: every Azurite accepts it)
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
REPO = Path(__file__).resolve().parent.parent


def azurite_executable() -> str | None:
    """`$LSM_LAB_AZURITE`, else `.tools/azurite/node_modules/.bin/azurite-blob`, else `azurite-blob` on PATH."""
    env = os.environ.get("LSM_LAB_AZURITE")
    if env:
        return env
    local = REPO / ".tools" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if local.exists():
        return str(local)
    return shutil.which("azurite-blob")


@dataclass
class AzureServer:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def options(self) -> dict[str, str]:
        return {"azure_storage_account_name": ACCOUNT, "azure_storage_account_key": KEY,
                "azure_endpoint": self.endpoint, "azure_allow_http": "true"}

    def env(self) -> dict[str, str]:
        """The same settings as the standard `AZURE_*` variables (for worker processes)."""
        return {"AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": KEY,
                "AZURE_STORAGE_ENDPOINT": self.endpoint, "AZURE_ALLOW_HTTP": "true"}

    def new_container(self) -> str:
        """Create a container with a fresh name and return the name."""
        import pyarrow.fs as pafs

        name = f"t-{uuid.uuid4().hex[:16]}"
        fs = pafs.AzureFileSystem(account_name=ACCOUNT, account_key=KEY,
                                  blob_storage_authority=f"127.0.0.1:{self.port}", blob_storage_scheme="http")
        fs.create_dir(name)
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(executable: str, tmp: Path) -> AzureServer:
    port = _free_port()
    log = open(tmp / "azurite.log", "wb")  # noqa: SIM115 - the server's output, open while it runs
    process = subprocess.Popen(
        [executable, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
         "--disableTelemetry", "--skipApiVersionCheck", "--loose", "--silent"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"azurite exited with {process.returncode}: {(tmp / 'azurite.log').read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return AzureServer(port, process)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("azurite did not listen within 30 s")


@pytest.fixture(scope="session")
def azure_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzureServer]:
    """Azurite's blob service on 127.0.0.1, shared by the whole test run (stopped at the end)."""
    executable = azurite_executable()
    if executable is None:
        pytest.skip("Azurite is not installed: `.ci/run` installs it (npm install --prefix .tools/azurite "
                    "azurite), or set LSM_LAB_AZURITE to an azurite-blob executable")
    server = start(executable, tmp_path_factory.mktemp("azurite"))
    try:
        yield server
    finally:
        server.stop()
