import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import Max
from django.utils import timezone

from accounts.triggers import triggers_create, triggers_drop


def changes_recorded(apps, schema_editor):
    """The triggers record every change from now on; the users inactive already who hold a
    live token are recorded once here, so that every process learns them."""
    now = timezone.now()
    held = (
        apps.get_model("accounts", "ApiToken")
        .objects.filter(user__is_active=False, expires_at__gt=now)
        .values("user_id")
        .annotate(end=Max("expires_at"))
    )
    ActiveChange = apps.get_model("accounts", "ActiveChange")
    ActiveChange.objects.bulk_create(
        [ActiveChange(user_id=row["user_id"], changed_at=now, expires_at=row["end"]) for row in held], batch_size=1000
    )
    triggers_create(schema_editor, apps)


def changes_unrecorded(apps, schema_editor):
    triggers_drop(schema_editor, apps)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_revoked_token_expiry_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        # After every change of auth_user: on SQLite each remade the table, which would drop
        # the trigger on it and break the one that reads it.
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.CreateModel(
            name="ActiveChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("changed_at", models.DateTimeField(db_index=True)),
                ("expires_at", models.DateTimeField(db_index=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
        ),
        # Not in a transaction of its own: MySQL refuses DDL in one (a trigger is DDL).
        migrations.RunPython(changes_recorded, changes_unrecorded, atomic=False),
    ]
