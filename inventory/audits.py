"""What an item's audit is, whatever its product (docs/design.md, "Invariants"): the
figures read from the database, and whether every invariant holds."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.db.models import Count, Q, Sum
from django.db.models.functions import Coalesce

from .records import SETTLED, TAKING, Record


@dataclass(frozen=True)
class HoldCounts:
    """The lifecycle's counts of an item's records (docs/design.md, "Lifecycle"): held,
    settled (paid or claimed, or settled when taken), released (cancelled, expired,
    forfeited: the unit back in the stock); units returned more than once, and records both
    settled and released, which a guarded strategy never makes."""

    held: int = 0
    settled: int = 0
    released: int = 0
    returned_twice: int = 0
    settled_and_released: int = 0

    @classmethod
    def of(cls, totals: dict) -> HoldCounts:
        """From the counts of :func:`record_totals`."""
        return cls(
            held=totals["held"],
            settled=totals["settled"],
            released=totals["released"],
            returned_twice=totals["returns"] - totals["released"],
            settled_and_released=totals["settled_and_released"],
        )

    @property
    def ok(self) -> bool:
        return self.returned_twice == 0 and self.settled_and_released == 0


class Audit:
    """The base of a product's audit, a frozen dataclass of figures that says ``ok``."""

    ok: bool

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def record_totals(prefix: str = "") -> dict:
    """The counts of an item's records that its audit reads, as aggregates over the
    records (``prefix`` their lookup from the item, as ``"orders__"``, to count them per
    item in a join): every record, those pending, held, settled and released; the returns
    of their units (a guarded strategy returns each at most once); those both settled and
    released; and the users whose records still hold a take (a released one does not)."""
    pk, status = f"{prefix}id", f"{prefix}status"
    taking = Q(**{f"{status}__in": TAKING})
    return {
        "records": Count(pk),
        "pending": Count(pk, filter=Q(**{status: Record.Status.PENDING})),
        "held": Count(pk, filter=Q(**{status: Record.Status.HELD})),
        "settled": Count(pk, filter=Q(**{f"{status}__in": SETTLED})),
        "released": Count(pk, filter=Q(**{f"{prefix}releases__gt": 0})),
        "returns": Coalesce(Sum(f"{prefix}releases"), 0),
        "settled_and_released": Count(
            pk, filter=Q(**{f"{prefix}settled_at__isnull": False, f"{prefix}released_at__isnull": False})
        ),
        "takers": Count(f"{prefix}user_id", distinct=True, filter=taking),
    }
