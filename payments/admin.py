"""The voucher's page in the admin with its payments' audit (``payments_audit``) one link
away: payments stand above the orders, so they extend the voucher's admin rather than the
orders importing them. The audit reads every payment of the voucher and the provider's
ledger beside them (seven queries, most of a second on a voucher of 20,000 orders), so the
page itself, opened to edit a title, runs none of it; the link runs it."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from orders.admin import VoucherAdmin
from orders.models import Voucher

from .selectors import payments_audit


class PaidVoucherAdmin(VoucherAdmin):
    @admin.display(description="audit")
    def audit(self, obj):
        return format_html(
            '{}<div data-testid="payments-audit"><a href="{}">Audit the payments</a></div>',
            super().audit(obj),
            reverse("admin:orders_voucher_payments_audit", args=[obj.pk]),
        )

    def get_urls(self):
        view = self.admin_site.admin_view(self.payments_audit_view)
        return [
            path("<int:voucher_id>/payments-audit/", view, name="orders_voucher_payments_audit"),
            *super().get_urls(),
        ]

    def payments_audit_view(self, request, voucher_id: int):
        voucher = get_object_or_404(Voucher, pk=voucher_id)
        if not self.has_view_permission(request, voucher):
            raise PermissionDenied
        result = payments_audit(voucher_id=voucher.pk)
        figures = [
            ("confirmations", result.confirmations),
            ("paid", result.paid),
            ("refunded", result.refunded),
            ("waiting", result.waiting),
            ("paid twice", result.double_paid),
            ("paid unsold", result.paid_unsold),
            ("sold unpaid", result.sold_unpaid),
            ("refunds unrecorded", result.refunds_unrecorded),
        ]
        # Judged once the voucher is paid through the provider (``PaymentsAudit.used``).
        verdict = "none yet" if not result.used else "OK" if result.ok else "BROKEN"
        context = {
            **self.admin_site.each_context(request),
            "title": f"Payments of {voucher}",
            "opts": self.model._meta,
            "voucher": voucher,
            "back_to": reverse("admin:orders_voucher_change", args=[voucher.pk]),
            "figures": format_html_join(" · ", "{} {}", figures),
            "verdict": verdict,
        }
        return render(request, "admin/payments_audit.html", context)


admin.site.unregister(Voucher)
admin.site.register(Voucher, PaidVoucherAdmin)
