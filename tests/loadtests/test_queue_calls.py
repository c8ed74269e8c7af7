"""A buyer through the waiting room (loadtests.queue_calls) against the API itself: admitted,
the ticket is handed on and nothing is an outcome; a join answered 429 or 404, with its JSON
body, is an ``error`` outcome beside the passage's ``error``, which the verdict counts, where
the buyer once left with a Locust failure alone; an admission whose ticket names no serial is
an error too, not an exception; and a 503 the fault runner allows is asked again."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts.services import token_issue
from loadtests import common, queue_calls
from loadtests.admissions import passages_read

from .conftest import FakeResponse, ServedUser


@pytest.fixture
def passages(outcomes_dir, monkeypatch):
    """The outcomes' folder, with the passages of this test's buyers logged beside them."""
    monkeypatch.setattr(queue_calls, "admissions", queue_calls.AdmissionLog())
    return outcomes_dir


@pytest.fixture
def queued(make_voucher, make_buyer):
    """A voucher behind a waiting room that admits at once, and a buyer's token."""
    voucher = make_voucher(stock=3, admission="queue", admission_rate=1000.0)
    return voucher.pk, token_issue(user=make_buyer())


def against_the_api(test):
    """A test against the API itself: the test database, and no room or rate counter left by
    an earlier test (the test database hands out the same ids again)."""
    return pytest.mark.django_db(transaction=True)(pytest.mark.usefixtures("rooms", "idempotency_keys")(test))


@against_the_api
def test_an_admitted_buyer_hands_the_ticket_on_and_nothing_is_an_outcome(passages, queued):
    voucher, token = queued
    user = ServedUser()
    ticket = queue_calls.queue_through(user, voucher, token)
    assert ticket and all(answer.marked == "success" for answer in user.answers)
    assert common.read_outcomes(passages) == []
    (passage,) = passages_read(passages)
    assert (passage.status, passage.serial) == ("admitted", queue_calls.ticket_serial(ticket))


@against_the_api
def test_a_join_answered_429_is_an_error_outcome(passages, queued, settings):
    voucher, token = queued
    settings.RATE_LIMITS_ENABLED = True
    settings.RATE_LIMITS = {"queue": {"user": (1, 60)}}
    # The buyer's one join a minute, spent (admitted by it: a room nobody waits in).
    joined = Client(headers={"Authorization": f"Bearer {token}"}).post(f"/api/vouchers/{voucher}/queue")
    assert joined.json()["status"] == "admitted"
    user = ServedUser()
    assert queue_calls.queue_through(user, voucher, token) is None
    assert (user.answers[0].status_code, user.answers[0].body["code"]) == (429, "rate_limited")
    assert user.answers[0].marked == "failure"
    assert common.read_outcomes(passages) == [["error"]]
    assert [p.status for p in passages_read(passages)] == ["error"]


@against_the_api
def test_a_join_of_a_voucher_not_there_is_an_error_outcome(passages, queued):
    voucher, token = queued
    user = ServedUser()
    assert queue_calls.queue_through(user, voucher + 1000, token) is None
    assert user.answers[0].status_code == 404
    assert common.read_outcomes(passages) == [["error"]]


class Queue:
    """A Locust user whose joins and polls get ``answers`` in turn, and which keeps what was
    asked: the answers no test server gives at will."""

    def __init__(self, *answers: FakeResponse) -> None:
        self.client = self
        self.answers = list(answers)
        self.asked: list[str] = []

    def request(self, method: str, url: str, **_) -> FakeResponse:
        self.asked.append(method)
        return self.answers.pop(0)


STANDING = {"position": None, "ahead": None, "eta_seconds": None, "ticket_expires_at": None}


def test_an_admission_whose_ticket_names_no_serial_is_an_error_not_an_exception(passages):
    for ticket in ("voucher.3.17", "voucher.3.17.x.1796031234567.9c0f"):
        answer = FakeResponse(200, {**STANDING, "status": "admitted", "ticket": ticket, "poll_after_seconds": None})
        assert queue_calls.queue_through(Queue(answer), 3, "t0k3n") is None
        assert answer.marked == "failure"
    assert common.read_outcomes(passages) == [["error"], ["error"]]


def test_under_the_fault_runner_a_503_is_asked_again_and_a_join_joined_again(passages, monkeypatch):
    monkeypatch.setenv("LOADTEST_UNAVAILABLE_OK", "1")
    down = {"code": "unavailable", "message": "Redis does not answer"}
    waiting = {**STANDING, "status": "waiting", "position": 1, "ahead": 0, "ticket": None, "poll_after_seconds": 0.01}
    admitted = {**STANDING, "status": "admitted", "ticket": "voucher.3.17.42.1796031234567.9c0f"}
    user = Queue(
        FakeResponse(503, down, {"Retry-After": "0.01"}),
        FakeResponse(200, waiting),
        FakeResponse(503, down, {"Retry-After": "0.01"}),
        FakeResponse(200, admitted | {"poll_after_seconds": None}),
    )
    assert queue_calls.queue_through(user, 3, "t0k3n") == admitted["ticket"]
    assert user.asked == ["POST", "POST", "GET", "GET"]
    assert common.read_outcomes(passages) == []
    assert [(p.status, p.serial) for p in passages_read(passages)] == [("admitted", 42)]


def test_without_it_a_503_is_an_error(passages):
    answer = FakeResponse(503, {"code": "unavailable", "message": "..."}, {"Retry-After": "1"})
    assert queue_calls.queue_through(Queue(answer), 3, "t0k3n") is None
    assert common.read_outcomes(passages) == [["error"]]
