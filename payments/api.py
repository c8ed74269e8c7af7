"""The buyer's pay of a held order, and the provider's callback that confirms it."""

from __future__ import annotations

from typing import Literal

from django.http import HttpResponse
from ninja import Router, Schema
from pydantic import Field

from core.idempotency import PARAMETER
from core.links import answered, calls
from core.schemas import InputSchema, answers
from inventory.api import ChangeCall
from orders.product import VOUCHER
from orders.selectors import order_get

from .models import Payment
from .services import order_pay, payment_confirm
from .signature import META, callback_verify
from .signature import PARAMETER as SIGNATURE

router = Router(tags=["orders"])

# A pay's answer leads to the order, which shows what became of it.
PAID = answered(calls({"GetOrder": "orders_api_orders_get"}, {"order_id": "$request.path.order_id"}), 200, 202)


class PayOut(Schema):
    order_id: int
    status: str = Field(description="the order's: paid, or held while its payment is pending")
    payment: str = Field(description="paid, or pending until the provider's confirmation arrives")


class CallbackIn(InputSchema):
    reference: str = Field(pattern=r"^[0-9a-f]{32}$", description="the provider's id of the charge")
    status: Literal["confirmed"]


class CallbackOut(Schema):
    reference: str
    status: str = Field(description="the payment's: paid, or refunded when its order was not held any more")


def _paid(order_id: int, payment: Payment) -> tuple[int, dict]:
    if payment.status == Payment.Status.PAID:
        return 200, {"order_id": order_id, "status": "paid", "payment": "paid"}
    return 202, {"order_id": order_id, "status": "held", "payment": "pending"}


PAY = ChangeCall(action="pay", product=VOUCHER, record="order", read=order_get, change=order_pay, reply=_paid)


# 409 expired, cancelled, already_paid, pending (a redis_lua order not written yet), busy or
# idempotency_in_progress/interrupted; 422 an Idempotency-Key malformed or reused.
@router.post(
    "/orders/{int:order_id}/pay",
    response=answers(
        {200: PayOut, 202: PayOut}, unsafe=True, item=True, body="none", refusals=(409, 422), limited=True
    ),
    openapi_extra={**PAID, "parameters": [PARAMETER]},
)
def orders_pay(request, order_id: int, response: HttpResponse):
    """Pay a held order before its `pay_by`: 200 when the provider confirmed the payment at
    once, 202 while its confirmation is on the way (`GET /api/orders/{id}` shows the
    outcome). An order not held is refused in the words of its state, and nothing is charged;
    a confirmation that came after the hold ended is refunded, never sold."""
    return PAY.answer(request, response, order_id)


def _provider_signed(request) -> bool:
    """The callback's proof, checked over the raw body before the body is parsed: whatever
    was not signed by the provider, lately and once, is 403 before its fields are read."""
    callback_verify(request.body, request.META.get(META))
    return True


# 403 bad_signature, signature_expired or signature_replayed; 404 a reference nobody charged;
# 409 busy (the provider sends it again).
@router.post(
    "/payments/callback",
    auth=_provider_signed,
    response=answers({200: CallbackOut}, login=False, body="json", refusals=(403, 404, 409)),
    openapi_extra={"parameters": [SIGNATURE]},
    tags=["payments"],
)
def payments_callback(request, payload: CallbackIn):
    """The payment provider's confirmation of a charge, signed (`X-Provider-Signature`, an
    HMAC of the time it was sent, a nonce and the body): no login, the signature is the
    caller's proof, checked before the body is read. A signature older than
    `PAYMENT_CALLBACK_TOLERANCE_SECONDS`, or accepted before, is refused. Sent late, twice or
    again (each post signed afresh), it resolves the payment once."""
    payment = payment_confirm(reference=payload.reference)
    return {"reference": payment.reference, "status": payment.status}
