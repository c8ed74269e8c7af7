from django.core.management.base import BaseCommand

from inventory.errors import LockBusy
from inventory.items import items_closing
from inventory.product import products
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_close

# Progress is reported every this many items.
EVERY = 1000


class Command(BaseCommand):
    help = (
        "Remove the Redis keys of every voucher and pool whose sale ended at least "
        "RESERVATIONS_CLOSE_AFTER_END_SECONDS ago, each item's waiting reservations persisted first. The beat "
        "closes those that ended in the day before that cutoff; this closes all of them (after a beat stopped "
        "for longer, or a site that kept every sale's keys). Exit 1 when an item's lock stayed busy: run it again."
    )

    def handle(self, *args, **options):
        reservations = reservations_client()
        busy = []
        for product in products():
            items = items_closing(product, everything_before=True).order_by("id")
            total, closed = items.count(), 0
            for seen, item in enumerate(items.iterator(chunk_size=EVERY), start=1):
                try:
                    closed += item_reservations_close(product, item=item, reservations=reservations, thorough=True)
                except LockBusy:
                    busy.append(f"{product.kind} {item.pk}")
                if seen % EVERY == 0:
                    self.stdout.write(f"{product.kind}s: {seen} of {total} looked at, {closed} closed")
            self.stdout.write(f"{product.kind}s: {total} ended before the cutoff, {closed} closed now.")
        if busy:
            self.stderr.write(f"Busy, not closed: {', '.join(busy)}.")
            raise SystemExit(1)
