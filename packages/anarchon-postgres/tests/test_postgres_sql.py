"""The schema's SQL as resource files: rendered for one checked, quoted schema, nothing left unfilled."""

from __future__ import annotations

import re

import pytest

from anarchon_postgres._backfill import BackfillStatements
from anarchon_postgres._control import _statements as control_statements
from anarchon_postgres._groups import _statements as group_statements
from anarchon_postgres._guarantees import _QUERY_FILE
from anarchon_postgres._schedules import _statements as schedule_statements
from anarchon_postgres._schema import _MIGRATIONS, SCHEMA_VERSION, _resource, quote_schema, render_sql
from anarchon_postgres._statements import Statements


def test_every_migration_renders_for_a_quoted_schema_with_no_placeholder_left():
    assert len(_MIGRATIONS) == SCHEMA_VERSION
    for migration in _MIGRATIONS:
        sql = migration(quote_schema("app_cron"))
        assert '"app_cron".' in sql
        assert not re.search(r"@[a-z_]+@|-- @include", sql), migration.__name__


def test_the_claim_function_is_included_where_migrations_ask_for_it():
    first, second = (m(quote_schema("s")) for m in _MIGRATIONS[:2])
    assert first.count('CREATE OR REPLACE FUNCTION "s".claim(') == 1
    assert second.count('CREATE OR REPLACE FUNCTION "s".claim(') == 1 and 'DROP FUNCTION "s".claim(' in second


@pytest.mark.parametrize("bad", ["app_cron", '"a; DROP TABLE x"', '"pg_catalog"', '"1abc"'])
def test_render_sql_takes_only_a_schema_quoted_by_quote_schema(bad):
    with pytest.raises(ValueError, match="schema"):
        render_sql("migration_3.sql", bad)


def test_every_statement_renders_for_a_quoted_schema_with_no_placeholder_left():
    quoted = quote_schema("app_cron")
    every = {
        **vars(Statements.for_schema(quoted)),
        **{f"backfill.{k}": v for k, v in vars(BackfillStatements.for_schema(quoted)).items()},
        **{f"control.{k}": v for k, v in vars(control_statements("app_cron")).items()},
        **{f"schedules.{k}": v for k, v in vars(schedule_statements("app_cron")).items()},
        **{f"groups.{k}": v for k, v in vars(group_statements("app_cron")).items()},
    }
    for name, sql in every.items():
        assert '"app_cron".' in sql or name in ("now_ms", "control.notify"), name  # a notice touches no table
        assert not re.search(r"@[a-z_]+@|-- @include", sql), name


def test_the_guarantees_query_names_no_schema_and_is_sent_as_its_file_reads():
    """It reads only the server's settings and pg_stat_replication, so ``guarantees()`` sends the raw file."""
    sql = _resource(_QUERY_FILE)
    assert "FROM pg_stat_replication" in sql
    assert not re.search(r"@[a-z_]+@|-- @include", sql)
