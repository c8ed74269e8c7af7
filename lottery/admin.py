"""Pools and prizes in the admin. A prize's stock is never edited as a field: it is set
when the prize is added and grows only through the guarded restock, so it cannot race
the draws."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from core.admin import SaleWindowColumns
from core.forms import NamedForm, SaleWindowForm
from inventory.admin import (
    ADMISSION_FIELDS,
    HeldColumn,
    ItemChangeView,
    ItemForm,
    ListedItemsFilter,
    RecordAdmin,
    RestockUrl,
    audit_line,
    buckets_field,
    restock_page,
)
from inventory.services import MAX_UNITS
from inventory.totals import stock_sums

from .models import Draw, Pool, Prize
from .selectors import pool_audit, prize_get, prize_marks, prizes_stocked
from .services import MAX_DRAWS_PER_USER, MAX_NO_PRIZE_WEIGHT, pool_create, pool_update, prize_create, prize_update


class PrizeInlineForm(NamedForm):
    name_fields = ("name",)
    initial_stock = forms.IntegerField(
        min_value=0,
        max_value=MAX_UNITS,
        required=False,
        help_text="Units of a new prize; restock an existing one.",
        widget=forms.NumberInput(attrs={"class": "vIntegerField"}),
    )

    class Meta:
        model = Prize
        fields = ["name", "description", "value"]
        # Narrow enough that the inline's seven columns fit the pool's page at 1280 px: with
        # the admin's defaults (a 40-column textarea) they stretched it to 1,857 px.
        widgets = {
            "name": forms.TextInput(attrs={"size": 16}),
            "description": forms.Textarea(attrs={"rows": 2, "cols": 24}),
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            # Set when the prize is added, then only restocked: a number typed here was
            # silently ignored. Disabled, the posted value is ignored by the form too.
            field = self.fields["initial_stock"]
            field.disabled = True
            field.widget.attrs["title"] = "Set when the prize is added; use Restock to add units."

    def clean_initial_stock(self):
        stock = self.cleaned_data.get("initial_stock")
        if self.instance.pk is None and stock is None:
            raise forms.ValidationError("A new prize needs its stock.")
        return stock


class PrizeInline(admin.TabularInline):
    model = Prize
    form = PrizeInlineForm
    extra = 1
    can_delete = False
    fields = ["name", "description", "value", "initial_stock", "stock_left", "supplied", "restock_link"]
    readonly_fields = ["stock_left", "supplied", "restock_link"]

    def get_queryset(self, request):
        # Each prize with its stock summed over its rows (one per bucket of the pool).
        return prizes_stocked(super().get_queryset(request))

    @admin.display(description="left")
    def stock_left(self, obj):
        return obj.stock_left if obj.pk else "-"

    @admin.display(description="supplied")
    def supplied(self, obj):
        return obj.stock_supplied if obj.pk else "-"

    @admin.display(description="")
    def restock_link(self, obj):
        if not obj.pk:
            return ""
        return format_html('<a href="{}">Restock</a>', reverse("admin:lottery_prize_restock", args=[obj.pk]))


class PoolAddForm(ItemForm, SaleWindowForm):
    name_fields = ("name",)
    hold_label = "Claim window (seconds)"
    hold_help = "How long a prize won is held for its winner's claim; 0: claimed when won."
    # The services' bounds (lottery.services), so that the form refuses what they would.
    draws_per_user = forms.IntegerField(
        min_value=1, max_value=MAX_DRAWS_PER_USER, initial=1, help_text=Pool._meta.get_field("draws_per_user").help_text
    )
    no_prize_weight = forms.IntegerField(
        min_value=0,
        max_value=MAX_NO_PRIZE_WEIGHT,
        initial=0,
        help_text=Pool._meta.get_field("no_prize_weight").help_text,
    )
    buckets = buckets_field("each prize's units are", changeable=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["buckets"].initial = self.instance.buckets

    class Meta:
        model = Pool
        fields = [
            "name",
            "description",
            "begin_at",
            "end_at",
            "draws_per_user",
            "no_prize_weight",
            "strategy",
            "hold_seconds",
            *ADMISSION_FIELDS,
            "abandon_limit",
            "abandon_cooldown_seconds",
        ]


# A pool's prizes left and supplied, summed in the query that reads it.
_STOCK = stock_sums(Pool, "stock_left", "stock_supplied")


@admin.register(Pool)
class PoolAdmin(ItemChangeView, HeldColumn, RestockUrl, SaleWindowColumns, admin.ModelAdmin):
    form = PoolAddForm
    restock_route = "prize/<int:prize_id>/restock/"
    restock_name = "lottery_prize_restock"
    inlines = [PrizeInline]
    records = "draws"
    list_display = ["name", "prizes_left", "held", "window", "draws_each", "no_prize", "strategy_name"]
    list_filter = ["strategy", "listed"]
    search_fields = ["name"]
    # ``buckets`` is no model field of the form: the services make the prizes' rows one per
    # bucket, and spread them again when it changes (``pool_update``).
    fields = [*PoolAddForm.Meta.fields, "buckets", "audit"]
    readonly_fields = ["audit"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(**_STOCK)

    # Short headers: the admin keeps a header on one line, and with the held column the field
    # names ("draws per user", "no prize weight") took the list 34 px past a 1280 px screen.
    @admin.display(description="draws each", ordering="draws_per_user")
    def draws_each(self, obj) -> int:
        return obj.draws_per_user

    @admin.display(description="no prize", ordering="no_prize_weight")
    def no_prize(self, obj) -> int:
        return obj.no_prize_weight

    @admin.display(description="prizes left")
    def prizes_left(self, obj):
        return f"{obj.stock_left} / {obj.stock_supplied}"

    @admin.display(description="audit")
    def audit(self, obj):
        if obj.pk is None:
            return "-"
        result = pool_audit(pool_id=obj.pk)
        per_prize = format_html_join(
            "",
            "<li>{}: awarded {} of {} supplied, {} left, over-awarded {}, conserved {}</li>",
            (
                (p.name, p.awarded, p.supplied, p.stock, p.over_awarded, "yes" if p.conserved else "NO")
                for p in result.prizes
            ),
        )
        return audit_line(
            result,
            [
                ("draws", f"{result.draws} ({result.no_prize_draws} without a prize)"),
                ("users", result.users),
                ("users over the limit", result.users_over_limit),
                ("over-awarded", result.over_awarded),
            ],
            format_html("<ul>{}</ul>", per_prize),
            settled="claimed",
        )

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if change:
            # The form set the new count on ``obj``: the service compares it with the stored one.
            obj.buckets = Pool.objects.values_list("buckets", flat=True).get(pk=obj.pk)
            pool_update(
                pool=obj,
                draws_per_user=data["draws_per_user"],
                no_prize_weight=data["no_prize_weight"],
                buckets=data["buckets"],
                **form.item_fields(),
            )
            obj.name, obj.description = data["name"], data["description"]
            obj.save(update_fields=["name", "description"])
            return
        created = pool_create(
            name=data["name"],
            description=data["description"],
            draws_per_user=data["draws_per_user"],
            no_prize_weight=data["no_prize_weight"],
            buckets=data["buckets"] or 1,
            **form.item_fields(),
        )
        # The prizes of the page are made next, one row per bucket of the pool as made.
        obj.pk, obj.group, obj.buckets = created.pk, created.group, created.buckets
        obj._state.adding = False

    def save_formset(self, request, form, formset, change):
        # The admin's change message reads these, which formset.save() would have set.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        for prize_form in formset.forms:
            if not prize_form.has_changed() or not prize_form.cleaned_data:
                continue
            data = prize_form.cleaned_data
            if prize_form.instance.pk is None:
                created = prize_create(
                    pool=form.instance,
                    name=data["name"],
                    description=data["description"],
                    value=data["value"],
                    stock=data["initial_stock"],
                )
                formset.new_objects.append(created)
            else:
                prize_update(
                    prize=prize_form.instance, name=data["name"], description=data["description"], value=data["value"]
                )
                formset.changed_objects.append((prize_form.instance, prize_form.changed_data))

    def restock_view(self, request, prize_id: int):
        prize = prize_get(prize_id=prize_id)
        return restock_page(
            self,
            request,
            item=f"{prize} ({prize.pool})",
            # A prize's rows summed (one per bucket), read again by its restock.
            marks=lambda: prize_marks(prize_get(prize_id=prize_id)),
            restock=lambda quantity: prize_update(prize=prize, restock=quantity),
            parent=prize.pool,
            back_to=reverse("admin:lottery_pool_change", args=[prize.pool_id]),
        )


@admin.register(Draw)
class DrawAdmin(RecordAdmin):
    list_display = ["shown_as", "pool", "user", "prize", "status", "created"]
    item_field = "pool"
    list_filter = [ListedItemsFilter, "status", "pool"]
    list_prefetch = ("pool", "user", "prize")
    readonly_fields = ["shown_as", "user", "pool", "prize", "status", "created"]
