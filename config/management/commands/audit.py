import json

from django.core.management.base import BaseCommand, CommandError

from inventory.audits import HoldCounts
from inventory.models import Strategy
from inventory.product import product_of
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.closing import close_cutoff
from inventory.redis_lua.item_states import item_reservations_check
from lottery.models import Pool
from lottery.selectors import pool_audits
from orders.models import Voucher
from orders.selectors import voucher_audits
from payments.selectors import PaymentsAudit, payments_audits


def _holds_header(settled: str) -> str:
    """The lifecycle's columns (docs/design.md, "Lifecycle"): held now, settled (``settled``:
    paid or claimed, or settled when taken), released, units returned twice, and records both
    settled and released; the last two are 0 under a guarded strategy."""
    return f"{'held':>6} {settled:>7} {'released':>8} {'returned2x':>10} {'both':>5}"


def _holds_cells(holds: HoldCounts) -> str:
    return (
        f"{holds.held:>6} {holds.settled:>7} {holds.released:>8} {holds.returned_twice:>10} "
        f"{holds.settled_and_released:>5}"
    )


def _payments_header() -> str:
    """A voucher's payments (``payments.selectors.payments_audit``): the provider's
    confirmations, the payments paid and refunded, and whether they add up ("-" for a voucher
    nobody paid through the provider)."""
    return f"{'confirmations':>13} {'pay_paid':>8} {'refunded':>8} {'payments_ok':>11}"


def _payments_cells(paid: PaymentsAudit) -> str:
    word = "-" if not paid.used else "yes" if paid.ok else "NO"
    return f"{paid.confirmations:>13} {paid.paid:>8} {paid.refunded:>8} {word:>11}"


class Command(BaseCommand):
    help = (
        'Check the invariants of every voucher and prize pool (docs/design.md, "Invariants"); exit 1 when one breaks. '
        "For redis_lua items, Redis is compared with the database too (invariant 5, as reconcile does). "
        "The lifecycle's counts: records held now, settled (paid, claimed), released (back in stock), units "
        "returned twice (returned2x) and records both settled and released (both), the last two 0 when sound. "
        "A voucher's payments: the provider's confirmations, paid, refunded, and whether they add up (payments_ok, "
        "judged once the voucher has any)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--voucher", type=int, action="append", help="Only this voucher id (repeatable).")
        parser.add_argument("--pool", type=int, action="append", help="Only this pool id (repeatable).")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON document instead of tables."
        )

    def handle(self, *args, voucher=None, pool=None, as_json: bool = False, **options):
        only_some = voucher is not None or pool is not None
        voucher_ids = self._ids(Voucher, voucher, only_some, "voucher")
        pool_ids = self._ids(Pool, pool, only_some, "pool")
        # Each table read in one pass grouped by item, whatever the number of items.
        vouchers = voucher_audits(voucher_ids=voucher_ids)
        self.payments = payments_audits(voucher_ids=voucher_ids)
        pools = pool_audits(pool_ids=pool_ids)
        self.redis = self._redis_checks(voucher_ids, pool_ids)
        broken = [a for a in vouchers if not self._ok(a, "voucher", a.voucher_id)]
        broken += [a for a in pools if not self._ok(a, "pool", a.pool_id)]
        if as_json:
            document = {
                "vouchers": [self._as_json(a, "voucher", a.voucher_id) for a in vouchers],
                "pools": [self._as_json(a, "pool", a.pool_id) for a in pools],
                "ok": not broken,
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            self._vouchers_table(vouchers)
            self._pools_table(pools)
            self.stdout.write(f"{len(vouchers)} vouchers, {len(pools)} pools, {len(broken)} broken.")
        if broken:
            raise SystemExit(1)

    @staticmethod
    def _redis_checks(voucher_ids: list[int], pool_ids: list[int]) -> dict:
        """Invariant 5 for the redis_lua items: their Redis state against the database."""
        reservations = reservations_client()
        return {
            (kind, item.pk): item_reservations_check(product, item=item, reservations=reservations)
            for kind, ids in (("voucher", voucher_ids), ("pool", pool_ids))
            for product in [product_of(kind)]
            # A sale closed long ago has had its keys removed: nothing in Redis to compare.
            for item in product.items().filter(pk__in=ids, strategy=Strategy.REDIS_LUA, end_at__gt=close_cutoff())
        }

    def _ok(self, audit, kind: str, pk: int) -> bool:
        check = self.redis.get((kind, pk))
        paid = self.payments.get(pk) if kind == "voucher" else None
        paid_ok = paid is None or not paid.used or paid.ok
        return audit.ok and (check is None or (check.state and not check.drifted)) and paid_ok

    def _as_json(self, audit, kind: str, pk: int) -> dict:
        check = self.redis.get((kind, pk))
        extra = {} if check is None else {"redis": check.as_dict()}
        if kind == "voucher":
            extra["payments"] = self.payments[pk].as_dict()
        return audit.as_dict() | extra | {"ok": self._ok(audit, kind, pk)}

    def _redis_word(self, kind: str, pk: int) -> str:
        check = self.redis.get((kind, pk))
        if check is None:
            return "-"
        return "no state" if not check.state else "DRIFT" if check.drifted else "agrees"

    @staticmethod
    def _ids(model, asked: list[int] | None, only_some: bool, label: str) -> list[int]:
        if asked is None:
            return [] if only_some else list(model.objects.order_by("id").values_list("id", flat=True))
        missing = set(asked) - set(model.objects.filter(id__in=asked).values_list("id", flat=True))
        if missing:
            raise CommandError(f"No {label} with id {', '.join(map(str, sorted(missing)))}.")
        return asked

    def _vouchers_table(self, audits) -> None:
        if not audits:
            return
        self.stdout.write(
            f"{'voucher':>7} {'strategy':<15} {'supplied':>8} {'stock':>6} {'orders':>6} {'oversold':>8} "
            f"{'dups':>5} {_holds_header('paid')} {_payments_header()} {'conserved':>9} {'redis':>8}  verdict"
        )
        for a in audits:
            redis = self._redis_word("voucher", a.voucher_id)
            self.stdout.write(
                f"{a.voucher_id:>7} {a.strategy:<15} {a.supplied:>8} {a.stock:>6} {a.orders:>6} {a.oversold:>8} "
                f"{a.duplicates:>5} {_holds_cells(a.holds)} {_payments_cells(self.payments[a.voucher_id])} "
                f"{'yes' if a.conserved else 'NO':>9} {redis:>8}  "
                f"{'ok' if self._ok(a, 'voucher', a.voucher_id) else 'BROKEN'}"
            )

    def _pools_table(self, audits) -> None:
        if not audits:
            return
        self.stdout.write(
            f"{'pool':>7} {'strategy':<15} {'supplied':>8} {'stock':>6} {'awarded':>7} {'over':>5} "
            f"{'draws':>6} {'users>limit':>11} {_holds_header('claimed')} {'conserved':>9} {'redis':>8}  verdict"
        )
        for a in audits:
            self.stdout.write(
                f"{a.pool_id:>7} {a.strategy:<15} {a.supplied:>8} {a.stock:>6} {a.awarded:>7} {a.over_awarded:>5} "
                f"{a.draws:>6} {a.users_over_limit:>11} {_holds_cells(a.holds)} {'yes' if a.conserved else 'NO':>9} "
                f"{self._redis_word('pool', a.pool_id):>8}  {'ok' if self._ok(a, 'pool', a.pool_id) else 'BROKEN'}"
            )
