"""Issuing bearer tokens and creating many load-test users fast."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import transaction

from .models import ApiToken


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def _new_token() -> tuple[str, str]:
    raw = secrets.token_urlsafe(32)
    return raw, token_hash(raw)


def token_issue(*, user) -> str:
    """A new bearer token for ``user``; the raw value is returned once and never stored."""
    raw, digest = _new_token()
    ApiToken.objects.create(user=user, key_hash=digest)
    return raw


@transaction.atomic
def users_with_tokens_create(
    *, count: int, prefix: str = "load", password: str | None = None, staff: bool = False
) -> list[tuple[str, str]]:
    """Create ``count`` users named ``<prefix>-<batch>-<n>`` with one token each.

    Returns ``(username, token)`` pairs. One bulk insert per table and one password
    hash shared by all (hashing per user would take minutes for thousands); the
    users cannot log in with a password unless ``password`` is given.
    """
    if count < 1:
        raise ValueError("count must be at least 1")
    User = get_user_model()
    batch = secrets.token_hex(3)  # lets the command run again without name clashes
    names = [f"{prefix}-{batch}-{n}" for n in range(1, count + 1)]
    hashed = make_password(password)  # unusable when password is None
    User.objects.bulk_create([User(username=name, password=hashed, is_staff=staff) for name in names], batch_size=1000)
    users = User.objects.filter(username__in=names).only("id", "username")
    pairs, tokens = [], []
    for user in users:
        raw, digest = _new_token()
        pairs.append((user.username, raw))
        tokens.append(ApiToken(user=user, key_hash=digest))
    ApiToken.objects.bulk_create(tokens, batch_size=1000)
    return pairs


def tokens_revoke(*, username_prefix: str) -> int:
    """Delete every token of the users whose name starts with ``username_prefix`` (a load
    run's crowd, once it is over); the number deleted."""
    if not username_prefix:
        raise ValueError("a prefix is needed: revoking every token is not what this is for")
    deleted, _ = ApiToken.objects.filter(user__username__startswith=username_prefix).delete()
    return deleted
