"""A bucketed redis_lua voucher on one state per bucket (docs/design.md, "Buckets"): many
processes buy it with buckets starting empty (homes spread, borrowing), then it is persisted
and checked; a missing state rebuilds all; releases go back to their bucket's state; a
reservation of a bucket's state is found by its id; a transfer stalled across a rebuild is
refused by the epoch through the client and doubles no unit; on a real cluster the states land
on different masters."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from inventory.buckets import home_bucket
from inventory.errors import SoldOut
from inventory.models import Stock
from inventory.records import internal_of
from inventory.redis_lua.bucket_states import item_states
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_check, item_reservations_reconcile
from inventory.redis_lua.transfers import transfers_client
from inventory.redis_lua.values import GroupKeys, reservation_group, state_of
from orders.models import Order
from orders.product import VOUCHER
from orders.selectors import voucher_audit, voucher_get
from orders.services import order_cancel, order_purchase, voucher_update
from tests.records import answered_row

from .buyers import act_concurrently, buy_concurrently
from .test_concurrency import crowd  # noqa: F401  (the fixture: 8 processes x 4 buyers, 4 firing twice)
from .test_holds import windowed
from .test_redis_lua import persist_voucher

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

BUCKETS = 8


def units_in_redis(voucher) -> dict[int, int]:
    """Units per row over every state of the voucher."""
    found: dict[int, int] = {}
    for state in item_states(voucher.group_id, BUCKETS):
        for row, units in (reservations_client().stock(group_id=state) or {}).items():
            found[row] = found.get(row, 0) + units
    return found


def database_units(voucher) -> dict[int, int]:
    return dict(Stock.objects.filter(group_id=voucher.group_id).values_list("id", "quantity"))


@pytest.mark.race
def test_many_processes_buy_a_bucketed_voucher_whose_buckets_start_partly_empty(make_voucher, crowd):  # noqa: F811
    """6 units over 8 buckets (2 start empty), 28 buyers in 8 processes, 4 of them twice."""
    voucher = make_voucher(stock=6, strategy="redis_lua", buckets=BUCKETS)
    assert sorted(database_units(voucher).values()) == [0, 0, 1, 1, 1, 1, 1, 1]
    states = item_states(voucher.group_id, BUCKETS)
    assert all(reservations_client().stock(group_id=state) is not None for state in states)

    outcome = buy_concurrently(voucher_id=voucher.pk, plan=crowd, race_ms=30)
    assert not outcome.unexpected, outcome.unexpected
    assert len(outcome.confirmed) == 6  # sold == supply: nobody refused while a unit sat elsewhere
    assert {state_of(reservation_group(internal_of(one)))[0] for one in outcome.confirmed} == {voucher.group_id}
    persist_voucher(voucher)

    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and (audit.orders, audit.stock, audit.oversold, audit.duplicates) == (6, 0, 0, 0), audit
    assert Order.objects.filter(voucher=voucher).values("user").distinct().count() == 6
    rows = Stock.objects.filter(group_id=voucher.group_id)
    for quantity, taken, initial in rows.values_list("quantity", "taken", "initial_quantity"):
        assert quantity == 0 and taken == initial
    check = item_reservations_check(VOUCHER, item=voucher)
    assert check.state and not check.drifted, check
    assert units_in_redis(voucher) == database_units(voucher)


def test_a_release_goes_back_to_its_rows_bucket_state_and_frees_the_take_at_home(make_voucher, make_user):
    voucher = windowed(make_voucher(stock=8, strategy="redis_lua", buckets=BUCKETS, abandon_cooldown_seconds=0))
    buyer = make_user()
    order = order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk))
    persist_voucher(voucher)
    order = answered_row(Order, order.public_id)
    home = item_states(voucher.group_id, BUCKETS)[home_bucket(buyer.pk, BUCKETS)]
    assert reservation_group(order.reservation) == home
    bucket = Stock.objects.get(pk=order.stock_id).bucket
    state = item_states(voucher.group_id, BUCKETS)[bucket]
    before = reservations_client().stock(group_id=state)[order.stock_id]
    order_cancel(order=order)
    assert reservations_client().stock(group_id=state)[order.stock_id] == before + 1
    assert reservations_client().takes(group_id=home, user_id=buyer.pk) == 0
    assert not item_reservations_check(VOUCHER, item=voucher).drifted
    # The buyer may buy again, at home.
    again = order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk))
    assert reservation_group(again.reservation) == home


def test_a_missing_state_among_several_rebuilds_them_all(make_voucher, make_user):
    voucher = make_voucher(stock=8, strategy="redis_lua", buckets=BUCKETS)
    buyers = [make_user() for _ in range(4)]
    for buyer in buyers:
        order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk))
    states = item_states(voucher.group_id, BUCKETS)
    epoch = reservations_client().client.hget(GroupKeys.of(states[0]).state, "epoch")
    reservations_client().client.delete(GroupKeys.of(states[3]).state)  # one state lost
    found = item_reservations_reconcile(VOUCHER, item=voucher)
    assert found.rebuilt
    assert all(reservations_client().stock(group_id=state) is not None for state in states)
    epochs = {reservations_client().client.hget(GroupKeys.of(state).state, "epoch") for state in states}
    assert len(epochs) == 1 and epoch not in epochs  # one new epoch for all
    assert Order.objects.filter(voucher=voucher).count() == 4  # the streams were persisted first
    assert not item_reservations_check(VOUCHER, item=voucher).drifted
    assert units_in_redis(voucher) == database_units(voucher)


def test_a_rebuild_of_a_lost_state_stops_the_others_selling_before_it_persists_their_streams(
    make_voucher, make_user, monkeypatch
):
    """The states still loaded are dropped before their streams are persisted: a buyer who
    reserves just after the persisting is told the state is missing (and asks again), where
    a state left loaded sold to them, and the load then found a reservation in its stream
    that the database did not hold, and failed."""
    from inventory.redis_lua import item_states as rebuilds

    voucher = make_voucher(stock=8, strategy="redis_lua", buckets=BUCKETS)
    states = item_states(voucher.group_id, BUCKETS)
    late = next(user for user in iter(make_user, None) if home_bucket(user.pk, BUCKETS) == 5)
    reservations_client().client.delete(GroupKeys.of(states[3]).state)  # one state lost
    persist, answers = rebuilds.states_persist, []

    def persist_then_sell(*args, **kwargs):
        persist(*args, **kwargs)
        answers.append(reservations_client().reserve(group_id=states[5], user_id=late.pk, rand=0.5, states=BUCKETS))

    monkeypatch.setattr(rebuilds, "states_persist", persist_then_sell)
    assert item_reservations_reconcile(VOUCHER, item=voucher).rebuilt
    assert [answer.refusal for answer in answers] == ["unavailable"]
    assert all(reservations_client().stock(group_id=state) is not None for state in states)
    assert not item_reservations_check(VOUCHER, item=voucher).drifted


def test_a_bucket_states_pending_order_is_found_by_its_id(make_voucher, api_client, make_user):
    voucher = make_voucher(stock=8, strategy="redis_lua", buckets=BUCKETS)
    buyer = next(u for u in iter(make_user, None) if home_bucket(u.pk, BUCKETS) != 0)
    client: Client = api_client(buyer)
    answer = client.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert answer.status_code == 202
    order_id = answer.json()["order_id"]
    assert reservation_group(internal_of(order_id)) >= 1 << 31  # a bucket state's reservation
    shown = client.get(f"/api/orders/{order_id}")
    assert shown.status_code == 200 and shown.json()["status"] == "pending"
    assert order_id in [one["id"] for one in client.get("/api/orders").json()]


def test_the_rebalancer_and_the_recovery_run_in_the_sweep(make_voucher):
    from inventory.tasks import reservations_sweep

    voucher = make_voucher(stock=80, strategy="redis_lua", buckets=BUCKETS)
    states = item_states(voucher.group_id, BUCKETS)
    transfers = transfers_client(reservations_client())
    for state in states[1:]:  # every unit moved to bucket 0's state
        while transfers.move(giver=state, receiver=states[0], most=64):
            pass
    transfers.out(giver=states[0], receiver=states[1], most=3)  # a move left half-done
    reservations_sweep("voucher")
    assert all(not reservations_client().client.hlen(GroupKeys.of(state).outbox) for state in states)
    assert all(one.left >= 1 for one in transfers.units(states))
    assert not item_reservations_check(VOUCHER, item=voucher).drifted


def test_a_take_that_would_borrow_from_a_missing_state_answers_unavailable_not_sold_out(make_voucher, make_user):
    from core.errors import Unavailable

    voucher = make_voucher(stock=1, strategy="redis_lua", buckets=BUCKETS)
    states = item_states(voucher.group_id, BUCKETS)
    (row,) = Stock.objects.filter(group_id=voucher.group_id, quantity=1).values_list("bucket", flat=True)
    buyer = next(u for u in iter(make_user, None) if home_bucket(u.pk, BUCKETS) != row)
    reservations_client().client.delete(GroupKeys.of(states[row]).state)  # the state with the unit lost
    with pytest.raises(Unavailable):
        order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk))
    item_reservations_reconcile(VOUCHER, item=voucher)  # rebuilt: the unit is back
    assert order_purchase(user=buyer, voucher=voucher_get(voucher_id=voucher.pk)).public_id


def test_a_transfer_stalled_across_a_rebuild_is_refused_and_doubles_no_unit(make_voucher, make_user):
    """A mover (a borrowing take, the rebalancer) made its TRANSFER_OUT, then stalled while a
    lost state had every state rebuilt from the database, which counts the moved units in the
    giver again. Resumed, its TRANSFER_IN is refused by the epoch, its cancel finds no entry
    (the rebuild dropped the outboxes), the sweep's recovery has nothing to finish, and the
    voucher sells its stock exactly."""
    from inventory.tasks import reservations_sweep

    voucher = make_voucher(stock=16, strategy="redis_lua", buckets=BUCKETS)
    states = item_states(voucher.group_id, BUCKETS)
    sold = [order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk)) for _ in range(3)]
    giver = max(states, key=lambda state: sum((reservations_client().stock(group_id=state) or {}).values()))
    receiver = next(state for state in states if state != giver)
    transfers = transfers_client(reservations_client())
    tid, said = transfers.out(giver=giver, receiver=receiver, most=2)
    _, epoch, at_ms, moved, rows = said.split(" ")
    assert int(moved) >= 1

    reservations_client().client.delete(GroupKeys.of(states[-1]).state)  # a state lost
    assert item_reservations_reconcile(VOUCHER, item=voucher).rebuilt  # the 3 persisted first
    assert Order.objects.filter(voucher=voucher).count() == len(sold)
    assert units_in_redis(voucher) == database_units(voucher)

    assert transfers.into(receiver=receiver, tid=tid, epoch=epoch, at_ms=int(at_ms), rows=rows) == "epoch"
    assert transfers.finish(giver=giver, tid=tid, receiver=receiver, epoch=epoch, at_ms=int(at_ms), rows=rows) == 0
    assert transfers.recover(states) == 0
    reservations_sweep("voucher")
    assert units_in_redis(voucher) == database_units(voucher)  # nothing doubled, nothing lost
    assert not item_reservations_check(VOUCHER, item=voucher).drifted

    for _ in range(16 - len(sold)):
        order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk))
    with pytest.raises(SoldOut):
        order_purchase(user=make_user(), voucher=voucher_get(voucher_id=voucher.pk))
    persist_voucher(voucher)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and (audit.orders, audit.stock, audit.oversold) == (16, 0, 0), audit


@pytest.mark.race
def test_the_beats_totals_first_check_takes_no_move_in_flight_for_drift(make_voucher, make_user):
    """Every unit starts in bucket 0's state: 24 buyers in 4 processes borrow units home, and
    two movers carry units out of that state and back, all without the group's lock, while
    two processes run the beat's check (totals first) over and over. No run repairs anything
    (a move seen half-done by one read of the states is not seen by the next), and the stock
    sells exactly."""
    voucher = make_voucher(stock=40, strategy="db_atomic", buckets=BUCKETS)
    Stock.objects.filter(group_id=voucher.group_id, bucket__gt=0).update(quantity=0, initial_quantity=0)
    Stock.objects.filter(group_id=voucher.group_id, bucket=0).update(quantity=40, initial_quantity=40)
    voucher = voucher_update(voucher=voucher_get(voucher_id=voucher.pk), strategy="redis_lua")
    item_reservations_reconcile(VOUCHER, item=voucher)  # a comparison per user: the totals may stand in
    users = [make_user().pk for _ in range(24)]
    plan = [[("buy", user) for user in users[n::4]] for n in range(4)]
    plan[0].append(("check", 30))
    plan[2].append(("check", 30))
    plan[1].append(("move", 150))
    plan[3].append(("move", 150))

    def act(slot):
        action, value = slot
        if action == "check":
            checks = [item_reservations_reconcile(VOUCHER, item=voucher, totals_first=True) for _ in range(value)]
            return ("checks", [(one.per_user, one.drifted, one.repaired) for one in checks])
        if action == "move":  # as the rebalancer moves: a unit out of bucket 0's state, and back
            states = item_states(voucher.group_id, BUCKETS)
            transfers = transfers_client(reservations_client())
            moved = 0
            for n in range(value):
                other = states[1 + n % (BUCKETS - 1)]
                moved += transfers.move(giver=states[0], receiver=other, most=1)
                moved += transfers.move(giver=other, receiver=states[0], most=1)
            return ("moved", moved)
        return order_purchase(user=get_user_model()(pk=value), voucher=voucher_get(voucher_id=voucher.pk)).public_id

    outcome = act_concurrently(act=act, plan=plan, race_ms=5)

    assert not outcome.unexpected, outcome.unexpected
    said = [answer for answer in outcome.confirmed if isinstance(answer, tuple)]
    checks = [one for kind, answer in said if kind == "checks" for one in answer]
    assert len(checks) == 60
    assert not [one for one in checks if one[1] or one[2]], checks
    assert sum(answer for kind, answer in said if kind == "moved") > 100
    assert len(outcome.confirmed) - len(said) == 24
    persist_voucher(voucher)
    audit = voucher_audit(voucher_id=voucher.pk)
    assert audit.ok and (audit.orders, audit.stock, audit.oversold) == (24, 16, 0), audit
    assert units_in_redis(voucher) == database_units(voucher)
    assert not item_reservations_check(VOUCHER, item=voucher).drifted
