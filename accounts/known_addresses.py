"""The addresses each account has logged in from, so that the login throttle can tell its
owner's usual places from a guesser's.

One Redis sorted set per account: the address, scored with the time of its last successful
login. It keeps the ``LOGIN_KNOWN_ADDRESSES`` most recent, for ``LOGIN_KNOWN_ADDRESS_SECONDS``
after the last success, so a login costs the same however long the account has been in use
and however many places it has logged in from; an address not used for that long is a
stranger again.
"""

from __future__ import annotations

from django.conf import settings


def known_address_score(pipe, key: str, address: str) -> None:
    """Queue the read of when ``address`` last logged in to the account (``None``: never)."""
    pipe.zscore(key, address)


def known_since_recent(score: float | None, *, now_ms: int) -> bool:
    """Whether a score read by ``known_address_score`` still makes the address known: the
    set's expiry is pushed back by every success, so an old member can outlive its own."""
    return score is not None and float(score) > now_ms - settings.LOGIN_KNOWN_ADDRESS_SECONDS * 1000


def known_address_remember(pipe, key: str, address: str, *, now_ms: int) -> None:
    """Queue remembering ``address`` as the account's own, dropping the oldest beyond the cap
    and those not used within the memory."""
    keep_ms = settings.LOGIN_KNOWN_ADDRESS_SECONDS * 1000
    pipe.zadd(key, {address: now_ms})
    pipe.zremrangebyscore(key, "-inf", now_ms - keep_ms)
    pipe.zremrangebyrank(key, 0, -settings.LOGIN_KNOWN_ADDRESSES - 1)
    pipe.pexpire(key, keep_ms)
