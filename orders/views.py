"""Server-rendered pages. They parse, call the same services as the API, and render."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import staff_permission_required
from accounts.permissions import staff_holds
from core.errors import DomainError, Unavailable
from core.ratelimit import client_address, rate_count
from inventory.forms import StrategyForm
from inventory.views import strategy_switch

from .models import Order
from .selectors import (
    order_get,
    order_list,
    order_list_all,
    voucher_audit,
    voucher_buy_refusal,
    voucher_get,
    voucher_held,
    voucher_list_audited,
)
from .services import order_purchase, voucher_update

# The event the Buy answer raises; the voucher's live part reloads on it.
BOUGHT = "bought"

# Every page and fragment here shows live state (stock, the Buy button, orders), so none is
# kept by the browser (``never_cache``: Cache-Control no-store). A page restored by Back from
# the HTTP cache showed the stock as it was loaded ("Left 20 of 20", Buy on, after the order
# was confirmed) until its next poll; one restored whole from the back/forward cache reloads
# itself (static/js/site.js).


def _live_context(request, voucher) -> dict:
    """The stock left, the audit's marks and the Buy button's state, polled by the voucher page."""
    # A reservation still being written counts as bought: a second purchase would be refused.
    held = voucher_held(voucher=voucher, user=request.user) if request.user.is_authenticated else None
    return {
        "voucher": voucher,
        "held": held,
        "audit": voucher_audit(voucher_id=voucher.pk),
        "refusal": voucher_buy_refusal(voucher=voucher, bought=held is not None),
    }


@never_cache
@require_GET
def voucher_list_page(request):
    return render(request, "pages/voucher_list.html", {"vouchers": voucher_list_audited()})


@never_cache
@require_GET
def voucher_stock_partial(request):
    """The live rows, polled by the list page."""
    return render(request, "pages/_voucher_rows.html", {"vouchers": voucher_list_audited()})


@never_cache
@require_GET
def voucher_detail_page(request, voucher_id: int):
    voucher = voucher_get(voucher_id=voucher_id)
    context = _live_context(request, voucher)
    if staff_holds(request.user, "orders.change_voucher"):
        context["strategy_form"] = StrategyForm(initial={"strategy": voucher.strategy})
    return render(request, "pages/voucher_detail.html", context)


@never_cache
@require_GET
def voucher_live_partial(request, voucher_id: int):
    return render(request, "pages/_voucher_live.html", _live_context(request, voucher_get(voucher_id=voucher_id)))


@never_cache
@require_POST
def voucher_buy(request, voucher_id: int):
    """The Buy button: answers with the outcome fragment that htmx swaps in place."""
    voucher = voucher_get(voucher_id=voucher_id)
    if not request.user.is_authenticated:
        return render(request, "pages/_buy_outcome.html", {"outcome": "login", "voucher": voucher})
    try:
        rate = rate_count(action="purchase", user_id=request.user.pk, address=client_address(request))
        order = order_purchase(user=request.user, voucher=voucher, rate=rate)
    except DomainError as exc:
        context = {"outcome": exc.code, "message": exc.message, "voucher": voucher}
    else:
        context = _order_outcome(order, voucher)
    response = render(request, "pages/_buy_outcome.html", context)
    # Bought or refused, the stock and the button may have changed: the live part reloads.
    response["HX-Trigger"] = BOUGHT
    return response


def _order_outcome(order: Order, voucher) -> dict:
    """The outcome fragment's context for an order as it stands: a pending one (``redis_lua``:
    reserved, not written yet) polls ``order_status_partial`` until it is confirmed or failed."""
    outcome = {Order.Status.PENDING: "pending", Order.Status.FAILED: "failed"}.get(order.status, "bought")
    return {"outcome": outcome, "order": order, "order_id": order.public_id, "voucher": voucher}


@never_cache
@require_GET
def order_status_partial(request, order_id: int):
    """The outcome of a purchase answered pending, by the id it was answered with: polled by
    that outcome, which this answer replaces, until the order is confirmed or failed."""
    if not request.user.is_authenticated:
        return render(request, "pages/_buy_outcome.html", {"outcome": "login"})
    try:
        order = order_get(user=request.user, order_id=order_id)
    except Unavailable:
        # Redis out of reach: nothing is known yet, so keep asking.
        return render(request, "pages/_buy_outcome.html", {"outcome": "pending", "order_id": order_id, "unread": True})
    except Http404:
        # Answered, not raised: a polled 404 would not be swapped in, and the poll would go on.
        return render(request, "pages/_buy_outcome.html", {"outcome": "unknown_order", "order_id": order_id})
    response = render(request, "pages/_buy_outcome.html", _order_outcome(order, order.voucher))
    if order.status != Order.Status.PENDING:
        # Settled: the stock and the button may have changed with it (a failed one gives
        # the unit and the user's purchase back).
        response["HX-Trigger"] = BOUGHT
    return response


@staff_permission_required("orders.change_voucher")
@require_POST
def voucher_strategy_switch(request, voucher_id: int):
    """Staff switch the voucher's strategy from its page, through the same service as the API."""
    voucher = voucher_get(voucher_id=voucher_id)
    return strategy_switch(
        request,
        switch=lambda name: voucher_update(voucher=voucher, strategy=name),
        then="pages:voucher_detail",
        voucher_id=voucher.pk,
    )


@never_cache
@login_required
@require_GET
def order_list_page(request):
    """The user's orders, with those still pending or failed under ``redis_lua``."""
    try:
        orders, unread = order_list_all(user=request.user), False
    except Unavailable:
        # Redis out of reach: the written orders, and a word that others may be missing.
        orders, unread = order_list(user=request.user), True
    return render(request, "pages/order_list.html", {"orders": orders, "unread": unread})
