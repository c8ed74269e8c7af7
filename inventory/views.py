"""What the products' pages share about strategies."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.errors import DomainError

from .forms import StrategyForm


def strategy_switch(request, *, switch: Callable[[str], object], then: str, **then_kwargs) -> HttpResponse:
    """The body of a staff view that switches an item's strategy from its page: ``switch``
    calls the product's update service with the chosen name; then back to ``then``. The
    product's view asks for its change permission first, as the admin's change form does."""
    form = StrategyForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Unknown strategy.")
    try:
        switch(form.cleaned_data["strategy"])
    except DomainError as exc:
        return HttpResponseBadRequest(exc.message)
    return redirect(then, **then_kwargs)


def strategy_switch_view(*, find: Callable[..., object], update: Callable[..., object], item: str, then: str):
    """The staff's strategy switch on an item's page: ``find(**url_ids)`` the item
    (``voucher_get``), ``update(<item>=, strategy=)`` it through the same service as the API
    (``voucher_update``), then back to the page named ``then`` (``voucher_detail``) in the
    switch's own URL namespace, with the same ids. The product wraps it in its change
    permission (``accounts.decorators.staff_permission_required``)."""

    @require_POST
    def view(request, **ids) -> HttpResponse:
        found = find(**ids)
        page = f"{request.resolver_match.namespace}:{then}"
        return strategy_switch(request, switch=lambda name: update(**{item: found}, strategy=name), then=page, **ids)

    return view
