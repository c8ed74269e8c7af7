"""Login throttling: failed logins counted per account and per address in Redis, checked
before the password is hashed, so that a flood of guesses neither finds a password nor
ties up the workers (each hash costs about 0.3 s of CPU by design)."""

from __future__ import annotations

import logging
import math

import redis
from django.conf import settings

from core.ratelimit import RateLimited
from locking.integration import lock_client

logger = logging.getLogger(__name__)

# Count one failure on every counter (expiring a window after its first failure).
# KEYS: the account's and the address's counters
# ARGV[1] the window in ms
RECORD = """
for _, key in ipairs(KEYS) do
    if redis.call('INCR', key) == 1 then redis.call('PEXPIRE', key, ARGV[1]) end
end
return 1
"""


def _keys(username: str, address: str) -> list[str]:
    return [f"login-failures:account:{username.strip().lower()}", f"login-failures:address:{address}"]


def login_throttle_check(*, username: str, address: str) -> None:
    """Raise ``RateLimited`` (429, with ``Retry-After``) while the account or the address has
    failed ``LOGIN_FAILURES_PER_ACCOUNT`` / ``LOGIN_FAILURES_PER_ADDRESS`` times within
    ``LOGIN_FAILURE_WINDOW_SECONDS``. Redis out of reach lets the login through."""
    if not settings.RATE_LIMITS_ENABLED:
        return
    account, by_address = _keys(username, address)
    try:
        pipe = lock_client().pipeline(transaction=False)
        pipe.get(account)
        pipe.pttl(account)
        pipe.get(by_address)
        pipe.pttl(by_address)
        account_failures, account_ttl, address_failures, address_ttl = pipe.execute()
    except redis.RedisError:
        logger.warning("login throttle not checked: Redis cannot be reached", exc_info=True)
        return
    waits = []
    if int(account_failures or 0) >= settings.LOGIN_FAILURES_PER_ACCOUNT:
        waits.append(account_ttl)
    if int(address_failures or 0) >= settings.LOGIN_FAILURES_PER_ADDRESS:
        waits.append(address_ttl)
    if waits:
        raise RateLimited(retry_after=max(1, math.ceil(max(waits) / 1000)))


def login_failure_record(*, username: str, address: str) -> None:
    """Count one failed login for the account and the address."""
    if not settings.RATE_LIMITS_ENABLED:
        return
    window_ms = settings.LOGIN_FAILURE_WINDOW_SECONDS * 1000
    try:
        lock_client().register_script(RECORD)(keys=_keys(username, address), args=[window_ms])
    except redis.RedisError:
        logger.warning("login failure not counted: Redis cannot be reached", exc_info=True)
