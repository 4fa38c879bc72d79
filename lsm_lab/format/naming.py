"""File names of base files and log files: what each name says, in every dialect.

A data file's name carries its file group, the writer's task (write token), the
instant that wrote it and, for logs, a version:

    base file (L1)      <fileId>_<writeToken>_<instant>.parquet
    native logs (L0)    <fileId>_<writeToken>_<instant>_<version>.log.<format>       (Hudi table v10:
                        <fileId>_<writeToken>_<instant>_<version>.deletes.<format>    FileNameParser.
                        <fileId>_<writeToken>_<instant>_<version>.cdc.<format>        NATIVE_LOG_FILE_PATTERN)
    draft v2 logs       <fileId>_<writeToken>_<instant>_<version>.parquet            (RFC-103 draft, read;
                        <fileId>_<writeToken>_<instant>_<version>.delete.parquet      written to version 9)
    v1 log (L0)         .<fileId>_<instant>.log.<version>_<writeToken>               (#HUDI# blocks)

    e.g. 00000002-5c1d..-0_0-1-0_20261122001500123_1.parquet
         └ file id ──────┘ └tok┘ └ instant ───────┘ └ version

In a native name the kind of log (data, deletes, cdc) is the extension and the
file format its suffix: the name alone says what the file holds.  Upstream's
grammar forbids '.' and '_' in the file id and '_' in the instant.

Names are parsed by regular expressions anchored at both ends, so a stray file
(`.hoodie_partition_metadata`, a temp file) is never mistaken for data.  For v1
logs of table version 6 the `<instant>` is the base file's instant, for 8+ the
writing deltacommit's (format page, section 4).

This is the one grammar of data file names: the table's listing, the v1 log
reader and writer, compaction plans and the tests all parse names here.  It is
checked against every file name in `data/hudi-log-files/` and
`data/hudi-tables/*.zip` (tests/test_naming.py).

Simplified compared with Apache Hudi: ORC and HFile base files are recognised
only so that a clear "not supported" error can name them.

Taught in: notebooks/01_build_a_table.ipynb
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from lsm_lab.errors import InputError

_T = r"\d{14}(?:\d{3})?"
_TOKEN = r"\d+-\d+-\d+"
_BASE = re.compile(rf"^(?P<fid>[^/]+?)_(?P<tok>{_TOKEN})_(?P<t>{_T})\.(?P<ext>parquet|orc|hfile|lance)$")
_V2_LOG = re.compile(
    rf"^(?P<fid>[^/]+?)_(?P<tok>{_TOKEN})_(?P<t>{_T})_(?P<ver>\d+)"
    rf"(?P<kind>\.delete|\.deletes|\.log|\.cdc)?\.parquet$"
)
_NATIVE_LOG = re.compile(
    rf"^(?P<fid>[^._/]+)_(?P<tok>{_TOKEN})_(?P<t>[^_/]+)_(?P<ver>\d+)\.(?P<kind>log|deletes|cdc)\.(?P<fmt>[^./]+)$"
)
NATIVE_DATA, NATIVE_DELETES, NATIVE_CDC = "log", "deletes", "cdc"
_V1_LOG = re.compile(rf"^\.(?P<fid>[^/]+?)_(?P<t>{_T})\.log\.(?P<ver>\d+)(?:_(?P<tok>{_TOKEN}))?(?P<cdc>\.cdc)?$")


@dataclass(frozen=True)
class FileName:
    """What a data file's name says.

    kind: "base" | "log";  log_format: 1 (#HUDI# blocks) or 2 (native Parquet);
    content: "data" | "delete" | "cdc";  ext: "parquet", "orc", "hfile", "lance".
    """

    name: str
    file_id: str
    instant: str
    kind: str
    write_token: str = ""
    version: int = 0
    log_format: int = 0
    content: str = "data"
    ext: str = "parquet"

    @property
    def is_base(self) -> bool:
        return self.kind == "base"

    @property
    def is_log(self) -> bool:
        return self.kind == "log"

    @property
    def is_delete(self) -> bool:
        return self.content == "delete"


@functools.lru_cache(maxsize=65_536)  # a name's parse never changes (FileName is frozen); views parse the same names
def parse(name: str) -> FileName | None:
    """Parse a data file name; None when the name is not a Hudi/lsm_lab data file."""
    m = _NATIVE_LOG.match(name)
    if m and re.fullmatch(_T, m.group("t")):
        content = {NATIVE_DATA: "data", NATIVE_DELETES: "delete", NATIVE_CDC: "cdc"}[m.group("kind")]
        return FileName(name, m.group("fid"), m.group("t"), "log", m.group("tok"), int(m.group("ver")), 2, content,
                        m.group("fmt"))
    m = _V2_LOG.match(name)
    if m:
        kind = m.group("kind") or ""
        content = {"": "data", ".log": "data", ".delete": "delete", ".deletes": "delete", ".cdc": "cdc"}[kind]
        return FileName(name, m.group("fid"), m.group("t"), "log", m.group("tok"), int(m.group("ver")), 2, content)
    m = _BASE.match(name)
    if m:
        return FileName(name, m.group("fid"), m.group("t"), "base", m.group("tok"), 0, 0, "data", m.group("ext"))
    m = _V1_LOG.match(name)
    if m:
        content = "cdc" if m.group("cdc") else "data"
        return FileName(name, m.group("fid"), m.group("t"), "log", m.group("tok") or "", int(m.group("ver")), 1,
                        content, "log")
    return None


def write_token(task: int = 0, stage: int = 0, attempt: int = 0) -> str:
    """`<taskPartitionId>-<stageId>-<attemptId>` (format page, section 1)."""
    return f"{task}-{stage}-{attempt}"


def base_file_name(file_id: str, token: str, instant: str) -> str:
    return f"{file_id}_{token}_{instant}.parquet"


def log_file_name(file_id: str, token: str, instant: str, version: int = 1, *, delete: bool = False,
                  native: bool = False) -> str:
    """A v2 log file name; `delete=True` for a delete log.

    `native=True` (table version 10) gives upstream's name, `…_<v>.log.parquet` /
    `…_<v>.deletes.parquet`; otherwise the RFC-103 draft's `…_<v>.parquet` / `….delete.parquet`.
    """
    if native:
        return native_log_file_name(file_id, token, instant, version, NATIVE_DELETES if delete else NATIVE_DATA)
    suffix = ".delete.parquet" if delete else ".parquet"
    return f"{file_id}_{token}_{instant}_{version}{suffix}"


def native_log_file_name(file_id: str, token: str, instant: str, version: int, kind: str = NATIVE_DATA,
                         file_format: str = "parquet") -> str:
    """Upstream Hudi's native log name `<fileId>_<writeToken>_<instant>_<version>.<kind>.<format>`."""
    name = f"{file_id}_{token}_{instant}_{version}.{kind}.{file_format}"
    if not _NATIVE_LOG.match(name):
        raise InputError(f"not a valid native log file name: {name!r} (the file id may hold no '.' or '_')")
    return name


def v1_log_file_name(file_id: str, instant: str, version: int, token: str) -> str:
    """A v1 (#HUDI# blocks) log file name, `.<fileId>_<instant>.log.<version>_<writeToken>`; InputError for a bad part."""
    if not file_id or "/" in file_id or "\\" in file_id or file_id.startswith("."):
        raise InputError(f"bad file id {file_id!r} for a v1 log file name")
    if not re.fullmatch(_T, instant):
        raise InputError(f"bad instant {instant!r} for a v1 log file name (14 or 17 digits)")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(f"log version must be an int >= 1, got {version!r}")
    if not re.fullmatch(_TOKEN, token):
        raise InputError(f"write token must look like '<task>-<stage>-<attempt>', got {token!r}")
    name = f".{file_id}_{instant}.log.{version}_{token}"
    parsed = parse(name)
    if parsed is None or (parsed.file_id, parsed.instant, parsed.version) != (file_id, instant, version):
        raise InputError(f"file id {file_id!r} does not give an unambiguous v1 log file name")
    return name
