"""The admission ticket: what the waiting room gives an admitted buyer, and what a take on a
``queue`` item asks for in its ``Admission-Ticket`` header.

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
from typing import NamedTuple

from django.conf import settings

from ..errors import NotAdmitted

SALT = "inventory.admission.ticket"

# The header a take carries its ticket in.
HEADER = "Admission-Ticket"
# A ticket is a few dozen characters; anything much longer is not one.
MAX_LENGTH = 200


class Ticket(NamedTuple):
    kind: str
    item_id: int
    user_id: int
    serial: int
    deadline_ms: int

    def signed(self) -> str:
        value = f"{self.kind}.{self.item_id}.{self.user_id}.{self.serial}.{self.deadline_ms}"
        return f"{value}.{_signature(value)}"


@functools.lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    return hashlib.sha256(f"{SALT}:{secret}".encode()).digest()


def _signature(value: str) -> str:
    return hashlib.blake2b(value.encode(), key=_key(settings.SECRET_KEY), digest_size=16).hexdigest()


def ticket_read(text: str | None, *, kind: str, item_id: int, user_id: int, now_ms: int) -> Ticket:
    """The ticket ``text`` says, when its signature is good and it was given to ``user_id``
    for this item and has not lapsed; ``NotAdmitted`` otherwise, saying which."""
    if not text:
        raise NotAdmitted("This sale admits buyers through its waiting room: join its queue, and take with the ticket.")
    value, _, signature = text.rpartition(".")
    fields = value.split(".")
    if (
        len(text) > MAX_LENGTH
        or len(fields) != 5
        or not signature.isascii()
        or not hmac.compare_digest(signature, _signature(value))
    ):
        raise NotAdmitted("The admission ticket is not one this server gave.")
    try:
        ticket = Ticket(fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4]))
    except ValueError:
        raise NotAdmitted("The admission ticket is not one this server gave.") from None
    if (ticket.kind, ticket.item_id, ticket.user_id) != (kind, item_id, user_id):
        raise NotAdmitted("The admission ticket was given to another buyer or for another sale.")
    if ticket.deadline_ms <= now_ms:
        raise NotAdmitted("The admission ticket has lapsed: join the queue again.")
    return ticket
