"""The running totals of the takes (inventory.totals): each stock row's units held by
records, and each group's takes beyond the per-user rule, counted once here from the
records already written; every take and return keeps them from then on."""

from django.db import migrations, models
from django.db.models import Count

TAKING = ("held", "confirmed", "paid", "claimed")
RELEASED = ("cancelled", "expired", "forfeited")


def _over(per_user, allowed_of):
    """{item id: (takes beyond the rule, users beyond it)} from (item id, records) per user."""
    over = {}
    for item_id, n in per_user.iterator():
        allowed = allowed_of[item_id]
        if n > allowed:
            takes, users = over.get(item_id, (0, 0))
            over[item_id] = (takes + n - allowed, users + 1)
    return over


def count(apps, schema_editor):
    Stock = apps.get_model("inventory", "Stock")
    StockGroup = apps.get_model("inventory", "StockGroup")
    Voucher = apps.get_model("orders", "Voucher")
    Order = apps.get_model("orders", "Order")
    Pool = apps.get_model("lottery", "Pool")
    Draw = apps.get_model("lottery", "Draw")

    taken = Order.objects.filter(status__in=TAKING).values("voucher__stock_id").annotate(n=Count("id"))
    for row in taken.values_list("voucher__stock_id", "n"):
        Stock.objects.filter(pk=row[0]).update(taken=row[1])
    awarded = Draw.objects.filter(status__in=TAKING, prize__isnull=False).values("prize__stock_id")
    for stock_id, n in awarded.annotate(n=Count("id")).values_list("prize__stock_id", "n"):
        Stock.objects.filter(pk=stock_id).update(taken=n)

    # A voucher allows one order per user that still holds its take; a pool its draw limit,
    # every draw counted.
    orders = Order.objects.exclude(status__in=RELEASED).values("voucher_id", "user_id").annotate(n=Count("id"))
    groups = dict(Voucher.objects.values_list("pk", "stock__group_id"))
    for voucher_id, (takes, users) in _over(orders.values_list("voucher_id", "n"), dict.fromkeys(groups, 1)).items():
        StockGroup.objects.filter(pk=groups[voucher_id]).update(over_takes=takes, over_takers=users)
    limits = dict(Pool.objects.values_list("pk", "draws_per_user"))
    draws = Draw.objects.values("pool_id", "user_id").annotate(n=Count("id")).values_list("pool_id", "n")
    pool_groups = dict(Pool.objects.values_list("pk", "group_id"))
    for pool_id, (takes, users) in _over(draws, limits).items():
        StockGroup.objects.filter(pk=pool_groups[pool_id]).update(over_takes=takes, over_takers=users)


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0005_voucher_moved_to_orders"),
        ("orders", "0007_lifecycle"),
        ("lottery", "0006_lifecycle"),
    ]

    operations = [
        migrations.AddField(
            model_name="stock",
            name="taken",
            field=models.IntegerField(default=0, editable=False, help_text="Units held or settled by records."),
        ),
        migrations.AddField(
            model_name="stockgroup",
            name="over_takers",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.AddField(
            model_name="stockgroup",
            name="over_takes",
            field=models.PositiveIntegerField(default=0, editable=False),
        ),
        migrations.RunPython(count, migrations.RunPython.noop),
    ]
