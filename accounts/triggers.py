"""The database triggers that record an ``ActiveChange`` (``accounts.models``), on MariaDB or
MySQL and on SQLite.

Triggers, not signals: ``User.objects.filter(...).update(is_active=False)`` sends none, nor
does raw SQL or a ``bulk_create`` of tokens, and every process must learn of a deactivation
within ``API_TOKEN_REVOCATIONS_REFRESH_SECONDS`` however it was made.

- ``accounts_user_active_changed``: a user's ``is_active`` changed. A deactivation is
  recorded when the user holds a token that has not ended, until the latest end among its
  tokens (one holding none has nothing to refuse); a reactivation always, for the processes
  that refuse the user's tokens to stop.
- ``accounts_token_of_inactive_user``: a token inserted for an inactive user, until its end.

The stamp is the database's clock in UTC, as Django stores datetimes (:func:`database_now`
reads it for the revocations' stamps and reads). On MariaDB or MySQL
with binary logging on, creating a trigger needs the ``SUPER`` privilege or
``log_bin_trust_function_creators=1`` (docs/operations.md). On SQLite, Django alters a column
by remaking the table, which drops its triggers: a migration that remakes ``auth_user`` or
``accounts_apitoken`` there calls :func:`triggers_create` again.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.conf import settings
from django.db import connection

USER_TRIGGER = "accounts_user_active_changed"
TOKEN_TRIGGER = "accounts_token_of_inactive_user"

_MYSQL = {
    USER_TRIGGER: """
        CREATE TRIGGER {user_trigger} AFTER UPDATE ON {user} FOR EACH ROW
        INSERT INTO {change} (user_id, changed_at, expires_at)
        SELECT NEW.{pk}, {now}, IF(NEW.{active}, {now}, (SELECT MAX(expires_at) FROM {token} WHERE user_id = NEW.{pk}))
        FROM DUAL
        WHERE NEW.{active} <> OLD.{active}
          AND (NEW.{active} OR EXISTS (SELECT 1 FROM {token} WHERE user_id = NEW.{pk} AND expires_at > {now}))
    """,
    TOKEN_TRIGGER: """
        CREATE TRIGGER {token_trigger} AFTER INSERT ON {token} FOR EACH ROW
        INSERT INTO {change} (user_id, changed_at, expires_at)
        SELECT {pk}, {now}, NEW.expires_at FROM {user} WHERE {pk} = NEW.user_id AND NOT {active}
    """,
}
_SQLITE = {
    USER_TRIGGER: """
        CREATE TRIGGER {user_trigger} AFTER UPDATE OF {active} ON {user} FOR EACH ROW
        WHEN NEW.{active} <> OLD.{active}
          AND (NEW.{active} OR EXISTS (SELECT 1 FROM {token} WHERE user_id = NEW.{pk} AND expires_at > {now}))
        BEGIN
            INSERT INTO {change} (user_id, changed_at, expires_at)
            VALUES (NEW.{pk}, {now}, CASE WHEN NEW.{active} THEN {now}
                ELSE (SELECT MAX(expires_at) FROM {token} WHERE user_id = NEW.{pk}) END);
        END
    """,
    TOKEN_TRIGGER: """
        CREATE TRIGGER {token_trigger} AFTER INSERT ON {token} FOR EACH ROW
        WHEN NOT (SELECT {active} FROM {user} WHERE {pk} = NEW.user_id)
        BEGIN
            INSERT INTO {change} (user_id, changed_at, expires_at) VALUES (NEW.user_id, {now}, NEW.expires_at);
        END
    """,
}
# Django stores a datetime on SQLite as text, 'YYYY-MM-DD HH:MM:SS.ffffff' in UTC: this
# sorts among those.
DATABASE_NOW = {"mysql": "UTC_TIMESTAMP(6)", "sqlite": "strftime('%Y-%m-%d %H:%M:%f', 'now')"}


def database_now() -> datetime:
    """The database's clock, in UTC: the one clock that stamps and reads the revocations
    (``accounts.tokens``), whichever process or host writes or reads them."""
    vendor = connection.vendor
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {DATABASE_NOW[vendor]}")
        value = cursor.fetchone()[0]
    if isinstance(value, str):  # SQLite's text
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC)


def _statements(schema_editor, apps) -> dict[str, str]:
    vendor = schema_editor.connection.vendor
    if vendor not in DATABASE_NOW:
        raise NotImplementedError(f"accounts.triggers knows MariaDB/MySQL and SQLite, not {vendor}")
    quote = schema_editor.quote_name
    User = apps.get_model(settings.AUTH_USER_MODEL)
    names = {
        "user": quote(User._meta.db_table),
        "pk": quote(User._meta.pk.column),
        "active": quote(User._meta.get_field("is_active").column),
        "token": quote(apps.get_model("accounts", "ApiToken")._meta.db_table),
        "change": quote(apps.get_model("accounts", "ActiveChange")._meta.db_table),
        "user_trigger": quote(USER_TRIGGER),
        "token_trigger": quote(TOKEN_TRIGGER),
        "now": DATABASE_NOW[vendor],
    }
    return {name: sql.format(**names) for name, sql in (_MYSQL if vendor == "mysql" else _SQLITE).items()}


def triggers_create(schema_editor, apps) -> None:
    """Create both triggers (again: those of the same name go first)."""
    triggers_drop(schema_editor, apps)
    for sql in _statements(schema_editor, apps).values():
        schema_editor.execute(sql, params=None)


def triggers_drop(schema_editor, apps) -> None:
    for name in (USER_TRIGGER, TOKEN_TRIGGER):
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {schema_editor.quote_name(name)}", params=None)
