"""The triggers that record each change of a user's ``is_active`` (``accounts.triggers``), in
a migration of their own: where the database refuses them (MySQL's binary log without the
privilege, docs/operations.md), this one stops alone and runs again once allowed."""

from django.conf import settings
from django.db import migrations
from django.db.models import Max
from django.utils import timezone

from accounts.triggers import triggers_create, triggers_drop


def changes_recorded(apps, schema_editor):
    """The triggers record every change from now on (made first: a deactivation meanwhile is
    then recorded twice rather than missed); the users inactive already who hold a live
    token are recorded once here, so that every process learns them."""
    triggers_create(schema_editor, apps)
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


def changes_unrecorded(apps, schema_editor):
    triggers_drop(schema_editor, apps)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0005_active_changes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Not in a transaction of its own: MySQL refuses DDL in one (a trigger is DDL).
        migrations.RunPython(changes_recorded, changes_unrecorded, atomic=False),
    ]
