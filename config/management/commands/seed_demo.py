"""The demo a new user meets: ``make run`` runs this before every start.

Every run makes the demo true again for the moment it starts: the windows are set from
now (the upcoming voucher opens a few minutes later), and the sold-out voucher is sold out
by real purchases of demo buyers, through the same service as any purchase, so that its
audit adds up. The descriptions say what each item is and no fact that changes: the pages
render those from the data. A rerun creates nothing twice and keeps what users bought or drew.

The demo's two logins have their passwords printed in the README: ``--no-logins`` (what
docker-compose runs) seeds the sales without them. The staff login is a member of staff
with the shop's permissions, not a superuser: it cannot manage users, nor give itself more.
"""

from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from accounts.permissions import permissions_named
from lottery.models import Pool
from lottery.selectors import pool_get
from lottery.services import pool_create, pool_update, prize_create
from orders.models import Voucher
from orders.selectors import voucher_get
from orders.services import order_purchase, voucher_create, voucher_update

DEMO_BUYER = ("buyer", "buyer-pass-2026")
DEMO_STAFF = ("staff", "staff-pass-2026")
# What the staff login needs and nothing more: the admin pages of both products (view, add,
# change: nothing is deleted there; orders and draws are read) and the race lab (read, start,
# cancel). No user, group or token management.
DEMO_STAFF_PERMISSIONS = [
    *(
        f"{app}.{action}_{model}"
        for app, model in (
            ("orders", "voucher"),
            ("orders", "order"),
            ("lottery", "pool"),
            ("lottery", "prize"),
            ("lottery", "draw"),
        )
        for action in ("view", "add", "change")
    ),
    "lab.view_labrun",
    "lab.add_labrun",
    "lab.change_labrun",
]
# The sold-out voucher's buyers: users of the demo that nobody logs in as.
DEMO_FAN = "demo-fan-{}"
LIVE = "Coffee for 1 cent"
HELD = "Bakery box, pay within ten minutes"
UPCOMING = "Midnight sneaker drop"
SOLD_OUT = "Concert tickets at cost"
# title: (supply, start relative to the run, payment window in seconds); every window ends a
# week after the run. The bakery box shows the unit's life after a purchase: the order is
# held until paid, cancelled or expired, and a unit not paid for goes back on sale.
DEMO_VOUCHERS = {
    LIVE: (50, -timedelta(minutes=5), 0),
    HELD: (30, -timedelta(minutes=5), 600),
    UPCOMING: (20, timedelta(minutes=5), 0),
    SOLD_OUT: (5, -timedelta(hours=1), 0),
}
# The upcoming drop sells through a waiting room: those who join before it opens wait in its
# lobby, put in a random order at the opening, then let in two a second with a ticket good
# for two minutes (docs/api.md, "Waiting room").
DEMO_QUEUED = {UPCOMING: {"admission": "queue", "admission_rate": 2.0, "admission_ticket_seconds": 120}}
DEMO_POOL = "Lucky wheel"
DEMO_CLAIM_POOL = "Prize wheel, claim within two minutes"
# name: (draws per user, weight of no prize, claim window in seconds, prizes: name, stock, value).
# The lucky wheel's prizes are the winner's at once; every draw of the prize wheel wins, the
# prize held two minutes for its claim and forfeited back to the wheel when not claimed.
DEMO_POOLS = {
    DEMO_POOL: (
        3,
        100,
        0,
        [("Weekend trip", 1, 800), ("Headphones", 5, 120), ("Tote bag", 20, 15), ("Free coffee", 60, 3)],
    ),
    DEMO_CLAIM_POOL: (3, 0, 120, [("Tote bag", 20, 15), ("Free coffee", 60, 3)]),
}
DEMO_LASTS = timedelta(days=7)
DEMO_STRATEGY = "db_atomic"


# What each item is, and nothing that changes: the supply, the window, the strategy, the
# prizes' stock and the odds are rendered on the pages from the data. A description written
# from them ("50 units ... taken under db_atomic", "5 × Headphones") was false after the first
# restock or switch, beside the page's live "Strategy: none" and "Left 59 of 60".
DEMO_DESCRIPTIONS = {
    LIVE: "A cup of filter coffee at the corner café for one cent. One voucher per buyer, while stock lasts.",
    HELD: (
        "A box of the bakery's pastries. Your voucher is held for you while you pay; one not paid for in time "
        "goes back on sale for the next buyer. One box per buyer."
    ),
    UPCOMING: (
        "Limited-edition sneakers, released when the sale opens. Buyers wait their turn in a queue, let in a few "
        "at a time; join before the opening and your place is drawn at random then. One pair per buyer."
    ),
    SOLD_OUT: "Tickets to the season's closing concert at cost price. One ticket per buyer.",
    DEMO_POOL: (
        "Spin the wheel for a prize. A draw wins each prize with the probability of its stock left over "
        "all stock left plus the weight of no prize, so the odds below move as prizes are won."
    ),
    DEMO_CLAIM_POOL: (
        "Every spin wins while prizes last. A prize won is held for you while you claim it; one not claimed in "
        "time goes back in the wheel for the next spin."
    ),
}


