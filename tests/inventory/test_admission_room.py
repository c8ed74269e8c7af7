"""An item's waiting room on the real Redis, with an injected clock (inventory.admission):
joining once, first in first out after the opening, the lobby shuffled at the opening, the rate,
units promised once, tickets lapsing to the next in line, sold out told to everyone waiting,
and a ticket spent once however many processes race to spend it."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from itertools import pairwise

import pytest
from scipy.stats import chisquare

from core.errors import DomainError
from inventory.admission.keys import RoomKeys
from inventory.admission.room import room_clear, room_enter, room_join_many, ticket_held, units_forget
from inventory.admission.tickets import Ticket
from inventory.errors import LockBusy, NotAdmitted, SoldOut
from orders.product import VOUCHER
from orders.selectors import voucher_get
from orders.services import voucher_update

from ..buyers import act_concurrently

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("rooms")]


@pytest.fixture
def queued(make_voucher):
    """A voucher with a waiting room opening in a minute (so that a test's clock decides),
    ``stock`` units, admitting ``rate`` a second."""

    def make(*, stock: int = 100, rate: float = 1.0, ticket_seconds: int = 30):
        voucher = make_voucher(
            stock=stock,
            starts_in=timedelta(minutes=1),
            admission="queue",
            admission_rate=rate,
            admission_ticket_seconds=ticket_seconds,
        )
        return voucher_get(voucher_id=voucher.pk)

    return make


def at(voucher, seconds: float):
    """The moment ``seconds`` after the voucher's sale opens."""
    return voucher.begin_at + timedelta(seconds=seconds)


def enter(voucher, user_id: int, seconds: float, *, join: bool = True):
    return room_enter(VOUCHER, voucher, user_id=user_id, join=join, now=at(voucher, seconds))


def spend(voucher, user_id: int, ticket: str | None, seconds: float, then=None):
    with ticket_held(VOUCHER, voucher, user_id=user_id, ticket=ticket, now=at(voucher, seconds)) as held:
        held.spend()
        if then is not None:
            raise then


def test_the_first_to_join_is_admitted_by_the_join_and_the_rest_join_once_and_wait_in_order(queued):
    voucher = queued()
    alone = enter(voucher, 1, 0.01)  # nobody waits: one admission is banked for the first joiner
    assert (alone.status, alone.position) == ("admitted", None) and alone.ticket
    first = enter(voucher, 2, 0.02)
    assert (first.status, first.position, first.ahead) == ("waiting", 1, 0)
    assert first.poll_after_seconds == 1.49  # at its turn (0.99 s away at one a second), and half a turn
    assert enter(voucher, 3, 0.03).position == 2
    again = enter(voucher, 2, 0.04)
    assert (again.position, again.waiting) == (1, 2)
    assert (enter(voucher, 1, 0.05).ticket, enter(voucher, 1, 0.05).waiting) == (alone.ticket, 2)  # not joined again
    assert enter(voucher, 4, 0.06, join=False) is None  # polled before joining: not in the line


def test_the_head_is_admitted_at_the_rate_with_a_ticket(queued):
    voucher = queued(rate=1.0)
    for user in (1, 2, 3, 4, 5):
        enter(voucher, user, 0.001 * user)  # the first admitted by its join, the others wait
    enter(voucher, 5, 1.01, join=False)
    enter(voucher, 5, 2.02, join=False)
    standing = enter(voucher, 5, 3.03, join=False)  # three admissions earned, a second's worth each
    assert (standing.status, standing.position) == ("waiting", 1)
    # A quiet spell banks a second's worth, no more.
    assert enter(voucher, 5, 3.5, join=False).status == "waiting"
    admitted = [enter(voucher, user, 3.02, join=False) for user in (1, 2, 3, 4)]
    assert [s.status for s in admitted] == ["admitted"] * 4
    assert all(s.ticket and s.ticket_expires_at for s in admitted)
    assert enter(voucher, 5, 4.04, join=False).status == "admitted"


def test_those_near_the_head_are_asked_back_one_by_one_and_admitted_one_by_one(queued):
    """A crowd joining an empty room at once: the room banks one admission, for the first of
    them, and asks each of the others to poll at its own turn (a tenth of a second apart at ten
    a second), so that each poll admits one buyer, not a second's worth together."""
    voucher = queued(rate=10.0)
    joined = {user: enter(voucher, user, 1 + 0.001 * user) for user in range(1, 31)}
    assert [user for user, standing in joined.items() if standing.status == "admitted"] == [1]
    assert enter(voucher, 2, 1.031, join=False).status == "waiting"  # no second's worth banked for the next
    polls = {user: 1 + 0.001 * user + joined[user].poll_after_seconds for user in range(2, 31)}
    near = sorted(polls[user] for user in range(2, 21))
    assert all(0.09 <= later - earlier <= 0.11 for earlier, later in pairwise(near)), near
    assert all(joined[user].poll_after_seconds >= 1 for user in range(21, 31))  # further back: later
    admitted_at = {}
    for moment, user in sorted((moment, user) for user, moment in polls.items() if user < 21):
        standing = enter(voucher, user, moment, join=False)
        assert standing.status == "admitted", (user, moment, standing)
        admitted_at[user] = moment
    assert list(admitted_at) == list(range(2, 21))  # in order of arrival, each at its own poll


def test_a_lobby_waits_unordered_and_goes_before_later_arrivals(queued):
    voucher = queued(rate=100.0)
    lobby = enter(voucher, 1, -30)
    assert (lobby.status, lobby.position, lobby.ahead) == ("waiting", None, None)
    assert lobby.eta_seconds == 30
    enter(voucher, 2, -10)
    later = enter(voucher, 3, 0.001)  # after the opening: behind the whole lobby
    assert later.position == 3
    assert {enter(voucher, user, 0.02, join=False).status for user in (1, 2)} == {"admitted"}


def test_the_lobby_is_shuffled_at_the_opening(queued):
    """Who of a lobby of four is admitted first, over 400 openings: uniform (chi-square), not
    by arrival."""
    voucher = queued(rate=1.0)
    firsts = Counter()
    for _ in range(400):
        room_clear(VOUCHER, voucher.pk)
        for user in (1, 2, 3, 4):
            enter(voucher, user, -5 + user)
        standings = {user: enter(voucher, user, 1.0, join=False).status for user in (1, 2, 3, 4)}
        firsts.update(user for user, status in standings.items() if status == "admitted")
    assert sum(firsts.values()) == 400
    assert chisquare([firsts[user] for user in (1, 2, 3, 4)]).pvalue > 1e-4, firsts


def test_units_are_promised_once_and_a_spent_ticket_promises_none_again(queued):
    voucher = queued(stock=2, rate=100.0)
    for user in (1, 2, 3):
        enter(voucher, user, 0.001 * user)
    assert [enter(voucher, user, 1, join=False).status for user in (1, 2, 3)] == ["admitted", "admitted", "waiting"]
    spend(voucher, 1, enter(voucher, 1, 1.1, join=False).ticket, 1.2)
    # The units read before the take still say 2: the spent ticket counts against them.
    assert enter(voucher, 3, 2, join=False).status == "waiting"


def test_a_ticket_lapses_and_the_next_buyer_is_admitted_in_its_place(queued):
    voucher = queued(stock=1, rate=100.0, ticket_seconds=5)
    enter(voucher, 1, 0.001)
    enter(voucher, 2, 0.002)
    ticket = enter(voucher, 1, 1, join=False).ticket
    assert enter(voucher, 2, 1, join=False).status == "waiting"
    assert enter(voucher, 2, 6.1, join=False).status == "admitted"
    assert enter(voucher, 1, 6.2, join=False) is None  # lapsed: out of the line
    with pytest.raises(NotAdmitted):
        spend(voucher, 1, ticket, 5.5)


def test_sold_out_is_told_to_everyone_waiting_and_a_unit_back_admits_the_next(queued):
    voucher = queued(stock=0, rate=100.0)
    for user in (1, 2):
        enter(voucher, user, 0.001 * user)
    assert [enter(voucher, user, 1, join=False).status for user in (1, 2)] == ["sold_out", "sold_out"]
    voucher_update(voucher=voucher, restock=1)
    units_forget(VOUCHER, voucher.pk)
    assert [enter(voucher, user, 2, join=False).status for user in (1, 2)] == ["admitted", "waiting"]


def test_the_room_is_closed_once_the_sale_ends(queued):
    voucher = queued()
    enter(voucher, 1, 0.001)
    ended = (voucher.end_at - voucher.begin_at).total_seconds()
    assert enter(voucher, 1, ended).status == "closed"


def test_an_open_item_admits_everyone_without_a_ticket(make_voucher):
    voucher = voucher_get(voucher_id=make_voucher().pk)
    standing = room_enter(VOUCHER, voucher, user_id=1, join=True)
    assert (standing.status, standing.ticket) == ("admitted", None)


def test_a_ticket_is_spent_by_its_own_user_for_its_own_item_once(queued):
    voucher, other = queued(rate=100.0), queued(rate=100.0)
    enter(voucher, 1, 0.001)
    enter(other, 1, 0.001)
    ticket = enter(voucher, 1, 1, join=False).ticket
    for user, item, shown in [(2, voucher, ticket), (1, other, ticket), (1, voucher, ticket[:-2] + "xx")]:
        with pytest.raises(NotAdmitted):
            spend(item, user, shown, 1.1)
    with pytest.raises(NotAdmitted):
        spend(voucher, 1, None, 1.1)
    spend(voucher, 1, ticket, 1.2)
    with pytest.raises(NotAdmitted):
        spend(voucher, 1, ticket, 1.3)


def test_a_ticket_is_checked_under_the_servers_secret_of_the_moment(queued, settings):
    voucher = queued(rate=100.0)
    enter(voucher, 1, 0.001)
    ticket = enter(voucher, 1, 1, join=False).ticket
    settings.SECRET_KEY = "a secret this test alone knows, of fifty characters or more"
    with pytest.raises(NotAdmitted, match="not one this server gave"):
        spend(voucher, 1, ticket, 1.1)
    spend(voucher, 1, Ticket(*ticket.split(".")[:5]).signed(), 1.2)  # the same admission, signed anew


def test_a_ticket_given_before_the_secret_was_rotated_stays_good_under_its_fallback(queued, settings):
    """A rotation (the old secret kept in ``SECRET_KEY_FALLBACKS``) leaves every live ticket
    good, as it leaves Django's own signatures: those admitted keep their turn."""
    voucher = queued(rate=100.0)
    enter(voucher, 1, 0.001)
    ticket = enter(voucher, 1, 1, join=False).ticket
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a secret this test alone knows, of fifty characters or more"
    spend(voucher, 1, ticket, 1.1)


def test_a_ticket_of_a_room_that_redis_lost_is_refused_once_the_buyer_is_admitted_again(queued):
    voucher = queued(rate=100.0)
    lost = enter(voucher, 1, 0.001).ticket  # admitted by its join
    room_clear(VOUCHER, voucher.pk)  # Redis lost the room: it starts again
    again = enter(voucher, 1, 0.002).ticket
    assert again.split(".")[3] != lost.split(".")[3]  # numbered afresh, from another start
    with pytest.raises(NotAdmitted, match="was used, or has lapsed"):
        spend(voucher, 1, lost, 0.003)
    spend(voucher, 1, again, 0.004)


def test_a_take_that_asks_again_gives_the_ticket_back_and_a_final_refusal_spends_it(queued):
    voucher = queued(rate=100.0)
    enter(voucher, 1, 0.001)
    ticket = enter(voucher, 1, 1, join=False).ticket
    with pytest.raises(LockBusy):
        spend(voucher, 1, ticket, 1.1, then=LockBusy())
    assert enter(voucher, 1, 1.2, join=False).status == "admitted"
    with pytest.raises(SoldOut):
        spend(voucher, 1, ticket, 1.3, then=SoldOut())
    assert enter(voucher, 1, 1.4, join=False) is None


def test_a_take_whose_redis_timed_out_keeps_its_ticket_spent(queued):
    """A 503 whose Redis timed out on a script's answer may follow a take made (a RESERVE in
    another slot than the room): given back, the ticket let a pool with a draw limit draw
    twice on one admission. One refused before anything ran (the Redis down) gives it back."""
    import redis

    from core.errors import Unavailable

    def unavailable(cause: Exception) -> Unavailable:
        try:
            raise cause
        except redis.RedisError as exc:
            try:
                raise Unavailable("The sale's Redis cannot be reached; try again shortly.") from exc
            except Unavailable as wrapped:
                return wrapped

    voucher = queued(rate=100.0)
    enter(voucher, 1, 0.001)
    ticket = enter(voucher, 1, 1, join=False).ticket
    with pytest.raises(Unavailable):
        spend(voucher, 1, ticket, 1.1, then=unavailable(redis.ConnectionError("Connection refused")))
    assert enter(voucher, 1, 1.2, join=False).status == "admitted"  # given back
    with pytest.raises(Unavailable):
        spend(voucher, 1, ticket, 1.3, then=unavailable(redis.TimeoutError("Timeout reading from socket")))
    assert enter(voucher, 1, 1.4, join=False) is None  # spent: the take may have been made


def test_many_processes_joining_at_once_each_get_one_place(queued, rooms):
    voucher = queued(rate=1.0)
    plan = [[p * 4 + t + 1 for t in range(4)] + [p + 1] for p in range(8)]  # users 1-8 join twice

    def join(user_id: int) -> int:
        return enter(voucher, user_id, 0.5).waiting

    outcome = act_concurrently(act=join, plan=plan, race_ms=0)
    assert not outcome.unexpected
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    line = rooms.zrange(keys.line, 0, -1, withscores=True)
    admitted = [int(user) for user in rooms.zrange(keys.admitted, 0, -1)]
    assert len(admitted) == 1  # the first to join, by its join: nobody waited
    assert sorted([int(user) for user, _ in line] + admitted) == list(range(1, 33))
    assert sorted(score for _, score in line) == [float(n) for n in range(3, 34)]  # its place was 2


def test_a_ticket_raced_from_many_processes_is_spent_once(queued):
    voucher = queued(rate=100.0)
    enter(voucher, 7, 0.001)
    ticket = enter(voucher, 7, 1, join=False).ticket

    def take(_slot: int) -> str:
        try:
            spend(voucher, 7, ticket, 1.5)
        except DomainError as exc:
            return exc.code
        return "spent"

    outcome = act_concurrently(act=take, plan=[[n * 4 + t for t in range(4)] for n in range(8)], race_ms=0)
    assert Counter(outcome.confirmed) == {"spent": 1, "not_admitted": 31}


# What 100,000 waiting buyers may cost the room's Redis, at most (measured: docs/design.md,
# "Admission", and benchmarks.admission).
WAITERS = 100_000
BOUND_BYTES = 12 * 1024 * 1024


def test_a_hundred_thousand_waiting_buyers_cost_bounded_memory(queued, rooms):
    voucher = queued(rate=1.0)
    assert enter(voucher, WAITERS + 1, 0.4).status == "admitted"  # the room's first joiner, alone
    room_join_many(VOUCHER, voucher, range(1, WAITERS + 1), now=at(voucher, 0.5))
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    assert rooms.zcard(keys.line) == WAITERS
    used = sum(rooms.memory_usage(key, samples=0) or 0 for key in keys.all)
    assert used < BOUND_BYTES, f"{used:,} bytes for {WAITERS:,} waiting"
    last = enter(voucher, WAITERS, 0.6, join=False)
    assert (last.position, last.ahead) == (WAITERS, WAITERS - 1)


def test_while_every_unit_is_promised_the_head_is_told_to_come_back_when_the_first_ticket_lapses(queued):
    voucher = queued(stock=1, rate=100.0, ticket_seconds=30)
    enter(voucher, 1, 0.001)  # admitted by its join: the one unit is promised to user 1
    enter(voucher, 2, 0.002)
    head = enter(voucher, 2, 1, join=False)
    # The rate has earned admissions, but there is no unit to admit for until user 1's ticket
    # lapses at 30.001 s: asked back every 0.05 s until then, the head would poll 580 times.
    assert (head.status, head.position, head.eta_seconds) == ("waiting", 1, 30)
    assert head.poll_after_seconds == 5
    near = enter(voucher, 2, 29.5, join=False)
    assert near.poll_after_seconds == 0.55  # at the lapse, and a little
    assert enter(voucher, 2, 30.1, join=False).status == "admitted"


def test_a_rooms_keys_go_a_ticket_lifetime_after_the_sale_ends(queued, rooms):
    voucher = queued(stock=3, rate=100.0, ticket_seconds=30)
    for user in (1, 2, 3, 4):
        enter(voucher, user, 0.001 * user)
    enter(voucher, 2, 1, join=False)  # admits users 2 and 3 beside 1, and 4 waits: every key is written
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    goes = int(voucher.end_at.timestamp() * 1000) + 30_000
    assert {key: rooms.pexpiretime(key) for key in keys.all} == dict.fromkeys(keys.all, goes)
    # Staff move the end: the next move moves the keys with it.
    later = voucher_update(voucher=voucher, end_at=voucher.end_at + timedelta(hours=1))
    later = voucher_get(voucher_id=later.pk)
    enter(later, 2, 2, join=False)
    assert {key: rooms.pexpiretime(key) for key in keys.all} == dict.fromkeys(keys.all, goes + 3_600_000)


def test_a_ticket_given_back_after_its_spend_emptied_the_room_goes_with_the_room(queued, rooms):
    voucher = queued(rate=100.0)
    ticket = enter(voucher, 1, 0.001).ticket  # the only ticket out
    with pytest.raises(LockBusy):
        spend(voucher, 1, ticket, 0.1, then=LockBusy())  # spent (admitted emptied), then given back
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    assert rooms.zscore(keys.admitted, 1) is not None
    assert rooms.pexpiretime(keys.admitted) == rooms.pexpiretime(keys.serials) == rooms.pexpiretime(keys.room) > 0


def test_a_ticket_is_not_given_back_to_a_buyer_who_joined_the_line_again_meanwhile(queued):
    voucher = queued(rate=0.1)
    ticket = enter(voucher, 1, 0.001).ticket
    with pytest.raises(LockBusy):
        with ticket_held(VOUCHER, voucher, user_id=1, ticket=ticket, now=at(voucher, 0.1)) as held:
            held.spend()
            assert enter(voucher, 1, 0.2).status == "waiting"  # spent: joins again, behind no one
            raise LockBusy()
    # One place for the buyer: the line's, not the line's and a ticket given back.
    assert enter(voucher, 1, 0.3, join=False).status == "waiting"
    with pytest.raises(NotAdmitted):
        spend(voucher, 1, ticket, 0.4)


def test_thousands_of_tickets_lapsing_at_once_go_in_one_move(queued, rooms):
    voucher = queued(stock=9_000, rate=10_000.0, ticket_seconds=5)
    room_join_many(VOUCHER, voucher, range(1, 9_001), now=at(voucher, 0.5))
    assert enter(voucher, 9_000, 1.5, join=False).status == "admitted"
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    assert rooms.zcard(keys.admitted) == rooms.hlen(keys.serials) == 9_000
    # All 9,000 lapse together: more than Lua unpacks at once.
    assert enter(voucher, 9_000, 7, join=False) is None
    assert rooms.zcard(keys.admitted) == rooms.hlen(keys.serials) == 0


def test_a_lobby_is_asked_back_over_the_time_its_admissions_take_not_all_at_the_opening(queued):
    voucher = queued(rate=100.0)
    for user in range(1, 51):
        enter(voucher, user, -30)
    asked = [enter(voucher, user, -1.5, join=False).poll_after_seconds for user in range(1, 51)]
    # 50 admissions at 100 a second take half a second: the polls come over it, after the opening.
    assert all(1.5 <= after <= 2.0 for after in asked), asked
    assert len(set(asked)) > 10, asked


def test_a_ticket_is_not_given_back_once_its_room_has_gone(queued, rooms):
    """Past the sale's end and a ticket's lifetime the room's keys go; a take that ran that
    long gives nothing back, and makes no key again that would never go."""
    voucher = queued(rate=100.0)
    ticket = enter(voucher, 1, 0.001).ticket
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    with pytest.raises(LockBusy):
        with ticket_held(VOUCHER, voucher, user_id=1, ticket=ticket, now=at(voucher, 0.1)) as held:
            held.spend()
            rooms.delete(*keys.all)  # the room expired meanwhile
            raise LockBusy()
    assert not rooms.exists(*keys.all)


def test_a_ticket_whose_take_never_ended_stops_promising_its_unit_once_a_take_would_have(queued, rooms, settings):
    """Spent in a call of its own, a ticket promises its unit until its take ends; a take whose
    process died never says so, and the promise lapses once a take would have ended
    (``IDEMPOTENCY_RUNNING_SECONDS``), or at the ticket's deadline if later."""
    settings.IDEMPOTENCY_RUNNING_SECONDS = 10
    voucher = queued(stock=1, rate=100.0, ticket_seconds=5)
    ticket = enter(voucher, 1, 0.01).ticket
    # Spent at 4.9 s, its take begun a moment before the ticket's deadline (5.01 s), and the
    # process died: nothing notes the take's end.
    ticket_held(VOUCHER, voucher, user_id=1, ticket=ticket, now=at(voucher, 4.9)).spend()
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    assert rooms.zscore(keys.admitted, "~1") is not None and rooms.pttl(keys.admitted) > 0
    assert enter(voucher, 2, 5.05).status == "waiting"  # past the deadline, the take may still run
    assert enter(voucher, 2, 14.8, join=False).status == "waiting"
    assert enter(voucher, 2, 15.0, join=False).status == "admitted"  # 4.9 s + 10 s
    assert rooms.zscore(keys.admitted, "~1") is None


def test_a_take_answered_unconfirmed_counts_its_unit_used(queued, rooms):
    """A reservation made that no replica confirmed in time stands: its ticket stays spent, and
    its unit is counted used, as a take's that was confirmed."""
    from inventory.errors import Unconfirmed

    voucher = queued(stock=2, rate=100.0)
    ticket = enter(voucher, 1, 0.01).ticket
    with pytest.raises(Unconfirmed):
        spend(voucher, 1, ticket, 0.1, then=Unconfirmed(7))
    keys = RoomKeys.of(VOUCHER.kind, voucher.pk)
    assert rooms.zscore(keys.admitted, "~1") is None and rooms.zscore(keys.admitted, 1) is None
    assert int(rooms.hget(keys.room, "used")) == 1


def test_a_reading_made_before_the_room_was_lost_counts_no_tickets_the_new_room_never_gave(queued, rooms):
    """A reading carries the room's count of tickets used as it stood then; a room that Redis
    lost since counts from 0, and the reading's larger count made room for units never there."""
    from inventory.admission import room as room_module

    voucher = queued(stock=3, rate=1000.0)
    seconds, micros = rooms.time()
    room_module._units.put((VOUCHER.kind, voucher.pk), (3, seconds * 1000 + micros // 1000, 1000))
    admitted = [enter(voucher, user, 0.01 * user).status for user in range(1, 7)]
    assert admitted.count("admitted") == 3, admitted
