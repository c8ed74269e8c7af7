"""Idempotency keys: a request sent again with the same ``Idempotency-Key`` header is
answered what the first was answered, and does nothing more.

A call that takes a key (a purchase, a draw, a cancel, a claim) asks ``idempotency_claim``
before it acts. No header: nothing happens, not even a round trip to Redis. With one, the
key is the caller's own for that action, ``<ns>:idem:{user:<id>}:<action>:<key>``
(``core.namespace``), and:

- nobody has used it: this request claims it, atomically (one script, ``_CLAIM_SCRIPT``), with a *running*
  record that holds the request's fingerprint (method, path, a digest of the body) and how
  long it may run, ``IDEMPOTENCY_RUNNING_SECONDS``. The call goes on, and once it is answered the API's view
  wrapper (``config.api``), or the page whose button sent the key (``inventory.pages``),
  hands the answer to ``idempotency_answered``, which keeps its status, content type and
  body under the key for ``IDEMPOTENCY_KEY_SECONDS``;
- it holds an answer: that answer is sent again, with ``Idempotent-Replayed: true``, and
  nothing else is done (no take, no rate limit counted);
- it is running: the request waits for the answer, polling, up to
  ``IDEMPOTENCY_WAIT_SECONDS``, and sends it again; past that it is answered 409
  ``idempotency_in_progress`` with ``Retry-After``;
- it was running and has not answered in ``IDEMPOTENCY_RUNNING_SECONDS``: its process died
  (or hangs), before or after it acted, which nobody knows; 409 ``idempotency_interrupted``,
  nothing done, for as long as an answer would be kept. Run afresh, a retry would act a second
  time whenever the first had acted (a second draw); the client looks at its orders or draws,
  and sends a new key to try again, as after a 500;
- it was used for another request (another path, item or body): 422
  ``idempotency_key_reused``, nothing done.

Kept are the answers that end the request: successes and refusals alike (a 201, a 202, a
409 ``sold_out``, a 403 ``ended``, a 404, and a 500, after which nobody knows what was
written), and 503 ``unconfirmed`` (a reservation made, that no replica confirmed in time).
Not kept are those that did nothing and ask for the same request again: 429
``rate_limited``, 503 ``unavailable``, 409 ``busy`` and 409 ``pending`` (a cancel or a claim
of a record not written yet); the key is then let go, and a retry runs afresh; unless its
cause may have acted all the same (``idempotency_outcome_unknown``): 409 interrupted then.

What one user keeps under keys, whatever the calls, is bounded: each user's live records are
counted in one sorted set of that user's slot, ``<ns>:idem:{user:<id>}:live`` (a short
digest of each key, scored by when its record lapses), its live members counted in the
claim's own script (the lapsed pruned as a new one is added): a new key past
``IDEMPOTENCY_KEYS_PER_USER`` live ones is refused, 429 ``idempotency_keys_exhausted`` with
``Retry-After`` until the oldest lapses, nothing done. Its cost is the set's (logarithmic in
a bounded size, each member pruned once), never a scan of the user's keys; the bound holds
whatever ``RATE_LIMITS_ENABLED`` says.

The records live in the Redis of the client that ``IDEMPOTENCY_REDIS_CLIENT`` names (the
settings choose the locks' own, which never swallows an error and is never a cache that
may evict): Redis out of reach answers 503 before anything is done (``core.outage``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import secrets
import time
from contextlib import suppress
from dataclasses import dataclass

import redis
from django.conf import settings
from django.http import HttpResponse

from .errors import DomainError
from .named_redis import client_script, named_client
from .namespace import key_prefix

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
META = "HTTP_IDEMPOTENCY_KEY"
REPLAYED = "Idempotent-Replayed"
# 1 to 255 visible ASCII characters (no space, no control character): a UUID fits, and so
# does any client's own scheme; nothing a header would fold or a log would mangle.
KEY_PATTERN = r"^[!-~]{1,255}$"
_KEY = re.compile(KEY_PATTERN)

# The header as an operation's OpenAPI parameter (``openapi_extra``'s ``parameters``).
PARAMETER = {
    "in": "header",
    "name": HEADER,
    "required": False,
    "description": (
        "Send the same key again to get the first answer again (with Idempotent-Replayed: true) "
        "without taking anything twice; another request under a used key is 422."
    ),
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": KEY_PATTERN},
}

# The answers that did nothing and ask for the same request again: not kept. ``pending``: a
# change of a record a worker has not written yet, which the same request may make once it is;
# ``not_admitted``: a take on an item with a waiting room, sent again with its ticket.
RETRY_STATUSES = frozenset({429, 503})
RETRY_CODES = frozenset({"busy", "pending", "not_admitted"})
# A 503 that did something, kept: ``unconfirmed``, a redis_lua reservation made that no replica
# confirmed in time (RESERVATIONS_WAIT_REPLICAS); the same request again would make another.
DONE_UNAVAILABLE_CODES = frozenset({"unconfirmed"})

# How a waiting request polls for the first one's answer: quickly at first, since most
# takes end in milliseconds, then every 50 ms.
FIRST_PAUSE, LONGEST_PAUSE = 0.005, 0.05

# On the request: while it holds its key; once it failed in a way that may have acted.
_HELD, _UNKNOWN = "_idempotency_held", "_idempotency_outcome_unknown"


class IdempotencyKeyInvalid(DomainError):
    code = "invalid"
    status = 422
    default_message = f"{HEADER} must be 1 to 255 visible ASCII characters (! to ~, no space), such as a UUID."


class IdempotencyKeyReused(DomainError):
    """The key was sent before with another request: another path (item) or body."""

    code = "idempotency_key_reused"
    status = 422
    default_message = f"This {HEADER} was used for another request (another item or body): send a new key for it."


class IdempotencyKeysExhausted(DomainError):
    """The user holds ``IDEMPOTENCY_KEYS_PER_USER`` live keys already: a new one waits until
    the oldest lapses. Requests without a key are not refused."""

    code = "idempotency_keys_exhausted"
    status = 429
    default_message = "Too many live Idempotency-Keys for this user."

    def __init__(self, retry_after: int) -> None:
        super().__init__(
            f"This user keeps {settings.IDEMPOTENCY_KEYS_PER_USER} live {HEADER}s already: send this request "
            f"without a key, or with one again in {retry_after} s, when the oldest lapses."
        )
        self.retry_after = retry_after


class IdempotencyInterrupted(DomainError):
    """The first request with this key stopped before it answered: whether it acted is unknown."""

    code = "idempotency_interrupted"
    status = 409
    default_message = (
        f"The first request with this {HEADER} stopped before it answered: whether it took anything is unknown. "
        "Look at your orders or draws, and send a new key to try again."
    )


class IdempotencyInProgress(DomainError):
    """The first request with this key is still running, past how long a retry waits."""

    code = "idempotency_in_progress"
    status = 409
    default_message = f"The first request with this {HEADER} is still running; send it again shortly."
    retry_after = 1


@dataclass(frozen=True)
class Claim:
    """A request's hold on its key: the token of the running record it wrote, which only it may
    replace; and the user's count of live keys (``live``) the key is counted in as ``member``."""

    key: str
    running: str
    fingerprint: str
    live: str
    member: str


