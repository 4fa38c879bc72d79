"""Argument checks: a wrong argument to the public API is an `InputError` naming it, never a deep traceback.

Python does not check the types of arguments, so without these a careless call
fails far from the mistake (`create_table(record_key=123)` → "'int' object is
not iterable"), or worse, is silently accepted (`num_buckets=2.7` truncated to
2, `columns="k"` read as the list `["k"]`... of characters).  Each public entry
point calls the checks below first:

    int_arg(2.7, "num_buckets", minimum=1)      → InputError: num_buckets must be an integer, not 2.7
    columns_arg("k")                            → InputError: columns must be a list of column names
    path_arg(None)                              → InputError: path must be a str or os.PathLike, not None

Simplified compared with Apache Hudi: Hudi validates configs through its
ConfigProperty registry; lsm_lab checks the handful of arguments its API has.

Taught in: no chapter (argument checks behind every public call; README, Errors)
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lsm_lab.errors import InputError


def path_arg(value: Any, name: str = "path") -> Path:
    """A table path: a non-empty str or os.PathLike."""
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise InputError(f"{name} must be a non-empty str or os.PathLike, not {value!r}")
    if not isinstance(os.fspath(value), str):
        raise InputError(f"{name} must be a str or os.PathLike of str, not {value!r}")
    if "\x00" in os.fspath(value):  # no file system takes it: os would raise a bare ValueError
        raise InputError(f"{name} {os.fspath(value)!r} contains a NUL character")
    return Path(value)


def int_arg(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (not a bool, not a float, not a string of digits), at least `minimum`, at most `maximum`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer, not {value!r}")
    if minimum is not None and int(value) < minimum:
        raise InputError(f"{name} must be at least {minimum}, not {value!r}")
    if maximum is not None and int(value) > maximum:
        raise InputError(f"{name} must be at most {maximum:,}, not {value!r}")
    return int(value)


def str_arg(value: Any, name: str, *, optional: bool = False, choices: Sequence[str] | None = None) -> str | None:
    """A non-empty string (or None when `optional`), one of `choices` when given."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{name} must be a non-empty string{' or None' if optional else ''}, not {value!r}")
    if choices is not None and value not in choices:
        raise InputError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return value


def fields_arg(value: Any, name: str, *, optional: bool = False) -> None:
    """A field name or a list of field names (strings), as `record_key` and `partition_by` take."""
    if value is None and optional:
        return
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or isinstance(items, bytes) or not all(isinstance(v, str) for v in items):
        raise InputError(f"{name} must be a field name or a list of field names, not {value!r}")
    if not optional and not any(v.strip() for v in items):
        raise InputError(f"{name} must name at least one field, not {value!r}")


def bool_arg(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"{name} must be True or False, not {value!r}")
    return value


def columns_arg(value: Any, name: str = "columns") -> list[str] | None:
    """None, or a list/tuple of column names (a bare string is refused: it is not a list of one)."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence) or not all(isinstance(c, str) for c in value):
        raise InputError(f"{name} must be a list of column names (e.g. [{value!r}]), not {value!r}"
                         if isinstance(value, str) else f"{name} must be a list of column names, not {value!r}")
    return list(value)


def options_arg(value: Any, name: str = "options") -> dict[str, str]:
    """Extra properties: string keys, values that are strings, numbers or booleans (booleans as true/false)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{name} must be a mapping of property names to values, not {value!r}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise InputError(f"{name}: property names must be non-empty strings, not {k!r}")
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, str | numbers.Number):
            out[k] = str(v)
        else:
            raise InputError(f"{name}: property {k!r} must be a string, number or boolean, not {v!r}")
    return out


__all__ = ["bool_arg", "columns_arg", "fields_arg", "int_arg", "options_arg", "path_arg",
           "str_arg"]
