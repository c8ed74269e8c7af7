"""The buyer's pay of a held order, and the provider's confirmation of it, resolved once.

A pay charges the order at the provider (``payments.provider``) while the order is held;
the provider confirms the charge at once or later, by a signed callback, as often as it
likes. The first confirmation of a payment resolves it, in one transaction with the order's
settle: ``paid`` with the order paid, or ``refunded`` when the order was not held any more
(its hold expired, it was cancelled, another payment paid it), never sold. Every later
confirmation of it finds it resolved and changes nothing.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from datetime import datetime, timedelta
from uuid import uuid4

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from redis.exceptions import RedisError

from core.errors import DomainError, Unavailable
from core.namespace import key_prefix
from core.outage import contended, dependency_down
from inventory.errors import AlreadyPaid, HoldCancelled, HoldClosed, HoldExpired, LockBusy
from inventory.holds import closed, hold_lapse, hold_settle, hold_settle_asked
from inventory.strategies.base import constraint_violated
from locking.integration import locks_redis
from orders.models import Order
from orders.product import VOUCHER

from .models import Payment
from .provider import (
    provider_charge,
    provider_confirms_at_once,
    provider_refund,
    provider_resolved_here,
    provider_unresolved,
)
from .selectors import payment_latest

logger = logging.getLogger(__name__)

# The names of the one-open-payment-per-order key, as MySQL and as SQLite name it.
OPEN_GUARD = ("payment_one_open_per_order", "payments_payment.open_guard")

# Payments confirmed per run of ``payments_unapplied_confirm``, read a page of as many at a
# time, at most UNAPPLIED_PAGES pages: the rest wait for the next run.
UNAPPLIED_BATCH = 200
UNAPPLIED_PAGES = 5
# Where the last run stopped is forgotten after a day without a run: it starts at the first.
UNAPPLIED_CURSOR_SECONDS = 24 * 3600

# A refunded payment's refusal, by the reason it was refunded for.
REFUSALS: dict[str, type[HoldClosed]] = {error.code: error for error in (HoldExpired, HoldCancelled, AlreadyPaid)}


def order_pay(*, order: Order, now: datetime | None = None) -> Payment:
    """Pay a held order (the caller's own, as ``order_get`` read it: not read again): its
    payment, ``paid`` when the provider confirmed it at once, ``requested`` while its
    confirmation is on the way (or its confirmation, given at once, could not be applied
    now: the order's strategy busy, a dependency out of reach; the callback, the next pay or
    the beat applies it).

    Nothing is charged for an order that is not held: ``HoldClosed`` (409) in the words of
    its state (``expired``, ``cancelled``, ``already_paid``, ``pending`` while a
    ``redis_lua`` order is not written yet). A confirmation that found the hold closed
    refunds the charge and raises the same refusal. While a payment of the order waits for
    its confirmation, a second pay charges nothing more and answers that payment.

    ``now`` (a test's clock) is the moment of every step; without it, the confirmation reads
    the clock again once it holds the payment: the charge and the commit take time, and the
    order's deadline may pass meanwhile, which the settle must see."""
    confirm_at = now
    now = now or timezone.now()
    _payable(order, now)
    try:
        with transaction.atomic():
            payment = Payment.objects.create(order=order, reference=uuid4().hex, open_guard=order.pk)
            # Marked paid in time, with the charge, while it is held before its deadline: a
            # lapse of it, its confirmation too late, is then no abandoned hold of the buyer's
            # (docs/design.md, "Abandoned holds"). And that is the read again past the guard:
            # a payment resolved while this one waited on it has left the order paid or
            # released, and nothing more is charged; or its deadline passed meanwhile (on a
            # confirmation that refunded another pay as expired, before the release that
            # follows the commit).
            if not hold_settle_asked(VOUCHER, order, now=confirm_at or timezone.now()):
                if not order.is_held:
                    raise closed(VOUCHER, order)
                raise _LapsedWaiting()
            immediate = provider_charge(reference=payment.reference, now=now)
    except _LapsedWaiting:
        _payable(order, confirm_at or timezone.now())  # released, and refused in its words
        raise HoldExpired() from None
    except IntegrityError as exc:
        if not any(constraint_violated(exc, name) for name in OPEN_GUARD):
            raise
        # Another payment of the order waits, or was resolved since: that one answers. With a
        # provider that confirms at once, a payment still waiting is one whose own confirm
        # found the strategy busy, and maybe no callback will come: confirm it now (a payment
        # resolved meanwhile is answered as it is).
        payment, immediate = payment_latest(order=order), provider_confirms_at_once()
        waited = True
    else:
        waited = False
    if immediate:
        try:
            payment = payment_confirm(reference=payment.reference, now=confirm_at, order=order)
        except Exception as exc:
            # The charge and the payment are committed; the confirm's own transaction rolled
            # back (its strategy busy, a deadlock or a lock wait lost, a dependency out of
            # reach, a redis_lua state being rebuilt): still requested, answered 202, and its
            # callback, the next pay or the beat applies it. Anything else is a fault.
            if not _unapplied_now(exc):
                raise
            _unapplied(payment, exc)
            return payment
        if waited:
            # One whose own confirm was left unapplied, its charge marked so: acknowledged now.
            _resolved_here(payment)
    if payment.status == Payment.Status.REFUNDED:
        raise payment_refusal(payment)
    return payment


class _LapsedWaiting(Exception):
    """A pay's order passed its deadline while the pay waited on another payment of it."""


def _unapplied_now(exc: Exception) -> bool:
    """Whether a confirmation failed with ``exc`` as one that a later one applies: busy, or
    out of reach for now (what a dependency down or a lock contended raises)."""
    return isinstance(exc, LockBusy | Unavailable) or bool(dependency_down(exc)) or contended(exc)


def _unapplied(payment: Payment, exc: Exception) -> None:
    """A payment confirmed at once whose confirmation could not be applied now: with nowhere
    to post, its charge is marked due (``provider_unresolved``), so that a callback URL set
    before the beat applies it posts it."""
    if not isinstance(exc, LockBusy):
        logger.warning("Payment %s could not be confirmed now; it is later.", payment.reference, exc_info=True)
    if settings.PAYMENT_CALLBACK_URL:
        return
    try:
        provider_unresolved(reference=payment.reference)
    except DatabaseError:  # the database out of reach: the beat applies it all the same
        logger.warning("Charge %s could not be marked unapplied.", payment.reference, exc_info=True)


def _resolved_here(payment: Payment) -> None:
    """A payment the site resolved itself: with nowhere to post, its charge is acknowledged."""
    if not settings.PAYMENT_CALLBACK_URL and payment.status != Payment.Status.REQUESTED:
        provider_resolved_here(reference=payment.reference)


def _payable(order: Order, now: datetime) -> None:
    if not order.is_held:
        raise closed(VOUCHER, order)
    if order.hold_until <= now:
        if not hold_lapse(VOUCHER, order, now=now):
            # Changed meanwhile (a callback paid it, a cancel): refused in the words of that.
            order.refresh_from_db(fields=["status"])
            if not order.is_held:
                raise closed(VOUCHER, order)
        raise HoldExpired()


def payment_refusal(payment: Payment) -> HoldClosed:
    """The refusal a refunded payment answers its pay with, in the order's words."""
    refusal = REFUSALS.get(payment.refund_reason, HoldCancelled)
    return refusal(f"{refusal.default_message} The payment was refunded.")


def payment_confirm(*, reference: str, now: datetime | None = None, order: Order | None = None) -> Payment:
    """Apply the provider's confirmation of the charge ``reference``: its payment resolved
    ``paid`` (the order settled under its strategy, ``inventory.holds.hold_settle``) or
    ``refunded`` (the order not held any more: the refund recorded, here and in the
    provider's ledger), in one transaction. A payment already resolved is answered as it is:
    duplicates, resends and the callback of a payment confirmed in its own request change
    nothing.

    The payment's row is locked first, so that confirmations of one payment run one at a
    time; the order's strategy decides between this settle and a cancel, an expiry or
    another payment's settle (only a record still held is changed). ``Http404`` for a
    reference nobody charged; ``LockBusy`` (nothing written) when the order's strategy gave
    up: the provider sends the confirmation again. Not to be called inside a transaction:
    a hold found lapsed is released after the commit, which ``redis_lua`` needs.

    ``order``, the payment's order when the caller holds it (a pay confirmed at once), is
    not read again: its settle changes only an order still held, whatever it was read as."""
    with transaction.atomic():
        payment = Payment.objects.select_for_update().filter(reference=reference).first()
        if payment is None:
            raise Http404("No such charge.")
        if payment.status != Payment.Status.REQUESTED:
            return payment
        now = now or timezone.now()
        if order is None:
            order = Order.objects.select_related("voucher").get(pk=payment.order_id)
        try:
            # A hold past its deadline is over, released yet or not: settled now it would
            # sell a unit that the expiry is about to put back on sale.
            if order.is_held and order.hold_until <= now:
                raise HoldExpired()
            hold_settle(VOUCHER, order, now=now)
        except HoldClosed as refusal:
            payment.status, payment.refunded_at, payment.refund_reason = Payment.Status.REFUNDED, now, refusal.code
            provider_refund(reference=reference, now=now)
        else:
            payment.status, payment.settled_at = Payment.Status.PAID, now
        payment.open_guard = None
        payment.save(update_fields=["status", "settled_at", "refunded_at", "refund_reason", "open_guard"])
    if payment.refund_reason == HoldExpired.code:
        try:
            hold_lapse(VOUCHER, order, now=now)
        except Exception as exc:
            # The refund is committed: it answers, and the expiry or the sweep releases the
            # order, whether its strategy was busy or a dependency out of reach (Redis under
            # redis_lua, the database).
            if not _unapplied_now(exc):
                raise
            logger.warning("Order %s refunded past its deadline; its expiry will release it.", order.pk, exc_info=True)
    return payment


def payments_unapplied_confirm(*, now: datetime | None = None, size: int = UNAPPLIED_BATCH) -> int:
    """Beat: apply the confirmations that no callback will bring. With no
    ``PAYMENT_CALLBACK_URL`` the provider posts none: a pay whose confirmation, given at once,
    met the order's strategy busy stays ``requested``, its charge kept, unless the buyer pays
    again. Each such payment left ``PAYMENT_PROVIDER_RESEND_SECONDS`` (as a callback would be
    sent again) is confirmed here: ``paid``, or ``refunded`` when the hold has closed
    meanwhile. The number resolved; one still busy waits for the next run.

    Reads the payments still waiting only (``open_guard``'s index), never the site's history."""
    if settings.PAYMENT_CALLBACK_URL or not provider_confirms_at_once():
        return 0
    now = now or timezone.now()
    waiting = Payment.objects.filter(
        open_guard__isnull=False, created_at__lte=now - timedelta(seconds=settings.PAYMENT_PROVIDER_RESEND_SECONDS)
    ).order_by("open_guard")
    # Where the last run stopped, and page after page past the ones that fail: payments that
    # keep failing at the head (a busy lock waited for seconds each, one item's Redis out of
    # reach) kept every later one waiting, run after run, a run cut short by its time limit
    # included. At most UNAPPLIED_PAGES pages a run; at the end, the next starts at the first.
    client, cursor = locks_redis(), f"{key_prefix()}payments:unapplied:after"
    after = 0
    with suppress(RedisError):
        after = int(client.get(cursor) or 0)
    resolved = 0
    for _ in range(UNAPPLIED_PAGES):
        page = list(waiting.filter(open_guard__gt=after).values_list("open_guard", "reference")[:size])
        for after, reference in page:  # noqa: B007  (the cursor, kept past the loop)
            try:
                _resolved_here(payment_confirm(reference=reference))
                resolved += 1
            except LockBusy:
                pass
            except (DomainError, DatabaseError):
                # Its turn comes again once the runs have gone round.
                logger.warning("Payment %s could not be confirmed; a later run tries again.", reference, exc_info=True)
            finally:
                with suppress(RedisError):
                    client.set(cursor, after, ex=UNAPPLIED_CURSOR_SECONDS)
        if len(page) < size:
            with suppress(RedisError):
                client.delete(cursor)
            break
        if resolved >= size:
            break
    return resolved
