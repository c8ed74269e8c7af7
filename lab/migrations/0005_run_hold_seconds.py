"""A lifecycle run records the hold it ran with, rather than its page reading today's."""

from django.db import migrations, models

# The lifecycle scenarios, and the hold every one of them ran with, when this was written.
LIFECYCLE = ("abandon", "cancel-storm", "claim-race", "draw-abandon", "hoarding", "pay-race")
HELD_SECONDS = 2


def holds_recorded(apps, schema_editor):
    apps.get_model("lab", "LabRun").objects.filter(scenario__in=LIFECYCLE).update(hold_seconds=HELD_SECONDS)


class Migration(migrations.Migration):
    dependencies = [
        ("lab", "0004_run_and_lane_buckets"),
    ]

    operations = [
        migrations.AddField(
            model_name="labrun",
            name="hold_seconds",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(holds_recorded, migrations.RunPython.noop),
    ]
