from django.db import migrations

from lab.proofs import run_proves


def proves_again(apps, schema_editor):
    """A run whose unsafe lane did not reproduce the race stands for no proof now: each run
    standing for one is keyed again as it finishes today (the others stood for none already)."""
    LabRun = apps.get_model("lab", "LabRun")
    for run in LabRun.objects.exclude(proves="").iterator():
        again = run_proves(run)
        if again != run.proves:
            LabRun.objects.filter(pk=run.pk).update(proves=again)


class Migration(migrations.Migration):
    dependencies = [("lab", "0007_run_proves")]

    operations = [migrations.RunPython(proves_again, migrations.RunPython.noop)]
