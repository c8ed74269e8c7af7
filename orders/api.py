"""The flash sale's JSON API: vouchers, purchases, orders and their cancel, and the staff's
voucher calls."""

from datetime import datetime

from django.conf import settings
from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import Field

from accounts.auth import optional_auth, require_permission
from accounts.unlisted import item_shown
from core.api import staff_read, staff_write
from core.metrics import purchase_counted
from core.schemas import UtcDatetime, answers, text, whole
from inventory.admission.api import AdmissionIn, AdmissionOut, AdmissionPatchIn, QueueCall, queue_answers
from inventory.api import (
    ABANDON_COOLDOWN_SAID,
    ABANDON_LIMIT_SAID,
    AbandonCooldown,
    AbandonLimit,
    ChangeCall,
    HoldCountsOut,
    HoldWindow,
    PageIn,
    TakeCall,
    change_answers,
    hold_window,
    keyed_openapi,
    page_answer,
    paged_openapi,
    take_answers,
)
from inventory.models import Strategy
from inventory.records import DEFAULT_ABANDON_COOLDOWN_SECONDS, DEFAULT_ABANDON_LIMIT, MAX_BUCKETS
from inventory.services import MAX_UNITS

from . import links
from .models import Voucher
from .product import VOUCHER
from .selectors import order_get, order_page, order_refund, voucher_audit, voucher_get, voucher_list, voucher_shown
from .services import order_cancel, voucher_create, voucher_update

router = Router(tags=["vouchers"])


class VoucherOut(AdmissionOut):
    id: int
    title: str
    description: str
    stock: int
    initial_stock: int
    begin_at: datetime
    end_at: datetime
    strategy: str
    state: str
    payment_window_seconds: int = Field(description="how long an order is held for its payment; 0: paid when made")
    buckets: int = Field(description="how many stock rows the units are spread over, each under its own guard (1-64)")
    abandon_limit: int = Field(description=ABANDON_LIMIT_SAID)
    abandon_cooldown_seconds: int = Field(description=ABANDON_COOLDOWN_SAID)

    # The voucher as read with its stock (``orders.selectors.voucher_get``, ``voucher_list``).
    @staticmethod
    def resolve_stock(obj: Voucher) -> int:
        return obj.stock_left

    @staticmethod
    def resolve_initial_stock(obj: Voucher) -> int:
        return obj.stock_supplied

    @staticmethod
    def resolve_state(obj: Voucher) -> str:
        return obj.window_state()

    @staticmethod
    def resolve_payment_window_seconds(obj: Voucher) -> int:
        return obj.hold_seconds


class VoucherCreateIn(AdmissionIn):
    title: text(200)
    description: str = Field(default="", max_length=10_000)
    stock: whole(0, MAX_UNITS)
    begin_at: UtcDatetime
    end_at: UtcDatetime
    strategy: Strategy = Field(default_factory=lambda: Strategy(settings.DEFAULT_STRATEGY))
    payment_window_seconds: HoldWindow = 0
    buckets: whole(1, MAX_BUCKETS) = 1
    abandon_limit: AbandonLimit = DEFAULT_ABANDON_LIMIT
    abandon_cooldown_seconds: AbandonCooldown = DEFAULT_ABANDON_COOLDOWN_SECONDS


class VoucherPatchIn(AdmissionPatchIn):
    restock: whole(1, MAX_UNITS) | None = None
    buckets: whole(1, MAX_BUCKETS) | None = None
    strategy: Strategy | None = None
    begin_at: UtcDatetime | None = None
    end_at: UtcDatetime | None = None
    payment_window_seconds: HoldWindow | None = None
    abandon_limit: AbandonLimit | None = None
    abandon_cooldown_seconds: AbandonCooldown | None = None


@router.get(
    "/vouchers", response=answers({200: list[VoucherOut]}, login=False), auth=None, openapi_extra=links.VOUCHER_LIST
)
def vouchers_list(request):
    return list(voucher_list())


@router.get(
    "/vouchers/{int:voucher_id}",
    response=answers({200: VoucherOut}, login=False, item=True),
    auth=optional_auth,
    # Anyone may read a listed voucher; a login (staff, the load crowd) shows an unlisted one too.
    openapi_extra={"security": [{}]},
)
def vouchers_get(request, voucher_id: int):
    return voucher_shown(voucher_id=voucher_id, user=request.auth)


@staff_write(router, "POST", "/admin/vouchers", {201: VoucherOut}, links=links.VOUCHER_CREATED)
def admin_vouchers_create(request, payload: VoucherCreateIn):
    require_permission(request, "orders.add_voucher")
    voucher = voucher_create(**hold_window(payload.dict(), "payment_window_seconds"))
    return Status(201, voucher_get(voucher_id=voucher.pk))


@staff_write(
    router, "PATCH", "/admin/vouchers/{int:voucher_id}", {200: VoucherOut}, item=True, links=links.VOUCHER_UPDATED
)
def admin_vouchers_update(request, voucher_id: int, payload: VoucherPatchIn):
    require_permission(request, "orders.change_voucher")
    changes = hold_window(payload.dict(exclude_unset=True, exclude_none=True), "payment_window_seconds")
    voucher = voucher_get(voucher_id=voucher_id)
    voucher_update(voucher=voucher, **changes)
    return voucher_get(voucher_id=voucher_id)


class PurchaseOut(Schema):
    order_id: int
    status: str = Field(description="confirmed, or held until pay_by (201); pending under redis_lua (202)")
    pay_by: datetime | None = Field(description="when a held order expires unless paid; null when not held")


