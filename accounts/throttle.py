"""Login throttling: failed logins counted in Redis and checked before the password is
hashed, so that a flood of guesses neither finds a password nor ties up the workers (each
hash costs about 0.3 s of CPU by design).

Three counts, so that nobody can lock a named account from where they sit:

- per account *and* address, with backoff: after ``LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS``
  failures that account is refused from that address for ``LOGIN_BACKOFF_SECONDS``, doubled
  at each further failure up to ``LOGIN_FAILURE_WINDOW_SECONDS``. The owner, elsewhere, still
  logs in; a success from the address forgets its failures;
- per account alone, a higher ceiling (``LOGIN_FAILURES_PER_ACCOUNT``): guesses spread over
  many addresses still end, for the rest of the window. An address the account has logged
  in from before (``accounts.known_addresses``) is not held to it: guesses from elsewhere
  cannot lock the owner out where the owner usually logs in;
- per address alone (``LOGIN_FAILURES_PER_ADDRESS``): one address guessing many accounts.

The account is counted as the login finds it: the user the database finds under the name,
by its collation, as Django's own lookup compares names (MariaDB's ignores case, accents and
trailing spaces: ``Staff ``, ``STÁFF`` and ``staff`` are one account), one indexed query; a
name that finds no user, which no password can log in, under the database's own sort key of
the name, so that its spellings count as one as an existing user's do. Counted under the
name alone, spellings the database takes for one name were as many accounts, each with a
ceiling of its own; normalised apart from the database, a 429 told which names exist.
The throttle is always on: ``RATE_LIMITS_ENABLED`` switches the crowd's limits only.
"""

from __future__ import annotations

import functools
import logging
import math
import time

import redis
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from core.namespace import instance_key
from core.ratelimit import RateLimited
from locking.integration import locks_redis

from .known_addresses import known_address_remember, known_address_score, known_since_recent

logger = logging.getLogger(__name__)

# What the throttle reads the time from, in seconds (a test moves it instead of waiting).
clock = time.time

# Count one failure. KEYS[1] the account-and-address hash (failures `n`, refused `until` ms),
# KEYS[2] the account's counter, KEYS[3] the address's.
# ARGV: now (ms), window (ms), failures free of backoff, first backoff (ms).
RECORD = """
local now, window, free, backoff = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
for i = 2, 3 do
    if redis.call('INCR', KEYS[i]) == 1 then redis.call('PEXPIRE', KEYS[i], window) end
end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
local keep = window
if n >= free then
    local wait = math.min(backoff * 2 ^ (n - free), window)
    redis.call('HSET', KEYS[1], 'until', now + wait)
    keep = math.max(window, wait)
end
redis.call('PEXPIRE', KEYS[1], keep)
return n
"""


def login_account(username: str) -> str:
    """``username`` as the throttle counts it: ``#<pk>`` of the user the database finds under
    it, as the login would; otherwise ``=`` and the name as the database compares names
    (``_compared``)."""
    model = get_user_model()
    found = model._default_manager.filter(**{model.USERNAME_FIELD: username}).values_list("pk", flat=True).first()
    if found is not None:
        return f"#{found}"
    return "=" + _compared(model, username)


def _compared(model, name: str) -> str:
    """``name`` as the database's lookup of names compares it: MariaDB's and MySQL's sort key of
    it under the column's collation (``WEIGHT_STRING``, trailing spaces dropped as a PAD SPACE
    comparison drops them); SQLite's is the name itself. Spellings one user would answer to
    then count as one whether or not the user exists: normalised apart, an unknown ``böb``
    counted afresh where an existing ``bob``'s variants shared its ceiling, and a 429 told
    which names exist."""
    if connection.vendor != "mysql":
        return name
    charset, collation = _collation_of(model._meta.db_table, model._meta.get_field(model.USERNAME_FIELD).column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT HEX(WEIGHT_STRING(TRIM(TRAILING ' ' FROM CONVERT(%s USING {charset})) COLLATE {collation}))",
            [name],
        )
        return cursor.fetchone()[0]


@functools.cache
def _collation_of(table: str, column: str) -> tuple[str, str]:
    """The column's character set and collation, as the database declares them (a database made
    by hand may hold names in another set than utf8mb4, whose collations utf8mb4 refuses)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s AND COLUMN_NAME = %s",
            [table, column],
        )
        found = cursor.fetchone() or (None, None)
    if not all(name and name.replace("_", "").isalnum() for name in found):
        raise ImproperlyConfigured(f"no character set or collation found for {table}.{column}")
    return found[0], found[1]


def login_throttle_key(*parts: str) -> str:
    """Every Redis key of the throttle is made here."""
    return instance_key(":".join(("login-failures", *parts)))


def _keys(account: str, address: str) -> list[str]:
    return [
        # The address first, then a separator no address holds: the name, which anyone
        # chooses, cannot make one address's key another's.
        login_throttle_key("pair", f"{address}|{account}"),
        login_throttle_key("account", account),
        login_throttle_key("address", address),
        login_throttle_key("known", account),
    ]


def login_throttle_check(*, account: str, address: str) -> None:
    """Raise ``RateLimited`` (429, with ``Retry-After``) while ``account`` (as
    :func:`login_account` names it) is backed off
    from this address, the account is over its ceiling for the window and this is not an
    address it has logged in from, or the address is over its own ceiling.
    Redis out of reach lets the login through."""
    pair, by_account, by_address, known = _keys(account, address)
    try:
        pipe = locks_redis().pipeline(transaction=False)
        pipe.hget(pair, "until")
        pipe.get(by_account)
        pipe.pttl(by_account)
        pipe.get(by_address)
        pipe.pttl(by_address)
        known_address_score(pipe, known, address)
        until, account_failures, account_ttl, address_failures, address_ttl, known_since = pipe.execute()
    except redis.RedisError:
        logger.warning("login throttle not checked: Redis cannot be reached", exc_info=True)
        return
    waits = [float(until or 0) - clock() * 1000]
    own_address = known_since_recent(known_since, now_ms=int(clock() * 1000))
    if int(account_failures or 0) >= settings.LOGIN_FAILURES_PER_ACCOUNT and not own_address:
        waits.append(account_ttl)
    if int(address_failures or 0) >= settings.LOGIN_FAILURES_PER_ADDRESS:
        waits.append(address_ttl)
    wait = max(waits)
    if wait > 0:
        raise RateLimited(retry_after=max(1, math.ceil(wait / 1000)))


def login_failure_record(*, account: str, address: str) -> None:
    """Count one failed login of ``account`` (:func:`login_account`) from the address, the
    account and the address."""
    args = [
        int(clock() * 1000),
        settings.LOGIN_FAILURE_WINDOW_SECONDS * 1000,
        settings.LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS,
        int(settings.LOGIN_BACKOFF_SECONDS * 1000),
    ]
    try:
        locks_redis().register_script(RECORD)(keys=_keys(account, address)[:3], args=args)
    except redis.RedisError:
        logger.warning("login failure not counted: Redis cannot be reached", exc_info=True)


def login_success_record(*, account: str, address: str) -> None:
    """Forget the account's failures from the address it just logged in from (its backoff)
    and remember the address as the account's own; the ceilings keep counting."""
    pair, _, _, known = _keys(account, address)
    try:
        pipe = locks_redis().pipeline(transaction=False)
        pipe.delete(pair)
        known_address_remember(pipe, known, address, now_ms=int(clock() * 1000))
        pipe.execute()
    except redis.RedisError:
        logger.warning("login success not recorded: Redis cannot be reached", exc_info=True)
