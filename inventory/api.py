"""What the products' APIs share about takes and the changes of what a take holds, and
what a request of the API and of the pages does alike to make one.

A take (a purchase, a draw) is one call of the same shape, answered 201 when the record is
written and 202 when it is reserved under ``redis_lua``: each product describes its take
once (``TakeCall``) with its metrics, and builds the answer's body itself. A change of a
held record by its user (a cancel, a claim, a pay: docs/design.md, "Lifecycle") is another
such call, answered 200 (``ChangeCall``). Both take an ``Idempotency-Key``
(``core.idempotency``) and count the caller's rate limits on the item; the pages' buttons
(``inventory.pages``) make their takes and changes through the same calls, and answer
with a fragment instead of JSON.

The item's hold window is one field (``Item.hold_seconds``) that each product names in its
API as its users know it (a voucher's ``payment_window_seconds``, a pool's
``claim_window_seconds``): ``hold_window`` maps it."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from django.http import HttpResponse
from ninja import Schema
from pydantic import Field, WithJsonSchema

from core.api import json_answer, refuse_body
from core.errors import InvalidInput
from core.idempotency import PARAMETER, idempotency_claim
from core.ratelimit import RateCount, client_counted, rate_count
from core.schemas import answers, whole

from .admission.api import TICKET_PARAMETER
from .admission.room import ticket_held
from .admission.tickets import HEADER, MAX_LENGTH
from .errors import NotAdmitted
from .holds import hold_change_counted
from .items import item_for_take
from .paging import CURSOR_PATTERN, PAGE_SIZE, PAGE_SIZE_MAX, Cursor, Page
from .product import Product
from .records import MAX_ABANDON_LIMIT, MAX_HOLD_SECONDS, Admission, Record
from .redis_lua.values import group_tag
from .take import item_take

# A hold window in a request: whole seconds, 0 (settled when taken) to a day.
HoldWindow = whole(0, MAX_HOLD_SECONDS)
# The cap on a user's abandoned holds of an item (0: none) and the cooldown after each, in
# seconds (0: none), in a request (docs/design.md, "Abandoned holds"); and how every read says them.
AbandonLimit = whole(0, MAX_ABANDON_LIMIT)
AbandonCooldown = whole(0, MAX_HOLD_SECONDS)
ABANDON_LIMIT_SAID = (
    "how many held takes one user may abandon (cancel, or let lapse) before their takes are refused "
    "(409 abandon_limit); 0: no cap"
)
ABANDON_COOLDOWN_SAID = (
    "how long after each abandoned hold the same user's takes are refused (429 cooling_down, with Retry-After); 0: none"
)


def hold_window(fields: dict, name: str) -> dict:
    """``fields`` of a request with the product's name of the hold window (``name``) as the
    item's own (``hold_seconds``), when it was sent."""
    if name in fields:
        fields["hold_seconds"] = fields.pop(name)
    return fields


class HoldCountsOut(Schema):
    """An audit's lifecycle counts (``inventory.audits.HoldCounts``)."""

    held: int = Field(description="records holding their unit for a payment or a claim now")
    settled: int = Field(description="paid or claimed, or settled when taken (no window); a pool's: prizes alone")
    released: int = Field(description="cancelled, expired or forfeited: the unit back in the stock")
    returned_twice: int = Field(description="units returned more than once; 0 under a guarded strategy")
    settled_and_released: int = Field(description="records both settled and released; 0 under a guarded strategy")


def take_answers(schema: type) -> dict[int, Any]:
    """A take's declared answers: ``schema`` with 201 (written) and 202 (pending under
    ``redis_lua``); 403 ``not_started`` or ``ended``, 409 the product's refusals, ``busy``,
    ``abandon_limit``, ``idempotency_in_progress`` or ``_interrupted``, 422 an ``Idempotency-Key`` malformed or
    reused, 429 ``rate_limited`` or ``cooling_down`` (docs/design.md, "Abandoned holds")."""
    return answers(
        {201: schema, 202: schema}, unsafe=True, item=True, body="none", refusals=(403, 409, 422), limited=True
    )


