"""Many records at once for the tests of what grows with them: orders of a voucher in every
status, draws of a pool, the provider's charges; written in bulk, by distinct users."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from inventory.records import RELEASED, row_filter
from lottery.models import Draw
from orders.models import Order
from payments.models import ProviderCharge
from tests.stock import stock_row

_batch = itertools.count(1)

# The statuses the orders take in turn: settled, held (due tomorrow), released.
ORDER_STATUSES = (
    Order.Status.CONFIRMED,
    Order.Status.PAID,
    Order.Status.HELD,
    Order.Status.CANCELLED,
    Order.Status.EXPIRED,
)


def users(count: int) -> list:
    """``count`` new users."""
    batch = next(_batch)
    model = get_user_model()
    return model.objects.bulk_create([model(username=f"many-{batch}-{n}", password="!") for n in range(count)])


def orders(voucher, count: int, *, row: int | None = None) -> list[Order]:
    """``count`` orders of ``voucher`` by as many users, the statuses in turn (held ones due
    tomorrow, released ones freed from the one-per-user key, as a release leaves them), taken
    from stock ``row`` (the voucher's one row unless given: a bucketed voucher has several)."""
    tomorrow = timezone.now() + timedelta(days=1)
    row = row or stock_row(voucher)
    rows = []
    for user, status in zip(users(count), itertools.cycle(ORDER_STATUSES), strict=False):
        released = status in RELEASED
        rows.append(
            Order(
                user=user,
                voucher=voucher,
                stock_id=row,
                status=status,
                hold_until=tomorrow if status == Order.Status.HELD else None,
                buyer_guard=None if released else user.pk,
                releases=int(released),
            )
        )
    return Order.objects.bulk_create(rows)


def draws(pool, count: int) -> list[Draw]:
    """``count`` draws of no prize in ``pool``, two per user (numbered 1 and 2)."""
    players = users((count + 1) // 2)
    rows = [
        Draw(user=player, pool=pool, status=Draw.Status.CONFIRMED, seq=n % 2 + 1, user_guard=player.pk)
        for n, player in ((n, players[n // 2]) for n in range(count))
    ]
    return Draw.objects.bulk_create(rows)


def charges(count: int, *, sent_at: datetime, acknowledged: bool = False) -> list[ProviderCharge]:
    """``count`` charges whose last callback left at ``sent_at``, acknowledged or not."""
    batch = next(_batch)
    return ProviderCharge.objects.bulk_create(
        ProviderCharge(
            reference=f"many-{batch}-{n}",
            sent_at=sent_at,
            callbacks=1,
            acknowledgements=int(acknowledged),
            acknowledged_at=sent_at if acknowledged else None,
        )
        for n in range(count)
    )


def answered_row(model, record_id: int):
    """The row of the record an answer or a page named ``record_id`` (``Record.public_id``)."""
    return model.objects.get(**row_filter(record_id))


def answered_rows(model, record_id: int):
    """The rows (one) of the record named ``record_id``, to update as time would."""
    return model.objects.filter(**row_filter(record_id))
