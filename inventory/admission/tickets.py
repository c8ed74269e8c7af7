"""The admission ticket: what the waiting room gives an admitted buyer, and what a take on a
``queue`` item asks for in its ``Admission-Ticket`` header, reads (``ticket_read``) and
spends once (``TicketHeld``).

It names the item (kind and id), the user, the serial the room gave this user's admission,
and its deadline, signed with the server's secret key: a keyed BLAKE2b of 128 bits (a MAC by
design, under a key derived once per process from ``SECRET_KEY`` and this module's salt),
which no one without the secret can make. Every take of a ``queue`` item checks one, so it
is built for that cost: BLAKE2b is CPython's own, where an HMAC-SHA256 through OpenSSL cost a
take three times as much, its caches cold among the rest of the request
(``benchmarks.admission_cpu``); ``django.core.signing`` would derive its key again for every
signature. The signature refuses a forged or altered ticket, or one shown for another user
or item, without asking Redis; the room then spends it only if its serial is still the
user's live admission there (``inventory.admission.scripts.TICKET``), which refuses one
used, lapsed or replayed.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from redis import RedisError
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from core.errors import DomainError
from core.idempotency import DONE_UNAVAILABLE_CODES, asks_again
from core.outage import outcome_unknown
from core.ratelimit import RateCount, rate_client, rate_refuse

from ..errors import NotAdmitted, TicketNotLive
from .keys import RoomKeys, room_client, room_script
from .scripts import TICKET_DONE, TICKET_RETURN, TICKET_SPEND

SALT = "inventory.admission.ticket"

logger = logging.getLogger(__name__)

# The header a take carries its ticket in.
HEADER = "Admission-Ticket"
# A ticket is a few dozen characters; anything much longer is not one.
MAX_LENGTH = 200

# Refusals past the ticket's check that give it back, beside those that ask again: a take
# told the sale has not started was admitted by a room whose clock said it had (Redis', and
# the take's window by its process's clock under a strategy other than ``redis_lua``, a
# moment apart at the opening), and the buyer would otherwise lose their place for that moment.
GIVEN_BACK = frozenset({"not_started"})


class Ticket(NamedTuple):
    kind: str
    item_id: int
    user_id: int
    serial: int
    deadline_ms: int

    def signed(self) -> str:
        value = f"{self.kind}.{self.item_id}.{self.user_id}.{self.serial}.{self.deadline_ms}"
        return f"{value}.{_signature(value)}"


@functools.cache
def _keyed() -> tuple:
    """BLAKE2b keyed for the server's secret, then for each of its ``SECRET_KEY_FALLBACKS``, fed
    nothing: each signature copies one, which is cheaper than keying a new one (the key takes
    a block of its own). A ticket is signed with the first and checked against each, so that
    one given before a rotation of the secret stays good until it lapses, as Django's own
    signatures do. Never updated themselves; made again when either setting changes (tests)."""
    secrets = [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS]
    return tuple(
        hashlib.blake2b(key=hashlib.sha256(f"{SALT}:{secret}".encode()).digest(), digest_size=16) for secret in secrets
    )


@receiver(setting_changed)
def _forget_key(*, setting: str, **kwargs) -> None:
    if setting in ("SECRET_KEY", "SECRET_KEY_FALLBACKS"):
        _keyed.cache_clear()


def _signature(value: str, keyed=None) -> str:
    mac = (_keyed()[0] if keyed is None else keyed).copy()
    mac.update(value.encode())
    return mac.hexdigest()


def _signed_here(value: str, signature: str) -> bool:
    """Whether ``signature`` is ``value``'s under the secret or one of its fallbacks."""
    return any(hmac.compare_digest(signature, _signature(value, keyed)) for keyed in _keyed())


def ticket_read(text: str | None, *, kind: str, item_id: int, user_id: int) -> Ticket:
    """The ticket ``text`` says, when its signature is good and it was given to ``user_id``
    for this item; ``NotAdmitted`` otherwise, saying which. Whether it has lapsed is the
    room's to say, by Redis' clock (``scripts.TICKET``): by this process's, a clock running
    fast refused tickets still live."""
    if not text:
        raise NotAdmitted("This sale admits buyers through its waiting room: join its queue, and take with the ticket.")
    value, _, signature = text.rpartition(".")
    fields = value.split(".")
    if len(text) > MAX_LENGTH or len(fields) != 5 or not signature.isascii() or not _signed_here(value, signature):
        raise NotAdmitted("The admission ticket is not one this server gave.")
    try:
        ticket = Ticket(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4]))
    except ValueError:
        raise NotAdmitted("The admission ticket is not one this server gave.") from None
    if (ticket.kind, ticket.item_id, ticket.user_id) != (kind, item_id, user_id):
        raise NotAdmitted("The admission ticket was given to another buyer or for another sale.")
    return ticket


