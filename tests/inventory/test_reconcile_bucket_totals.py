"""The beat's reconciliation of a bucketed ``redis_lua`` voucher compares totals first
(``inventory.redis_lua.reconcile_buckets``): of each state only ``live`` (its rows and the
takes of its users together), its stream and its transfers, against the rows and the
records' count; each user's marks only on a difference, or once the last comparison per user
(marked in bucket 0's ``checked`` key) has expired. ``manage.py reconcile`` always compares
each user."""

from __future__ import annotations

import pytest
from django.conf import settings

from inventory.buckets import home_bucket
from inventory.models import Stock
from inventory.redis_lua.bucket_states import item_states
from inventory.redis_lua.client import Reservations, reservations_client
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.redis_lua.reconcile_buckets import STATES_READS
from inventory.redis_lua.transfers import Transfers, transfers_client
from inventory.redis_lua.values import GroupKeys
from inventory.tasks import reservations_reconcile
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_get
from orders.services import order_purchase, voucher_update
from tests.waiting import wait_until

from .. import records

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("reservations_redis")]

BUCKETS = 4


def beat(voucher):
    """What the beat's task does for one item."""
    return item_reservations_reconcile(VOUCHER, item=voucher_get(voucher_id=voucher.pk), totals_first=True)


def full_period_over(voucher) -> None:
    """The last comparison per user expires, as it does ``RESERVATIONS_RECONCILE_FULL_SECONDS``
    after it ran: its key's expiry brought forward, and waited on."""
    client, key = reservations_client().client, GroupKeys.of(voucher.group_id).checked
    assert client.pexpire(key, 1)
    wait_until(lambda: not client.exists(key), "the comparison per user expired")


@pytest.fixture
def voucher(make_voucher, make_user):
    """A redis_lua voucher of 4 buckets whose states were loaded from 20 orders in every
    status, then 6 purchases waiting in their home states' streams and a unit in transit
    between two states."""
    voucher = make_voucher(stock=60)
    records.orders(voucher, 20)
    voucher = voucher_update(voucher=voucher, buckets=BUCKETS, strategy="redis_lua")
    for _ in range(6):
        order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk))
    states = item_states(voucher.group_id, BUCKETS)
    assert transfers_client(reservations_client()).out(giver=states[1], receiver=states[2], most=1)
    return voucher


def home(voucher, user_id: int) -> int:
    """The state of the user's home bucket."""
    return item_states(voucher.group_id, BUCKETS)[home_bucket(user_id, BUCKETS)]


def home_state(voucher, user_id: int) -> str:
    return GroupKeys.of(home(voucher, user_id)).state


def test_a_bucketed_item_whose_totals_agree_is_checked_without_reading_each_user(voucher):
    first = beat(voucher)
    assert (first.state, first.per_user, first.drifted, first.pending) == (True, True, False, 6)
    ttl = reservations_client().client.ttl(GroupKeys.of(voucher.group_id).checked)
    assert 0 < ttl <= settings.RESERVATIONS_RECONCILE_FULL_SECONDS
    second = beat(voucher)
    assert (second.state, second.per_user, second.drifted, second.pending) == (True, False, False, 6)
    # The command and the audit compare each user whatever the totals say.
    assert item_reservations_check(VOUCHER, item=voucher).per_user


class MovingMidRead(Reservations):
    """The process's Redis, where moves run while the states are read: just before each of
    the first ``reads`` reads of ``receiver``, a unit moves to it from ``giver``, read
    already, so that each of those reads counts it in both."""

    def __init__(self, *, giver: int, receiver: int, reads: int = 1) -> None:
        super().__init__(reservations_client().client)
        self.giver, self.receiver, self.reads, self.moved = giver, receiver, reads, 0

    def multi(self, *, group_id: int):
        if group_id == self.receiver and self.moved < self.reads:
            self.moved += 1
            assert Transfers(self.client).move(giver=self.giver, receiver=self.receiver, most=1) == 1
        return super().multi(group_id=group_id)


def moving(voucher, reads: int) -> MovingMidRead:
    states = item_states(voucher.group_id, BUCKETS)
    return MovingMidRead(giver=states[0], receiver=states[3], reads=reads)


def test_a_move_between_two_reads_is_read_again_and_taken_for_no_drift(voucher):
    beat(voucher)
    mover = moving(voucher, reads=1)
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=mover, totals_first=True)
    assert mover.moved == 1
    assert (check.state, check.per_user, check.drifted) == (True, False, False)


def test_moves_that_show_the_same_difference_in_two_reads_are_no_drift(voucher):
    """Two reads in a row find the same unit counted twice, by two moves: the states are read
    until no move ran between two reads, and nothing is repaired."""
    mover = moving(voucher, reads=2)
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=mover)
    assert mover.moved == 2
    assert (check.state, check.per_user, check.drifted, check.repaired) == (True, True, False, False)
    assert not item_reservations_check(VOUCHER, item=voucher).drifted


def test_moves_that_never_stop_leave_the_rows_to_the_next_run(voucher):
    """Every read finds a move in flight: no row is taken for drift, and the item is not
    marked whole, so that the next run compares each user again."""
    client = reservations_client().client
    mover = moving(voucher, reads=STATES_READS)
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=mover)
    assert mover.moved == STATES_READS
    assert (check.state, check.drifted, check.repaired) == (True, False, False)
    assert not client.exists(GroupKeys.of(voucher.group_id).checked)
    assert beat(voucher).per_user and client.exists(GroupKeys.of(voucher.group_id).checked)


