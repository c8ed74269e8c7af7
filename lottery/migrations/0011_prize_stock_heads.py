"""Every prize's stock row becomes the head of its shares (``Stock.head``): the prize's rows,
one per bucket, are read together by it. A prize made before buckets has one row, its own
head; set in one UPDATE whatever the number of prizes."""

from django.db import migrations
from django.db.models import F


def fill(apps, schema_editor):
    Stock = apps.get_model("inventory", "Stock")
    Stock.objects.filter(prize__isnull=False, head__isnull=True).update(head=F("id"))


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0008_stock_head"),
        ("lottery", "0010_pool_buckets"),
    ]

    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
