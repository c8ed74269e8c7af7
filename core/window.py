"""The sale window that vouchers and prize pools share: ``begin_at``..``end_at``."""

from __future__ import annotations

from datetime import datetime

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

    def window_check(self, now: datetime | None = None) -> None:
        """Raise ``NotStarted`` or ``Ended`` unless the window is open at ``now``."""
        state = self.window_state(now)
        if state == "upcoming":
            raise NotStarted()
        if state == "ended":
            raise Ended()


def window_validate(begin_at: datetime, end_at: datetime) -> None:
    """Refuse a window without a UTC offset or one that ends before it begins."""
    if begin_at.tzinfo is None or end_at.tzinfo is None:
        raise InvalidInput("begin_at and end_at need a UTC offset (ISO 8601, such as 2026-01-01T10:00:00+00:00).")
    if end_at <= begin_at:
        raise InvalidInput("end_at must be after begin_at.")
