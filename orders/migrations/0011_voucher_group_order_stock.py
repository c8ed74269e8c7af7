"""A voucher owns its stock group, as a pool does, rather than one stock row; every order
carries the stock row it took its unit from. Filled from the rows each voucher had, in one
UPDATE per column whatever the number of orders. Reversible: back, a voucher gets the first
row of its group again."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill(apps, schema_editor):
    Stock = apps.get_model("inventory", "Stock")
    Voucher = apps.get_model("orders", "Voucher")
    Order = apps.get_model("orders", "Order")
    Voucher.objects.update(group_id=Subquery(Stock.objects.filter(pk=OuterRef("stock_id")).values("group_id")[:1]))
    Order.objects.update(stock_id=Subquery(Voucher.objects.filter(pk=OuterRef("voucher_id")).values("stock_id")[:1]))


def fill_back(apps, schema_editor):
    Stock = apps.get_model("inventory", "Stock")
    Voucher = apps.get_model("orders", "Voucher")
    first_row = Stock.objects.filter(group_id=OuterRef("group_id")).order_by("pk").values("pk")[:1]
    Voucher.objects.update(stock_id=Subquery(first_row))


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0006_running_totals"),
        ("orders", "0010_order_voucher_user_status"),
    ]

    operations = [
        migrations.AddField(
            model_name="voucher",
            name="group",
            field=models.OneToOneField(
                editable=False,
                null=True,
                on_delete=models.deletion.PROTECT,
                related_name="voucher",
                to="inventory.stockgroup",
            ),
        ),
        migrations.AddField(
            model_name="order",
            name="stock",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=models.deletion.PROTECT,
                related_name="orders",
                to="inventory.stock",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="voucher",
            name="group",
            field=models.OneToOneField(
                editable=False, on_delete=models.deletion.PROTECT, related_name="voucher", to="inventory.stockgroup"
            ),
        ),
        # Nullable for a moment, so that going back adds the column before filling it.
        migrations.AlterField(
            model_name="voucher",
            name="stock",
            field=models.OneToOneField(
                null=True, on_delete=models.deletion.PROTECT, related_name="voucher", to="inventory.stock"
            ),
        ),
        migrations.RunPython(migrations.RunPython.noop, fill_back),
        migrations.RemoveField(
            model_name="voucher",
            name="stock",
        ),
    ]
