"""``manage.py seed_big``: a big site in seconds (``config.big_site``, docs/operations.md, "A big site")."""

from django.core.management.base import BaseCommand

from config.big_site import BigSite
from harness.big_site import BIG_SITE_SIZES


class Command(BaseCommand):
    help = (
        "Build a big site fast with bulk inserts (MariaDB's sequence engine; slower on SQLite): users with an "
        "API token each, vouchers with orders in every status and their payments, pools with prizes and draws in "
        "every status, consistent so that `manage.py audit` passes. Sizes default to 500,000 users, 20 vouchers, "
        "400,000 orders, 5 pools and 200,000 draws; run it on an empty database."
    )

    def add_arguments(self, parser):
        for name, default in BIG_SITE_SIZES.items():
            parser.add_argument(f"--{name}", type=int, default=default, help=f"How many (default {default:,}).")

    def handle(self, *args, users: int, vouchers: int, orders: int, pools: int, draws: int, **options):
        BigSite(self.stdout).build(users=users, vouchers=vouchers, orders=orders, pools=pools, draws=draws)
