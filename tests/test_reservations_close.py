"""An ended sale's ``redis_lua`` keys leave Redis ``RESERVATIONS_CLOSE_AFTER_END_SECONDS``
after its end: its waiting reservations written first, then every key of every state gone
(its stream, counter and failed reservations too), so that Redis holds what the live sales
need, not the site's history. A take after that hears ``ended`` and asks for no rebuild;
the reconciliation and the audit expect no state of it."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.window import Ended
from inventory.errors import StateMissing
from inventory.items import items_closing
from inventory.models import StockGroup
from inventory.redis_lua.bucket_states import states_present
from inventory.redis_lua.client import reservations_client
from inventory.redis_lua.item_states import item_reservations_close
from inventory.redis_lua.values import GroupKeys
from inventory.tasks import reservations_close
from lottery.models import Pool
from lottery.selectors import pool_get
from lottery.services import pool_draw
from orders.models import Order, Voucher
from orders.product import VOUCHER
from orders.selectors import voucher_get
from orders.services import order_purchase, voucher_update
from tests.plans import analyze, assert_no_full_scan

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("reservations_redis")]

CLOSE_AFTER = 7200


@pytest.fixture(autouse=True)
def close_after(settings):
    settings.RESERVATIONS_SWEEP_AFTER_END_SECONDS = 3600
    settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS = CLOSE_AFTER


def ended(voucher: Voucher, ago: timedelta) -> Voucher:
    Voucher.objects.filter(pk=voucher.pk).update(
        begin_at=timezone.now() - ago - timedelta(days=1), end_at=timezone.now() - ago
    )
    return voucher_get(voucher_id=voucher.pk)


def keys_left(voucher: Voucher) -> int:
    return reservations_client().client.exists(*GroupKeys.of(voucher.group_id).all())


def bought(voucher: Voucher, users) -> list[Order]:
    """Purchases left waiting in the stream (no worker writes them in these tests)."""
    return [order_purchase(user=user, voucher=voucher_get(voucher_id=voucher.pk)) for user in users]


def test_a_sale_closed_long_ago_has_its_waiting_reservations_written_then_every_key_removed(make_voucher, make_user):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    bought(voucher, [make_user(), make_user()])
    assert reservations_client().waiting(group_id=voucher.group_id) == 2
    live = make_voucher(stock=3, strategy="redis_lua")
    recent = make_voucher(stock=3, strategy="redis_lua")
    ended(recent, timedelta(seconds=CLOSE_AFTER - 600))  # ended, not yet long enough
    ended(voucher, timedelta(seconds=CLOSE_AFTER + 600))
    assert keys_left(voucher) == 2  # its state and its stream

    assert reservations_close("voucher") == 1

    assert Order.objects.filter(voucher=voucher).count() == 2  # written before the keys went
    assert keys_left(voucher) == 0
    assert keys_left(live) and keys_left(recent)
    assert reservations_close("voucher") == 0  # nothing left to close


def test_every_state_of_a_bucketed_sale_is_closed(make_voucher, make_user):
    voucher = make_voucher(stock=8, strategy="redis_lua", buckets=4)
    bought(voucher, [make_user() for _ in range(6)])
    reservations = reservations_client()
    assert len(states_present(reservations, voucher.group_id, every_key=True)) == 3
    ended(voucher, timedelta(seconds=CLOSE_AFTER + 600))

    assert reservations_close("voucher") == 1

    assert Order.objects.filter(voucher=voucher).count() == 6
    assert states_present(reservations, voucher.group_id, every_key=True) == []
    assert keys_left(voucher) == 0


def test_a_take_of_a_closed_sale_hears_ended_and_no_state_is_built_again(make_voucher, make_user):
    voucher = ended(make_voucher(stock=3, strategy="redis_lua"), timedelta(seconds=CLOSE_AFTER + 600))
    reservations_close("voucher")
    with pytest.raises(Ended):
        bought(voucher, [make_user()])
    assert keys_left(voucher) == 0  # not even the claim of a rebuild

    out = io.StringIO()
    call_command("reconcile", "--repair", stdout=out)  # exits 1 on an item it finds missing
    assert "0 with a Redis state" in out.getvalue()
    assert keys_left(voucher) == 0
    call_command("audit", "--voucher", str(voucher.pk), stdout=io.StringIO())  # exits 1 when broken


def test_a_prize_pool_closed_long_after_its_end_hears_ended(make_pool, make_user):
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 3),))
    pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk))
    ago = timedelta(seconds=CLOSE_AFTER + 600)
    Pool.objects.filter(pk=pool.pk).update(
        begin_at=timezone.now() - ago - timedelta(days=1), end_at=timezone.now() - ago
    )

    assert reservations_close("pool") == 1
    with pytest.raises(Ended):
        pool_draw(user=make_user(), pool=pool_get(pool_id=pool.pk))
    assert not reservations_client().client.exists(*GroupKeys.of(pool.group_id).all())


def test_a_draw_that_finds_no_state_on_sale_reads_no_prize_row_before_it_is_told_so(make_pool, make_user):
    """The window is checked from the pool as it was read: a crowd meeting a state being
    rebuilt does not read the prizes' rows the rebuild reads."""
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 3), ("Silver", 5)))
    reservations_client().drop(group_id=pool.group_id)
    live, user = pool_get(pool_id=pool.pk), make_user()
    with CaptureQueriesContext(connection) as queries, pytest.raises(StateMissing):
        pool_draw(user=user, pool=live)
    prize_rows = [query["sql"] for query in queries.captured_queries if "FROM `inventory_stock`" in query["sql"]]
    assert not prize_rows


