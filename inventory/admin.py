"""The admin's restock page, which every product's admin uses: stock is never edited as
a field, it grows through the product's guarded restock service, so it cannot race the
buyers or the draws. (Nothing is registered here: stock is shown with its product.)"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import ClassVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import ModelAdmin
from django.contrib.admin.views.main import ChangeList
from django.core.cache import cache
from django.db.models import Count, Model
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import path
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.views.decorators.csrf import csrf_protect
from django_redis.exceptions import ConnectionInterrupted
from redis import RedisError

from core.admin import CappedPaginator, CreatedColumn
from core.errors import DomainError, InvalidInput

from .errors import RowsLocked
from .records import MAX_BUCKETS, Record, row_filter
from .services import MAX_UNITS
from .totals import ItemMarks, StockMarks
from .validators import abandon_cooldown_valid, abandon_limit_valid, hold_seconds_valid

# The item's cap on abandoned holds and its cooldown (docs/design.md, "Abandoned holds"), checked as the
# services check them.
_ABANDON_FIELDS = {"abandon_limit": abandon_limit_valid, "abandon_cooldown_seconds": abandon_cooldown_valid}


class RestockForm(forms.Form):
    quantity = forms.IntegerField(min_value=1, max_value=MAX_UNITS, help_text="Units to add to the stock.")
    # The page's own: a restock adds, so the same form sent twice (a second click while a take
    # holds the row) would add twice. Each page sends a fresh one; the first POST with it
    # takes it (``restock_once``), and a second is refused.
    once = forms.CharField(widget=forms.HiddenInput, max_length=64, initial=lambda: secrets.token_urlsafe(16))


logger = logging.getLogger(__name__)
RESTOCK_ONCE_SECONDS = 24 * 3600  # how long a form's ``once`` stays taken: past any resend


def restock_once(once: str) -> bool:
    """Take the form's ``once``; False when a POST already took it (an atomic ``SET NX``). True
    with the cache's Redis out of reach: a database strategy's restock needs no Redis."""
    try:
        return cache.add(f"restock-once:{once}", 1, RESTOCK_ONCE_SECONDS)
    except (RedisError, ConnectionInterrupted):
        logger.warning("restock: the cache cannot be reached, so a form sent twice would add twice")
        return True


def restock_page(
    model_admin: ModelAdmin,
    request,
    *,
    item: object,
    marks: Callable[[], StockMarks | ItemMarks],
    restock: Callable[[int], object],
    parent: Model,
    back_to: str,
) -> HttpResponse:
    """The form, and on a valid POST ``restock(quantity)`` then a redirect to ``back_to``;
    ``marks()`` reads the stock restocked now (its ``stock`` left and ``supplied``).

    ``parent`` is the object of ``model_admin`` the stock belongs to (the voucher, or the
    prize's pool), whose change page is ``back_to``: the breadcrumbs lead through it back
    to the list, and only who may change it may restock. A refusal of the service
    (``DomainError``) is shown on the form, and nothing changes.
    """
    if not model_admin.has_change_permission(request, parent):
        return redirect("admin:index")
    form = RestockForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        quantity, once = form.cleaned_data["quantity"], form.cleaned_data["once"]
        if not restock_once(once):
            # A fresh ``once``: sent again on purpose, once the stock is checked, it adds.
            form = RestockForm({"quantity": quantity, "once": secrets.token_urlsafe(16)})
            form.is_valid()
            form.add_error(None, "This restock was sent already (a second click?): check the stock above first.")
            return _restock_form(model_admin, request, item, marks, form, parent, back_to)
        try:
            restock(quantity)
        except DomainError as exc:
            cache.delete(f"restock-once:{once}")  # nothing added: the form may be sent again
            form.add_error("quantity", exc.message)
        else:
            left = marks().stock
            model_admin.message_user(request, f"Added {quantity} to “{item}”: {left} left.", messages.SUCCESS)
            return redirect(back_to)
    return _restock_form(model_admin, request, item, marks, form, parent, back_to)


def _restock_form(model_admin, request, item, marks, form, parent, back_to) -> HttpResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Restock {item}",
        "marks": marks(),
        "form": form,
        "opts": model_admin.model._meta,
        "parent": parent,
        "back_to": back_to,
    }
    return render(request, "admin/restock.html", context)


class ItemChangeView:
    """A product admin's add and change pages, saved outside one transaction of the page's
    own: each write is the services', which commit as they go, as the API's do. A ``redis_lua``
    item leaving its strategy, or split into another number of buckets, persists its waiting
    reservations and lets their stream go (``item_states.item_reservations_retire``): inside
    the page's transaction, a failure after it (a row held by a take, an inline's error)
    rolled those records back while their stream entries were gone, and buyers told 202 had
    no record. A change that finds a row held by a take (``RowsLocked``) is tried again a
    few times, then the page says so."""

    def has_delete_permission(self, request, obj=None):
        """Never, whoever asks: an item is kept as its records' evidence, and a ``redis_lua``
        item with no record yet may have reservations answered 202 waiting to be written
        under it. Its sale is ended instead (its window, or its stock taken out)."""
        return False

    @method_decorator(csrf_protect)
    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return self._changeform_view(request, object_id, form_url, extra_context)
        except RowsLocked as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())


class RestockUrl:
    """A product admin's restock page (``restock_page``), at ``restock_route`` among the
    admin's own URLs and named ``restock_name``; the admin's ``restock_view`` takes the ids
    of the route."""

    restock_route: str
    restock_name: str

    def get_urls(self):
        view = self.admin_site.admin_view(self.restock_view)
        return [path(self.restock_route, view, name=self.restock_name), *super().get_urls()]


def buckets_field(rows: str, *, changeable: bool = False) -> forms.IntegerField:
    """The ``buckets`` of an item's add page (and of its change page where ``changeable``):
    how many buckets ``rows`` are spread over (1 to 64), blank for 1 (on a change page, for
    as they are) (``inventory.buckets``)."""
    when = (
        "Changed while it sells: the units left are spread again. Blank: 1 when it is made, unchanged after."
        if changeable
        else "Set when it is made. Blank: 1."
    )
    return forms.IntegerField(
        min_value=1,
        max_value=MAX_BUCKETS,
        initial=1,
        required=False,
        help_text=f"Stock rows {rows} spread over, each taken under its own guard: more than 1 for a hot "
        f'item (docs/design.md, "Buckets"). {when}',
    )


# The waiting room's settings (``inventory.admission``), on every item's form: the model's
# bounds check them.
ADMISSION_FIELDS = ("admission", "admission_rate", "admission_ticket_seconds")


class ItemForm(forms.ModelForm):
    """What an item's admin form has of the fields every item has: its hold window
    (``hold_seconds``), in the product's words (``hold_label``: "Payment window (seconds)"),
    checked as the services check it (``hold_seconds_valid``), and its cap on abandoned holds
    and cooldown. Optional: a form posted without one keeps the item's, or gives a new one
    none (the window) or the default (the cap and the cooldown)."""

    hold_label: ClassVar[str]
    hold_help: ClassVar[str]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields.get("hold_seconds")
        if field is not None:
            field.label, field.help_text, field.required = self.hold_label, self.hold_help, False
            # The bounds are the service's, said in its words; the input keeps them as attributes.
            field.validators = []
        for name in _ABANDON_FIELDS:
            if name in self.fields:
                self.fields[name].required, self.fields[name].validators = False, []
        for name in ADMISSION_FIELDS:
            if name in self.fields:
                self.fields[name].required = False

    def clean(self):
        # A form posted without a waiting room's setting keeps the item's (a new one's default).
        cleaned = super().clean()
        for name in ADMISSION_FIELDS:
            if name in self.fields and cleaned.get(name) in (None, ""):
                cleaned[name] = getattr(self.instance, name)
        return cleaned

    def clean_hold_seconds(self) -> int:
        value = self.cleaned_data.get("hold_seconds")
        if value is None:
            return self.instance.hold_seconds
        try:
            return hold_seconds_valid(value, name=self.hold_label)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message, code="invalid") from None

    def _abandon_clean(self, name: str) -> int:
        value = self.cleaned_data.get(name)
        if value is None:
            return getattr(self.instance, name)
        try:
            return _ABANDON_FIELDS[name](value, name=self.fields[name].label)
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message, code="invalid") from None

    def clean_abandon_limit(self) -> int:
        return self._abandon_clean("abandon_limit")

    def clean_abandon_cooldown_seconds(self) -> int:
        return self._abandon_clean("abandon_cooldown_seconds")

    def item_fields(self) -> dict[str, object]:
        """The cleaned fields every item has that the product's services take by name."""
        names = ("begin_at", "end_at", "strategy", "hold_seconds", *ADMISSION_FIELDS, *_ABANDON_FIELDS)
        return {name: self.cleaned_data[name] for name in names if name in self.cleaned_data}


