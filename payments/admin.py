"""The voucher's page in the admin with its payments' audit under its own (``payments_audit``):
payments stand above the orders, so they extend the voucher's admin rather than the orders
importing them."""

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from orders.admin import VoucherAdmin
from orders.models import Voucher

from .selectors import payments_audit


class PaidVoucherAdmin(VoucherAdmin):
    @admin.display(description="audit")
    def audit(self, obj):
        result = payments_audit(voucher_id=obj.pk)
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
        return format_html(
            '{}<div data-testid="payments-audit">payments: {} · <strong>{}</strong></div>',
            super().audit(obj),
            format_html_join(" · ", "{} {}", figures),
            verdict,
        )


admin.site.unregister(Voucher)
admin.site.register(Voucher, PaidVoucherAdmin)
