"""The flash sale's OpenAPI links: which answer gives the id that the next call takes, so
that a client (and the contract test's stateful run) can follow a voucher from its creation
or the list to its page, its changes, its purchase and the order it made."""

from __future__ import annotations


def _voucher_calls(voucher_id: str) -> dict:
    """The calls on one voucher, whose id is at ``voucher_id`` (a runtime expression)."""
    ids = {"voucher_id": voucher_id}
    return {
        "GetVoucher": {"operationId": "orders_api_vouchers_get", "parameters": ids},
        "PurchaseVoucher": {"operationId": "orders_api_vouchers_purchase", "parameters": ids},
        "UpdateVoucher": {"operationId": "orders_api_admin_vouchers_update", "parameters": ids},
        "AuditVoucher": {"operationId": "orders_api_admin_vouchers_audit", "parameters": ids},
    }


VOUCHER_LIST = {"responses": {200: {"links": _voucher_calls("$response.body#/0/id")}}}
VOUCHER_CREATED = {"responses": {201: {"links": _voucher_calls("$response.body#/id")}}}
VOUCHER_UPDATED = {"responses": {200: {"links": _voucher_calls("$response.body#/id")}}}

_PURCHASED = {
    "GetOrder": {"operationId": "orders_api_orders_get", "parameters": {"order_id": "$response.body#/order_id"}},
    # The same buyer again: already_purchased, or sold_out.
    "PurchaseAgain": {
        "operationId": "orders_api_vouchers_purchase",
        "parameters": {"voucher_id": "$request.path.voucher_id"},
    },
}
PURCHASED = {"responses": {201: {"links": _PURCHASED}, 202: {"links": _PURCHASED}}}
