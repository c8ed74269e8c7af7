"""Server-rendered pages. They parse, call the same services as the API, and render."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from accounts.decorators import staff_required
from core.errors import DomainError
from inventory.forms import StrategyForm
from inventory.views import strategy_switch

from .selectors import order_list, voucher_audit, voucher_buy_refusal, voucher_get, voucher_list_audited
from .services import order_purchase, voucher_update

# The event the Buy answer raises; the voucher's live part reloads on it.
BOUGHT = "bought"


def _live_context(request, voucher) -> dict:
    """The stock left, the audit's marks and the Buy button's state, polled by the voucher page."""
    bought = request.user.is_authenticated and order_list(user=request.user).filter(voucher_id=voucher.pk).exists()
    return {
        "voucher": voucher,
        "audit": voucher_audit(voucher_id=voucher.pk),
        "refusal": voucher_buy_refusal(voucher=voucher, bought=bought),
    }


@require_GET
def voucher_list_page(request):
    return render(request, "pages/voucher_list.html", {"vouchers": voucher_list_audited()})


@require_GET
def voucher_stock_partial(request):
    """The live rows, polled by the list page."""
    return render(request, "pages/_voucher_rows.html", {"vouchers": voucher_list_audited()})


@require_GET
def voucher_detail_page(request, voucher_id: int):
    voucher = voucher_get(voucher_id=voucher_id)
    context = _live_context(request, voucher)
    if request.user.is_staff:
        context["strategy_form"] = StrategyForm(initial={"strategy": voucher.strategy})
    return render(request, "pages/voucher_detail.html", context)


@require_GET
def voucher_live_partial(request, voucher_id: int):
    return render(request, "pages/_voucher_live.html", _live_context(request, voucher_get(voucher_id=voucher_id)))


@require_POST
def voucher_buy(request, voucher_id: int):
    """The Buy button: answers with the outcome fragment that htmx swaps in place."""
    voucher = voucher_get(voucher_id=voucher_id)
    if not request.user.is_authenticated:
        return render(request, "pages/_buy_outcome.html", {"outcome": "login", "voucher": voucher})
    try:
        order = order_purchase(user=request.user, voucher=voucher)
    except DomainError as exc:
        context = {"outcome": exc.code, "message": exc.message, "voucher": voucher}
    else:
        context = {"outcome": "bought", "order": order, "voucher": voucher}
    response = render(request, "pages/_buy_outcome.html", context)
    # Bought or refused, the stock and the button may have changed: the live part reloads.
    response["HX-Trigger"] = BOUGHT
    return response


@staff_required
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


@login_required
@require_GET
def order_list_page(request):
    return render(request, "pages/order_list.html", {"orders": order_list(user=request.user)})
