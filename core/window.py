"""The sale window that vouchers and prize pools share: ``begin_at``..``end_at``."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import models
from django.utils import timezone

from .errors import DomainError, InvalidInput


class NotStarted(DomainError):
    code = "not_started"
    status = 403
    default_message = "The sale has not started yet."


class Ended(DomainError):
    code = "ended"
    status = 403
    default_message = "The sale has ended."


class SaleWindow(models.Model):
    """Abstract: a begin and an end, with the end after the begin (a database check
    that each concrete model names after itself)."""

    begin_at = models.DateTimeField()
    end_at = models.DateTimeField()

    class Meta:
        abstract = True

    def window_state(self, now: datetime | None = None) -> str:
        """``upcoming``, ``live`` or ``ended`` at ``now``."""
        now = now or timezone.now()
        if now < self.begin_at:
            return "upcoming"
        if now >= self.end_at:
            return "ended"
        return "live"

    def window_refusal(self, now: datetime | None = None) -> str | None:
        """The code of the refusal a take would get from the window at ``now``
        (``not_started``, ``ended``), or None while it is open: what a page says."""
        return {"upcoming": NotStarted.code, "ended": Ended.code}.get(self.window_state(now))

    def window_check(self, now: datetime | None = None) -> None:
        """Raise ``NotStarted`` or ``Ended`` unless the window is open at ``now``."""
        state = self.window_state(now)
        if state == "upcoming":
            raise NotStarted()
        if state == "ended":
            raise Ended()


# The range of MySQL's DATETIME, in UTC (what the database stores). A time that parses can
# still fall outside it: 0001-01-01T00:00:00+14:00 is before year 1 in UTC, and converting it
# raised OverflowError deep in the database adapter (a 500).
WINDOW_EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
WINDOW_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def moment_utc(moment: datetime) -> datetime:
    """``moment`` in UTC; ``InvalidInput`` when it has no UTC offset or its UTC instant is
    outside the range the database stores."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidInput("a time needs a UTC offset (ISO 8601, such as 2026-01-01T10:00:00+00:00).")
    out_of_range = InvalidInput(
        f"a time must fall between {WINDOW_EARLIEST.isoformat()} and {WINDOW_LATEST.isoformat()} in UTC."
    )
    try:
        in_utc = moment.astimezone(UTC)
    except OverflowError:
        raise out_of_range from None
    if not WINDOW_EARLIEST <= in_utc <= WINDOW_LATEST:
        raise out_of_range
    return in_utc


def window_validate(begin_at: datetime, end_at: datetime) -> None:
    """Refuse a window without a UTC offset, out of the stored range, or one that ends
    before it begins."""
    if begin_at.tzinfo is None or end_at.tzinfo is None:
        raise InvalidInput("begin_at and end_at need a UTC offset (ISO 8601, such as 2026-01-01T10:00:00+00:00).")
    for name, moment in (("begin_at", begin_at), ("end_at", end_at)):
        try:
            moment_utc(moment)
        except InvalidInput as exc:
            raise InvalidInput(f"{name}: {exc.message}") from None
    if end_at <= begin_at:
        raise InvalidInput("end_at must be after begin_at.")