def idempotency_client() -> redis.Redis:
    """The client the keys live in: what ``IDEMPOTENCY_REDIS_CLIENT`` returns."""
    return named_client("IDEMPOTENCY_REDIS_CLIENT")


def idempotency_key(*, user_id: int, action: str, key: str) -> str:
    """The Redis key of ``user_id``'s ``key`` for ``action``."""
    return f"{key_prefix()}idem:{{user:{user_id}}}:{action}:{key}"


def live_key(*, user_id: int) -> str:
    """The Redis key of the sorted set that counts ``user_id``'s live records, in their slot."""
    return f"{key_prefix()}idem:{{user:{user_id}}}:live"


def _member(key: str) -> str:
    # A digest, not the key: 255 characters a member would double what a record costs.
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def fingerprint(request) -> str:
    """What makes two requests the same one: method, path and body."""
    body = hashlib.sha256(request.body).hexdigest()
    return hashlib.sha256(f"{request.method}\0{request.path}\0{body}".encode()).hexdigest()


# What the key holds, with Redis' time (ms), or, when it holds nothing, the request's running
# record: its fingerprint (ARGV[1]), its token (ARGV[6]) and the time it may run until, Redis'
# time plus ARGV[7] ms (one clock, Redis', for every server that compares it), kept ARGV[2]
# ms: SET NX GET in one round trip, on any Redis (the command itself takes both options only
# from Redis 7). The user's records still live (KEYS[2], members scored by when they lapse)
# are counted first: past ARGV[4] the answer is the ms until the oldest lapses, and nothing
# is written. The SET is the script's first write, so that a Redis full under noeviction
# refuses the script before it writes anything (a script that wrote once may write on past
# maxmemory); the lapsed members are pruned after it. The set lapses ARGV[5] ms after its
# last write, past any member's score.
_CLAIM_SCRIPT = """
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local found = redis.call('GET', KEYS[1])
if found then return {found, string.format('%d', now)} end
if redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf') >= tonumber(ARGV[4]) then
    local oldest = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    return math.max(1, tonumber(oldest[2]) - now)
end
local running = {fingerprint = ARGV[1], running = ARGV[6], ['until'] = now + tonumber(ARGV[7])}
redis.call('SET', KEYS[1], cjson.encode(running), 'PX', ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return false
"""

