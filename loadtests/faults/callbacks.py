"""The payment provider's confirmation arriving after the hold it paid for has ended
(docs/design.md, "Payments and refunds"): a late confirmation never sells."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from .expiry import HOLD_SECONDS, Holding
from .kinds import Fault
from .stage import Stage


class LateCallback(Holding, Fault):
    """Pays fired, as their buyers, at ``pays`` orders the crowd holds (each with ``lead``
    seconds of its hold left, so that the pay is taken: 202, the confirmation on its way;
    the runner waits up to a window for the crowd's next wave of takes to find them), on a
    server whose provider confirms ``delay_seconds`` after the charge, past the end of any
    of those holds. Each hold expires meanwhile and its unit goes back on sale; the crowd,
    sold out, buys it again. Each confirmation must then be refunded (the order expired,
    not paid), and no unit sold twice: available + held + settled stays the supply, and
    every confirmation is one paid order or one refund (``payments_audit``).

    A voucher's only (a pool's prize is claimed, not paid); on every safe strategy, whose
    settle the confirmation runs through (``inventory.holds.hold_settle``)."""

    name = "late-callback"
    summary = "pays of held orders confirmed after their holds expired: each refunded, no unit sold twice"
    products = ("voucher",)
    strategies = ("db_atomic", "redis_lock", "redis_lua")
    pays = 20
    lead = 1.0
    # A hold paid ends at most a window after the pay: its confirmation comes a second later.
    delay_seconds = HOLD_SECONDS + 1

    def __init__(self) -> None:
        self.answers: dict[int, int] = {}  # order pk: the pay's status

    def lasts(self, down: float) -> float:
        return HOLD_SECONDS + self.delay_seconds + 0.5

    def server_settings(self, down: float) -> dict[str, str]:
        return {"PAYMENT_PROVIDER_DELAY_MS": str(self.delay_seconds * 1000)}

    def inject(self, stage: Stage, group_id: int) -> None:
        from django.db import connection
        from django.utils import timezone

        from inventory.records import public_of

        from .lifecycle import held

        tokens = dict(line.split() for line in stage.tokens.read_text().splitlines() if line.strip())
        try:
            give_up = time.monotonic() + HOLD_SECONDS
            while True:
                soon = timezone.now() + timedelta(seconds=self.lead)
                ahead = held(stage.product, stage.target).filter(hold_until__gt=soon).order_by("-hold_until")
                orders = list(ahead.values_list("pk", "reservation", "user__username")[: self.pays])
                if len(orders) == self.pays or time.monotonic() > give_up:
                    break
                time.sleep(0.05)
        finally:
            connection.close()
        with ThreadPoolExecutor(max_workers=8) as pool:
            answered = pool.map(
                lambda order: (order[0], pay(stage.server.host, public_of(order[1] or order[0]), tokens[order[2]])),
                orders,
            )
            self.answers = dict(answered)

    def heal(self, stage: Stage, down: float) -> float:
        # The fault is over when the last confirmation has come, late.
        time.sleep(self.delay_seconds + 0.5)
        return time.time()

    def drained(self, product: str, target) -> tuple[list[str], list[str]]:
        from orders.models import Order
        from payments.models import Payment

        from .lifecycle import bought_between

        accepted = [pk for pk, status in self.answers.items() if status == 202]
        others = {status for status in self.answers.values() if status not in (202, 409)}
        payments = Payment.objects.filter(order_id__in=accepted)
        payments = list(payments.values_list("order_id", "status", "refund_reason", "refunded_at"))
        broken = []
        if not accepted:
            broken.append(f"no pay was taken ({len(self.answers)} fired)")
        if others:
            broken.append(f"pays answered {sorted(others)}")
        paid = [order for order, status, _, _ in payments if status == Payment.Status.PAID]
        if paid:
            broken.append(f"{len(paid)} late confirmations paid")
        refunded = [(order, reason, at) for order, status, reason, at in payments if status == Payment.Status.REFUNDED]
        if len(refunded) != len(accepted):
            broken.append(f"{len(accepted) - len(refunded)} taken pays not refunded")
        orders = Order.objects.filter(pk__in=accepted)
        not_expired = orders.exclude(status=Order.Status.EXPIRED).count()
        if not_expired:
            broken.append(f"{not_expired} paid-for orders not expired")
        answered = " ".join(f"{status}: {n}" for status, n in sorted(Counter(self.answers.values()).items()))
        notes = [f"pays answered {answered or 'none'}; {len(refunded)} refunded, {len(paid)} paid"]
        released = [at for at in orders.values_list("released_at", flat=True) if at is not None]
        if released and refunded:
            again = bought_between(product, target, min(released), max(at for _, _, at in refunded))
            notes.append(f"{again} units bought between the first release and the last refund")
        reasons = sorted({reason for _, reason, _ in refunded})
        if reasons:
            notes.append(f"refunded as {', '.join(reasons)}")
        return broken, notes


def pay(host: str, order_id: int, token: str) -> int:
    """POST the order's pay as its buyer; the answer's status (0: none)."""
    request = urllib.request.Request(
        f"{host}/api/orders/{order_id}/pay",
        data=b"",
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            json.loads(response.read() or b"{}")
            return response.status
    except urllib.error.HTTPError as answer:
        return answer.code
    except OSError:
        return 0
