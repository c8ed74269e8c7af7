"""The flash sale's OpenAPI links: from a voucher's creation or the list to its page, its
changes, its purchase, and the order it made and its cancel (``core.links``)."""

from __future__ import annotations

from core.links import answered, calls

# The calls on one voucher, which take its id.
VOUCHER_CALLS = {
    "GetVoucher": "orders_api_vouchers_get",
    "PurchaseVoucher": "orders_api_vouchers_purchase",
    "UpdateVoucher": "orders_api_admin_vouchers_update",
    "AuditVoucher": "orders_api_admin_vouchers_audit",
}

VOUCHER_LIST = answered(calls(VOUCHER_CALLS, {"voucher_id": "$response.body#/0/id"}), 200)
VOUCHER_CREATED = answered(calls(VOUCHER_CALLS, {"voucher_id": "$response.body#/id"}), 201)
VOUCHER_UPDATED = answered(calls(VOUCHER_CALLS, {"voucher_id": "$response.body#/id"}), 200)

# The calls on one order, which take its id.
# Its payment (payments.api): already_paid when the voucher has no payment window.
ORDER_CALLS = {
    "GetOrder": "orders_api_orders_get",
    "CancelOrder": "orders_api_orders_cancel",
    "PayOrder": "payments_api_orders_pay",
}

PURCHASED = answered(
    {
        **calls(ORDER_CALLS, {"order_id": "$response.body#/order_id"}),
        # The same buyer again: already_purchased, or sold_out.
        **calls({"PurchaseAgain": "orders_api_vouchers_purchase"}, {"voucher_id": "$request.path.voucher_id"}),
    },
    201,
    202,
)

# From a cancel: the order again, and its cancel again (cancelled).
CANCELLED = answered(calls(ORDER_CALLS, {"order_id": "$response.body#/order_id"}), 200)
