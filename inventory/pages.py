"""What the products' pages share about takes: the item's page and the parts it polls, the Buy
or Draw button's view and the outcome fragment it answers with, that fragment's polling of a
record still pending under ``redis_lua``, the page of the user's own records, and the staff's
strategy switch. Each product describes its takes once (``TakePages``), makes its views of it
with its own selectors and services, and serves them where it places them (``TakePages.urls``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import URLPattern, path
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError, Unavailable
from core.ratelimit import client_address, rate_count

from .records import Record
from .views import strategy_switch_view

# Every page and fragment of the products shows live state (stock, the buttons, the user's
# records), so none is kept by the browser (``never_cache``: Cache-Control no-store). A page
# restored by Back from the HTTP cache showed the stock as it was loaded ("Left 20 of 20", Buy
# on, after the order was confirmed) until its next poll; one restored whole from the
# back/forward cache reloads itself (static/js/site.js).


def live_view(template: str, context: Callable[..., dict]):
    """A page, or a fragment of one that the page polls: ``context(request, **url_ids)``
    rendered in ``template``, read with GET and never cached."""

    @never_cache
    @require_GET
    def view(request, **ids) -> HttpResponse:
        return render(request, template, context(request, **ids))

    return view


@dataclass(frozen=True)
class TakePages:
    """One product's takes on its pages, and the item's page they are made from.

    ``template`` is the outcome fragment, which answers a take and polls a pending one.
    ``event`` is the ``HX-Trigger`` that its answer raises, on which the item's live parts
    reload; ``action`` the rate limit's name for a take. In the templates' context the item
    is ``item`` (``voucher``), the record ``record`` (``order``), its public id
    ``<record>_id``, and the user's records ``<record>s``. ``verb`` is the take's word in its
    route (``buy``). ``confirmed`` names the outcome of a confirmed record.

    Every view made here is served at a route placed and named after the item and the record
    alike for every product (:attr:`urls`); the product's urls list only the others.
    """

    template: str
    event: str
    action: str
    item: str
    record: str
    verb: str
    confirmed: Callable[[Record], str]
    # Filled in as the product makes its views (each once, as its views module is imported),
    # so that a route is written once, beside the view it serves, and never listed again.
    _served: dict[str, tuple[str, Callable[..., HttpResponse]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def id_name(self) -> str:
        return f"{self.record}_id"

    def _serve(self, route: str, name: str, view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        self._served[name] = (route, view)
        return view

    def _item_route(self, part: str) -> str:
        return f"{self.item}s/<int:{self.item}_id>/{part}"

    @property
    def urls(self) -> list[URLPattern]:
        """The routes of the views made here, for the product's ``urlpatterns``: under the item
        (``vouchers/<voucher_id>/``) its page (``voucher_detail``), the parts it polls
        (``…/live``, ``voucher_live``), the take (``…/buy``, ``voucher_buy``) and the strategy
        switch (``…/strategy``, ``voucher_strategy``); the user's records (``orders/``,
        ``order_list``) and one's status (``orders/<order_id>/status``, ``order_status``)."""
        return [path(route, view, name=name) for name, (route, view) in self._served.items()]

    def item_view(self, template: str, context: Callable[..., dict], *, part: str = ""):
        """The item's page, or with ``part`` a part of it that the page polls: a
        :func:`live_view` found by the item's id (``context(request, <item>_id=)``)."""
        name = f"{self.item}_{part or 'detail'}"
        return self._serve(self._item_route(part), name, live_view(template, context))

    def outcome(self, record: Record, item) -> dict:
        """The outcome fragment's context for a record as it stands: a pending one (reserved,
        not written yet) polls the status view until it is confirmed or failed."""
        if record.status == Record.Status.PENDING:
            outcome = "pending"
        elif record.status == Record.Status.FAILED:
            outcome = "failed"
        else:
            outcome = self.confirmed(record)
        return {"outcome": outcome, self.record: record, self.id_name: record.public_id, self.item: item}

    def take_view(self, *, find: Callable[..., object], take: Callable[..., Record]):
        """The Buy or Draw button's view: ``find(**url_ids)`` the item (``voucher_get``), then
        ``take(user=, <item>=, rate=)`` (``order_purchase``); it answers with the outcome
        fragment that htmx swaps in place."""

        @never_cache
        @require_POST
        def view(request, **ids) -> HttpResponse:
            item = find(**ids)
            if not request.user.is_authenticated:
                return render(request, self.template, {"outcome": "login", self.item: item})
            try:
                rate = rate_count(action=self.action, user_id=request.user.pk, address=client_address(request))
                record = take(user=request.user, **{self.item: item}, rate=rate)
            except DomainError as exc:
                context = {"outcome": exc.code, "message": exc.message, self.item: item}
            else:
                context = self.outcome(record, item)
            response = render(request, self.template, context)
            # Taken or refused, the stock and the button may have changed, or the page was
            # stale (the last draw used in another tab, the stock gone): it reloads.
            response["HX-Trigger"] = self.event
            return response

        return self._serve(self._item_route(self.verb), f"{self.item}_{self.verb}", view)

    def switch_view(
        self,
        *,
        find: Callable[..., object],
        update: Callable[..., object],
        guard: Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]],
    ):
        """The staff's strategy switch on the item's page, back to that page once done
        (``inventory.views.strategy_switch_view``), behind ``guard``: the product's change
        permission (``accounts.decorators.staff_permission_required("orders.change_voucher")``)."""
        view = guard(strategy_switch_view(find=find, update=update, item=self.item, then=f"{self.item}_detail"))
        return self._serve(self._item_route("strategy"), f"{self.item}_strategy", view)

    def status_view(self, *, read: Callable[..., Record]):
        """The outcome of a take answered pending, by the id it was answered with
        (``read(user=, <record>_id=)``, such as ``order_get``): polled by that outcome, which
        this answer replaces, until the record is confirmed or failed."""

        @never_cache
        @require_GET
        def view(request, **ids) -> HttpResponse:
            if not request.user.is_authenticated:
                return render(request, self.template, {"outcome": "login"})
            try:
                record = read(user=request.user, **ids)
            except Unavailable:
                # Redis out of reach: nothing is known yet, so keep asking.
                return render(request, self.template, {"outcome": "pending", **ids, "unread": True})
            except Http404:
                # Answered, not raised: a polled 404 would not be swapped in, and the poll would go on.
                return render(request, self.template, {"outcome": f"unknown_{self.record}", **ids})
            response = render(request, self.template, self.outcome(record, getattr(record, self.item)))
            if record.status != Record.Status.PENDING:
                # Settled: the stock, the button and the user's records may have changed with
                # it (a failed one gives the unit and the user's take back).
                response["HX-Trigger"] = self.event
            return response

        return self._serve(f"{self.record}s/<int:{self.id_name}>/status", f"{self.record}_status", view)

    def list_view(
        self, template: str, *, read_all: Callable[..., Iterable[Record]], read_written: Callable[..., Iterable[Record]]
    ):
        """The page of the user's records (``template``): ``read_all(user=)`` with those still
        pending or failed under ``redis_lua``; with Redis out of reach, ``read_written(user=)``
        and a word that others may be missing."""

        @never_cache
        @login_required
        @require_GET
        def view(request) -> HttpResponse:
            try:
                records, unread = read_all(user=request.user), False
            except Unavailable:
                records, unread = list(read_written(user=request.user)), True
            return render(request, template, {f"{self.record}s": records, "unread": unread})

        return self._serve(f"{self.record}s/", f"{self.record}_list", view)
