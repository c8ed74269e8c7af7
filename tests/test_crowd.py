"""The load crowd (``accounts.crowd``): only its members take from a load run's unlisted items,
and telling a member from an outsider makes no query per take."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts import crowd
from accounts.crowd import OUTSIDER_SECONDS, crowd_join, crowd_member
from accounts.services import users_retire, users_with_tokens_create
from core import memo
from orders.services import voucher_create
from tests.clocks import Clock

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock(monkeypatch):
    clock = Clock(100.0)
    monkeypatch.setattr(memo.time, "monotonic", clock)
    return clock


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


@pytest.mark.django_db(transaction=True)
def test_a_crowds_takes_of_an_unlisted_item_read_nothing_of_the_database(
    reservations_redis, django_assert_num_queries, clock, settings
):
    # The voucher is kept a second (by the clock held still here), the revocations an hour:
    # what is left to read is the crowd.
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 3600
    now = timezone.now()
    voucher = voucher_create(
        title="a run's own", stock=100, strategy="redis_lua", listed=False,
        begin_at=now - timedelta(minutes=1), end_at=now + timedelta(hours=1),
    )  # fmt: skip
    path = f"/api/vouchers/{voucher.pk}/purchase"
    first, *rest = users_with_tokens_create(count=4, prefix="crowd-a")
    assert bearer(first[1]).post(path).status_code == 202  # reads the voucher, the revocations, the crowd
    for _, raw in rest:
        with django_assert_num_queries(0):
            assert bearer(raw).post(path).status_code == 202
    # A crowd made since: its first member brings the rest in one query.
    first, *rest = users_with_tokens_create(count=4, prefix="crowd-b")
    with django_assert_num_queries(1):
        assert bearer(first[1]).post(path).status_code == 202
    for _, raw in rest:
        with django_assert_num_queries(0):
            assert bearer(raw).post(path).status_code == 202


def test_an_outsider_is_asked_once_a_second(make_user, clock, django_assert_num_queries):
    outsider = make_user()
    with django_assert_num_queries(1):
        assert not crowd_member(user_id=outsider.pk)
    clock.now += OUTSIDER_SECONDS
    with django_assert_num_queries(0):
        assert not crowd_member(user_id=outsider.pk)
    clock.now += 0.01
    with django_assert_num_queries(1):
        assert not crowd_member(user_id=outsider.pk)


def test_an_outsider_who_joins_is_a_member_at_once_in_the_joining_process(make_user, clock):
    user = make_user()
    assert not crowd_member(user_id=user.pk)
    crowd_join(user_ids=[user.pk])
    assert crowd_member(user_id=user.pk)


def test_an_outsider_who_joins_elsewhere_is_a_member_within_a_second(make_user, clock):
    user = make_user()
    assert not crowd_member(user_id=user.pk)
    crowd_join(user_ids=[user.pk])
    crowd._members.outsiders.put(user.pk, True)  # as another process, which did not join it, keeps it
    assert not crowd_member(user_id=user.pk)
    clock.now += OUTSIDER_SECONDS + 0.01
    assert crowd_member(user_id=user.pk)


def test_a_member_added_below_the_highest_id_read_is_still_found(make_user, clock):
    early, late = make_user(), make_user()
    crowd_join(user_ids=[late.pk])
    assert crowd_member(user_id=late.pk)
    crowd_join(user_ids=[early.pk])  # below the highest member id this process read
    assert crowd_member(user_id=early.pk)


def test_retired_members_are_out_of_the_crowd_in_the_retiring_process(clock):
    users_with_tokens_create(count=2, prefix="lab998")
    members = list(get_user_model().objects.filter(username__startswith="lab998-").values_list("pk", flat=True))
    assert all(crowd_member(user_id=pk) for pk in members)
    users_retire(username_prefix="lab998-")
    assert not any(crowd_member(user_id=pk) for pk in members)


def test_members_who_left_in_another_process_are_forgotten_within_a_minute(clock, django_assert_num_queries):
    """A process's set of members only grew: every member of every run the site ever had,
    however long retired elsewhere."""
    users_with_tokens_create(count=2, prefix="lab997")
    members = list(get_user_model().objects.filter(username__startswith="lab997-").values_list("pk", flat=True))
    assert all(crowd_member(user_id=pk) for pk in members)
    # Retired by another process: this one's set is its own.
    get_user_model().groups.through.objects.filter(user_id__in=members).delete()
    clock.now += crowd.MEMBERS_SECONDS - 0.01
    with django_assert_num_queries(0):
        assert crowd_member(user_id=members[0])  # within the minute: no token left to use it
    clock.now += 0.01
    with django_assert_num_queries(1):  # the whole crowd again, once
        assert not crowd_member(user_id=members[0])
    assert not set(members) & crowd._members.ids