def audit_line(result, figures: list[tuple[str, object]], details: str = "", *, settled: str) -> str:
    """An audit (a voucher's, a pool's) on one line: its ``figures`` (label, value), its
    lifecycle's counts (``result.holds``; ``settled`` is the product's word, paid or
    claimed), whether it is conserved, its verdict, then its ``details`` (HTML)."""
    holds = result.holds
    lifecycle = [
        ("held", holds.held),
        (settled, holds.settled),
        ("released", holds.released),
        ("returned twice", holds.returned_twice),
        (f"{settled} and released", holds.settled_and_released),
    ]
    return format_html(
        "{} · conserved {} · <strong>{}</strong>{}",
        format_html_join(" · ", "{} {}", [*figures, *lifecycle]),
        "yes" if result.conserved else "NO",
        "OK" if result.ok else "BROKEN",
        details,
    )


class PageCountedChangeList(ChangeList):
    """A changelist whose rows get figures read for its page alone, once the page is known:
    its admin's ``page_count(items)`` sets them on the page's items, in one query each
    whatever the page's length, where an annotation of the list's query counted the
    records of every item of the list in a join."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        self.model_admin.page_count(self.result_list)


class HeldColumn:
    """A ``held`` column in an item's list: its records holding a unit for a payment or a
    claim now (docs/design.md, "Lifecycle"), counted for the page's items in one grouped
    query over the hold index's range ``status = held`` (``order_hold_due``,
    ``draw_hold_due``), which holds the live holds only, not the records of every take
    ever. ``records`` is the item's reverse name of its records (``"orders"``)."""

    records: str

    def get_changelist(self, request, **kwargs):
        return PageCountedChangeList

    def page_count(self, items: list[Model]) -> None:
        relation = self.model._meta.get_field(self.records)
        item_id = relation.field.attname
        page = {f"{item_id}__in": [item.pk for item in items]}
        held = dict(
            relation.related_model.objects.filter(status=Record.Status.HELD, **page)
            .order_by()
            .values_list(item_id)
            .annotate(n=Count("pk"))
        )
        for item in items:
            item.held_count = held.get(item.pk, 0)

    @admin.display(description="held")
    def held(self, obj) -> int:
        return obj.held_count