# Replace the request's own running record (its token ARGV[1]) with its answer (ARGV[2], kept
# ARGV[3] ms), or let the key go (ARGV[2] empty); never a record that is not the request's own
# (an answer, or another request's claim). The user's count of live records (KEYS[2], member
# ARGV[4]) follows: the member lapses with the answer, or goes with the key.
_FINISH_SCRIPT = """
local found = redis.call('GET', KEYS[1])
if not found then return 0 end
local ok, record = pcall(cjson.decode, found)
if not ok or record.running ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
    redis.call('DEL', KEYS[1])
    redis.call('ZREM', KEYS[2], ARGV[4])
else
    redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
    local time = redis.call('TIME')
    redis.call('ZADD', KEYS[2], time[1] * 1000 + math.floor(time[2] / 1000) + tonumber(ARGV[3]), ARGV[4])
    if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
end
return 1
"""


def _script(source: str):
    return client_script(idempotency_client(), source)


def idempotency_claim(request, response: HttpResponse, *, action: str, user_id: int) -> HttpResponse | None:
    """None when the request goes on: it sent no key, or it now holds its key (and its
    answer will be kept). Otherwise the answer to send instead, written into ``response``:
    the first request's answer again. Raises ``IdempotencyKeyInvalid``,
    ``IdempotencyKeyReused``, ``IdempotencyKeysExhausted``, ``IdempotencyInProgress`` and
    ``IdempotencyInterrupted``."""
    sent = request.META.get(META)
    if sent is None:
        return None
    if not _KEY.match(sent):
        raise IdempotencyKeyInvalid()
    key = idempotency_key(user_id=user_id, action=action, key=sent)
    live, member = live_key(user_id=user_id), _member(key)
    running_ms = _ms(settings.IDEMPOTENCY_RUNNING_SECONDS)
    kept_ms = max(running_ms, _ms(settings.IDEMPOTENCY_KEY_SECONDS))
    mine = fingerprint(request)
    # Kept as long as an answer, whose place in the user's count it takes: a claim that lapsed
    # let a retry act a second time after a process died past its commit.
    running = secrets.token_hex(8)
    claim_or_read = _script(_CLAIM_SCRIPT)
    give_up = time.monotonic() + settings.IDEMPOTENCY_WAIT_SECONDS
    pause = FIRST_PAUSE
    waiters = None
    try:
        while True:
            # Claimed (None), or what the key holds; a claim that lapsed meanwhile is taken anew.
            found = claim_or_read(
                keys=[key, live],
                args=[mine, kept_ms, member, settings.IDEMPOTENCY_KEYS_PER_USER, kept_ms, running, running_ms],
            )
            if found is None:
                setattr(request, _HELD, Claim(key=key, running=running, fingerprint=mine, live=live, member=member))
                return None
            if isinstance(found, int):
                raise IdempotencyKeysExhausted(retry_after=max(1, math.ceil(found / 1000)))
            found, now = found
            record = json.loads(found)
            if record["fingerprint"] != mine:
                raise IdempotencyKeyReused()
            if "status" in record:
                return _replay(response, record)
            if record.get("until", math.inf) <= int(now):
                raise IdempotencyInterrupted()
            left = give_up - time.monotonic()
            if left <= 0:
                raise IdempotencyInProgress()
            if waiters is None:
                waiters = f"{key}:waiters"
                if _waiter_join(waiters) > settings.IDEMPOTENCY_WAITERS:
                    raise IdempotencyInProgress()
            time.sleep(min(pause, left))
            pause = min(pause * 2, LONGEST_PAUSE)
    finally:
        if waiters is not None:
            _waiter_leave(waiters)


