from inventory.errors import CrowdOnly, UserLimit


class AlreadyPurchased(UserLimit):
    code = "already_purchased"
    default_message = "You already bought this voucher."


class NotForSale(CrowdOnly):
    code = "not_for_sale"
    default_message = "This voucher is a load run's own, not for sale: only that run's crowd buys it."
