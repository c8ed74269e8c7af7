"""What the products' APIs share about the waiting room: joining an item's queue, polling it, and
the ticket a take sends (``inventory.admission.room``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from django.http import HttpResponse
from ninja import Schema
from pydantic import Field

from core.api import json_answer, refuse_body
from core.errors import DomainError
from core.ratelimit import RateCount, client_counted, rate_count
from core.schemas import InputSchema, answers, whole

from ..product import Product
from ..records import (
    DEFAULT_ADMISSION_RATE,
    DEFAULT_TICKET_SECONDS,
    MAX_ADMISSION_RATE,
    MAX_TICKET_SECONDS,
    MIN_ADMISSION_RATE,
    MIN_TICKET_SECONDS,
    Admission,
)
from .room import Standing, item_for_queue, room_enter
from .tickets import HEADER, MAX_LENGTH

AdmissionRate = Annotated[
    float,
    Field(
        ge=MIN_ADMISSION_RATE,
        le=MAX_ADMISSION_RATE,
        description="with a queue: buyers admitted per second (0.1 to 10,000)",
    ),
]
TicketSeconds = whole(MIN_TICKET_SECONDS, MAX_TICKET_SECONDS)


class AdmissionIn(InputSchema):
    """The waiting room's settings of a new item (``inventory.admission``)."""

    admission: Admission = Field(Admission.OPEN, description="open: anyone may take; queue: through a waiting room")
    admission_rate: AdmissionRate = DEFAULT_ADMISSION_RATE
    admission_ticket_seconds: TicketSeconds = Field(
        DEFAULT_TICKET_SECONDS, description="how long an admitted buyer's ticket lets them take, once"
    )


class AdmissionPatchIn(InputSchema):
    """The waiting room's settings changed; one left out stays as it is."""

    admission: Admission | None = None
    admission_rate: AdmissionRate | None = None
    admission_ticket_seconds: TicketSeconds | None = None


class AdmissionOut(Schema):
    """The waiting room's settings of an item, as every read answers them."""

    admission: str = Field(description="open: anyone may take; queue: a take needs the ticket its queue gives")
    admission_rate: float = Field(description="with a queue: buyers admitted per second")
    admission_ticket_seconds: int = Field(description="with a queue: how long a ticket lets its buyer take, once")


class QueueOut(Schema):
    status: str = Field(
        description="waiting; admitted (take with `ticket` in the Admission-Ticket header, once, before "
        "ticket_expires_at; on an open item no ticket is needed); sold_out (nothing left to admit for; a unit "
        "that comes back admits the next in line); closed (the sale has ended)"
    )
    position: int | None = Field(
        description="while waiting after the opening: 1 is next; null in the lobby, before the sale opens, "
        "whose order is drawn at the opening"
    )
    ahead: int | None = Field(description="how many wait ahead of the caller; null in the lobby")
    eta_seconds: int | None = Field(description="the estimated wait, at the item's admission rate")
    ticket: str | None = Field(description="once admitted: the ticket a take sends in its Admission-Ticket header")
    ticket_expires_at: datetime | None = Field(description="when the ticket lapses and the next buyer is admitted")
    poll_after_seconds: float | None = Field(
        description="while waiting or sold out: when to ask again, in seconds to the hundredth (near the head "
        "of the line, at the caller's turn; further back, half the estimated wait, 1 to 5 s); null once "
        "admitted or closed"
    )


class NotQueued(DomainError):
    """A poll of a queue by a user who is not in it: never joined, or whose ticket was spent or
    lapsed."""

    code = "not_queued"
    status = 404
    default_message = "You are not in this queue (your ticket was used or lapsed, or you never joined): join it."


# The header a take carries its ticket in, as the OpenAPI document declares it.
TICKET_PARAMETER = {
    "in": "header",
    "name": HEADER,
    "required": False,
    "description": "The ticket the item's queue gave the caller (`POST .../queue`): needed, once, by a take on an "
    "item whose admission is `queue`; without a good one the take is 403 `not_admitted`.",
    "schema": {"type": "string", "maxLength": MAX_LENGTH},
}


def queue_answers(*, join: bool) -> dict[int, Any]:
    """A join's (POST, no body) or a poll's (GET) declared answers: 200 where the caller stands;
    404 an item that is not there, or (a poll) a caller not in its queue; 429 over the
    rate limits of :data:`QUEUE_ACTION`."""
    if join:
        return answers({200: QueueOut}, unsafe=True, item=True, body="none", limited=True)
    return answers({200: QueueOut}, item=True, limited=True)


# The rate limits' action that joins and polls count against, together (``RATE_LIMITS``).
QUEUE_ACTION = "queue"


def queue_rate(request, user) -> RateCount | None:
    """What a join or a poll counts, through the API and the pages alike: each moves the room
    by a script, counted per user and per address."""
    return rate_count(action=QUEUE_ACTION, user_id=user.pk, address=client_counted(request))


@dataclass(frozen=True)
class QueueCall:
    """One product's queue as a request joins or polls it, through the API and the pages alike.
    ``shown(item, user=)`` is the product's rule of who may see the item (``Http404`` for an
    unlisted one but to its crowd and staff)."""

    product: Product
    shown: Callable[..., Any]

    def standing(self, request, item_id: int, *, join: bool, user) -> Standing:
        item = self.shown(item_for_queue(self.product, item_id=item_id), user=user)
        standing = room_enter(self.product, item, user_id=user.pk, join=join, rate=queue_rate(request, user))
        if standing is None:
            raise NotQueued()
        return standing

    # Answered as built, not validated against the schema (``core.api.json_answer``): polls
    # come every few seconds from everyone waiting.
    def join(self, request, response: HttpResponse, item_id: int) -> HttpResponse:
        refuse_body(request, action="queue")
        return json_answer(response, 200, self.standing(request, item_id, join=True, user=request.auth).as_dict())

    def poll(self, request, response: HttpResponse, item_id: int) -> HttpResponse:
        return json_answer(response, 200, self.standing(request, item_id, join=False, user=request.auth).as_dict())
