"""Tokens carry a stamp, and a user's revoked tokens are recorded as one cutoff per user
(``TokenCutoff``) rather than one row per token (``RevokedToken``), which grew with every
login past the per-user cap and every logout, in every process's memory."""

from django.conf import settings
from django.db import migrations, models

from accounts.triggers import triggers_create, triggers_drop


def triggers_aside(apps, schema_editor):
    # SQLite remakes accounts_apitoken to add its stamp: a trigger naming the table stops
    # the remake, and a remade table would lose its own. Made again at the end.
    if schema_editor.connection.vendor == "sqlite":
        triggers_drop(schema_editor, apps)


def tokens_unstamped_delete(apps, schema_editor):
    """A token issued before stamps cannot be checked any more: its holder logs in again, as
    the tokens issued before signatures did (``0003_revoked_tokens``)."""
    apps.get_model("accounts", "ApiToken").objects.all().delete()


def triggers_again(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        triggers_create(schema_editor, apps)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0006_active_change_triggers"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(triggers_aside, triggers_again, atomic=False),
        migrations.RunPython(tokens_unstamped_delete, migrations.RunPython.noop),
        migrations.AddField(
            model_name="apitoken",
            name="stamp",
            field=models.PositiveBigIntegerField(default=0, editable=False),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="apitoken",
            constraint=models.UniqueConstraint(fields=("user", "stamp"), name="accounts_token_stamp_unique"),
        ),
        migrations.CreateModel(
            name="TokenCutoff",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("user_id", models.PositiveBigIntegerField(unique=True)),
                ("stamp", models.PositiveBigIntegerField()),
                ("spared", models.TextField(blank=True, default="")),
                ("changed_at", models.DateTimeField(db_index=True)),
                ("expires_at", models.DateTimeField(db_index=True)),
            ],
        ),
        migrations.DeleteModel(name="RevokedToken"),
        migrations.RunPython(triggers_again, triggers_aside, atomic=False),
    ]
