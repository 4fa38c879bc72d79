"""Tests that damage or inspect an instant file by hand: read it in whatever encoding it has, write it back as JSON.

Instant files of tables of version 8 and later are Avro object container files, as upstream writes them
(timeline/metadata.py, timeline/avro_models.py); version 6 commit metadata is JSON. lsm_lab reads both, so a
test that edits an instant file may write its edit back as JSON and the table reads it as before.
"""

from __future__ import annotations

from typing import Any

from localpath import local

from lsm_lab.storage import TablePath
from lsm_lab.timeline.metadata import decode_instant_content, encode_json


def read_instant(path: TablePath) -> dict[str, Any]:
    """The content of an instant file (JSON or Avro), decoded."""
    return decode_instant_content(local(path).read_bytes(), path=str(path))


def write_instant_json(path: TablePath, content: dict[str, Any]) -> None:
    """Replace an instant file with `content` as JSON (which every reader of lsm_lab accepts)."""
    local(path).write_bytes(encode_json(content))
