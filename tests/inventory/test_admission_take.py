"""Who spends a take's admission ticket, on the real Redis: ``redis_lua``'s RESERVE in its own
round trip where the room lives in the same Redis and the item in one state, only on an answer
that does not ask to be sent again; a round trip of its own first otherwise (another strategy,
a bucketed item, the room in another Redis), given back when the take asks again."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.db import OperationalError, connection

from core.errors import DomainError
from core.outage import database_cut
from core.ratelimit import Limit, RateCount, RateLimited
from core.window import NotStarted
from inventory.admission.keys import RoomKeys
from inventory.admission.room import room_enter, ticket_held, units_forget
from inventory.admission.tickets import TicketHeld
from inventory.errors import NotAdmitted, SoldOut, StateMissing
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_load
from inventory.redis_lua.values import group_tag
from inventory.take import item_take
from orders.product import VOUCHER
from orders.selectors import voucher_get

from ..buyers import act_concurrently
from ..cuts import cut_after

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("rooms", "reservations_redis"),
]


@pytest.fixture
def queued(make_voucher):
    """A voucher on sale now behind a waiting room that admits at once."""

    def make(*, strategy: str = "redis_lua", stock: int = 5, **fields):
        voucher = make_voucher(stock=stock, strategy=strategy, admission="queue", admission_rate=1000.0, **fields)
        return voucher_get(voucher_id=voucher.pk)

    return make


@pytest.fixture
def users(make_user) -> list[int]:
    """Three buyers' ids."""
    return [make_user().pk for _ in range(3)]


def admitted(voucher, user_id: int) -> str:
    """The user's ticket: joined, then polled until admitted (the room admits its first
    joiner at once, and its rate of 1,000 a second earns each later one within a millisecond)."""
    standing = room_enter(VOUCHER, voucher, user_id=user_id, join=True)
    for _ in range(10_000):
        if standing.status == "admitted":
            return standing.ticket
        standing = room_enter(VOUCHER, voucher, user_id=user_id, join=False)
    raise AssertionError(f"not admitted: {standing}")


def take(voucher, user_id: int, ticket: str, **more) -> TicketHeld:
    """A take with ``ticket``, as the API makes it: the ticket as the take left it."""
    with ticket_held(VOUCHER, voucher, user_id=user_id, ticket=ticket) as held:
        item_take(VOUCHER, voucher, user_id=user_id, ticket=held, **more)
    return held


def live(voucher, user_id: int) -> bool:
    """Whether the room still holds a ticket for the user (admitted, not spent)."""
    standing = room_enter(VOUCHER, voucher, user_id=user_id, join=False)
    return standing is not None and standing.status == "admitted"


def used(rooms, voucher) -> int:
    return int(rooms.hget(RoomKeys.of(VOUCHER.kind, voucher.pk).room, "used") or 0)


def test_redis_lua_spends_the_ticket_in_its_reserve_and_only_once(queued, rooms, users):
    voucher = queued()
    ticket = admitted(voucher, users[0])
    held = take(voucher, users[0], ticket)
    # Spent, and not by a round trip of its own (which would have noted its deadline).
    assert not held.spent
    assert not live(voucher, users[0])
    assert used(rooms, voucher) == 1
    with pytest.raises(NotAdmitted):
        take(voucher, users[0], ticket)
    # Checked first, as a take that spends it apart does: refused 403 even where the state is
    # missing (503, asking again), as after Redis restarted empty.
    reservations_client().drop(group_id=VOUCHER.group_of(voucher))
    with pytest.raises(NotAdmitted):
        take(voucher, users[0], ticket)
    assert used(rooms, voucher) == 1


def test_a_ticket_raced_into_reserve_from_many_processes_takes_one_unit(queued, rooms, users):
    """32 takes by its buyer at once, each with the same ticket, in 8 processes: RESERVE spends
    it once, and every other take is refused for the ticket, before the buyer's own limit."""
    voucher = queued(stock=50)
    ticket = admitted(voucher, users[0])

    def attempt(_slot: int) -> str:
        try:
            take(voucher, users[0], ticket)
        except DomainError as exc:
            return exc.code
        return "reserved"

    outcome = act_concurrently(act=attempt, plan=[[n * 4 + t for t in range(4)] for n in range(8)], race_ms=0)
    assert sorted(outcome.confirmed) == ["not_admitted"] * 31 + ["reserved"]
    assert used(rooms, voucher) == 1


