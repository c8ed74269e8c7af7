"""Server-rendered pages. They parse, call the same services as the API, and render."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError

from .selectors import order_list, voucher_get, voucher_list
from .services import order_purchase


@require_GET
def voucher_list_page(request):
    return render(request, "pages/voucher_list.html", {"vouchers": voucher_list()})


@require_GET
def voucher_stock_partial(request):
    """The live stock column, polled by the list page."""
    return render(request, "pages/_voucher_rows.html", {"vouchers": voucher_list()})


@require_GET
def voucher_detail_page(request, voucher_id: int):
    voucher = voucher_get(voucher_id=voucher_id)
    bought = request.user.is_authenticated and order_list(user=request.user).filter(voucher_id=voucher_id).exists()
    return render(request, "pages/voucher_detail.html", {"voucher": voucher, "bought": bought})


@require_POST
def voucher_buy(request, voucher_id: int):
    """The Buy button: answers with the outcome fragment that htmx swaps in place."""
    voucher = voucher_get(voucher_id=voucher_id)
    if not request.user.is_authenticated:
        return render(request, "pages/_buy_outcome.html", {"outcome": "login", "voucher": voucher})
    try:
        order = order_purchase(user=request.user, voucher=voucher)
    except DomainError as exc:
        return render(
            request, "pages/_buy_outcome.html", {"outcome": exc.code, "message": exc.message, "voucher": voucher}
        )
    return render(request, "pages/_buy_outcome.html", {"outcome": "bought", "order": order, "voucher": voucher})


@login_required
@require_GET
def order_list_page(request):
    return render(request, "pages/order_list.html", {"orders": order_list(user=request.user)})
