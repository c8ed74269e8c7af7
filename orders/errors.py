from core.errors import DomainError


class AlreadyPurchased(DomainError):
    code = "already_purchased"
    status = 409
    default_message = "You already bought this voucher."
