"""The plans MariaDB makes for a test's queries, and a check that none reads a whole big
table: the test of a hot query names its tables and seeds them with enough rows
(``insert_series``, thousands in a statement) and fresh statistics (``analyze``) that the
optimizer picks the plan a big site gets; on a table of a few rows it may read them all,
rightly. ``ANALYZE TABLE`` commits, so such a test runs with
``@pytest.mark.django_db(transaction=True)``.

    insert_series("orders_order", 30_000, {"voucher_id": str(voucher.pk), ...})
    analyze("orders_order")
    with CaptureQueriesContext(connection) as captured:
        client.get("/admin/orders/order/")
    assert_no_full_scan(captured, tables=["orders_order"])
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db import connection
from django.db.models import QuerySet
from django.test.utils import CaptureQueriesContext

# The most rows of a named table a query may expect to read: a page's worth and then some.
# A whole index read in its order expects a page's rows (100) when a LIMIT stops it, the
# table's when nothing does; a read of one item's records, all of them.
MAX_ROWS = 1_000


def explain(sql: str, params: Iterable | None = None) -> list[dict]:
    """The rows of MariaDB's ``EXPLAIN`` of the query, one dict per table it reads."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", None if params is None else tuple(params))
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def insert_series(table: str, count: int, columns: dict[str, str]) -> None:
    """``count`` rows in ``table`` in one statement, each column's value an SQL expression
    of ``seq``, 1 to ``count`` (MariaDB's sequence engine): ``{"status": "IF(seq % 2, 'held',
    'paid')"}``."""
    names, values = ", ".join(columns), ", ".join(columns.values())
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {table} ({names}) SELECT {values} FROM seq_1_to_{count}")


def analyze(*tables: str) -> None:
    """Fresh statistics for ``tables``, as a big site's server keeps them: bulk inserts in a
    test leave InnoDB's estimates behind, and the plan follows the estimates."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {', '.join(tables)}")
        cursor.fetchall()


def _aliases(sql: str) -> dict[str, str]:
    """The tables of the query by the names EXPLAIN gives them: Django's subqueries read
    ``orders_order`` as ``U0``."""
    named = {table: table for table in re.findall(r"`(\w+)`", sql)}
    return named | {alias: table for table, alias in re.findall(r"`(\w+)` (U\d+)\b", sql)}


def _rows(row: dict) -> int:
    """The row's estimate of the rows it reads: MariaDB writes it as text, after a join
    sometimes with the share its condition keeps ("401 (38%)")."""
    return int(str(row["rows"] or 0).split()[0])


def full_scans(sql: str, params: Iterable | None, tables: Iterable[str], max_rows: int = MAX_ROWS) -> list[dict]:
    """The rows of the query's plan that read the whole of one of ``tables``: a table scan
    (type ALL), or any read expected to go past ``max_rows`` rows of it (a whole index, or
    every record of an item joined first and sorted). A read inside a derived table with a
    LIMIT (``SELECT COUNT(*) FROM (... LIMIT n)``) stops at its n rows, which the derived
    table's own row says and the read's does not."""
    aliases, tables = _aliases(sql), set(tables)
    plan = explain(sql, params)
    derived = {row["table"]: _rows(row) for row in plan if str(row["table"]).startswith("<derived")}
    scans = []
    for row in plan:
        if aliases.get(row["table"], row["table"]) not in tables:
            continue
        rows = _rows(row)
        if row["select_type"] == "DERIVED" and f"<derived{row['id']}>" in derived:
            rows = min(rows, derived[f"<derived{row['id']}>"])
        if row["type"] == "ALL" or rows > max_rows:
            scans.append(row)
    return scans


def assert_no_full_scan(
    queries: QuerySet | CaptureQueriesContext | Iterable[dict],
    *,
    tables: Iterable[str],
    max_rows: int = MAX_ROWS,
) -> None:
    """Fail when a query reads the whole of one of ``tables`` (``full_scans``): ``queries`` is
    a queryset, or the queries a ``CaptureQueriesContext`` captured (their SELECTs)."""
    if connection.vendor != "mysql":
        raise AssertionError("EXPLAIN is read as MariaDB and MySQL write it")
    tables = list(tables)
    if isinstance(queries, QuerySet):
        sql, params = queries.query.sql_with_params()
        statements = [(sql, params)]
    else:
        captured = queries.captured_queries if isinstance(queries, CaptureQueriesContext) else queries
        statements = [(query["sql"], None) for query in captured if query["sql"].lstrip().upper().startswith("SELECT")]
    scans = [(sql, row) for sql, params in statements for row in full_scans(sql, params, tables, max_rows)]
    assert not scans, "full scans:\n" + "\n".join(f"{row}\n  in {sql}" for sql, row in scans)