class ListedItemsFilter(admin.SimpleListFilter):
    """The records of the shop's own (listed) items by default: every race lab run and load
    test takes thousands from items of its own, which would bury the real ones. A choice
    shows theirs too, or theirs alone; an item picked in the item's filter shows its
    records whichever it is.

    The listed items' ids are read first (the shop's items), and the records filtered on
    them, so that the first page is still read newest first from the ordering's index,
    stopping once it is full, where a join to the items' table would let MariaDB start there
    and sort every record. The item is not in that index (no column of the records says
    whether their item is listed): a page deep in the filtered list may read the listed
    items' records and sort them, which "All" does not."""

    title = "items"
    parameter_name = "items"
    ALL, UNLISTED = "all", "unlisted"

    def __init__(self, request, params, model, model_admin):
        self.item = model_admin.item_field
        # Picked from the item's filter: that item's records, listed or not.
        self.item_picked = any(name.startswith(f"{self.item}__") for name in params)
        super().__init__(request, params, model, model_admin)
        self.item_model = model._meta.get_field(self.item).related_model

    def lookups(self, request, model_admin):
        return [(self.ALL, "All, the race lab's and load tests' too"), (self.UNLISTED, "Only the lab's and tests'")]

    def choices(self, changelist):
        choices = list(super().choices(changelist))
        choices[0]["display"] = "The shop's (listed)"
        return choices

    def queryset(self, request, queryset):
        if self.value() == self.ALL or (self.value() is None and self.item_picked):
            return queryset
        listed = self.value() != self.UNLISTED
        ids = list(self.item_model.objects.filter(listed=listed).values_list("pk", flat=True))
        return queryset.filter(**{f"{self.item}_id__in": ids})


class RecordAdmin(CreatedColumn, ModelAdmin):
    """The records of takes (orders, draws), read only: they come from takes alone, and one
    typed in by hand would skip the stock.

    A list that grows with every take, so that a page costs what it shows: the newest
    records read from the ordering's index (``order_created``, ``draw_created``), and the
    rows they name (``list_prefetch``: the item, the user) in one lookup each for the page.
    Joined in the list's query instead, they let MariaDB start from the item's table and
    sort every record. The count stops at ``CappedPaginator.cap``, and neither the full
    count nor the filters' facets (a count per choice over every record) are offered.

    The search finds a user's records by the start of their username, through its index;
    the item's filter finds an item's. A search for any part of the name, or of the item's
    name too, read every record joined to its user and item to find a few. A number (with
    or without its ``#``) finds the record a buyer quotes: the one shown by that number
    (``Record.public_id``), by its primary key or reservation; where none is, the number
    is searched as a username."""

    search_fields = ["^user__username"]
    search_help_text = "A username, or its beginning; or the number a buyer was shown (#…). The filter picks an item."
    # The record's item (a voucher, a pool): ``ListedItemsFilter`` shows the listed ones' records.
    item_field: ClassVar[str]
    list_select_related = ()
    list_prefetch: ClassVar[tuple[str, ...]] = ()
    paginator = CappedPaginator
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related(*self.list_prefetch)

    def get_search_results(self, request, queryset, search_term):
        number = search_term.strip().removeprefix("#")
        found = row_filter(int(number)) if number.isascii() and number.isdigit() and len(number) <= 19 else None
        if found is not None and queryset.filter(**found).exists():
            return queryset.filter(**found), False
        # No record is shown by that number: it may be a username made of digits.
        return super().get_search_results(request, queryset, search_term)

    @admin.display(description="number shown")
    def shown_as(self, record) -> str:
        return f"#{record.public_id}"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        """Read only, its view permission showing the page: saved, the page wrote every column
        back as it read them, over a release or a pay committed meanwhile (a unit back on sale
        and held still); and a record is changed by the services alone."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Never: a deleted record gives back no unit, no running total and no take, and a held
        one kept its unit out of stock for good, out of the sweep's sight."""
        return False
