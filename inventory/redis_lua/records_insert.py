"""A batch's records as one INSERT made ready before its transaction.

The drains of one item take turns on its stock rows' locks, held from the start of a
batch's transaction to its commit (``inventory.redis_lua.persist``): what a consumer does
inside them, no other consumer of the item does meanwhile. Building 500 model instances,
compiling their INSERT and quoting its values cost a consumer several times what the
database spends on the statement. So they are done first, outside, with what Django's
``bulk_create`` does, and the transaction sends the finished text. When the transaction
finds some of the batch written already (a redelivery), or its part is smaller (a refused
batch written half by half), the INSERT of what is left is built there as before.
"""

from __future__ import annotations

from typing import Any

from django.db import connections, router
from django.db.models import AutoField
from django.db.models.sql import InsertQuery

from ..product import Product
from ..take import hold_expire_later
from .values import Pending


class RecordsInsert:
    """The records of ``product``'s item ``item_id`` for reservations: ``prepare(pending)``
    before the transaction, ``write(fresh)`` inside it (``reservations_persist``'s
    ``prepare`` and ``write``)."""

    def __init__(self, product: Product, item_id: int) -> None:
        self.product = product
        self.item_id = item_id
        self.model = product.record_model
        self._ready: tuple[frozenset[int], list[Any], list[tuple[str, Any]]] | None = None

    def prepare(self, pending: list[Pending]) -> None:
        """Build the records of ``pending`` and their INSERT, ready to send."""
        rows = self.product.rows(self.item_id, pending)
        self._ready = (frozenset(one.reservation_id for one in pending), rows, self._statements(rows))

    def write(self, fresh: list[Pending]) -> None:
        """Insert the records of ``fresh``, in the caller's transaction: the INSERT prepared
        for them, or one built now for a different set."""
        ready, self._ready = self._ready, None
        if ready is not None and ready[0] == frozenset(one.reservation_id for one in fresh):
            _, rows, statements = ready
        else:
            rows = self.product.rows(self.item_id, fresh)
            statements = self._statements(rows)
        connection = connections[router.db_for_write(self.model)]
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
        hold_expire_later(self.product, self.item_id, [row.hold_until for row in rows])

    def _statements(self, rows: list[Any]) -> list[tuple[str, Any]]:
        """The INSERT of ``rows`` as ``bulk_create`` builds it (new rows: no primary key), its
        values quoted into the text where the database's client does that itself (MySQL,
        MariaDB), so that sending it costs nothing more."""
        if not rows:
            return []
        using = router.db_for_write(self.model)
        self.model._default_manager.using(using)._prepare_for_bulk_create(rows)
        fields = [f for f in self.model._meta.concrete_fields if not f.generated and not isinstance(f, AutoField)]
        query = InsertQuery(self.model)
        query.insert_values(fields, rows)
        statements = query.get_compiler(using=using).as_sql()
        connection = connections[using]
        if connection.vendor != "mysql":
            return statements
        with connection.cursor() as cursor:
            return [(cursor.cursor.mogrify(sql, params), None) for sql, params in statements]
