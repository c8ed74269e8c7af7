"""Stock management. Stock is never edited as a field: restock goes through the
same guarded service as purchases, so it cannot race the buyers."""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from core.admin import SaleWindowColumns
from core.forms import SaleWindowForm
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
from inventory.totals import group_marks

from .models import Order, Voucher
from .selectors import voucher_audit, voucher_get, vouchers_stocked
from .services import voucher_create, voucher_update


class VoucherForm(ItemForm, SaleWindowForm):
    name_fields = ("title",)
    hold_label = "Payment window (seconds)"
    hold_help = "How long a buyer's order holds its unit for the payment; 0: paid when bought."

    class Meta:
        model = Voucher
        fields = [
            *("title", "description", "begin_at", "end_at", "strategy", "hold_seconds"),
            *(*ADMISSION_FIELDS, "abandon_limit", "abandon_cooldown_seconds"),
        ]


class VoucherAddForm(VoucherForm):
    initial_stock = forms.IntegerField(min_value=0, max_value=MAX_UNITS, help_text="Units on sale.")
    buckets = buckets_field("the units are")


@admin.register(Voucher)
class VoucherAdmin(ItemChangeView, HeldColumn, RestockUrl, SaleWindowColumns, admin.ModelAdmin):
    form = VoucherForm
    records = "orders"
    restock_route = "<int:voucher_id>/restock/"
    restock_name = "orders_voucher_restock"
    list_display = ["title", "stock_left_of_supplied", "sold", "held", "window", "strategy_name", "restock_link"]
    list_filter = ["strategy", "listed"]
    search_fields = ["title"]
    fields = [
        "title",
        "description",
        "begin_at",
        "end_at",
        "strategy",
        "hold_seconds",
        *ADMISSION_FIELDS,
        "abandon_limit",
        "abandon_cooldown_seconds",
        "buckets",
        "stock_left",
        "supplied",
        "restock_page",
        "audit",
    ]
    # The fields of the add page: the stock to start with, not the stock's figures and audit.
    add_fields = [
        *("title", "description", "begin_at", "end_at", "strategy", "hold_seconds"),
        *(*ADMISSION_FIELDS, "abandon_limit", "abandon_cooldown_seconds", "buckets", "initial_stock"),
    ]
    # Set when the voucher is made: its rows are made with it, one per bucket.
    readonly_fields = ["buckets", "stock_left", "supplied", "restock_page", "audit"]

    def get_queryset(self, request):
        # Each voucher with its stock, its group's rows summed in the query of the list's page.
        return vouchers_stocked(super().get_queryset(request))

    @admin.display(description="sold")
    def sold(self, obj):
        """The units orders hold (held or paid), from the stock's running total
        (``inventory.totals``), marked when they pass the units supplied: an oversell shows
        in the list, not only in each voucher's audit, and the list counts no order."""
        beyond = obj.stock_taken - obj.stock_supplied
        if beyond > 0:
            return format_html("{} <strong>oversold {}</strong>", obj.stock_taken, beyond)
        return obj.stock_taken

    @admin.display(description="stock left")
    def stock_left(self, obj):
        return obj.stock_left

    @admin.display(description="supplied (initial + restocks)")
    def supplied(self, obj):
        return obj.stock_supplied

    @admin.display(description="left / supplied", ordering="stock_left")
    def stock_left_of_supplied(self, obj):
        return f"{obj.stock_left} / {obj.stock_supplied}"

    @admin.display(description="")
    def restock_link(self, obj):
        return format_html('<a href="{}">Restock</a>', reverse("admin:orders_voucher_restock", args=[obj.pk]))

    @admin.display(description="restock")
    def restock_page(self, obj):
        """The way to add units from the voucher's own page, beside its stock, as its row in
        the list has."""
        url = reverse("admin:orders_voucher_restock", args=[obj.pk])
        return format_html('<a href="{}" class="button" data-testid="restock">Restock</a>', url)

    @admin.display(description="audit")
    def audit(self, obj):
        result = voucher_audit(voucher_id=obj.pk)
        return audit_line(
            result,
            [
                ("orders", result.orders),
                ("buyers", result.buyers),
                ("stock", result.stock),
                ("supplied", result.supplied),
                ("oversold", result.oversold),
                ("duplicates", result.duplicates),
            ],
            settled="paid",
        )

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = VoucherAddForm
            kwargs["fields"] = self.add_fields
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        return self.add_fields if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is not None else []

    def save_model(self, request, obj, form, change):
        if change:
            data = form.cleaned_data
            voucher_update(voucher=obj, **form.item_fields())
            obj.title, obj.description = data["title"], data["description"]
            obj.save(update_fields=["title", "description"])
            return
        created = voucher_create(
            title=form.cleaned_data["title"],
            description=form.cleaned_data["description"],
            stock=form.cleaned_data["initial_stock"],
            buckets=form.cleaned_data["buckets"] or 1,
            **form.item_fields(),
        )
        obj.pk, obj.group = created.pk, created.group

    def restock_view(self, request, voucher_id: int):
        voucher = voucher_get(voucher_id=voucher_id)
        return restock_page(
            self,
            request,
            item=voucher,
            marks=lambda: group_marks(group_id=voucher.group_id),
            restock=lambda quantity: voucher_update(voucher=voucher, restock=quantity),
            parent=voucher,
            back_to=reverse("admin:orders_voucher_change", args=[voucher.pk]),
        )


@admin.register(Order)
class OrderAdmin(RecordAdmin):
    list_display = ["shown_as", "voucher", "user", "status", "created"]
    item_field = "voucher"
    list_filter = [ListedItemsFilter, "status", "voucher"]
    list_prefetch = ("voucher", "user")
    readonly_fields = ["shown_as", "user", "voucher", "status", "created"]