def change_answers(schema: type) -> dict[int, Any]:
    """A change's declared answers: ``schema`` with 200; 404 a record that is not the
    caller's; 409 the record's state (``inventory.errors.HoldClosed``) or
    ``idempotency_in_progress`` or ``_interrupted``, 422 an ``Idempotency-Key`` malformed or reused."""
    return answers({200: schema}, unsafe=True, item=True, body="none", refusals=(409, 422), limited=True)


class PageIn(Schema):
    """The query of a list of the caller's own records, a page at a time (``inventory.paging``)."""

    limit: int = Field(PAGE_SIZE, ge=1, le=PAGE_SIZE_MAX, description="How many records a page holds at most.")
    # Said as a string alone: a query has no null, and a client leaves the cursor out instead.
    cursor: Annotated[str | None, WithJsonSchema({"type": "string", "pattern": CURSOR_PATTERN})] = Field(
        None,
        pattern=CURSOR_PATTERN,
        description="Where the page starts: the cursor of the Link header's `next` of the page before, "
        "as it was given. Left out: the newest records.",
    )

    @property
    def after(self) -> Cursor | None:
        return None if self.cursor is None else Cursor.parse(self.cursor)


# The answer's header that leads to the next page (RFC 8288), absent on the last page.
NEXT_LINK = {
    "description": 'The next page, older records: `<URL>; rel="next"`. Absent on the last page.',
    "required": False,
    "schema": {"type": "string"},
}


def paged_openapi(links: dict | None = None) -> dict:
    """The ``openapi_extra`` of a list of the caller's records: the 200's ``Link`` header."""
    return {**(links or {}), "responses": {200: {"headers": {"Link": NEXT_LINK}}}}


def page_answer(request, response: HttpResponse, paging: PageIn, page: Page) -> list:
    """The page's records as the answer's body, and its ``Link`` to the next page if any."""
    if page.next is not None:
        query = urlencode({"limit": paging.limit, "cursor": str(page.next)})
        response["Link"] = f'<{request.build_absolute_uri(request.path)}?{query}>; rel="next"'
    return page.records


def keyed_openapi(links: dict, *, take: bool = False) -> dict:
    """The ``openapi_extra`` of a call that takes an ``Idempotency-Key``: its ``links``, and
    the header; a take's (``take``), the ``Admission-Ticket`` header too."""
    return {**links, "parameters": [PARAMETER, TICKET_PARAMETER] if take else [PARAMETER]}


def _ticket_header(request) -> str | None:
    """The request's ``Admission-Ticket``, whatever the item's admission: one longer than any
    ticket is refused (``InvalidInput``, 422), as the API's document bounds it, rather than
    ignored by an open item's take. Here, not in the room's code, which an open item's take
    never enters."""
    text = request.headers.get(HEADER)
    if text is not None and len(text) > MAX_LENGTH:
        raise InvalidInput(f"{HEADER} is longer than any ticket ({MAX_LENGTH} characters at most).")
    return text


