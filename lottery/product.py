"""The prize draw to the item core (``inventory.product``): a pool's prizes are the rows of its
stock group, drawn by weight with a weight of no prize, a number of times per user; its
record is a draw, numbered among the user's draws (``seq``) under the limit's guard."""

from __future__ import annotations

from django.db.models import QuerySet

from inventory.product import Product
from inventory.reservation_types import Failed, Pending, Reserved, Rules

from .errors import DrawLimit, PoolEmpty
from .models import Draw, Pool, Prize
from .selectors import pool_for_draw, prize_for_stock


class PoolProduct(Product):
    kind = "pool"
    item_model = Pool
    record_model = Draw
    item_field = "pool"
    group_field = "group_id"
    over_limit = DrawLimit
    sold_out = PoolEmpty

    def group_of(self, item: Pool) -> int:
        return item.group_id

    def read(self, item_id: int) -> Pool:
        return pool_for_draw(pool_id=item_id)

    def rules(self, item: Pool) -> Rules:
        return Rules(
            begin_at=item.begin_at, end_at=item.end_at, limit=item.draws_per_user, no_take=item.no_prize_weight
        )

    def seqs(self, records: QuerySet) -> QuerySet:
        return records.values_list("user_id", "seq")

    def rows(self, item_id: int, fresh: list[Pending]) -> list[Draw]:
        prize_of = dict(Prize.objects.filter(pool_id=item_id).values_list("stock_id", "id"))
        return [
            Draw(
                user_id=one.user_id,
                pool_id=item_id,
                prize_id=None if one.stock_id is None else prize_of[one.stock_id],
                status=Draw.Status.CONFIRMED,
                # The script's count of the user's takes: with user_guard, the limit's backstop.
                seq=one.seq,
                user_guard=one.user_id,
                reservation=one.reservation_id,
            )
            for one in fresh
        ]

    def reserved(self, item: Pool, user_id: int, reserved: Reserved) -> Draw:
        """The draw as it will be, with the prize as it will award it (its name kept a few
        seconds per process)."""
        prize = None if reserved.stock_id is None else prize_for_stock(stock_id=reserved.stock_id)
        draw = Draw(
            user_id=user_id,
            pool_id=item.pk,
            prize=prize,
            status=Draw.Status.PENDING,
            seq=reserved.seq,
            reservation=reserved.reservation_id,
        )
        draw.draws_counted = reserved.takes
        # The limit the script enforced, from Redis: the pool may be a memo up to a second
        # older than a change of it.
        draw.draws_limit = reserved.limit
        return draw

    def unsaved(self, found: Pending | Failed, item: Pool, **fields) -> Draw:
        prize = None if found.stock_id is None else Prize.objects.filter(stock_id=found.stock_id).first()
        return Draw(
            user_id=found.user_id,
            pool=item,
            prize=prize,
            seq=getattr(found, "seq", 0),
            reservation=found.reservation_id,
            **fields,
        )


POOL = PoolProduct()