class Command(BaseCommand):
    help = (
        "Create or refresh the demo: a live voucher, a live one held for payment, an upcoming and a sold-out "
        "voucher, a live prize pool and one that holds its prizes for a claim, "
        "a buyer and a staff user. Windows are set from now on every run; idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("--quiet", action="store_true", help="Do not print the logins.")
        parser.add_argument(
            "--no-logins",
            action="store_true",
            help="Create neither the demo buyer nor the demo staff (their passwords are in the README): "
            "for a server that others can reach.",
        )

    @transaction.atomic
    def handle(self, *args, quiet: bool = False, no_logins: bool = False, **options):
        if not no_logins:
            self._logins()
        now = timezone.now()
        created = 0
        for title, (supply, starts_in, window) in DEMO_VOUCHERS.items():
            begin_at = now + starts_in
            voucher = Voucher.objects.filter(title=title).first()
            if voucher is None:
                voucher = voucher_create(
                    title=title,
                    stock=supply,
                    begin_at=begin_at,
                    end_at=now + DEMO_LASTS,
                    strategy=DEMO_STRATEGY,
                    hold_seconds=window,
                )
                created += 1
            else:
                voucher_update(voucher=voucher, begin_at=begin_at, end_at=now + DEMO_LASTS)
            if title == SOLD_OUT:
                self._sell_out(voucher, supply=supply, now=now)
            voucher_update(
                voucher=voucher_get(voucher_id=voucher.pk),
                description=DEMO_DESCRIPTIONS[title],
                **DEMO_QUEUED.get(title, {}),
            )
        for name, (draws, no_prize, window, prizes) in DEMO_POOLS.items():
            pool = Pool.objects.filter(name=name).first()
            if pool is None:
                pool = pool_create(
                    name=name,
                    begin_at=now - timedelta(minutes=5),
                    end_at=now + DEMO_LASTS,
                    draws_per_user=draws,
                    no_prize_weight=no_prize,
                    strategy=DEMO_STRATEGY,
                    hold_seconds=window,
                )
                for prize, stock, value in prizes:
                    prize_create(pool=pool, name=prize, stock=stock, value=value)
                created += 1
            else:
                pool_update(pool=pool, begin_at=now - timedelta(minutes=5), end_at=now + DEMO_LASTS)
            pool_update(pool=pool_get(pool_id=pool.pk), description=DEMO_DESCRIPTIONS[name])
        if quiet:
            return
        self.stdout.write(f"Demo data ready ({created} created; every window now starts from this run).")
        if no_logins:
            self.stdout.write("  No demo logins: create your own with `python manage.py createsuperuser`.")
        else:
            self.stdout.write(f"  buyer: username {DEMO_BUYER[0]!r}, password {DEMO_BUYER[1]!r}")
            self.stdout.write(f"  staff: username {DEMO_STAFF[0]!r}, password {DEMO_STAFF[1]!r} (admin at /admin/)")

    def _logins(self) -> None:
        """The buyer and the staff login; a password is set only when the user is created (a
        changed one stays), the staff's rights on every run (an older seed made it a superuser)."""
        User = get_user_model()
        for username, password in (DEMO_BUYER, DEMO_STAFF):
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save()
        staff = User.objects.get(username=DEMO_STAFF[0])
        staff.is_staff, staff.is_superuser = True, False
        staff.save(update_fields=["is_staff", "is_superuser"])
        staff.user_permissions.set(permissions_named(DEMO_STAFF_PERMISSIONS))

    def _sell_out(self, voucher: Voucher, *, supply: int, now: datetime) -> None:
        """Demo buyers buy what is left, one unit each, through the purchase service.

        A voucher that was never supplied (an older seed made it with no stock at all) is
        first given its supply, so that "sold out" means sold, not empty."""
        if voucher_get(voucher_id=voucher.pk).stock_supplied == 0:
            voucher_update(voucher=voucher, restock=supply)
        User = get_user_model()
        fan = 0
        while (voucher := voucher_get(voucher_id=voucher.pk)).stock_left > 0:
            fan += 1
            buyer, made = User.objects.get_or_create(username=DEMO_FAN.format(fan))
            if made:
                buyer.set_unusable_password()
                buyer.save(update_fields=["password"])
            if not voucher.orders.filter(user=buyer).exists():
                order_purchase(user=buyer, voucher=voucher, now=now)
