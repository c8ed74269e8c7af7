"""Pages of a user's own records (orders, draws), newest first, by a cursor: where the last
page ended, never an offset or a count, so that a page costs what it shows whatever the
user's history, and records made while a client pages come before its first page and never
push others from one page to the next.

A record's place is its ``created_at`` and then its id (a row's ``pk``, or for a record still
in Redis under ``redis_lua``, its reservation's id): the order of the index on
``(user, created_at, id)`` that each record model has. A cursor is the place of a page's last
record, written ``<microseconds since 1970>.<id>``, the id as it is shown
(``inventory.records.public_of``: never the internal one, which would count the site's records);
the next page holds the records after it. Clients pass it back as they were given it; any
cursor of that form is taken, so a cursor made by hand reads the records from that moment
on, those of the moment itself in an order only the server knows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from django.db.models import Model, Q, QuerySet

from core.errors import InvalidInput

from .records import ID_LIMIT, internal_of, public_of

# How many records a page shows unless asked for fewer, and the most it shows.
PAGE_SIZE = 50
PAGE_SIZE_MAX = 100

# Up to 16 digits of microseconds (past the year 2200) and 19 of id (a reservation's id is
# below 2**63): whatever matches is a cursor.
CURSOR_PATTERN = r"^[0-9]{1,16}\.[0-9]{1,19}$"
_CURSOR = re.compile(CURSOR_PATTERN)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

R = TypeVar("R", bound=Model)


@dataclass(frozen=True, order=True)
class Cursor:
    """A record's place in its user's list, newest first: the greater, the newer."""

    at: datetime
    id: int

    @classmethod
    def of(cls, record: Model) -> Cursor:
        # A record read from Redis has no row yet: its reservation's id stands for it.
        return cls(record.created_at, record.pk if record.pk is not None else record.reservation)

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """The cursor written ``text``; ``InvalidInput`` (422) for anything else."""
        if not _CURSOR.fullmatch(text):
            raise InvalidInput(
                "cursor: not a cursor; pass back the one a page gave (its Link header's next, "
                "or the page's Older link), or leave it out for the newest records."
            )
        micros, record_id = text.split(".")
        return cls(_EPOCH + timedelta(microseconds=int(micros)), internal_of(min(int(record_id), ID_LIMIT - 1)))

    def __str__(self) -> str:
        return f"{(self.at - _EPOCH) // timedelta(microseconds=1)}.{public_of(self.id)}"

    def rows_after(self, rows: QuerySet[R]) -> QuerySet[R]:
        """``rows`` that come after this place, newest first: older, or as old with a lower id."""
        return rows.filter(Q(created_at__lt=self.at) | Q(created_at=self.at, pk__lt=self.id))


@dataclass(frozen=True)
class Page(Generic[R]):
    """Records of a user, newest first, and the cursor of the page after them (None on the last)."""

    records: list[R]
    next: Cursor | None