def test_redis_lua_keeps_the_ticket_when_its_take_asks_again_and_spends_it_on_a_final_refusal(queued, rooms, users):
    voucher = queued(stock=2)
    first, second = admitted(voucher, users[0]), admitted(voucher, users[1])
    over = RateCount(action="purchase", counted=((Limit("user", 0, 60), str(users[0])),))
    with pytest.raises(RateLimited):
        take(voucher, users[0], first, rate=over)
    assert live(voucher, users[0]) and used(rooms, voucher) == 0
    reservations_client().drop(group_id=VOUCHER.group_of(voucher))
    with pytest.raises(StateMissing):
        take(voucher, users[0], first)
    assert live(voucher, users[0]) and used(rooms, voucher) == 0

    item_reservations_load(VOUCHER, item=voucher)
    take(voucher, users[0], first)
    # The other unit goes to a buyer the room never saw: user 2's take finds none left.
    assert reservations_client().reserve(group_id=VOUCHER.group_of(voucher), user_id=users[2], rand=0.5).refusal is None
    with pytest.raises(SoldOut):
        take(voucher, users[1], second)
    # Spent by the refusal, which took no unit: the room counts none used for it.
    assert not live(voucher, users[1]) and used(rooms, voucher) == 1


@pytest.mark.parametrize(
    ("strategy", "fields"), [("db_atomic", {}), ("redis_lua", {"buckets": 2})], ids=["db_atomic", "redis_lua-bucketed"]
)
def test_a_take_that_cannot_spend_it_in_its_own_call_spends_it_first_and_gives_it_back_when_asked_again(
    queued, rooms, strategy, fields, users
):
    voucher = queued(strategy=strategy, **fields)
    ticket = admitted(voucher, users[0])
    over = RateCount(action="purchase", counted=((Limit("user", 0, 60), str(users[0])),))
    with pytest.raises(RateLimited):
        take(voucher, users[0], ticket, rate=over)
    assert live(voucher, users[0]) and used(rooms, voucher) == 0
    held = take(voucher, users[0], ticket)
    assert held.spent
    assert not live(voucher, users[0]) and used(rooms, voucher) == 1


def test_a_take_whose_database_connection_is_cut_at_its_commit_keeps_its_ticket_spent(queued, rooms, users):
    """The COMMIT may have been done with its answer lost: given back, the ticket would let a
    pool with a draw limit draw twice on one admission. Cut here as the take's order is
    written, the connection killed from another before its COMMIT."""
    voucher = queued(strategy="db_atomic")
    ticket = admitted(voucher, users[0])

    with connection.execute_wrapper(cut_after("INSERT INTO `orders_order`")), pytest.raises(OperationalError) as cut:
        take(voucher, users[0], ticket)
    connection.close()
    assert database_cut(cut.value)
    assert not live(voucher, users[0]) and used(rooms, voucher) == 1
    # The same error on a statement that failed for good (a deadlock, rolled back) gives it back.
    assert not database_cut(OperationalError(1213, "Deadlock found when trying to get lock"))


