"""The reads beside the take (loadtests.watch_calls) against the site itself: an open tab's
polls of the pages and the honest buyer's look at the stock, served, write no outcome; any
other answer is an ``error`` outcome, which the verdict counts, where a tab's 500 once stayed
in Locust's report and a stock read answered anything passed as a success."""

from __future__ import annotations

import pytest

from accounts.services import token_issue
from loadtests import common
from loadtests.watch_calls import page_watched, stock_read

from .conftest import FakeResponse, ServedUser

pytestmark = pytest.mark.django_db


def test_a_tabs_pages_served_write_no_outcome(outcomes_dir, make_voucher):
    voucher = make_voucher(stock=5)
    user = ServedUser()
    assert page_watched(user, f"/vouchers/{voucher.pk}/live", "/vouchers/[id]/live")
    assert page_watched(user, "/vouchers/stock", "/vouchers/stock")
    assert [answer.marked for answer in user.answers] == ["success"] * 2
    assert common.read_outcomes(outcomes_dir) == []


def test_a_tabs_page_not_served_is_an_error_outcome(outcomes_dir, make_voucher):
    voucher = make_voucher(stock=5)
    user = ServedUser()
    assert not page_watched(user, f"/vouchers/{voucher.pk + 1000}/live", "/vouchers/[id]/live")
    assert (user.answers[0].status_code, user.answers[0].marked) == (404, "failure")
    assert common.read_outcomes(outcomes_dir) == [["error"]]


def test_the_stock_read_says_the_stock_and_a_read_refused_is_an_error(outcomes_dir, make_voucher, make_buyer):
    voucher = make_voucher(stock=5)
    token = token_issue(user=make_buyer())
    assert stock_read(ServedUser(), voucher.pk, token) == 5
    assert common.read_outcomes(outcomes_dir) == []
    assert stock_read(ServedUser(), voucher.pk + 1000, token) is None
    assert common.read_outcomes(outcomes_dir) == [["error"]]


class Answering:
    """A Locust user whose one request gets ``answer``: the answers no test server gives at will."""

    def __init__(self, answer: FakeResponse) -> None:
        self.client = self
        self.answer = answer

    def get(self, url: str, **_) -> FakeResponse:
        return self.answer


@pytest.mark.parametrize("allowed", [True, False])
def test_the_outage_page_is_documented_under_the_fault_runner_alone(outcomes_dir, monkeypatch, allowed):
    if allowed:
        monkeypatch.setenv("LOADTEST_UNAVAILABLE_OK", "1")
    page = FakeResponse(503, ValueError("an HTML page"), {"Retry-After": "5"})
    assert not page_watched(Answering(page), "/vouchers/stock", "/vouchers/stock")
    read = FakeResponse(503, {"code": "unavailable", "message": "..."}, {"Retry-After": "5"})
    assert stock_read(Answering(read), 3, "t0k3n") is None
    assert (page.marked, read.marked) == (("success",) * 2 if allowed else ("failure",) * 2)
    assert common.read_outcomes(outcomes_dir) == ([] if allowed else [["error"], ["error"]])
