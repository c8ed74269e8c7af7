"""The few SQL expressions that a bulk insert over a sequence of numbers writes differently on
MariaDB (or MySQL) and on SQLite (``config.big_site``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone


class SequenceSql:
    """The few expressions that differ between MariaDB (or MySQL) and SQLite. Every statement
    is run with parameters, so a literal % is written %%."""

    def __init__(self, vendor: str) -> None:
        if vendor not in ("mysql", "sqlite"):
            raise CommandError(f"seed_big writes MariaDB, MySQL or SQLite, not {vendor}.")
        self.mysql = vendor == "mysql"

    def numbers(self, first: int, last: int) -> str:
        """A table ``s`` of one column ``seq``, ``first`` to ``last`` (signed: arithmetic on the
        sequence engine's unsigned column may not go below 0)."""
        if self.mysql:
            return f"(SELECT CAST(seq AS SIGNED) AS seq FROM seq_{first}_to_{last}) AS s"
        return (
            f"(WITH RECURSIVE n(seq) AS (SELECT {first} UNION ALL SELECT seq + 1 FROM n WHERE seq < {last}) "
            "SELECT seq FROM n) AS s"
        )

    def concat(self, *parts: str) -> str:
        return f"CONCAT({', '.join(parts)})" if self.mysql else "(" + " || ".join(parts) + ")"

    def key(self, expression: str, width: int, salt: str) -> str:
        """A unique hex string of ``width`` (64 or 32) for each value of ``expression``: a hash on
        MariaDB, the number in hex on SQLite. Never the hash of a real token."""
        if not self.mysql:
            return f"printf('%%0{width}x', {expression})"
        digest = "SHA2({}, 256)" if width == 64 else "MD5({})"
        return digest.format(self.concat(f"'{salt}'", expression))

    def plus(self, moment: str, microseconds: str) -> str:
        """``moment`` (a column or %s) moved by ``microseconds`` (an expression, may be negative)."""
        if self.mysql:
            return f"({moment} + INTERVAL ({microseconds}) MICROSECOND)"
        return f"strftime('%%Y-%%m-%%d %%H:%%M:%%f', {moment}, (({microseconds}) / 1000000.0) || ' seconds')"

    def div(self, a: str, b: str) -> str:
        return f"(({a}) DIV ({b}))" if self.mysql else f"(({a}) / ({b}))"

    def moment(self, value: datetime):
        """A parameter for a datetime column: naive UTC, as Django writes it."""
        naive = timezone.make_naive(value, UTC) if timezone.is_aware(value) else value
        return naive if self.mysql else naive.isoformat(" ")

    def run(self, statement: str, params: list) -> None:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)

    @contextmanager
    def checks_off(self) -> Iterator[None]:
        """MariaDB checks neither foreign nor unique keys row by row while the rows go in: they
        hold by construction, and the checks cost more than the writes."""
        if self.mysql:
            self.run("SET foreign_key_checks = 0, unique_checks = 0", [])
        try:
            yield
        finally:
            if self.mysql:
                self.run("SET foreign_key_checks = 1, unique_checks = 1", [])