class CancelOut(Schema):
    order_id: int
    status: str = Field(description="cancelled: the unit is back on sale, and the buyer may buy again")


class RefundOut(Schema):
    reference: str = Field(description="the payment provider's id of the refunded charge")
    refunded_at: datetime
    reason: str = Field(description="the order's state when the payment's confirmation came: expired, cancelled...")


class OrderOut(Schema):
    order_id: int = Field(
        description="the id the purchase answered, from a redis_lua 202 on; it tells nothing of other orders"
    )
    # Orders named their id `id` before they answered `order_id` as draws answer `draw_id`;
    # kept, the same number, so that no client reading it breaks.
    id: int = Field(deprecated=True, description="deprecated: the same as order_id, which clients should read")
    voucher_id: int
    voucher_title: str
    status: str = Field(
        description="confirmed; with a payment window held, then paid, cancelled or expired; "
        "under redis_lua first pending, then one of those or failed"
    )
    reason: str = Field(description="why a failed order failed; empty otherwise")
    created_at: datetime
    pay_by: datetime | None = Field(description="the deadline of a held order's payment; null without one")
    refund: RefundOut | None = Field(description="a payment whose confirmation came after the hold ended, refunded")

    @staticmethod
    def resolve_refund(obj) -> dict | None:
        return order_refund(order=obj)

    @staticmethod
    def resolve_order_id(obj) -> int:
        return obj.public_id

    @staticmethod
    def resolve_id(obj) -> int:
        return obj.public_id

    @staticmethod
    def resolve_voucher_title(obj) -> str:
        return obj.voucher.title

    @staticmethod
    def resolve_reason(obj) -> str:
        return obj.why

    @staticmethod
    def resolve_pay_by(obj) -> datetime | None:
        return obj.hold_until


class AuditOut(Schema):
    voucher_id: int
    title: str
    strategy: str
    supplied: int
    stock: int
    orders: int
    pending: int
    buyers: int
    oversold: int
    duplicates: int
    conserved: bool
    stock_not_negative: bool
    holds: HoldCountsOut = Field(description="orders held for payment, paid (or paid when made), released")
    totals_agree: bool = Field(description="the running totals the pages show agree with the orders")
    ok: bool


PURCHASE = TakeCall(action="purchase", product=VOUCHER, counted=purchase_counted)


# 403 not_started or ended; 409 sold_out, already_purchased, abandon_limit, busy or
# idempotency_in_progress/interrupted; 422 an Idempotency-Key malformed or reused; 429 rate_limited or
# cooling_down.
@router.post(
    "/vouchers/{int:voucher_id}/purchase",
    response=take_answers(PurchaseOut),
    openapi_extra=keyed_openapi(links.PURCHASED, take=True),
)
def vouchers_purchase(request, voucher_id: int, response: HttpResponse):
    return PURCHASE.answer(
        request,
        response,
        voucher_id,
        lambda order: {"order_id": order.public_id, "status": order.status, "pay_by": order.hold_until},
    )


QUEUE = QueueCall(product=VOUCHER, shown=item_shown)


@router.post("/vouchers/{int:voucher_id}/queue", response=queue_answers(join=True), tags=["waiting room"])
def vouchers_queue_join(request, response: HttpResponse, voucher_id: int):
    """Join the voucher's waiting room, once (joining again answers where the caller stands), and
    hear where the caller stands: on a voucher whose admission is `queue`, a purchase needs the
    ticket the room gives once the caller is admitted."""
    return QUEUE.join(request, response, voucher_id)


@router.get("/vouchers/{int:voucher_id}/queue", response=queue_answers(join=False), tags=["waiting room"])
def vouchers_queue_poll(request, response: HttpResponse, voucher_id: int):
    """Where the caller stands in the voucher's waiting room, and the ticket once admitted; poll every
    few seconds. 404 `not_queued` once the ticket was used or lapsed, or before joining."""
    return QUEUE.poll(request, response, voucher_id)


@router.get(
    "/orders", response=answers({200: list[OrderOut]}, query=True), tags=["orders"], openapi_extra=paged_openapi()
)
def orders_list(request, response: HttpResponse, paging: Query[PageIn]):
    """The caller's orders, newest first, a page at a time: the next page is the answer's
    `Link` header's `next`, absent on the last page."""
    return page_answer(request, response, paging, order_page(user=request.auth, after=paging.after, size=paging.limit))


@router.get("/orders/{int:order_id}", response=answers({200: OrderOut}, item=True), tags=["orders"])
def orders_get(request, order_id: int):
    return order_get(user=request.auth, order_id=order_id)


CANCEL = ChangeCall(action="cancel", product=VOUCHER, record="order", read=order_get, change=order_cancel)


# 409 expired, cancelled, already_paid, pending (with Retry-After), idempotency_in_progress/interrupted.
@router.post(
    "/orders/{int:order_id}/cancel",
    response=change_answers(CancelOut),
    openapi_extra=keyed_openapi(links.CANCELLED),
    tags=["orders"],
)
def orders_cancel(request, order_id: int, response: HttpResponse):
    return CANCEL.answer(request, response, order_id)


@staff_read(router, "/admin/vouchers/{int:voucher_id}/audit", {200: AuditOut}, item=True)
def admin_vouchers_audit(request, voucher_id: int):
    # The admin shows the audit on the voucher's page: view, or change standing for it.
    require_permission(request, "orders.view_voucher", "orders.change_voucher")
    voucher = voucher_get(voucher_id=voucher_id)
    return voucher_audit(voucher_id=voucher.pk).as_dict()
