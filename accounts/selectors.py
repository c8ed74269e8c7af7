from __future__ import annotations

from functools import lru_cache

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from .models import ApiToken
from .services import token_hash


@lru_cache(maxsize=1)
def _token_user_query() -> tuple[str, list[str]]:
    """The SQL of :func:`user_for_token` and the user's field names, built once per process."""
    User = get_user_model()
    quote = connection.ops.quote_name
    fields = User._meta.concrete_fields
    columns = ", ".join(f"u.{quote(field.column)}" for field in fields)
    user_id = ApiToken._meta.get_field("user").column
    key_hash = ApiToken._meta.get_field("key_hash").column
    is_active = User._meta.get_field("is_active").column
    expires_at = ApiToken._meta.get_field("expires_at").column
    sql = (
        f"SELECT {columns} FROM {quote(User._meta.db_table)} u"
        f" INNER JOIN {quote(ApiToken._meta.db_table)} t ON t.{quote(user_id)} = u.{quote(User._meta.pk.column)}"
        f" WHERE t.{quote(key_hash)} = %s AND t.{quote(expires_at)} > %s AND u.{quote(is_active)}"
    )
    return sql, [field.attname for field in fields]


def user_for_token(*, raw: str):
    """The active user holding this bearer token, while it has not expired; or None.

    One query for the user alone, written as SQL: it runs on every API request, and
    the ORM spent five times the CPU building the same query (0.41 ms against 0.085
    ms measured here) as the database spent answering it.
    """
    sql, names = _token_user_query()
    with connection.cursor() as cursor:
        # The database's own form of the time (naive UTC on MySQL, text on SQLite), as the
        # ORM would send it.
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        cursor.execute(sql, [token_hash(raw), now])
        row = cursor.fetchone()
    return None if row is None else get_user_model().from_db(connection.alias, names, row)


def tokens_of_user(*, user) -> list[ApiToken]:
    """The user's tokens that still work, newest first."""
    return list(ApiToken.objects.filter(user=user, expires_at__gt=timezone.now()).order_by("-created_at", "-pk"))
