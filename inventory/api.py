"""What the products' APIs share about takes: the purchase and the draw are one call of the
same shape, answered 201 when the record is written and 202 when it is reserved under
``redis_lua``. Each product describes its take once (``TakeCall``) with its own selector,
service and metrics, and builds the answer's body itself. Both take an ``Idempotency-Key``
(``core.idempotency``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse

from core.api import json_answer, refuse_body
from core.idempotency import PARAMETER, idempotency_claim
from core.ratelimit import client_address, rate_count
from core.schemas import answers

from .items import item_for_take
from .product import Product
from .records import Record
from .take import item_take


def take_answers(schema: type) -> dict[int, Any]:
    """A take's declared answers: ``schema`` with 201 (written) and 202 (pending under
    ``redis_lua``); 403 ``not_started`` or ``ended``, 409 the product's refusals, ``busy`` or
    ``idempotency_in_progress``, 422 an ``Idempotency-Key`` malformed or reused."""
    return answers(
        {201: schema, 202: schema}, unsafe=True, item=True, body="none", refusals=(403, 409, 422), limited=True
    )


def take_openapi(links: dict) -> dict:
    """A take's ``openapi_extra``: its ``links``, and the ``Idempotency-Key`` header it takes."""
    return {**links, "parameters": [PARAMETER]}


@dataclass(frozen=True)
class TakeCall:
    """One product's take through the API. ``action`` names it (for the refusal of a body and
    the rate limit); ``product`` is the product's adapter, whose kind names the item in
    ``counted(strategy, <kind>_id=, user_id=)``, which counts the outcome
    (``core.metrics.purchase_counted``)."""

    action: str
    product: Product
    counted: Callable[..., Any]

    def answer(self, request, response: HttpResponse, item_id: int, body: Callable[[Record], dict]) -> HttpResponse:
        """The take by the caller of the item ``item_id`` (``inventory.take``), answered with
        ``body(record)`` through ``json_answer``: built by the view, not validated against the
        schema. With an ``Idempotency-Key``, once the request is known to be well formed and
        its item to exist: the first answer again, or the take, whose answer is kept."""
        refuse_body(request, action=self.action)
        item = item_for_take(self.product, item_id=item_id)
        user_id = request.auth.pk
        replay = idempotency_claim(request, response, action=self.action, user_id=user_id)
        if replay is not None:
            return replay
        with self.counted(item.strategy, **{f"{self.product.kind}_id": item.pk}, user_id=user_id) as counted:
            rate = rate_count(action=self.action, user_id=user_id, address=client_address(request))
            record = counted(item_take(self.product, item, user_id=user_id, rate=rate))
        return json_answer(response, 202 if record.status == Record.Status.PENDING else 201, body(record))
