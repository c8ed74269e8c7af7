import json

from django.core.management.base import BaseCommand

from inventory.persist import reservations_client
from lottery.models import Pool
from lottery.reservations import pool_reservations_check
from orders.models import Voucher
from orders.reservations import voucher_reservations_check


class Command(BaseCommand):
    help = (
        "Compare the redis_lua state in Redis with the database for every voucher and pool that has "
        'one (docs/design.md, "Invariants", 5); exit 1 when one drifted. Reports only: it repairs nothing.'
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON document instead of lines."
        )

    def handle(self, *args, as_json: bool = False, **options):
        reservations = reservations_client()
        checks = [
            ("voucher", voucher.pk, voucher_reservations_check(voucher=voucher, reservations=reservations))
            for voucher in Voucher.objects.select_related("stock").order_by("id")
        ] + [
            ("pool", pool.pk, pool_reservations_check(pool=pool, reservations=reservations))
            for pool in Pool.objects.order_by("id")
        ]
        # Items that never had a Redis state (other strategies) are not reported.
        checked = [(kind, pk, check) for kind, pk, check in checks if check.state or check.pending]
        drifted = [item for item in checked if item[2].drifted]
        if as_json:
            document = {
                "items": [{"kind": kind, "id": pk, **check.as_dict()} for kind, pk, check in checked],
                "ok": not drifted,
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            for kind, pk, check in checked:
                self.stdout.write(self._line(kind, pk, check))
            self.stdout.write(f"{len(checked)} with a Redis state, {len(drifted)} drifted.")
        if drifted:
            raise SystemExit(1)

    @staticmethod
    def _line(kind: str, pk: int, check) -> str:
        head = f"{kind} {pk}: "
        if not check.state:
            return head + f"no state in Redis, {check.pending} reservations waiting"
        parts = [f"{check.pending} pending (oldest {check.oldest_pending_seconds:.0f} s)"]
        parts += [f"stock {sid}: Redis {have}, expected {want}" for sid, (have, want) in check.stock.items()]
        parts += [f"user {uid}: Redis {have} takes, expected {want}" for uid, (have, want) in check.takers.items()]
        return head + ("DRIFT: " if check.drifted else "ok, ") + "; ".join(parts)
