"""The revocations every process reads (``accounts.tokens``) as they hold up over time: a
transaction that records revocations for long, the purges each login makes, a read that
fails just after one was asked for, and what a process keeps of the users it refuses."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from accounts import tokens
from accounts.models import ActiveChange
from accounts.services import token_issue, token_revoke_raw
from accounts.tokens import Revocations, RevocationsUnknown, token_claims
from accounts.triggers import database_now
from tests.clocks import Clock

pytestmark = pytest.mark.django_db


def elsewhere(act):
    """``act()`` on a connection of its own, as another process reads: it sees only what
    has been committed."""
    answer = []

    def run():
        try:
            answer.append(act())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert answer, "the thread failed"
    return answer[0]


@pytest.mark.django_db(transaction=True)
def test_a_revocation_committed_long_after_its_stamp_reaches_a_process_that_read_meanwhile(
    settings, make_user, monkeypatch
):
    """A transaction that records revocations for longer than the readers' window (the
    tokens' admin deleting thousands, a bulk delete of users) committed the first one's
    stamp behind every process that read meanwhile: its token kept working there."""
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 1
    later = timedelta()
    monkeypatch.setattr(tokens, "revocations_clock", lambda: database_now() + later)
    first, second = make_user(), make_user()
    raws = [token_issue(user=first), token_issue(user=second)]
    claims = [token_claims(raw) for raw in raws]
    clock = Clock(100.0)
    process = Revocations(clock=clock)
    assert not elsewhere(lambda: process.revoked(claims[0]))
    with transaction.atomic():
        token_revoke_raw(user=first, raw=raws[0])
        later = tokens.OVERLAP + timedelta(seconds=30)  # the transaction goes on
        clock.now += 1
        assert not elsewhere(lambda: process.revoked(claims[0]))  # a read meanwhile: nothing committed
        token_revoke_raw(user=second, raw=raws[1])
    clock.now += 1
    assert elsewhere(lambda: [process.revoked(one) for one in claims]) == [True, True]


def test_a_login_deletes_at_most_a_thousand_ended_changes(make_user):
    """Each login purges the changes no process needs under its user's lock: all of them,
    thousands after a bulk deactivation had ended, made that login wait on the deletes."""
    user, other = make_user(), make_user()
    ended = timezone.now() - tokens.CHANGES_KEPT - timedelta(minutes=1)
    ActiveChange.objects.bulk_create(
        [ActiveChange(user=other, changed_at=ended, expires_at=ended) for _ in range(1001)], batch_size=1000
    )
    token_issue(user=user)
    assert ActiveChange.objects.count() == 1
    token_issue(user=user)
    assert not ActiveChange.objects.exists()


def test_a_read_asked_for_soon_that_fails_keeps_trusting_a_fresh_copy(settings, make_user, monkeypatch):
    """A revocation of its own asks the process to read again before its next check: that
    read failing (the database away for a moment) refused every token with 503 at once,
    though the copy had been read a moment before."""
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 1
    settings.API_TOKEN_REVOCATIONS_STALE_SECONDS = 5
    clock = Clock(100.0)
    process = Revocations(clock=clock)
    claims = token_claims(token_issue(user=make_user()))
    assert not process.revoked(claims)
    process.read_soon()

    def away():
        raise OperationalError("the database is away")

    monkeypatch.setattr(tokens, "revocations_clock", away)
    clock.now += 4.9
    assert not process.revoked(claims)  # read 4.9 s ago: still trusted
    clock.now += 0.1
    with pytest.raises(RevocationsUnknown):
        process.revoked(claims)
    monkeypatch.undo()
    assert not process.revoked(claims)


def test_a_process_that_reads_every_second_forgets_an_inactive_user_once_its_tokens_ended(make_user, monkeypatch):
    """A process reading since its last read kept every user it had seen deactivated, for
    good: only a whole read (after half an hour without one) dropped them."""
    later = timedelta()
    monkeypatch.setattr(tokens, "revocations_clock", lambda: database_now() + later)
    clock = Clock(100.0)
    process = Revocations(clock=clock)
    gone, kept = make_user(), make_user()
    token_issue(user=gone, ttl=timedelta(seconds=30))
    claims = token_claims(token_issue(user=kept, ttl=timedelta(hours=1)))
    get_user_model().objects.filter(pk__in=[gone.pk, kept.pk]).update(is_active=False)
    assert process.revoked(claims)
    assert set(process._inactive) == {gone.pk, kept.pk}
    for seconds in (60, 120, 180):  # a read every minute, each since the last
        later, clock.now = timedelta(seconds=seconds), clock.now + 60
        assert process.revoked(claims)
    assert set(process._inactive) == {kept.pk}
