"""The symlink guard of local writes: a file lsm_lab creates, replaces or deletes has its folder inside its table.

    table root (resolved) ─┬─ .hoodie/.heartbeat/<t>     folder resolves inside: write
                           └─ p=a ──► /elsewhere         a link out of the table: UnsafePathError

`checked(path)` resolves the deepest existing part of the file's folder (links
followed) and requires it inside the resolved table root; the final name is not
resolved (rename, link and unlink do not follow it; `paths.open_nofollow`
refuses it).  The root is found without following links (`table_root`).  This
module sits below `storage/` (whose local backend uses it) and `paths.py`
(which re-exports it with the object-store cases); see `paths.py` for the rule
as a whole.

Simplified compared with Apache Hudi: Hudi writes through Hadoop file systems,
which follow links like any client; lsm_lab refuses a link out of the table.

Taught in: notebooks/02_timeline.ipynb
"""

from __future__ import annotations

import os
from pathlib import Path

from lsm_lab.errors import UnsafePathError

META_FOLDER = ".hoodie"


def table_root(path: str | os.PathLike[str]) -> Path | None:
    """The local table `path` belongs to (None: not inside a table), found without following links.

    The folder before the first `.hoodie` component of `path`, else the outermost
    ancestor that holds a `.hoodie` entry (outermost: a partition folder linked to
    another table's root is still judged against this table).
    """
    full = Path(os.path.abspath(path))
    parts = full.parts
    if META_FOLDER in parts:
        return Path(*parts[: parts.index(META_FOLDER)])
    found = None
    for folder in full.parents:
        if os.path.lexists(os.path.join(folder, META_FOLDER)):
            found = folder
    return found


def _first_link(root: Path, path: Path) -> Path:
    """The first component of `path` below `root` that is a symbolic link (`path` itself if none is)."""
    current = root
    for piece in path.relative_to(root).parts:
        current = current / piece
        if os.path.islink(current):
            return current
    return path


def unsafe(root: Path, probe: Path, target: str, root_real: str, path: Path) -> UnsafePathError:
    link = _first_link(root, probe)
    where = f"is a symbolic link to {os.readlink(link)!r}" if os.path.islink(link) else f"resolves to {target}"
    return UnsafePathError(f"{where}, outside the table folder {root_real}; lsm_lab does not write, delete "
                           f"or list through a link out of the table (needed for {path})", path=link)


def checked(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Path:
    """`path` (absolute) when its folder resolves inside its table: safe to create, replace or delete its name.

    `root` defaults to `table_root(path)`; outside any table nothing is checked.
    The deepest existing part of the folder is resolved (symlinks followed) and
    must lie in the resolved root, else UnsafePathError naming the link.  The
    final name is not resolved: rename, link and unlink do not follow it, and
    `open_nofollow` refuses it.
    """
    full = Path(os.path.abspath(path))
    top = Path(os.path.abspath(root)) if root is not None else table_root(full)
    if top is None:
        return full
    root_real = os.path.realpath(top)
    if not within(str(full), str(top)):
        raise UnsafePathError(f"is not inside the table folder {top}", path=full)
    probe = full.parent
    while not os.path.lexists(probe) and probe != top:
        probe = probe.parent
    target = os.path.realpath(probe)
    if not within(target, root_real):
        raise unsafe(top, probe, target, root_real, full)
    return full




def within(path: str, root: str) -> bool:
    """`path` is `root` or below it (both absolute, compared as text)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def make_local_folders(folder: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> Path:
    """`mkdir -p folder` after `checked` (an existing part of it that links out of its table: UnsafePathError)."""
    full = checked(Path(os.path.abspath(folder)) / "_", root=root).parent
    full.mkdir(parents=True, exist_ok=True)
    return full


__all__ = ["META_FOLDER", "checked", "make_local_folders", "table_root", "unsafe", "within"]
