"""Every stock row joins a group: the candidates a take chooses among.

Each existing row (a voucher's stock) gets a group of its own. Fences are reset:
the redis_lock strategy now locks the group (``stock-group:<id>``) instead of the
row (``stock:<id>``), and fences are counted per lock name, so a row still
carrying a fence of the old name would refuse every holder of the new one.
"""

import django.db.models.deletion
from django.db import migrations, models


def give_each_stock_a_group(apps, schema_editor):
    Stock = apps.get_model("inventory", "Stock")
    StockGroup = apps.get_model("inventory", "StockGroup")
    for stock in Stock.objects.filter(group__isnull=True).only("id"):
        group = StockGroup.objects.create()
        Stock.objects.filter(pk=stock.pk).update(group=group, fence=0)


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0003_redlock_strategy'),
    ]

    operations = [
        migrations.CreateModel(
            name='StockGroup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('version', models.PositiveBigIntegerField(default=0, help_text="Bumped by db_optimistic's writes and by every restock; db_optimistic compares it before writing.")),
            ],
        ),
        migrations.AddField(
            model_name='stock',
            name='group',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='stocks', to='inventory.stockgroup'),
        ),
        migrations.RunPython(give_each_stock_a_group, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='stock',
            name='group',
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='stocks', to='inventory.stockgroup'),
        ),
        migrations.AlterField(
            model_name='stock',
            name='version',
            field=models.PositiveBigIntegerField(default=0, help_text='Bumped by every write of this row.'),
        ),
    ]
