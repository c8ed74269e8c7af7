"""The voucher moves from ``inventory`` to ``orders``, next to its orders; every row is kept.

The table is renamed (``inventory_voucher`` -> ``orders_voucher``), the order's
foreign key follows it (the database's constraint already points at that table),
and the voucher's admin permissions move with its content type.
"""

import django.db.models.deletion
import inventory.models
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    if not ContentType.objects.filter(app_label="orders", model="voucher").exists():
        ContentType.objects.filter(app_label="inventory", model="voucher").update(app_label="orders")


class Migration(migrations.Migration):

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('inventory', '0004_stock_group'),
        ('orders', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Voucher',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('begin_at', models.DateTimeField()),
                        ('end_at', models.DateTimeField()),
                        ('title', models.CharField(max_length=200)),
                        ('description', models.TextField(blank=True)),
                        ('strategy', models.CharField(choices=[('none', 'none: naive read-check-write (oversells)'), ('local', 'local: process-local lock (oversells across processes)'), ('db_pessimistic', 'db_pessimistic: SELECT ... FOR UPDATE'), ('db_optimistic', 'db_optimistic: version compare-and-set'), ('db_atomic', 'db_atomic: conditional UPDATE'), ('redis_lock', 'redis_lock: per-item and per-user Redis locks'), ('redlock', 'redlock: the same locks on a majority of Redis servers')], default=inventory.models.default_strategy, max_length=32)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('stock', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='voucher', to='inventory.stock')),
                    ],
                    options={
                        'db_table': 'inventory_voucher',
                        'ordering': ['begin_at', 'id'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('end_at__gt', models.F('begin_at'))), name='voucher_window_ordered')],
                    },
                ),
                migrations.AlterField(
                    model_name='order',
                    name='voucher',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='orders', to='orders.voucher'),
                ),
            ],
        ),
        migrations.AlterModelTable(name='voucher', table=None),
        migrations.RunPython(move_content_type, migrations.RunPython.noop),
    ]
