"""The errors of taking stock, whatever the product."""

from __future__ import annotations

from core.errors import DomainError, Unavailable


class SoldOut(DomainError):
    """No candidate row had the units asked for. Products may answer it in their own
    words (a pool says ``pool_empty``)."""

    code = "sold_out"
    status = 409
    default_message = "Sold out."


class LockBusy(DomainError):
    """Too much contention right now; the caller may retry. Nothing was written."""

    code = "busy"
    status = 409
    default_message = "Too many buyers at once; try again."


class RowsLocked(LockBusy):
    """A change of the stock rows found one of them held by a take, and did not wait for it
    (``inventory.services.stock_group_rebucket``): the change is rolled back, and may be
    made again."""

    default_message = "The stock is being taken right now; try the change again."


class InvalidQuantity(DomainError):
    code = "invalid_quantity"
    status = 422
    default_message = "Quantity must be a positive whole number."


class SupplyLimit(DomainError):
    """A restock that would take a row's units supplied past ``MAX_UNITS``: the column
    holds about 2.1 billion, and 22 restocks of the largest size would have overflowed it."""

    code = "supply_limit"
    status = 409
    default_message = "This restock would take the units supplied past the limit."


class RedlockUnconfigured(Unavailable):
    """An item under ``redlock`` on a server given no Redlock servers (``LOCK_REDIS_URLS``),
    such as the docker-compose stack: its takes answer 503 until they are configured, as
    while too many of them are down, rather than a server error."""

    default_message = "This item's redlock strategy has no Redis servers configured here (LOCK_REDIS_URLS)."


class UserLimit(DomainError):
    """The user has taken all that the item allows them (the one voucher, a pool's draws
    per user). Each product names it in its own words."""

    status = 409


class CrowdOnly(DomainError):
    """The item is a load run's own: only that run's crowd (``accounts.crowd``) takes from
    it, and anyone else would skew its audit. Each product names it in its own words."""

    status = 403


class StateMissing(Unavailable):
    """The item's state is not in Redis (Redis restarted empty, or it is being rebuilt):
    nothing is sold from nothing, and reconciliation rebuilds it from the database."""

    default_message = "This sale is being restored after a Redis restart; try again in a few seconds."


class Unconfirmed(Unavailable):
    """A ``redis_lua`` reservation made on its Redis master that no replica confirmed within
    ``RESERVATIONS_WAIT_MS`` (``RESERVATIONS_WAIT_REPLICAS``): not acknowledged. It stands,
    and is written, unless that master fails before a replica has it; then it is gone, as
    if never made. Before trying again, look for it among the user's orders or draws."""

    code = "unconfirmed"

    def __init__(self, record_id: int) -> None:
        # ``record_id``: the id the record will be shown by (``Record.public_id``), never the
        # reservation's own, which counts the sale's takes.
        super().__init__(
            f"Reserved as {record_id}, but not yet confirmed by a replica of the sale's Redis: it stands "
            "unless that server fails before it is written. Look for it among your orders or draws before trying again."
        )
        self.record_id = record_id


class HoldClosed(DomainError):
    """The record is not held any more (or not yet): nothing was written. Each subclass
    names the state it is in; the products' own words for a settled one are theirs."""

    status = 409


class HoldExpired(HoldClosed):
    code = "expired"
    default_message = "The hold on this unit expired; it went back on sale."


class HoldCancelled(HoldClosed):
    code = "cancelled"
    default_message = "This was cancelled; its unit went back on sale."


class HoldForfeited(HoldClosed):
    code = "forfeited"
    default_message = "This prize was not claimed in time; it went back to the pool."


class AlreadyPaid(HoldClosed):
    code = "already_paid"
    default_message = "This order is paid already."


class AlreadyClaimed(HoldClosed):
    code = "already_claimed"
    default_message = "This prize is claimed already."


class HoldPending(HoldClosed):
    """A ``redis_lua`` take whose record a worker has not written yet."""

    code = "pending"
    default_message = "This is still being written; try again in a moment."
    retry_after = 1


class NothingHeld(HoldClosed):
    """A draw of no prize: there is nothing to claim."""

    code = "nothing_held"
    default_message = "There is nothing to claim: this draw won no prize."


class NotAdmitted(DomainError):
    """A take on an item with a waiting room (``admission`` ``queue``) without a ticket that
    the room gave the caller for it and that is still good: none, forged, another's, used or
    lapsed. Nothing was taken; join the queue (``inventory.admission``)."""

    code = "not_admitted"
    status = 403
    default_message = "This sale admits buyers through its waiting room: join its queue first."


class TicketNotLive(NotAdmitted):
    """A ticket the room signed for this user and item, but spent already, lapsed, or replaced
    by a later one: what the room holds says so, not the ticket."""

    default_message = "The admission ticket was used, or has lapsed: join the queue again."


class AbandonLimit(DomainError):
    """The user has abandoned as many held takes of this item (cancelled, or let lapse) as it
    allows (``Item.abandon_limit``): their takes of it are refused from then on, so that
    buying and abandoning cannot keep its stock from everyone else (docs/design.md,
    "Abandoned holds")."""

    code = "abandon_limit"
    status = 409
    default_message = "You have let go of too many holds on this item to take another."


class CoolingDown(DomainError):
    """The user abandoned a held take of this item less than its cooldown ago
    (``Item.abandon_cooldown_seconds``): a take is refused until it has passed, which
    ``Retry-After`` says."""

    code = "cooling_down"
    status = 429

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"You let go of a hold on this item moments ago; try again in {retry_after} s.")
        self.retry_after = retry_after