@pytest.fixture
def room_elsewhere(settings):
    """The waiting rooms on a client of their own (as if in another Redis): same server, so
    that the test reads them, but not the client ``redis_lua`` reserves with."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    settings.ADMISSION_REDIS_CLIENT = "tests.inventory.test_admission_take.ROOM_ELSEWHERE"
    ROOM_ELSEWHERE.client = client
    yield client
    client.close()


def ROOM_ELSEWHERE():  # noqa: N802 (a settings path names it)
    return ROOM_ELSEWHERE.client


def test_redis_lua_spends_the_ticket_first_when_the_room_lives_in_another_redis(queued, rooms, room_elsewhere, users):
    voucher = queued()
    ticket = admitted(voucher, users[0])
    assert reservations_client().client is not room_elsewhere
    held = take(voucher, users[0], ticket)
    assert held.spent
    assert not live(voucher, users[0]) and used(rooms, voucher) == 1


def test_a_take_that_counts_its_rate_limits_first_counts_them_in_the_tickets_own_round_trip(queued, rooms, users):
    voucher = queued(strategy="db_atomic")
    ticket = admitted(voucher, users[0])
    rate = RateCount(action="purchase", counted=((Limit("user", 5, 60), str(users[0])),))
    held = take(voucher, users[0], ticket, rate=rate)
    assert held.spent and used(rooms, voucher) == 1
    # Counted once: in the ticket's script, and not again on its own.
    [counter] = rate.keys(tag=group_tag(voucher.group_id))
    assert int(rooms.get(counter)) == 1


def test_a_take_whose_room_lives_in_another_redis_counts_its_limits_apart_first_and_keeps_its_ticket_over_them(
    queued, rooms, room_elsewhere, users
):
    voucher = queued(strategy="db_atomic")
    ticket = admitted(voucher, users[0])
    over = RateCount(action="purchase", counted=((Limit("user", 0, 60), str(users[0])),))
    with pytest.raises(RateLimited):
        take(voucher, users[0], ticket, rate=over)
    assert live(voucher, users[0]) and used(rooms, voucher) == 0
    rate = RateCount(action="purchase", counted=((Limit("user", 5, 60), str(users[1])),))
    held = take(voucher, users[1], admitted(voucher, users[1]), rate=rate)
    assert held.spent and used(rooms, voucher) == 1
    [counter] = rate.keys(tag=group_tag(voucher.group_id))
    assert int(rooms.get(counter)) == 1


@pytest.mark.parametrize("strategy", ["redis_lua", "db_atomic"])
def test_a_take_told_the_sale_has_not_started_keeps_its_ticket(make_voucher, users, strategy):
    """The room admits by its own clock; the take's window, by Redis' or its process's, may say
    a moment later that the sale has not started: the buyer keeps the ticket for that moment."""
    voucher = make_voucher(strategy=strategy, starts_in=timedelta(minutes=1), admission="queue", admission_rate=1000.0)
    voucher = voucher_get(voucher_id=voucher.pk)
    opened = voucher.begin_at + timedelta(seconds=1)  # the room's clock, a moment ahead
    ticket = room_enter(VOUCHER, voucher, user_id=users[0], join=True, now=opened).ticket
    with pytest.raises(NotStarted):
        with ticket_held(VOUCHER, voucher, user_id=users[0], ticket=ticket, now=opened) as held:
            item_take(VOUCHER, voucher, user_id=users[0], ticket=held)
    assert live(voucher, users[0])


@pytest.mark.parametrize(
    ("strategy", "fields"),
    [("db_atomic", {}), ("redis_lua", {}), ("redis_lua", {"buckets": 2})],
    ids=["db_atomic", "redis_lua", "redis_lua-bucketed"],
)
def test_takes_with_a_spent_ticket_count_against_the_rate_limits(queued, strategy, fields, users):
    """The limits are counted before the ticket is checked, in the ticket's script or in
    RESERVE's: a spent ticket sent again and again is refused 429 once over them, as on an
    item without a room."""
    voucher = queued(strategy=strategy, **fields)
    ticket = admitted(voucher, users[0])
    rate = RateCount(action="purchase", counted=((Limit("user", 3, 60), str(users[0])),))
    take(voucher, users[0], ticket, rate=rate)
    refused = []
    for _ in range(3):
        with pytest.raises(DomainError) as caught:
            take(voucher, users[0], ticket, rate=rate)
        refused.append(caught.value.code)
    assert refused == ["not_admitted", "not_admitted", "rate_limited"]


def test_a_take_with_a_spent_ticket_counts_its_limits_apart_when_the_room_lives_in_another_redis(
    queued, room_elsewhere, users
):
    voucher = queued()
    ticket = admitted(voucher, users[0])
    rate = RateCount(action="purchase", counted=((Limit("user", 2, 60), str(users[0])),))
    take(voucher, users[0], ticket, rate=rate)
    with pytest.raises(NotAdmitted):
        take(voucher, users[0], ticket, rate=rate)
    with pytest.raises(RateLimited):
        take(voucher, users[0], ticket, rate=rate)


@pytest.mark.parametrize("elsewhere", [False, True], ids=["in-its-script", "apart"])
def test_a_join_counts_its_limits_on_the_rooms_tag_in_its_script_or_apart(queued, rooms, users, elsewhere, request):
    """Where the room lives in the rate limits' Redis (the client they are counted with), a
    join's limits are counted in the room's script; elsewhere, in a round trip of their own.
    Either way, over a limit the room does not move: the user does not join."""
    if elsewhere:
        request.getfixturevalue("room_elsewhere")
    voucher = queued()
    rate = RateCount(action="queue", counted=((Limit("address", 1, 60), "203.0.113.9"),))
    assert room_enter(VOUCHER, voucher, user_id=users[0], join=True, rate=rate).status == "admitted"
    with pytest.raises(RateLimited):
        room_enter(VOUCHER, voucher, user_id=users[1], join=True, rate=rate)
    assert room_enter(VOUCHER, voucher, user_id=users[1], join=False) is None
    [counter] = rate.keys(tag=RoomKeys.of(VOUCHER.kind, voucher.pk).hash_tag)
    assert int(rooms.get(counter)) == 2


def test_a_redis_lua_rooms_units_are_what_its_state_holds_not_the_rows_its_drains_have_yet_to_write(
    queued, rooms, users
):
    """A unit reserved in Redis is gone from the room's next reading of the units, written to
    the database or not (no worker writes it here). Read from the stock rows, which still said
    2, the room promised that unit again, and every reading forgot the tickets spent since."""
    voucher = queued(stock=2)
    take(voucher, users[0], admitted(voucher, users[0]))
    units_forget(VOUCHER, voucher.pk)  # the next move reads the units again
    assert admitted(voucher, users[1])
    standing = room_enter(VOUCHER, voucher, user_id=users[2], join=True)
    for _ in range(50):  # the rate earns an admission every millisecond: the units withhold it
        standing = room_enter(VOUCHER, voucher, user_id=users[2], join=False)
    assert standing.status != "admitted", standing


def test_a_take_between_a_reading_of_the_units_and_the_rooms_move_does_not_free_its_unit_again(rooms, queued, users):
    """The last unit taken (RESERVE spends the ticket and the unit at once) after this process
    read the units and before the room moved with that reading: the room counted the take in
    its base and the unit as left, and admitted the next buyer for a unit that was gone."""
    from inventory.admission.room import units_left

    voucher = queued(stock=1)
    first, second = users[0], users[1]
    ticket = admitted(voucher, first)
    units_forget(VOUCHER, voucher.pk)
    assert units_left(VOUCHER, voucher)[0] == 1  # read, and kept for the room's next moves
    take(voucher, first, ticket)
    assert used(rooms, voucher) == 1
    standing = room_enter(VOUCHER, voucher, user_id=second, join=True)
    assert standing.status == "sold_out", standing


def test_a_ticket_spent_before_its_take_promises_its_unit_until_the_take_ends(rooms, queued, users):
    """A database strategy spends the ticket in a call of its own, then takes: a reading of the
    units made meanwhile found the unit left and the ticket used, and the room promised the
    last unit to the next buyer, whom the take then left sold out."""
    voucher = queued(strategy="db_atomic", stock=1)
    first, second = users[0], users[1]
    ticket = admitted(voucher, first)
    with ticket_held(VOUCHER, voucher, user_id=first, ticket=ticket) as held:
        held.spend()
        units_forget(VOUCHER, voucher.pk)  # read while the take runs: the unit is still there
        assert room_enter(VOUCHER, voucher, user_id=second, join=True).status == "waiting"
        item_take(VOUCHER, voucher, user_id=first, ticket=held)
    assert used(rooms, voucher) == 1
    units_forget(VOUCHER, voucher.pk)
    assert room_enter(VOUCHER, voucher, user_id=second, join=False).status == "sold_out"
