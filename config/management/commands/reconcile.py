import json

from django.core.management.base import BaseCommand

from inventory.product import products
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.closing import item_keeps_state
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile


class Command(BaseCommand):
    help = (
        "Compare the redis_lua state in Redis with the database for every voucher and pool that has "
        'one (docs/design.md, "Invariants", 5); exit 1 when one drifted or has no state. With --repair, set the drift '
        "right (safe while a sale runs) and rebuild the missing state of every redis_lua item."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON document instead of lines."
        )
        parser.add_argument(
            "--repair",
            action="store_true",
            help="Repair drift and rebuild missing states (what the beat's reconciliation does every few seconds).",
        )

    def handle(self, *args, as_json: bool = False, repair: bool = False, **options):
        reservations = reservations_client()
        run = item_reservations_reconcile if repair else item_reservations_check
        checks = [
            (
                product.kind,
                item.pk,
                item_keeps_state(item),
                run(product, item=item, reservations=reservations),
            )
            for product in products()
            for item in product.items().order_by("id")
        ]
        # Items that never had a Redis state (other strategies) are not reported, nor those whose
        # sale closed long ago (their keys removed); a redis_lua item without one is (it answers
        # 503 until rebuilt).
        checked = [(kind, pk, check) for kind, pk, live, check in checks if check.state or check.pending or live]
        drifted = [item for item in checked if _broken(item[2])]
        if as_json:
            document = {
                "items": [{"kind": kind, "id": pk, **check.as_dict()} for kind, pk, check in checked],
                "ok": not drifted,
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            for kind, pk, check in checked:
                self.stdout.write(self._line(kind, pk, check))
            self.stdout.write(f"{len(checked)} with a Redis state, {len(drifted)} drifted or missing.")
        if drifted:
            raise SystemExit(1)

    @staticmethod
    def _line(kind: str, pk: int, check) -> str:
        head = f"{kind} {pk}: "
        if check.rebuilt:
            return head + "no state in Redis: rebuilt from the database"
        if not check.state:
            return head + f"no state in Redis (answering 503 until rebuilt), {check.pending} reservations waiting"
        parts = [f"{check.pending} pending (oldest {check.oldest_pending_seconds:.0f} s)"]
        parts += [f"stock {sid}: Redis {have}, expected {want}" for sid, (have, want) in check.stock.items()]
        parts += [f"user {uid}: Redis {have} takes, expected {want}" for uid, (have, want) in check.takers.items()]
        if check.seqs_missing:
            parts.append(f"{check.seqs_missing} take numbers not marked")
        verdict = "REPAIRED: " if check.repaired else "DRIFT: " if check.drifted else "ok, "
        return head + verdict + "; ".join(parts)


def _broken(check) -> bool:
    """Drift left as it is, or a redis_lua item with no state (it answers 503)."""
    return (check.drifted and not check.repaired) or not check.state
