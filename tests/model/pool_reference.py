"""The reference model of one prize pool's draws, in plain Python (``tests.model.reference``
has what it shares with a voucher's): each buyer's draws against the limit, each prize's units
left and supplied, each prize held for its claim until its deadline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tests.model.reference import Answer, Ledger, Unit


@dataclass
class Draws(Ledger):
    """A pool's: ``draws_per_user`` draws each, a forfeited one counted all the same; a prize
    won is held until claimed, or forfeited (back in the pool) at its deadline."""

    draws_per_user: int = 2
    no_prize_weight: int = 0
    id_field = "draw_id"
    deadline_field = "claim_by"
    lapsed = "forfeited"

    def take(self, buyer: int, answer: Answer, *, now: datetime) -> None:
        if self.deferred and self.state_lost:
            assert (answer.status, answer.code) == (503, "unavailable"), answer
            return
        refusals = set()
        if sum(1 for draw in self.records if draw.buyer == buyer and draw.status != "failed") >= self.draws_per_user:
            refusals.add("draw_limit")  # told before pool_empty: a user with no draws left hears so
        if self.over_abandons(buyer):
            refusals.add("abandon_limit")
        if not refusals and not any(self.left.values()):
            refusals.add("pool_empty")
        if refusals:
            self.refused(answer, refusals)
            return
        prize = answer.body.get("prize")
        if prize is None:
            assert self.no_prize_weight > 0, answer
            self.took(buyer, answer, unit=None, held="confirmed")
        else:
            assert self.left.get(prize["id"], 0) > 0, (answer, self.left)
            self.took(buyer, answer, unit=prize["id"], held="held")

    def claim(self, draw: Unit, answer: Answer, *, now: datetime) -> None:
        if draw.status == "held" and not draw.due(now):
            assert (answer.status, answer.code) == (200, "claimed"), (answer, draw)
            draw.status = "claimed"
            return
        if draw.status == "held":  # past its deadline: the claim forfeits it, whether or not the expiry ran
            assert (answer.status, answer.code) == (409, "forfeited"), (answer, draw)
            self.released(draw, "forfeited")
            return
        refusal = {
            "pending": "pending",
            "claimed": "already_claimed",
            "confirmed": "nothing_held",
            "forfeited": "forfeited",
            "failed": "cancelled",
        }[draw.status]
        assert (answer.status, answer.code) == (409, refusal), (answer, draw)
