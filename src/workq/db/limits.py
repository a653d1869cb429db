"""LIMIT and OFFSET written into SQLite's SQL as numbers, not bound as parameters.

A SQLite built with STAT4 (the bundled library, db/sqlite.py) lets a bound LIMIT or OFFSET
steer the query plan, so it prepares the statement again whenever one is bound: about
15 us more on every ready query and claim, measured. Written as numbers, each distinct
limit is one statement that SQLite's statement cache keeps prepared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import literal
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.sql.selectable import Select

_TOKEN = re.compile(r"__\[POSTCOMPILE_(\w+)\]")


class LiteralLimits(SQLiteCompiler):
    """SQLite's compiler, with LIMIT and OFFSET rendered at execution (SQLAlchemy's
    "post-compile" parameters) rather than bound."""

    def limit_clause(self, select: Select[Any], **kw: Any) -> str:
        kw["literal_execute"] = True
        text = ""
        if select._limit_clause is not None:
            text += "\n LIMIT " + self.process(select._limit_clause, **kw)
        if select._offset_clause is not None:
            if select._limit_clause is None:
                text += "\n LIMIT " + self.process(literal(-1))
            text += " OFFSET " + self.process(select._offset_clause, **kw)
        return text


def has_literals(sql: str) -> bool:
    return "__[POSTCOMPILE_" in sql


def expand(sql: str, params: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    """``sql`` with its post-compile tokens replaced by their (integer) values, and the
    names it replaced (no longer parameters).

    Raises:
        TypeError: a value is not an integer (a LIMIT or OFFSET always is).
    """
    names: list[str] = []

    def number(found: re.Match[str]) -> str:
        value = params[found.group(1)]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{found.group(1)} must be an integer, not {value!r}")
        names.append(found.group(1))
        return str(value)

    return _TOKEN.sub(number, sql), tuple(dict.fromkeys(names))
