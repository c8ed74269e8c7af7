"""The rate limits and the idempotency keys (``core.ratelimit``, ``core.idempotency``), read
from the environment."""

from __future__ import annotations

import os

from .environment import env_bool, env_int

# Rate limits (core.ratelimit): {action: {scope: (hits, per seconds)}}, per user and per
# address, answered 429 with Retry-After. Off for load tests, whose crowd is one address
# (the login throttle below stays on).
RATE_LIMITS_ENABLED = env_bool("RATE_LIMITS_ENABLED", True)
# The function that gives the client the counters live in: the locks' own, bounded and never
# swallowing an error (named here, where every package is known, so that core imports none).
RATE_LIMITS_REDIS_CLIENT = "locking.integration.locks_redis"
# A person buys or draws a few times a second at most; an address may be a shop's NAT. A
# cancel, a claim and a pay change stock (or charge) under the item's strategy as a take
# does, and each may leave an idempotency record: the same limits, each counted apart, on
# the record's item.
_PER_USER = env_int("RATE_LIMIT_PER_USER_PER_SECOND", 5)
_PER_ADDRESS = env_int("RATE_LIMIT_PER_ADDRESS_PER_SECOND", 100)
_LIMITED = ("purchase", "draw", "pay", "cancel", "claim")
RATE_LIMITS = {action: {"user": (_PER_USER, 1), "address": (_PER_ADDRESS, 1)} for action in _LIMITED}
# A waiting room's joins and polls, together (inventory.admission): each moves the room by a
# script. A buyer polls when told, a few times a second at most near their turn; those behind
# one shop's address poll every second or few each.
RATE_LIMITS["queue"] = {
    "user": (env_int("QUEUE_RATE_LIMIT_PER_USER_PER_SECOND", 10), 1),
    "address": (env_int("QUEUE_RATE_LIMIT_PER_ADDRESS_PER_SECOND", 200), 1),
}

# Idempotency keys (core.idempotency): an answer is kept IDEMPOTENCY_KEY_SECONDS for the same
# user's retries with its key; a claim whose request has not answered in
# IDEMPOTENCY_RUNNING_SECONDS (past gunicorn's 30 s worker timeout, which ends a longer
# request) is taken for one that died, before or after it acted: its key answers 409
# idempotency_interrupted, nothing done, for as long as an answer is kept; a retry waits
# IDEMPOTENCY_WAIT_SECONDS for the first's answer (as long as a take may queue for its lock)
# before 409. In the rate limits' Redis: that client never swallows
# an error, and it is not the cache, which may be run to evict (a lost record takes twice).
IDEMPOTENCY_REDIS_CLIENT = RATE_LIMITS_REDIS_CLIENT
# The waiting rooms' lines and tickets (inventory.admission): the same client, for the same
# reasons; a room lost with its Redis is joined again, and nothing taken is lost with it.
ADMISSION_REDIS_CLIENT = RATE_LIMITS_REDIS_CLIENT
IDEMPOTENCY_KEY_SECONDS = env_int("IDEMPOTENCY_KEY_SECONDS", 24 * 3600)
# A refusal that did nothing (403, 409: sold out, not started, the user's limit) is kept this
# long instead: its retries are answered alike, and it does not hold a record for a day.
IDEMPOTENCY_REFUSAL_SECONDS = env_int("IDEMPOTENCY_REFUSAL_SECONDS", 600)
IDEMPOTENCY_RUNNING_SECONDS = env_int("IDEMPOTENCY_RUNNING_SECONDS", 60)
IDEMPOTENCY_WAIT_SECONDS = float(os.environ.get("IDEMPOTENCY_WAIT_SECONDS", "5"))
# At most this many retries wait on one key's first request at a time (the rest are told 409
# at once): each holds a server worker while it waits, and no rate limit counts it.
IDEMPOTENCY_WAITERS = env_int("IDEMPOTENCY_WAITERS", 2)
# Each user keeps at most this many live records under keys, whatever the calls (a new key
# past it is 429 until the oldest lapses): a client sending a fresh key with each request
# fills a bounded part of Redis, about 800 bytes a record, not one that grows with its rate.
IDEMPOTENCY_KEYS_PER_USER = env_int("IDEMPOTENCY_KEYS_PER_USER", 1000)