def test_the_beat_leaves_a_sale_ended_before_its_day_to_the_command_which_closes_every_one(make_voucher, make_user):
    old = make_voucher(stock=3, strategy="redis_lua")
    bought(old, [make_user()])
    ended(old, timedelta(seconds=CLOSE_AFTER, days=3))
    assert reservations_close("voucher") == 0
    assert keys_left(old)

    out = io.StringIO()
    call_command("reservations_close", stdout=out)

    assert "vouchers: 1 ended before the cutoff, 1 closed now." in out.getvalue()
    assert keys_left(old) == 0
    assert Order.objects.filter(voucher=old).count() == 1


def test_a_close_is_put_off_while_a_reservation_still_waits_to_be_written(make_voucher, make_user, settings):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    bought(voucher, [make_user()])
    voucher = ended(voucher, timedelta(seconds=CLOSE_AFTER + 600))
    # With a replica to wait for and none there, every batch is handed back unwritten.
    settings.RESERVATIONS_WAIT_REPLICAS, settings.RESERVATIONS_WAIT_MS = 1, 20

    assert not item_reservations_close(VOUCHER, item=voucher)

    assert reservations_client().waiting(group_id=voucher.group_id) == 1
    assert not Order.objects.filter(voucher=voucher).exists()
    settings.RESERVATIONS_WAIT_REPLICAS = 0
    assert reservations_close("voucher") == 1  # written, then closed
    assert Order.objects.filter(voucher=voucher).count() == 1 and keys_left(voucher) == 0


def test_a_sale_whose_end_staff_moved_on_after_it_was_read_is_not_closed(make_voucher, make_user):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    read = ended(voucher, timedelta(seconds=CLOSE_AFTER + 600))
    Voucher.objects.filter(pk=voucher.pk).update(end_at=timezone.now() + timedelta(hours=1))

    assert not item_reservations_close(VOUCHER, item=read)
    assert keys_left(voucher)
    bought(voucher, [make_user()])  # on sale again, from its state


def test_a_sale_that_left_redis_lua_has_the_keys_it_kept_closed(make_voucher, make_user):
    voucher = make_voucher(stock=3, strategy="redis_lua")
    bought(voucher, [make_user()])
    voucher = voucher_update(voucher=voucher_get(voucher_id=voucher.pk), strategy="db_atomic")
    assert keys_left(voucher)  # its counter, its empty stream
    ended(voucher, timedelta(seconds=CLOSE_AFTER + 600))

    assert reservations_close("voucher") == 1
    assert keys_left(voucher) == 0


@pytest.mark.skipif(connection.vendor != "mysql", reason="reads MariaDB's EXPLAIN")
def test_the_beat_finds_the_sales_to_close_in_a_range_of_an_index_however_many_sales_ended(settings):
    """A site of 5,000 ended redis_lua sales, one a day or so back two years: the beat's
    query reads the day before the cutoff, not the sales of every day there ever was."""
    settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS = 7 * 24 * 3600
    now = timezone.now()
    groups = StockGroup.objects.bulk_create(StockGroup() for _ in range(5000))
    Voucher.objects.bulk_create(
        Voucher(
            title=f"Sale {at}",
            group=group,
            strategy="redis_lua",
            begin_at=now - timedelta(hours=at * 3.5 + 1),
            end_at=now - timedelta(hours=at * 3.5),
        )
        for at, group in enumerate(groups)
    )
    analyze("orders_voucher")
    assert items_closing(VOUCHER).count() == 7
    assert_no_full_scan(items_closing(VOUCHER), tables=["orders_voucher"], max_rows=50)


def test_the_close_refuses_to_start_removing_keys_before_the_sweep_is_done_or_less_often_than_its_range(settings):
    from inventory.checks import strategy_settings_check

    assert strategy_settings_check(None) == []
    settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS = 1800  # the sweep still reads the sale for an hour
    assert [error.id for error in strategy_settings_check(None)] == ["inventory.E003"]
    settings.RESERVATIONS_CLOSE_AFTER_END_SECONDS = CLOSE_AFTER
    settings.RESERVATIONS_CLOSE_EVERY_SECONDS = 24 * 3600  # some ended sales would fall between two runs
    assert [error.id for error in strategy_settings_check(None)] == ["inventory.E004"]
