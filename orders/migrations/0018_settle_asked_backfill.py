from django.db import migrations


def settle_asked_marked(apps, schema_editor):
    """A held order whose payment waits for its confirmation, made before this mark existed,
    is marked as the pay marks one now (``inventory.holds.hold_settle_asked``): its lapse after
    a late confirmation is then no abandoned hold either. One statement per open payment, of
    which there are as many as orders held with a payment waiting."""
    Order = apps.get_model("orders", "Order")
    Payment = apps.get_model("payments", "Payment")
    waiting = Payment.objects.filter(open_guard__isnull=False).values_list("open_guard", "created_at")
    for order_id, asked_at in waiting.iterator():
        Order.objects.filter(pk=order_id, status="held", settle_asked_at__isnull=True).update(settle_asked_at=asked_at)


class Migration(migrations.Migration):
    dependencies = [
        ("orders", "0017_item_shown"),
        ("payments", "0001_initial"),
    ]

    operations = [migrations.RunPython(settle_asked_marked, migrations.RunPython.noop)]