def _waiter_join(waiters: str) -> int:
    """Count one more request waiting on a key's first, bounded: each holds a server's worker
    while it waits, and is counted by no rate limit (the first was). Those past
    ``IDEMPOTENCY_WAITERS`` are told to come back at once. The count lapses with the wait."""
    pipe = idempotency_client().pipeline(transaction=True)
    pipe.incr(waiters)
    pipe.pexpire(waiters, _ms(settings.IDEMPOTENCY_WAIT_SECONDS) + 1000)
    return int(pipe.execute()[0])


# One waiter less, on a count still there: lapsed meanwhile (a slow Redis), a DECR would make
# it again at -1, with no expiry. KEYS[1] the key's count of waiters.
_WAITER_LEAVE_SCRIPT = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECR', KEYS[1]) end return 0"


def _waiter_leave(waiters: str) -> None:
    with suppress(redis.RedisError):
        _script(_WAITER_LEAVE_SCRIPT)(keys=[waiters])


def _replay(response: HttpResponse, record: dict) -> HttpResponse:
    response.status_code = record["status"]
    response.content = record["body"].encode()
    response["Content-Type"] = record["content_type"]
    response[REPLAYED] = "true"
    return response


def idempotency_answered(request, response: HttpResponse, *, refusal: DomainError | None = None) -> None:
    """Keep ``response`` under the key the request holds, if it holds one, or let the key go
    when the answer asks for the request again: judged from the answer (the API's), or from
    ``refusal`` when the answer is a page's fragment that says it in words. Redis out of
    reach here is logged, not answered: the client gets its answer, and the key answers
    ``idempotency_interrupted`` once the running record's time is past (whether it acted is
    as unknown to a retry as after a process that died)."""
    claim: Claim | None = getattr(request, _HELD, None)
    if claim is None:
        return
    setattr(request, _HELD, None)
    answer = ""
    if getattr(request, _UNKNOWN, False):  # as a request that stopped before it answered
        answer = json.dumps({"fingerprint": claim.fingerprint, "until": 0})
    elif _kept(response) if refusal is None else not asks_again(refusal.status, refusal.code):
        answer = json.dumps(
            {
                "fingerprint": claim.fingerprint,
                "status": response.status_code,
                "content_type": response["Content-Type"],
                "body": response.content.decode(),
            }
        )
    # A refusal did nothing: kept long enough for the client's retries, not holding one of the
    # user's records for a day (a page sends a fresh key with every press of its buttons).
    refused = (refusal.status if refusal is not None else response.status_code) in (403, 409)
    try:
        kept_ms = _ms(settings.IDEMPOTENCY_REFUSAL_SECONDS if refused else settings.IDEMPOTENCY_KEY_SECONDS)
        finish = _script(_FINISH_SCRIPT)
        mine = finish(keys=[claim.key, claim.live], args=[claim.running, answer, kept_ms, claim.member])
    except redis.RedisError:
        logger.warning("idempotency key not finished: Redis cannot be reached", exc_info=True)
        return
    if not int(mine):
        logger.warning("idempotency key lapsed before its request was answered (%s)", response.status_code)


def idempotency_outcome_unknown(request) -> None:
    """The request failed in a way that may have acted (``core.outage.outcome_unknown``): its
    key answers ``idempotency_interrupted``, where a resend after the 503 would act again."""
    setattr(request, _UNKNOWN, True)


def _kept(response: HttpResponse) -> bool:
    status = response.status_code
    if status not in RETRY_STATUSES and status not in (403, 409):
        return True
    try:
        code = json.loads(response.content).get("code")
    except (ValueError, AttributeError):
        code = None
    return not asks_again(status, code)


def asks_again(status: int, code: str | None) -> bool:
    """Whether a refusal asks the client to send again (a busy item, a 503), so that its answer
    is not kept: except a 503 that says the thing was done (``DONE_UNAVAILABLE_CODES``: a
    reservation made but not confirmed by a replica), which a resend must not do twice."""
    if status in RETRY_STATUSES:
        return code not in DONE_UNAVAILABLE_CODES
    return code in RETRY_CODES
