"""The store's SQL, kept as resource files (``sql/*.sql``) as the other backends keep theirs.

A statement is read once and cached; each file holds one statement, named for
what it does (``take_over_run.sql``), and ``_schema.py`` reads the tables' DDL
the same way.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["statement"]


@cache
def statement(name: str) -> str:
    """The text of ``sql/<name>.sql``, without its trailing newline."""
    return resources.files(__package__).joinpath("sql", f"{name}.sql").read_text(encoding="utf-8").strip()
