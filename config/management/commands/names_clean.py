"""``manage.py names_clean``: the titles and names stored before the rule of ``core.names``
refused bidirectional and other control characters in them, cleaned."""

from __future__ import annotations

from functools import reduce
from operator import or_

from django.core.management.base import BaseCommand
from django.db.models import Model, Q

from core.names import NAME_REFUSED, name_scrubbed
from lottery.models import Pool, Prize
from orders.models import Voucher

# Each model's name as the API and the admin call it.
NAMED = ((Voucher, "title"), (Pool, "name"), (Prize, "name"))


def names_refused(model: type[Model], field: str):
    """The rows whose ``field`` holds a refused character: found by the database (a binary
    comparison on MariaDB, where the collation ignores some of these characters), not read
    one by one."""
    return model.objects.filter(reduce(or_, (Q(**{f"{field}__contains": char}) for char in NAME_REFUSED)))


class Command(BaseCommand):
    help = (
        "Clean the voucher titles, pool names and prize names that hold a bidirectional control (U+202E "
        "RIGHT-TO-LEFT OVERRIDE and the like) or another control character, stored before the API, the admin "
        "and the services refused them (core/names.py): those characters are taken out, and a name left with "
        "nothing that shows becomes the model's name and id. --dry-run says what would change."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Say what would change; change nothing.")

    def handle(self, *args, dry_run: bool, **options):
        changed = 0
        for model, field in NAMED:
            kind = model._meta.verbose_name
            for pk, old in names_refused(model, field).order_by("pk").values_list("pk", field):
                new = name_scrubbed(old) or f"{kind.capitalize()} {pk}"
                if new == old:
                    continue
                self.stdout.write(f"{kind} {pk} {field}: {ascii(old)} -> {ascii(new)}")
                # Only if unchanged since it was read: a rename meanwhile stands.
                if dry_run or model.objects.filter(pk=pk, **{field: old}).update(**{field: new}):
                    changed += 1
        verb = "would be cleaned" if dry_run else "cleaned"
        self.stdout.write(f"{changed} name{'s' if changed != 1 else ''} {verb}.")
