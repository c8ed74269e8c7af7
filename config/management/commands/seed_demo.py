from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from lottery.models import Pool
from lottery.services import pool_create, prize_create
from orders.models import Voucher
from orders.services import voucher_create

DEMO_BUYER = ("buyer", "buyer-pass-2026")
DEMO_STAFF = ("staff", "staff-pass-2026")
DEMO_POOL = "Lucky wheel"
DEMO_PRIZES = [("Weekend trip", 1, 800), ("Headphones", 5, 120), ("Tote bag", 20, 15), ("Free coffee", 60, 3)]


class Command(BaseCommand):
    help = (
        "Create demo data: a live, an upcoming and a sold-out voucher, a live prize pool, "
        "a buyer and a staff user. Idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--quiet", action="store_true", help="Do not print the logins.")

    @transaction.atomic
    def handle(self, *args, quiet: bool = False, **options):
        User = get_user_model()
        for (username, password), staff in ((DEMO_BUYER, False), (DEMO_STAFF, True)):
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.is_staff = user.is_superuser = staff
                user.save()
        now = timezone.now()
        demo = [
            (
                "Coffee for 1 cent",
                "Live now: 50 vouchers, one per buyer.",
                50,
                now - timedelta(minutes=5),
                now + timedelta(days=7),
            ),
            (
                "Midnight sneaker drop",
                "Starts in ten minutes.",
                20,
                now + timedelta(minutes=10),
                now + timedelta(days=7),
            ),
            ("Concert tickets at cost", "All gone.", 0, now - timedelta(hours=1), now + timedelta(days=7)),
        ]
        made = 0
        for title, description, stock, begin_at, end_at in demo:
            if not Voucher.objects.filter(title=title).exists():
                voucher_create(
                    title=title,
                    description=description,
                    stock=stock,
                    begin_at=begin_at,
                    end_at=end_at,
                    strategy="db_atomic",
                )
                made += 1
        pools = 0
        if not Pool.objects.filter(name=DEMO_POOL).exists():
            pool = pool_create(
                name=DEMO_POOL,
                description="Three draws each. The odds follow what is left: watch them move as prizes are won.",
                begin_at=now - timedelta(minutes=5),
                end_at=now + timedelta(days=7),
                draws_per_user=3,
                no_prize_weight=100,
                strategy="db_atomic",
            )
            for name, stock, value in DEMO_PRIZES:
                prize_create(pool=pool, name=name, stock=stock, value=value)
            pools += 1
        if not quiet:
            self.stdout.write(f"Demo data ready ({made} vouchers and {pools} prize pool created).")
            self.stdout.write(f"  buyer: username {DEMO_BUYER[0]!r}, password {DEMO_BUYER[1]!r}")
            self.stdout.write(f"  staff: username {DEMO_STAFF[0]!r}, password {DEMO_STAFF[1]!r} (admin at /admin/)")
