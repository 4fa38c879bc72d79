"""A filter written as text (`lsm-lab read --filter`) → the `(column, op, value)` tuples `read`/`scan` take.

    "fare > 50 and city = 'chennai' and id in ('a', 'b')"
        │ tokens: names, operators, literals, `(`, `,`, `)`   (one regular expression; nothing is evaluated)
        ▼
    [("fare", ">", 50), ("city", "=", "chennai"), ("id", "in", ["a", "b"])]

The grammar, all of it:

    filter    := condition ("and" condition)*
    condition := column op literal  |  column ["not"] "in" "(" literal ("," literal)* ")"
    op        := "=" | "==" | "!=" | "<" | "<=" | ">" | ">="
    literal   := 'text' | "text" | integer | decimal | true | false
    column    := letters, digits, `_`, `.` (not first: a digit) | `any text in backquotes`

Keywords are case-insensitive.  Anything else — `or`, parentheses around
conditions, functions, arithmetic, a column compared with a column — is an
`InputError` naming what was found and where.  The text is never evaluated as
Python or SQL.

Simplified compared with Apache Hudi: Hudi takes filters as Spark SQL
expressions; this is a conjunction of comparisons, which is also what the
pruning layers understand (`scan.prune_partitions`, `predicate.key_predicate`,
`scan.stats_prune`).

Taught in: no chapter (README, "Reading an lsm_lab table from other engines")
"""

from __future__ import annotations

import re
from typing import Any

from lsm_lab.errors import InputError
from lsm_lab.table.predicate import FilterTuple

_TOKEN = re.compile(r"""
    \s*(?:
      (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
    | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)(?![\w.])
    | (?P<op>==|!=|<>|<=|>=|=|<|>)
    | (?P<punct>[(),])
    | (?P<quoted>`[^`]+`)
    | (?P<word>[A-Za-z_][\w.]*)
    | (?P<bad>\S)
    )""", re.VERBOSE)

_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:  # only trailing blanks left
            break
        kind = m.lastgroup or "bad"
        value = m.group(kind)
        out.append((kind, value, m.start(kind) + 1))
        pos = m.end()
    return out


def _unquote(text: str) -> str:
    quote = text[0]
    body = text[1:-1].replace(quote * 2, quote)
    return re.sub(r"\\(.)", r"\1", body)


def parse_filter(text: str) -> list[FilterTuple]:
    """The `(column, op, value)` conjunction a filter text means (see the module docstring for the grammar);
    `InputError` naming the first thing that is not part of it."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("the filter is empty: write conditions such as \"fare > 50 and city = 'chennai'\"")
    tokens = _tokens(text)
    pos = 0

    def where() -> str:
        return f"at character {tokens[pos][2]}" if pos < len(tokens) else "at the end"

    def fail(expected: str) -> InputError:
        found = repr(tokens[pos][1]) if pos < len(tokens) else "nothing"
        return InputError(f"invalid filter {text!r}: expected {expected} {where()}, found {found} "
                          "(the grammar: column op value [and …]; ops = == != < <= > >= in (…) not in (…); "
                          "values 'text', numbers, true, false)")

    def literal() -> Any:
        nonlocal pos
        if pos >= len(tokens):
            raise fail("a value")
        kind, value, _ = tokens[pos]
        if kind == "string":
            pos += 1
            return _unquote(value)
        if kind == "number":
            pos += 1
            return float(value) if any(c in value for c in ".eE") else int(value)
        if kind == "word" and value.lower() in ("true", "false"):
            pos += 1
            return value.lower() == "true"
        if kind == "word" and value.lower() == "null":
            raise InputError(f"invalid filter {text!r}: null {where()}: a comparison with null matches no row")
        raise fail("a value ('text', a number, true or false)")

    out: list[FilterTuple] = []
    while True:
        if pos >= len(tokens):
            raise fail("a column name")
        kind, value, _ = tokens[pos]
        if kind == "quoted":
            column = value[1:-1]
        elif kind == "word" and value.lower() not in _KEYWORDS:
            column = value
        else:
            raise fail("a column name")
        pos += 1
        if pos < len(tokens) and tokens[pos][0] == "op":
            op = tokens[pos][1]
            op = {"==": "=", "<>": "!="}.get(op, op)
            pos += 1
            out.append((column, op, literal()))
        elif pos < len(tokens) and tokens[pos][0] == "word" and tokens[pos][1].lower() in ("in", "not"):
            negated = tokens[pos][1].lower() == "not"
            pos += 1
            if negated:
                if pos >= len(tokens) or tokens[pos][1].lower() != "in":
                    raise fail("'in' after 'not'")
                pos += 1
            if pos >= len(tokens) or tokens[pos][1] != "(":
                raise fail("'(' opening the list of values")
            pos += 1
            values = [literal()]
            while pos < len(tokens) and tokens[pos][1] == ",":
                pos += 1
                values.append(literal())
            if pos >= len(tokens) or tokens[pos][1] != ")":
                raise fail("',' or ')' in the list of values")
            pos += 1
            out.append((column, "not in" if negated else "in", values))
        else:
            raise fail("an operator (= == != < <= > >= in, not in)")
        if pos >= len(tokens):
            return out
        if tokens[pos][0] == "word" and tokens[pos][1].lower() == "and":
            pos += 1
            continue
        if tokens[pos][0] == "word" and tokens[pos][1].lower() == "or":
            raise InputError(f"invalid filter {text!r}: 'or' {where()} is not supported: conditions are joined "
                             "by 'and' only (run one read per alternative)")
        raise fail("'and' or the end of the filter")


__all__ = ["parse_filter"]
