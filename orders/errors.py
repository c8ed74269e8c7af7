from core.errors import DomainError


class AlreadyPurchased(DomainError):
    code = "already_purchased"
    status = 409
    default_message = "You already bought this voucher."


class NotForSale(DomainError):
    code = "not_for_sale"
    status = 403
    default_message = "This voucher is a load run's own, not for sale: only that run's crowd buys it."