@dataclass(frozen=True)
class TakeCall:
    """One product's take as a request asks for it: through the API (:meth:`answer`) and
    through the page's Buy or Draw button (``inventory.pages.TakePages.take_view``) alike,
    both by :meth:`taken`. ``action`` names it (for the refusal of a body, the rate limit
    and the idempotency keys); ``product`` is the product's adapter, whose kind names the
    item in ``counted(strategy, <kind>_id=, user_id=)``, which counts the outcome
    (``core.metrics.purchase_counted``)."""

    action: str
    product: Product
    counted: Callable[..., Any]

    def taken(self, request, response: HttpResponse, item: Any, *, user_id: int) -> Record | HttpResponse:
        """The take of ``item`` by ``user_id`` that ``request`` asks for (``inventory.take``):
        the record, its outcome counted (``counted``) and the user's and the address's rate
        limits counted on the item. On an item with a waiting room the take spends the
        request's ``Admission-Ticket`` (``inventory.admission.room.ticket_held``: 403
        ``not_admitted``); one longer than any ticket is 422 on every item.
        With an ``Idempotency-Key``, the first answer again instead, written into ``response``
        and returned (``core.idempotency``); otherwise the answer made of the record is kept
        under the key."""
        ticket = _ticket_header(request)
        replay = idempotency_claim(request, response, action=self.action, user_id=user_id)
        if replay is not None:
            return replay
        rate = rate_count(action=self.action, user_id=user_id, address=client_counted(request))
        with self.counted(item.strategy, **{f"{self.product.kind}_id": item.pk}, user_id=user_id) as counted:
            with self._door(item, user_id=user_id, ticket=ticket, rate=rate) as held:
                return counted(item_take(self.product, item, user_id=user_id, rate=rate, ticket=held))

    def _door(self, item: Any, *, user_id: int, ticket: str | None, rate: RateCount | None):
        """What the take of ``item`` runs in: nothing on an open item, whose take never enters
        the waiting room's code; else its ticket read (``ticket_held``). A take refused there
        (no ticket, or not one this server gave this user for the item) counts against the
        rate limits as any take does, or a client could send such takes without limit."""
        if item.admission == Admission.OPEN:
            return nullcontext()
        try:
            return ticket_held(self.product, item, user_id=user_id, ticket=ticket)
        except NotAdmitted:
            if rate is not None:
                rate.count(tag=group_tag(self.product.group_of(item)))
            raise

    def answer(self, request, response: HttpResponse, item_id: int, body: Callable[[Record], dict]) -> HttpResponse:
        """The take by the caller of the item ``item_id`` (:meth:`taken`), once the request
        is known to be well formed and its item to exist, answered with ``body(record)``
        through ``json_answer``: built by the view, not validated against the schema."""
        refuse_body(request, action=self.action)
        item = item_for_take(self.product, item_id=item_id)
        record = self.taken(request, response, item, user_id=request.auth.pk)
        if isinstance(record, HttpResponse):
            return record
        return json_answer(response, 202 if record.status == Record.Status.PENDING else 201, body(record))


@dataclass(frozen=True)
class ChangeCall:
    """One product's change of a record its caller holds (a cancel, a claim, a pay) as a
    request asks for it: through the API (:meth:`answer`) and through the record's button
    on the pages (``inventory.pages.TakePages.change_view``) alike, both by :meth:`changed`.
    ``action`` names it (the refusal of a body, the rate limit, the idempotency keys, the
    page's route); ``record`` is the record's name (``"order"``): its id's in the path and
    the answer (``order_id``) and the service's argument; ``read(user=, <record>_id=)`` is
    the product's selector of the caller's own record (``Http404`` for anyone else's),
    ``change(<record>=)`` its service, given the record as read, which raises
    ``HoldClosed`` (409) in the words of the record's state. ``reply(record_id, changed)``,
    when given, makes the answer's status and body from what the service returned (a pay:
    200 paid, 202 while its confirmation is on the way); without it the answer is 200
    ``{<record>_id, status}`` of the record changed."""

    action: str
    product: Product
    record: str
    read: Callable[..., Record]
    change: Callable[..., Any]
    reply: Callable[[int, Any], tuple[int, dict]] | None = None

    @property
    def id_name(self) -> str:
        return f"{self.record}_id"

    def changed(self, request, response: HttpResponse, record: Record, *, user_id: int) -> Any:
        """The change of ``record`` (the caller's, as read) that ``request`` asks for: what
        the service returned, the rate limits counted on the record's item as its take
        counted them (``hold_change_counted``). With an ``Idempotency-Key``, as a take's
        (:meth:`TakeCall.taken`): the first answer again, written into ``response`` and
        returned, or the change, whose answer is kept."""
        replay = idempotency_claim(request, response, action=self.action, user_id=user_id)
        if replay is not None:
            return replay
        hold_change_counted(self.product, record, action=self.action, user_id=user_id, address=client_counted(request))
        return self.change(**{self.record: record})

    def answer(self, request, response: HttpResponse, record_id: int) -> HttpResponse:
        """The change (:meth:`changed`) of the caller's record ``record_id``, once the request
        is well formed and the record the caller's, answered 200 ``{<record>_id, status}``
        or as ``reply`` says."""
        refuse_body(request, action=self.action)
        found = self.read(user=request.auth, **{self.id_name: record_id})
        changed = self.changed(request, response, found, user_id=request.auth.pk)
        if isinstance(changed, HttpResponse):
            return changed
        if self.reply is not None:
            return json_answer(response, *self.reply(record_id, changed))
        return json_answer(response, 200, {self.id_name: changed.public_id, "status": changed.status})