def test_a_record_lost_on_one_side_is_found_through_the_totals_and_repaired(voucher):
    beat(voucher)
    assert reservations_client().client.exists(GroupKeys.of(voucher.group_id).checked)  # totals may stand in
    gone = Order.objects.filter(voucher=voucher, status=Order.Status.CONFIRMED).first()
    Order.objects.filter(pk=gone.pk).update(status=Order.Status.CANCELLED, buyer_guard=None)
    check = beat(voucher)
    assert check.per_user and check.repaired
    assert check.takers == {gone.user_id: (1, 0)} and not check.stock
    assert reservations_client().takes(group_id=home(voucher, gone.user_id), user_id=gone.user_id) == 0
    again = beat(voucher)
    assert (again.per_user, again.drifted) == (False, False)


def test_a_unit_too_many_in_one_state_is_found_through_the_totals_and_taken_back(voucher):
    beat(voucher)
    row = Stock.objects.filter(group_id=voucher.group_id, bucket=3).values_list("id", flat=True).get()
    states = item_states(voucher.group_id, BUCKETS)
    reservations_client().add_units(group_id=states[3], stock_id=row, units=2)
    check = beat(voucher)
    assert check.per_user and check.repaired
    ((found, (have, want)),) = check.stock.items()
    assert found == row and have - want == 2
    assert not beat(voucher).per_user


def test_a_users_field_changed_alone_is_found_once_the_full_period_has_passed(voucher):
    """One user's take moved to another in Redis, the states' totals left as they were: the
    totals agree and the beat misses it, until the last comparison per user expires."""
    beat(voucher)
    client = reservations_client().client
    buyer = Order.objects.filter(voucher=voucher, status=Order.Status.PAID).values_list("user_id", flat=True)[0]
    stranger = records.users(1)[0].pk
    client.hdel(home_state(voucher, buyer), buyer)
    client.hset(home_state(voucher, stranger), stranger, 1)

    assert not beat(voucher).per_user  # missed for now
    assert item_reservations_check(VOUCHER, item=voucher).takers == {buyer: (0, 1), stranger: (1, 0)}
    full_period_over(voucher)
    check = beat(voucher)
    assert check.per_user and check.repaired
    assert check.takers == {buyer: (0, 1), stranger: (1, 0)}
    assert not item_reservations_check(VOUCHER, item=voucher).drifted


def test_the_beats_task_compares_a_bucketed_items_totals_first(voucher):
    """``inventory.tasks.reservations_reconcile``: a drift that keeps the totals is not
    reported while the last comparison per user stands, and is once it expired; one that
    changes a total is at once."""
    assert reservations_reconcile("voucher") == 0
    client = reservations_client().client
    buyer = Order.objects.filter(voucher=voucher, status=Order.Status.CONFIRMED).values_list("user_id", flat=True)[0]
    client.hset(home_state(voucher, buyer), buyer, "1:")  # the take kept, its number lost
    assert reservations_reconcile("voucher") == 0
    full_period_over(voucher)
    assert reservations_reconcile("voucher") == 1
    assert client.hget(home_state(voucher, buyer), buyer) == b"1"
    assert reservations_reconcile("voucher") == 0
    # A record gone behind Redis' back changes the takes' total: found without waiting.
    Order.objects.filter(user_id=buyer, voucher=voucher).update(status=Order.Status.CANCELLED, buyer_guard=None)
    assert client.exists(GroupKeys.of(voucher.group_id).checked)
    assert reservations_reconcile("voucher") == 1
    assert reservations_reconcile("voucher") == 0


class SellingMidRead(Reservations):
    """The process's Redis, where a buyer reserves from ``state`` after its first read, so
    that the second read finds its row's units, and its units expected, one lower."""

    def __init__(self, *, state: int, user_id: int) -> None:
        super().__init__(reservations_client().client)
        self.state, self.user_id, self.reads, self.sold = state, user_id, 0, False

    def multi(self, *, group_id: int):
        if group_id == self.state:
            self.reads += 1
            if self.reads == 2:
                answer = self.reserve(group_id=group_id, user_id=self.user_id, rand=0.5, states=BUCKETS)
                self.sold = answer.refusal is None
        return super().multi(group_id=group_id)


def test_a_drift_on_a_row_that_sells_between_the_two_reads_is_found_and_repaired(voucher, make_user):
    row = Stock.objects.filter(group_id=voucher.group_id, bucket=3).values_list("id", flat=True).get()
    states = item_states(voucher.group_id, BUCKETS)
    reservations_client().add_units(group_id=states[3], stock_id=row, units=2)
    buyer = next(user for user in iter(lambda: make_user().pk, None) if home_bucket(user, BUCKETS) == 3)
    seller = SellingMidRead(state=states[3], user_id=buyer)
    check = item_reservations_reconcile(VOUCHER, item=voucher, reservations=seller)
    assert seller.sold
    ((found, (have, want)),) = check.stock.items()
    assert (found, have - want, check.repaired) == (row, 2, True)
    assert not item_reservations_check(VOUCHER, item=voucher).drifted