def _one_script_with(client) -> bool:
    """Whether one script on ``client`` can reach the room's keys beside its own: the room's
    own client, and no Cluster, where the room's hash tag and another's are in other slots."""
    return client is room_client() and not _is_cluster(type(client))


@functools.cache
def _is_cluster(kind: type) -> bool:
    # Once per client class: RedisCluster's metaclass is typing's Protocol one, and an
    # isinstance against it walks the class's attributes at every take.
    return issubclass(kind, RedisCluster)


@dataclass
class TicketHeld:
    """A take's admission ticket, its signature found good and not yet spent (``ticket_held``),
    and the context the take runs in. The take spends it once, in its own script where the
    room lives in the same Redis (``redis_lua``'s RESERVE: :meth:`spends_with`), otherwise
    first, in a round trip of its own that counts the take's rate limits too where the same
    Redis holds them (:meth:`spend`). Spent that way, it is given back when the take was
    refused with nothing done and asks to be sent again (busy, rate limited, unavailable, or
    not yet started: :data:`GIVEN_BACK`), or failed unforeseen, unless a Redis timed out on an
    answer, or the database's connection was cut, where the take may have been made
    (``core.outage.outcome_unknown``); a take that wrote, or was
    refused for good (sold out, the user's limit, the end of the window), has spent it, and
    one that spends it in its own script spends it only then. A class, not a generator: every
    take of a ``queue`` item enters it."""

    keys: RoomKeys
    user_id: int
    serial: int
    moment: int | str  # "" for Redis' clock; a test's moment (ms)
    deadline: int | None = None  # set once spent in its own round trip, to give it back by

    @property
    def spent(self) -> bool:
        return self.deadline is not None

    def spend(self, rate: RateCount | None = None, *, tag: str = "") -> None:
        """Spend it now, once (``NotAdmitted`` unless it is the user's live ticket for the
        item), having counted the take's ``rate`` limits on the item's hash ``tag``: in the
        same round trip where they live in the room's Redis, otherwise in one of their own
        before it. Counted first, a take refused for its ticket counts too; over a limit,
        ``RateLimited``, the ticket unspent."""
        if self.spent:
            return
        take_ms = settings.IDEMPOTENCY_RUNNING_SECONDS * 1000  # past the server's timeout for a request
        keys, args = self.spend_keys, [self.user_id, *self.spend_args(), take_ms]
        if rate is not None and _one_script_with(rate_client()):
            keys, args = keys + rate.keys(tag=tag), args + rate.args()
        elif rate is not None:
            rate.count(tag=tag)
        answer = int(room_script(TICKET_SPEND)(keys=keys, args=args))
        if answer < 0:
            rate_refuse(-answer)
        if not answer:
            raise TicketNotLive()
        self.deadline = answer

    def spends_with(self, client) -> bool:
        """Whether a script on ``client`` can spend it: the room's own Redis, not yet spent."""
        return not self.spent and _one_script_with(client)

    @property
    def spend_keys(self) -> list[str]:
        """The room's keys a script spends it in: admitted, serials, room (``scripts.TICKET``)."""
        return [self.keys.admitted, self.keys.serials, self.keys.room]

    def spend_args(self) -> list:
        """Its serial and the moment (ms) it is checked at: "" for Redis' clock."""
        return [self.serial, self.moment]

    def __enter__(self) -> TicketHeld:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if not self.spent:
            return
        # Kept spent where the take may have been made (or was, unconfirmed by a replica):
        # given back, a pool with a draw limit could draw twice on one admission.
        made = error is None or outcome_unknown(error) or getattr(error, "code", None) in DONE_UNAVAILABLE_CODES
        # Redis out of reach here leaves the take's own answer to its client; the ticket then
        # lapses as its score says (``scripts.TICKET_SPEND``).
        try:
            if not made and (
                not isinstance(error, DomainError) or asks_again(error.status, error.code) or error.code in GIVEN_BACK
            ):
                # Only before its deadline, by Redis' clock: one that lapsed during the take is not.
                room_script(TICKET_RETURN)(
                    keys=[*self.spend_keys, self.keys.line],
                    args=[self.user_id, self.serial, self.deadline, self.moment],
                )
            else:
                # Its take over, it stops promising its unit, counted used where the take may have taken one.
                room_script(TICKET_DONE)(keys=[self.keys.admitted, self.keys.room], args=[self.user_id, int(made)])
        except (RedisError, RedisClusterException):
            logger.warning("admission ticket of user %s: its take's end not noted; it lapses", self.user_id)
