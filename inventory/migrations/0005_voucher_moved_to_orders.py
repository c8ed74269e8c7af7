"""The voucher now lives in ``orders`` (its migration 0002 renamed the table); here it
only leaves ``inventory``'s model state."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0004_stock_group'),
        ('orders', '0002_voucher_from_inventory'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name='Voucher')]),
    ]
