"""Server-rendered pages. They parse, call the same services as the API, and render; the Buy
and Cancel buttons make their purchase and cancel through the API's calls (``.api``:
the same idempotency keys, metrics and rate limits). Every page and fragment here shows live
state, so none is kept by the browser (inventory.pages)."""

from accounts.decorators import staff_permission_required
from accounts.permissions import staff_holds
from accounts.unlisted import item_shown
from inventory.forms import StrategyForm
from inventory.pages import TakePages, live_view

from .api import CANCEL, PURCHASE
from .models import Order
from .selectors import (
    order_get,
    order_page,
    order_paying,
    order_refund,
    voucher_buy_refusal,
    voucher_get,
    voucher_held,
    voucher_held_order,
    voucher_list_marked,
    voucher_marks,
    voucher_shown,
)
from .services import voucher_update


def _list_context(request) -> dict:
    """The vouchers with their running totals' marks: the list page, and the rows it polls."""
    return {"vouchers": voucher_list_marked()}


voucher_list_page = live_view("pages/voucher_list.html", _list_context)
voucher_stock_partial = live_view("pages/_voucher_rows.html", _list_context)


def _live_context(request, voucher_id: int) -> dict:
    """The stock left, the running totals' marks and the Buy button's state, polled by the
    voucher page."""
    voucher = voucher_shown(voucher_id=voucher_id, user=request.user)
    # A reservation still being written counts as bought: a second purchase would be refused.
    held = voucher_held(voucher=voucher, user=request.user) if request.user.is_authenticated else None
    return {
        "voucher": voucher,
        "held": held,
        "marks": voucher_marks(voucher=voucher),
        "refusal": voucher_buy_refusal(voucher=voucher, bought=held is not None),
        "queue": PURCHASES.queue_standing(request, voucher),
    }


def _page_context(request, voucher_id: int) -> dict:
    """The live part, the buyer's order still held with its Pay and Cancel (as the purchase
    answered it: a reload keeps them), and the strategy switch for staff who may change the
    voucher."""
    context = _live_context(request, voucher_id)
    if context["held"] == Order.Status.HELD:
        order = voucher_held_order(voucher=context["voucher"], user=request.user)
        if order is not None:
            context["held_order"] = PURCHASES.outcome(order, context["voucher"])
    if staff_holds(request.user, "orders.change_voucher"):
        context["strategy_form"] = StrategyForm(initial={"strategy": context["voucher"].strategy})
    return context


def _order_details(order, outcome: str) -> dict:
    """An order whose payment waits for the provider's confirmation is "payment pending", and
    asked about again until it is paid or refunded (also once its hold ended meanwhile: the
    confirmation decides); a released one whose payment came too late is "refunded", with
    the reason."""
    if outcome not in ("held", Order.Status.EXPIRED, Order.Status.CANCELLED):
        return {}
    if order_paying(order=order):
        return {"outcome": "payment_pending", "waiting": True}
    refund = None if outcome == "held" else order_refund(order=order)
    return {} if refund is None else {"outcome": "refunded", "refund": refund}


# The voucher's page and its purchases: the Buy button's answer, and the orders it makes. Its
# event, raised by the answers, reloads the voucher's live part.
PURCHASES = TakePages(
    "pages/_buy_outcome.html",
    event="bought",
    take=PURCHASE,
    item="voucher",
    record="order",
    verb="buy",
    confirmed=lambda order: "bought",
    shown=item_shown,
    details=_order_details,
)
voucher_detail_page = PURCHASES.item_view("pages/voucher_detail.html", _page_context)
voucher_live_partial = PURCHASES.item_view("pages/_voucher_live.html", _live_context, part="live")

voucher_buy = PURCHASES.take_view()
# The Join button of a voucher with a waiting room.
voucher_queue_join = PURCHASES.queue_view()
# An order's fragment, and a held one's Cancel; its Pay is the payments' (payments.views).
order_status_partial = PURCHASES.status_view(read=order_get, changes=[CANCEL])
# The user's orders, a page at a time, with those still pending or failed under ``redis_lua``.
order_list_page = PURCHASES.list_view("pages/order_list.html", read=order_page)

# Staff switch the voucher's strategy from its page, through the same service as the API.
voucher_strategy_switch = PURCHASES.switch_view(
    find=voucher_get, update=voucher_update, guard=staff_permission_required("orders.change_voucher")
)
