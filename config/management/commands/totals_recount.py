"""``manage.py totals_recount``: the running totals the pages show (``inventory.totals``),
counted again from the records."""

from django.core.management.base import BaseCommand

from inventory.product import products
from inventory.totals import totals_recount


class Command(BaseCommand):
    help = (
        "Set the running totals of the vouchers and pools (the units their records hold, and the takes past the "
        'per-user rule: docs/design.md, "Running totals") from their records, under the rows\' locks, so safe while '
        "a sale runs; every item, or those named. `manage.py audit` says when they disagree (totals_agree)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--voucher", type=int, action="append", default=[], help="A voucher's id (repeatable).")
        parser.add_argument("--pool", type=int, action="append", default=[], help="A pool's id (repeatable).")

    def handle(self, *args, voucher: list[int], pool: list[int], **options):
        named = {"voucher": voucher, "pool": pool}
        everything = not (voucher or pool)
        changed = 0
        for product in products():
            if everything or named[product.kind]:
                changed += totals_recount(product, item_ids=None if everything else named[product.kind])
        self.stdout.write(f"{changed} item{'s' if changed != 1 else ''} had totals to set right.")
