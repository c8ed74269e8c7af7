import json
from datetime import datetime

from ninja import Router, Schema, Status
from ninja.errors import HttpError

from accounts.auth import require_staff
from inventory.selectors import voucher_get

from .selectors import order_get, order_list, voucher_audit
from .services import order_purchase

router = Router(tags=["orders"])


class PurchaseOut(Schema):
    order_id: int
    status: str


class OrderOut(Schema):
    id: int
    voucher_id: int
    voucher_title: str
    status: str
    created_at: datetime

    @staticmethod
    def resolve_voucher_title(obj) -> str:
        return obj.voucher.title


class AuditOut(Schema):
    voucher_id: int
    title: str
    strategy: str
    supplied: int
    stock: int
    orders: int
    pending: int
    buyers: int
    oversold: int
    duplicates: int
    conserved: bool
    stock_not_negative: bool
    ok: bool


FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def _refuse_unexpected_body(request) -> None:
    """The purchase takes no input: no body, an empty form, or ``{}``. Anything else is refused whole."""
    if not request.body.strip():
        return
    if request.content_type in FORM_TYPES and not request.POST and not request.FILES:
        return
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HttpError(400, "Cannot parse request body: send no body or {}.") from None
    if body != {}:
        raise HttpError(400, "A purchase takes no input: the buyer is the authenticated user.")


@router.post("/vouchers/{int:voucher_id}/purchase", response={201: PurchaseOut, 202: PurchaseOut})
def vouchers_purchase(request, voucher_id: int):
    _refuse_unexpected_body(request)
    order = order_purchase(user=request.auth, voucher=voucher_get(voucher_id=voucher_id))
    return Status(202 if order.status == "pending" else 201, {"order_id": order.pk, "status": order.status})


@router.get("/orders", response=list[OrderOut])
def orders_list(request):
    return list(order_list(user=request.auth))


@router.get("/orders/{int:order_id}", response=OrderOut)
def orders_get(request, order_id: int):
    return order_get(user=request.auth, order_id=order_id)


@router.get("/admin/vouchers/{int:voucher_id}/audit", response=AuditOut, tags=["staff"])
def admin_vouchers_audit(request, voucher_id: int):
    require_staff(request)
    voucher = voucher_get(voucher_id=voucher_id)
    return voucher_audit(voucher_id=voucher.pk).as_dict()
