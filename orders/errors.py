from inventory.errors import DomainError


class AlreadyPurchased(DomainError):
    code = "already_purchased"
    default_message = "You already bought this voucher."
