import json

from django.core.management.base import BaseCommand, CommandError

from inventory.models import Voucher
from orders.selectors import voucher_audit


class Command(BaseCommand):
    help = "Check the invariants of DESIGN.md section 4 for every voucher; exit 1 when one breaks."

    def add_arguments(self, parser):
        parser.add_argument("--voucher", type=int, action="append", help="Only this voucher id (repeatable).")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="Print one JSON document instead of a table."
        )

    def handle(self, *args, voucher=None, as_json: bool = False, **options):
        ids = voucher or list(Voucher.objects.order_by("id").values_list("id", flat=True))
        missing = set(ids) - set(Voucher.objects.filter(id__in=ids).values_list("id", flat=True))
        if missing:
            raise CommandError(f"No voucher with id {', '.join(map(str, sorted(missing)))}.")
        audits = [voucher_audit(voucher_id=voucher_id) for voucher_id in ids]
        broken = [a for a in audits if not a.ok]
        if as_json:
            self.stdout.write(json.dumps({"vouchers": [a.as_dict() for a in audits], "ok": not broken}, indent=2))
        else:
            header = (
                f"{'id':>5} {'strategy':<15} {'supplied':>8} {'stock':>6} {'orders':>6} {'oversold':>8} "
                f"{'dups':>5} {'conserved':>9}  verdict"
            )
            self.stdout.write(header)
            for a in audits:
                self.stdout.write(
                    f"{a.voucher_id:>5} {a.strategy:<15} {a.supplied:>8} {a.stock:>6} {a.orders:>6} {a.oversold:>8} "
                    f"{a.duplicates:>5} {'yes' if a.conserved else 'NO':>9}  {'ok' if a.ok else 'BROKEN'}"
                )
            self.stdout.write(f"{len(audits)} vouchers, {len(broken)} broken.")
        if broken:
            raise SystemExit(1)
