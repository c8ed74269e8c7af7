"""Every draw carries the stock row it took its unit from (its prize's; none for "no
prize"), filled in one UPDATE whatever the number of draws."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill(apps, schema_editor):
    Prize = apps.get_model("lottery", "Prize")
    Draw = apps.get_model("lottery", "Draw")
    prize_row = Prize.objects.filter(pk=OuterRef("prize_id")).values("stock_id")[:1]
    Draw.objects.filter(prize__isnull=False).update(stock_id=Subquery(prize_row))


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0006_running_totals"),
        ("lottery", "0008_draw_created_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="draw",
            name="stock",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=models.deletion.PROTECT,
                related_name="draws",
                to="inventory.stock",
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
