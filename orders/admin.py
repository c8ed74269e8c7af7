from django.contrib import admin

from .models import Order


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "voucher", "user", "status", "created_at"]
    list_filter = ["status", "voucher"]
    list_select_related = ["voucher", "user"]
    search_fields = ["user__username", "voucher__title"]
    readonly_fields = ["user", "voucher", "status", "created_at"]

    def has_add_permission(self, request):
        # Orders come from purchases only; an order typed in by hand would skip the stock.
        return False
