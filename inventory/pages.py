"""What the products' pages share about takes: the item's page and the parts it polls, the Buy
or Draw button's view and the outcome fragment it answers with, that fragment's polling of a
record still pending under ``redis_lua``, the buttons of a record held for its user (Pay,
Cancel, Claim: docs/design.md, "Lifecycle") and their answers, the pages of the user's own
records, and the staff's strategy switch. Each product describes its takes once
(``TakePages``), makes its views of it with its own selectors and the API's calls of its
take and changes (``inventory.api``: a button takes and changes as the API does, with the
key it was rendered with), and serves them where it places them (``TakePages.urls``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from math import ceil
from typing import TYPE_CHECKING, Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import URLPattern, path
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError, InvalidInput, Unavailable
from core.idempotency import idempotency_answered, idempotency_outcome_unknown
from core.outage import dependency_down, outcome_unknown
from core.ratelimit import RateLimited

from .admission.api import queue_rate
from .admission.room import Standing, item_for_queue, room_enter
from .items import item_for_take
from .paging import PAGE_SIZE, Cursor, Page
from .product import Product, product_of
from .records import Admission, Record
from .views import strategy_switch_view

if TYPE_CHECKING:
    from .api import ChangeCall, TakeCall

Status = Record.Status

# Every page and fragment of the products shows live state (stock, the buttons, the user's
# records), so none is kept by the browser (``never_cache``: Cache-Control no-store). A page
# restored by Back from the HTTP cache showed the stock as it was loaded ("Left 20 of 20", Buy
# on, after the order was confirmed) until its next poll; one restored whole from the
# back/forward cache reloads itself (static/js/site.js).


def _too_many(refused: RateLimited) -> HttpResponse:
    response = HttpResponse(refused.message, status=429, content_type="text/plain")
    response["Retry-After"] = str(refused.retry_after)
    return response


def live_view(template: str, context: Callable[..., dict]):
    """A page, or a fragment of one that the page polls: ``context(request, **url_ids)``
    rendered in ``template``, read with GET and never cached."""

    @never_cache
    @require_GET
    def view(request, **ids) -> HttpResponse:
        try:
            return render(request, template, context(request, **ids))
        except RateLimited as refused:  # a queue's poll, over its limits: htmx keeps the part shown
            return _too_many(refused)

    return view


@dataclass(frozen=True)
class TakePages:
    """One product's takes on its pages, and the item's page they are made from.

    ``template`` is the outcome fragment, which answers a take and polls a pending one; it is
    also a record's fragment as it stands (held with its buttons, paid, cancelled...), in the
    lists and as the answer of those buttons. ``event`` is the ``HX-Trigger`` that its answers
    raise, on which the item's live parts reload; ``take`` is the take as a request makes it,
    the API's (``inventory.api.TakeCall``: ``orders.api.PURCHASE``). In the templates'
    context the item is ``item`` (``voucher``), the record ``record`` (``order``), its public
    id ``<record>_id``, and the user's records ``<record>s``. ``verb`` is the take's word in
    its route (``buy``). ``confirmed`` names the outcome of a confirmed record;
    ``details(record, outcome)`` is what the product adds to a record's fragment (an order's
    refund), which may name another outcome, and ``waiting`` while it is to be asked again (a
    payment on its way).

    Every view made here is served at a route placed and named after the item and the record
    alike for every product (:attr:`urls`); the product's urls list only the others.
    """

    template: str
    event: str
    take: TakeCall
    item: str
    record: str
    verb: str
    confirmed: Callable[[Record], str]
    # The product's rule of who may see the item (``Http404`` for an unlisted one but to its
    # crowd and staff), asked before anything else: the buttons of an unlisted item answer an
    # outsider, logged in or not, as those of an id of nothing do.
    shown: Callable[..., Any]
    details: Callable[[Record, str], dict] = lambda record, outcome: {}
    # Filled in as the product makes its views (each once, as its views module is imported),
    # so that a route is written once, beside the view it serves, and never listed again.
    _served: dict[str, tuple[str, Callable[..., HttpResponse]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def id_name(self) -> str:
        return f"{self.record}_id"

    @property
    def product(self) -> Product:
        # The item's name on the pages is its product's kind ("voucher", "pool").
        return product_of(self.item)

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
        ``order_list``), one's status (``orders/<order_id>/status``, ``order_status``) and the
        changes of a held one (``orders/<order_id>/cancel``, ``order_cancel``)."""
        return [path(route, view, name=name) for name, (route, view) in self._served.items()]

    def item_view(self, template: str, context: Callable[..., dict], *, part: str = ""):
        """The item's page, or with ``part`` a part of it that the page polls: a
        :func:`live_view` found by the item's id (``context(request, <item>_id=)``)."""
        name = f"{self.item}_{part or 'detail'}"
        return self._serve(self._item_route(part), name, live_view(template, context))

    def outcome(self, record: Record, item, *, now: datetime | None = None) -> dict:
        """The record's fragment's context as it stands. A pending one (reserved, not written
        yet) polls the status view until it is confirmed or failed; a held one counts down to
        its deadline (``seconds_left``, from the server's clock, so that the browser's does not
        matter) and asks again once it has passed. Past its deadline it is shown lapsed
        (expired, forfeited) before the expiry releases it: it can no longer be paid or claimed."""
        # No refusal unless a change's answer adds one: a list's page may have its own in context.
        context = {
            self.record: record,
            self.id_name: record.public_id,
            self.item: item,
            "waiting": False,
            "refusal": None,
        }
        if record.status == Status.PENDING:
            outcome, context["waiting"] = "pending", True
        elif record.status == Status.FAILED:
            outcome = "failed"
        elif record.status == Status.CONFIRMED:
            outcome = self.confirmed(record)
        elif record.is_held:
            left = (record.hold_until - (now or timezone.now())).total_seconds()
            outcome = "held" if left > 0 else self.product.lapsed
            context["seconds_left"] = max(0, ceil(left))
        else:
            outcome = record.status
        context["outcome"] = outcome
        return context | self.details(record, outcome)

    def states(self, records: Iterable[Record]) -> list[Record]:
        """``records``, each that was or is held given ``state``: its fragment's context
        (:meth:`outcome`), which the lists render in place of its status."""
        records = list(records)
        for record in records:
            if record.status not in (Status.PENDING, Status.FAILED, Status.CONFIRMED):
                record.state = self.outcome(record, getattr(record, self.item))
        return records

    def take_view(self):
        """The Buy or Draw button's view, served at ``<item>s/<id>/<verb>``: the take as the
        API makes it (``TakeCall.taken``: the item read as a take reads it, the
        ``Idempotency-Key`` the button sends, the outcome's metrics, the rate limits),
        answered with the outcome fragment that htmx swaps in place."""

        @never_cache
        @require_POST
        def view(request, **ids) -> HttpResponse:
            item = self.shown(item_for_take(self.product, item_id=ids[f"{self.item}_id"]), user=request.user)
            if not request.user.is_authenticated:
                return render(request, self.template, {"outcome": "login", self.item: item})

            def context(record: Record | None, refusal: DomainError | None) -> dict:
                if refusal is not None:
                    return {"outcome": refusal.code, "message": refusal.message, self.item: item}
                return self.outcome(record, item)

            # Taken or refused, the stock and the button may have changed, or the page was
            # stale (the last draw used in another tab, the stock gone): it reloads.
            return self._keyed(
                request, lambda response: self.take.taken(request, response, item, user_id=request.user.pk), context
            )

        return self._serve(self._item_route(self.verb), f"{self.item}_{self.verb}", view)

    def queue_standing(self, request, item) -> Standing | None:
        """Where the page's user stands in the item's waiting room, for its live part: None
        for an ``open`` item, a user not logged in, or one not in the queue (the Join button)."""
        if item.admission == Admission.OPEN or not request.user.is_authenticated:
            return None
        return room_enter(
            self.product, item, user_id=request.user.pk, join=False, rate=queue_rate(request, request.user)
        )

    def queue_view(self):
        """The Join button of an item with a waiting room, served at ``<item>s/<id>/queue``: the
        user joins its queue (once; again is where they stand) and the item's live part, which
        shows the place, reloads on the answer's event."""

        @never_cache
        @require_POST
        def view(request, **ids) -> HttpResponse:
            item = self.shown(item_for_queue(self.product, item_id=ids[f"{self.item}_id"]), user=request.user)
            response = HttpResponse(status=204)
            if request.user.is_authenticated:
                try:
                    room_enter(
                        self.product, item, user_id=request.user.pk, join=True, rate=queue_rate(request, request.user)
                    )
                except RateLimited as refused:
                    return _too_many(refused)
                response["HX-Trigger"] = self.event
            return response

        return self._serve(self._item_route("queue"), f"{self.item}_queue", view)

    def _keyed(
        self,
        request,
        enter: Callable[[HttpResponse], Any],
        context: Callable[[Any, DomainError | None], dict],
    ) -> HttpResponse:
        """A button's answer: ``enter(response)`` (a take's or a change's call), then the
        fragment of ``context(returned, refusal)``, raising the event on which the item's
        parts reload. Under an ``Idempotency-Key``, ``enter`` may answer the first request's
        fragment again instead (written into ``response``), and the answer made here is
        kept for the key (``core.idempotency``) as the API keeps its own: a refusal that asks
        for the same request again (busy, rate limited, unavailable) lets the key go."""
        response = HttpResponse()
        refusal: DomainError | None = None
        try:
            returned = enter(response)
        except DomainError as exc:
            returned, refusal = None, exc
            if outcome_unknown(exc):  # a 503 raised from what may have acted (a Redis script timed out)
                idempotency_outcome_unknown(request)
        except Exception as exc:
            # As the API keeps its answer to an error: a 500 (nobody knows what was written),
            # and none for a dependency out of reach (nothing was, unless it was cut mid-way).
            if outcome_unknown(exc):
                idempotency_outcome_unknown(request)
            idempotency_answered(request, HttpResponse(status=503 if dependency_down(exc) else 500))
            raise
        if returned is not response:
            response.content = render_to_string(self.template, context(returned, refusal), request)
            idempotency_answered(request, response, refusal=refusal)
        response["HX-Trigger"] = self.event
        return response

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

    def status_view(self, *, read: Callable[..., Record], changes: Iterable[ChangeCall] = ()):
        """The record's fragment as it stands, by the id the take was answered with
        (``read(user=, <record>_id=)``, such as ``order_get``): polled by an outcome pending
        until the record is confirmed or failed, by a payment on its way until it is paid or
        refunded, and asked once by a held record at its deadline; each answer replaces the
        fragment that asked. With ``changes`` (the API's ``orders.api.CANCEL``), the buttons
        of a held record, which answer the same fragment (:meth:`change_view`)."""
        for call in changes:
            self.change_view(call)

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
            context = self.outcome(record, getattr(record, self.item))
            response = render(request, self.template, context)
            if not context["waiting"]:
                # Settled: the stock, the button and the user's records may have changed with
                # it (a failed one gives the unit and the user's take back).
                response["HX-Trigger"] = self.event
            return response

        return self._serve(self.record_route("status"), f"{self.record}_status", view)

    def record_route(self, part: str) -> str:
        """The route of a view of one of the user's records (``orders/<int:order_id>/status``)."""
        return f"{self.record}s/<int:{self.id_name}>/{part}"

    def change_view(self, call: ChangeCall, *, served: bool = True):
        """A button of a held record's fragment (Cancel, Claim, Pay), posted to
        ``<record>s/<id>/<action>`` (``order_cancel``): ``call.read`` the caller's own record
        (``Http404`` for anyone else's, as the API answers), then the change as the API makes
        it (``ChangeCall.changed``: the ``Idempotency-Key`` the button sends, the rate limits
        named after the action, counted on the record's item, and the service, given the
        record as read). The answer is the record's fragment as the service left it, with
        the refusal in words when the service refused (``HoldClosed``: expired, already
        paid...).

        ``served=False`` for a change that a package above the product serves at its own
        route (a payment: ``record_route(action)``), since the product's routes are placed
        before that package is imported."""

        @never_cache
        @require_POST
        def view(request, **ids) -> HttpResponse:
            if not request.user.is_authenticated:
                return render(request, self.template, {"outcome": "login"})
            record = call.read(user=request.user, **ids)

            def context(changed: Any, refusal: DomainError | None) -> dict:
                # The record as the service left it, changed or refused: a settle or release
                # that lost a race to another request reads it again (``inventory.holds``).
                context = self.outcome(record, getattr(record, self.item))
                if refusal is not None:
                    context |= {"refusal": refusal.code, "message": refusal.message}
                return context

            # Released, the unit is back on sale and the user may take again: the item's parts reload.
            return self._keyed(
                request, lambda response: call.changed(request, response, record, user_id=request.user.pk), context
            )

        if served:
            self._serve(self.record_route(call.action), f"{self.record}_{call.action}", view)
        return view

    def list_view(self, template: str, *, read: Callable[..., Page]):
        """The page of the user's records (``template``), newest first, a page at a time
        (``inventory.paging``): ``read(user=, after=, size=)`` with those still pending or
        failed under ``redis_lua``; with Redis out of reach, the written ones (``reserved=False``)
        and a word that others may be missing. The page after is at ``?cursor=`` (its Older
        link); a cursor not of its form is answered 400, with a link to the newest. Each that
        was held is shown as its fragment (:meth:`states`), with its buttons while it is held."""

        @never_cache
        @login_required
        @require_GET
        def view(request) -> HttpResponse:
            records = f"{self.record}s"
            cursor = request.GET.get("cursor")
            try:
                after = None if cursor is None else Cursor.parse(cursor)
            except InvalidInput:
                return render(request, template, {records: [], "bad_cursor": True, "newest": request.path}, status=400)
            try:
                page, unread = read(user=request.user, after=after, size=PAGE_SIZE), False
            except Unavailable:
                page, unread = read(user=request.user, after=after, size=PAGE_SIZE, reserved=False), True
            return render(
                request,
                template,
                {
                    records: self.states(page.records),
                    "unread": unread,
                    "after": after,
                    "next_cursor": page.next,
                    "newest": request.path,
                },
            )

        return self._serve(f"{self.record}s/", f"{self.record}_list", view)
