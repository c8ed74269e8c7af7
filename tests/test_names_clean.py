"""``manage.py names_clean``: titles and names stored before ``core.names`` refused their
bidirectional and other controls, found by the database and cleaned, or only shown."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from core.names import name_problem
from lottery.models import Pool, Prize
from orders.models import Voucher

pytestmark = pytest.mark.django_db

OVERRIDE = "Gift\u202egnp.exe"  # reads as "Giftexe.png"


def clean(*args: str) -> str:
    out = io.StringIO()
    call_command("names_clean", *args, stdout=out)
    return out.getvalue()


def stored(model, pk: int, **field: str) -> None:
    """A name as a row held it before the rule: written past the services, which refuse it."""
    model.objects.filter(pk=pk).update(**field)


def test_names_with_bidi_and_other_controls_are_found_shown_and_cleaned(make_voucher, make_pool):
    voucher, fine = make_voucher(title="Old title"), make_voucher(title="Caf\u00e9 \u05e9\u05dc\u05d5\u05dd")
    pool = make_pool(name="Old pool")
    gold, silver = pool.prizes.order_by("pk")
    stored(Voucher, voucher.pk, title=OVERRIDE)
    stored(Pool, pool.pk, name="\u2067Lucky\u2069 wheel\x00")
    stored(Prize, gold.pk, name="\u202e\u200f ")  # nothing left that shows

    dry = clean("--dry-run")
    assert f"voucher {voucher.pk} title: {ascii(OVERRIDE)} -> 'Giftgnp.exe'" in dry
    assert f"pool {pool.pk} name: " in dry and f"prize {gold.pk} name: " in dry
    assert dry.rstrip().endswith("3 names would be cleaned.")
    assert Voucher.objects.get(pk=voucher.pk).title == OVERRIDE  # a dry run changes nothing

    assert clean().rstrip().endswith("3 names cleaned.")
    assert Voucher.objects.get(pk=voucher.pk).title == "Giftgnp.exe"
    assert Pool.objects.get(pk=pool.pk).name == "Lucky wheel"
    assert Prize.objects.get(pk=gold.pk).name == f"Prize {gold.pk}"
    # Untouched: names the rule takes, right-to-left letters included.
    assert Voucher.objects.get(pk=fine.pk).title == "Caf\u00e9 \u05e9\u05dc\u05d5\u05dd"
    assert Prize.objects.get(pk=silver.pk).name == "Silver"
    names = [*Voucher.objects.values_list("title", flat=True), *Prize.objects.values_list("name", flat=True)]
    assert not [name for name in names if name_problem(name)]
    assert clean() == "0 names cleaned.\n"
