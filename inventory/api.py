from datetime import datetime

from django.conf import settings
from ninja import Router, Schema, Status
from pydantic import AwareDatetime, Field

from accounts.auth import require_staff

from .models import Strategy, Voucher
from .selectors import voucher_get, voucher_list
from .services import voucher_create, voucher_update

router = Router(tags=["vouchers"])


class VoucherOut(Schema):
    id: int
    title: str
    description: str
    stock: int
    initial_stock: int
    begin_at: datetime
    end_at: datetime
    strategy: str
    state: str

    @staticmethod
    def resolve_stock(obj: Voucher) -> int:
        return obj.stock.quantity

    @staticmethod
    def resolve_initial_stock(obj: Voucher) -> int:
        return obj.stock.initial_quantity

    @staticmethod
    def resolve_state(obj: Voucher) -> str:
        return obj.window_state()


class VoucherCreateIn(Schema):
    title: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=10_000)
    stock: int = Field(ge=0, le=100_000_000, strict=True)
    begin_at: AwareDatetime
    end_at: AwareDatetime
    strategy: Strategy = Field(default_factory=lambda: Strategy(settings.DEFAULT_STRATEGY))


class VoucherPatchIn(Schema):
    restock: int | None = Field(default=None, ge=1, le=100_000_000, strict=True)
    strategy: Strategy | None = None
    begin_at: AwareDatetime | None = None
    end_at: AwareDatetime | None = None


@router.get("/vouchers", response=list[VoucherOut], auth=None)
def vouchers_list(request):
    return list(voucher_list())


@router.get("/vouchers/{int:voucher_id}", response=VoucherOut, auth=None)
def vouchers_get(request, voucher_id: int):
    return voucher_get(voucher_id=voucher_id)


@router.post("/admin/vouchers", response={201: VoucherOut}, tags=["staff"])
def admin_vouchers_create(request, payload: VoucherCreateIn):
    require_staff(request)
    voucher = voucher_create(**payload.dict())
    return Status(201, voucher_get(voucher_id=voucher.pk))


@router.patch("/admin/vouchers/{int:voucher_id}", response=VoucherOut, tags=["staff"])
def admin_vouchers_update(request, voucher_id: int, payload: VoucherPatchIn):
    require_staff(request)
    changes = payload.dict(exclude_unset=True, exclude_none=True)
    voucher = voucher_get(voucher_id=voucher_id)
    voucher_update(voucher=voucher, **changes)
    return voucher_get(voucher_id=voucher_id)
