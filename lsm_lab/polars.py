"""polars: `scan_table(path)` — a `LazyFrame` whose projection, predicate and row limit reach `Table.scan`.

    pl ─ scan_table("/data/trips")                     polars' IO-plugin API (register_io_source)
           .filter((pl.col("city") == "pune") & (pl.col("uuid") == "k0042"))
           .select("uuid", "fare").head(10).collect()
              │ polars hands the source: with_columns, predicate (a pl.Expr), n_rows, batch_size
              ▼
    pushed_filter(predicate)  top-level AND conjuncts that are `col op literal` / `col.is_in([...])`
              │               on a string, integer or boolean column  ──►  [("city", "=", "pune"), ...]
              ▼
    Table.scan(columns=with_columns + the predicate's columns, filter=tuples, batch_size)
              │ partitions, record keys, statistics pruned (MOR-safe: table/scan.py); the tuples
              ▼ applied after the merge
    every batch ─► pl.DataFrame ─► .filter(predicate) (the whole polars predicate, always)
                                ─► .select(with_columns) ─► stop after n_rows

**No wrong row.**  The translated conjuncts are only a pruning hint with the same meaning in Arrow as in
polars for the types accepted: the polars predicate itself is applied to every batch afterwards, so an
expression the translation does not understand (or, or a function, a date) only reads more, never
returns different rows.  Floating-point columns take part only through `==` and `is_in` (polars orders
NaN above every number, Arrow's comparisons say false, and Parquet statistics leave NaN out), and
`is_null`/`is_not_null` are not translated (Hudi-style tuples have no null test).  The predicate is read
from polars' JSON serialisation of the expression (`Expr.meta.serialize(format="json")`, an unstable
format): whatever it does not recognise is left to polars.

**Streams.**  Batches come from `Scan.batches()` (on `lsm_tree`, the streaming merge inside a slice).
polars reads ahead on its own threads after a limit above the source is met, and a thread still inside
Python when the interpreter finalises aborts it ("FATAL: exception not rethrown"); so at exit the
sources are told to stop and exit waits until none is between two batches (`_Running`).

Simplified compared with polars' own `scan_delta` / `scan_iceberg`: no statistics are handed to polars
(no `count()` from metadata), and `OR` predicates are not pushed down.  Apache Hudi has no polars
connector; hudi-rs's Python reader returns whole record batches.

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import atexit
import io
import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lsm_lab.api import open_table
from lsm_lab.errors import InputError
from lsm_lab.storage import TablePath
from lsm_lab.timeline.instanttime import TimeLike

if TYPE_CHECKING:
    import polars as pl

_OPS = {"Eq": "=", "NotEq": "!=", "Lt": "<", "LtEq": "<=", "Gt": ">", "GtEq": ">="}
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_UNKNOWN = object()

class _Running:
    """Sources polars is running right now on its threads, and whether the process is ending.

    polars keeps pulling from a source on its own threads after a limit above it is met (it reads ahead),
    and a thread still inside lsm_lab's Python code when the interpreter finalises aborts the process
    ("FATAL: exception not rethrown").  At exit the sources are told to stop, and exit waits (a bounded
    time: one slice's read) until none is between two batches."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.exiting = False

    def enter(self) -> bool:
        with self.lock:
            if self.exiting:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.count -= 1

    def stop(self, timeout: float = 30.0) -> None:
        with self.lock:
            self.exiting = True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.count == 0:
                    return
            time.sleep(0.01)


_RUNNING = _Running()
atexit.register(_RUNNING.stop)


def scan_table(path: str | TablePath, *, as_of: TimeLike | None = None,
               storage_options: Mapping[str, Any] | None = None) -> pl.LazyFrame:
    """A polars `LazyFrame` over the table's snapshot (or `as_of`): `Table.scan` batch by batch.

    The table's latest commit is read at each `collect()` (unless `as_of` is given); its schema is the
    one when `scan_table` was called.  `storage_options` as for `open_table`."""
    import polars as pl  # optional: only when a polars frame is asked for
    from polars.io.plugins import register_io_source

    table = open_table(path, storage_options)
    read_time = table.resolve_time(as_of)  # checked now: a bad `as_of` fails here, not at collect()
    arrow_schema = table.read_context(read_time).full_schema
    schema = pl.from_arrow(arrow_schema.empty_table()).schema  # type: ignore[union-attr]

    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        return _batches(table, as_of, arrow_schema, with_columns, predicate, n_rows, batch_size)

    return register_io_source(source, schema=schema, explain_name="lsm_lab",
                              explain_detail=f"lsm_lab table {table.path}")


def _batches(table: Any, as_of: TimeLike | None, arrow_schema: pa.Schema, with_columns: list[str] | None,
             predicate: pl.Expr | None, n_rows: int | None, batch_size: int | None) -> Iterator[pl.DataFrame]:
    import polars as pl

    if n_rows is not None and n_rows <= 0:
        return
    wanted = list(arrow_schema.names) if with_columns is None else list(with_columns)
    if not wanted:  # a polars frame of no column has no rows: hand the first column, polars drops it
        wanted = list(arrow_schema.names[:1])
    needed = list(wanted)
    if predicate is not None:
        needed += [c for c in predicate.meta.root_names() if c not in needed]
    unknown = [c for c in needed if c not in arrow_schema.names]
    if unknown:
        raise InputError(f"unknown column{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                         f"the table has {', '.join(arrow_schema.names)}")
    tuples = pushed_filter(predicate, arrow_schema) if predicate is not None else []
    scan = table.scan(columns=needed, filter=tuples or None, as_of=as_of,
                      batch_size=batch_size if batch_size and batch_size > 0 else 65_536)
    left = n_rows
    batches = scan.batches()
    while True:
        if not _RUNNING.enter():  # the process is ending: stop (polars no longer needs the rows)
            return
        try:
            batch = next(batches, None)
        finally:
            _RUNNING.leave()
        if batch is None:
            return
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        if predicate is not None:
            frame = frame.filter(predicate)
        frame = frame.select(wanted)
        if left is not None:
            if frame.height >= left:
                yield frame.head(left)
                return
            left -= frame.height
        if frame.height:
            yield frame


# --------------------------------------------------------------------------- predicate → (col, op, value)
def pushed_filter(predicate: pl.Expr, schema: pa.Schema) -> list[tuple[str, str, Any]]:
    """The conjuncts of a polars predicate that mean the same as a Hudi-style `(column, op, value)` tuple
    (empty when none does).  Every row the predicate keeps satisfies each returned tuple."""
    try:
        tree = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # noqa: BLE001 - an expression polars cannot serialise: nothing is pushed
        return []
    out: list[tuple[str, str, Any]] = []
    for node in _conjuncts(tree):
        one = _tuple_of(node, schema)
        if one is not None:
            out.append(one)
    return out


def _conjuncts(node: Any) -> Iterator[Any]:
    binary = node.get("BinaryExpr") if isinstance(node, dict) else None
    if isinstance(binary, dict) and binary.get("op") in ("And", "LogicalAnd"):
        yield from _conjuncts(binary.get("left"))
        yield from _conjuncts(binary.get("right"))
    else:
        yield node


def _tuple_of(node: Any, schema: pa.Schema) -> tuple[str, str, Any] | None:
    if not isinstance(node, dict):
        return None
    if "BinaryExpr" in node:
        b = node["BinaryExpr"]
        op = _OPS.get(b.get("op"))
        if op is None:
            return None
        left, right = b.get("left"), b.get("right")
        if _column(left) is None and _column(right) is not None:
            left, right, op = right, left, _FLIPPED[op]
        col = _column(left)
        value = _literal(right)
        if col is None or value is _UNKNOWN or col not in schema.names:
            return None
        return (col, op, value) if _same_meaning(schema.field(col).type, op, [value]) else None
    if "Function" in node:
        f = node["Function"]
        fn = f.get("function")
        inputs = f.get("input") or []
        if not (isinstance(fn, dict) and isinstance(fn.get("Boolean"), dict) and "IsIn" in fn["Boolean"]
                and len(inputs) == 2):
            return None
        col = _column(inputs[0])
        values = _list_literal(inputs[1])
        if col is None or values is None or col not in schema.names or not values:
            return None
        return (col, "in", values) if _same_meaning(schema.field(col).type, "in", values) else None
    return None


def _column(node: Any) -> str | None:
    if isinstance(node, dict) and isinstance(node.get("Column"), str):
        return str(node["Column"])
    return None


def _literal(node: Any) -> Any:
    lit = node.get("Literal") if isinstance(node, dict) else None
    if not isinstance(lit, dict):
        return _UNKNOWN
    inner = lit.get("Scalar") or lit.get("Dyn")
    if not isinstance(inner, dict) or len(inner) != 1:
        return _UNKNOWN
    (kind, value), = inner.items()
    if kind in ("String", "Str") and isinstance(value, str):
        return value
    if kind in ("Boolean", "Bool") and isinstance(value, bool):
        return value
    if kind in ("Int", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64") \
            and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in ("Float", "Float32", "Float64") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return _UNKNOWN


def _list_literal(node: Any) -> list[Any] | None:
    """The values of a literal list (polars serialises it as an Arrow IPC stream of one column)."""
    lit = node.get("Literal") if isinstance(node, dict) else None
    scalar = lit.get("Scalar") if isinstance(lit, dict) else None
    raw = scalar.get("List") if isinstance(scalar, dict) else None
    if not (isinstance(raw, list) and all(isinstance(x, int) for x in raw)):
        return None
    try:
        with pa.ipc.open_stream(io.BytesIO(bytes(raw))) as reader:
            table = reader.read_all()
        if table.num_columns != 1:
            return None
        column = table.column(0)
        if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):  # one row holding the list
            values = column.to_pylist()[0] if len(column) == 1 else None
        else:  # the values, one per row (polars 2.x)
            values = column.to_pylist()
    except (pa.ArrowException, ValueError, TypeError):
        return None
    return list(values) if isinstance(values, list) else None


def _same_meaning(typ: pa.DataType, op: str, values: list[Any]) -> bool:
    """Whether Arrow evaluates `column op value` as polars does (nulls drop out in both)."""
    if any(v is None or (isinstance(v, float) and v != v) for v in values):
        return False
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return all(isinstance(v, str) for v in values)
    if pa.types.is_boolean(typ):
        return op in ("=", "!=", "in") and all(isinstance(v, bool) for v in values)
    if pa.types.is_integer(typ):
        return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    if pa.types.is_floating(typ):  # NaN: polars orders it above every number, Arrow says false
        return op in ("=", "in") and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return False


__all__ = ["pushed_filter", "scan_table"]
