"""The restock scenario's call (loadtests.restock_calls) against the API itself: a restock by
the runner's member of staff lands, is kept in the history and writes no outcome; a documented
refusal writes none either; a restock refused for any other reason (staff without
``orders.change_voucher``, a voucher not there, a 500) is an ``error`` outcome, which fails a
safe strategy's run, where it once went to the history alone and the run held without a
single restock."""

from __future__ import annotations

import json

import pytest

from accounts.services import users_with_tokens_create
from inventory.services import MAX_UNITS
from loadtests import common, restock_calls
from loadtests.history_log import HistoryLog, history_lines
from loadtests.staff import staff_token_create
from tests.stock import stock_supplied

from .conftest import FakeResponse, ServedUser

pytestmark = pytest.mark.django_db


@pytest.fixture
def kept(outcomes_dir, monkeypatch):
    """The outcomes' folder, and a history of this test's own kept beside them."""
    monkeypatch.setattr(restock_calls, "history", HistoryLog())
    return outcomes_dir


def history(folder) -> list[tuple]:
    return [(c["action"], c["status"], c["code"], c["units"]) for c in map(json.loads, history_lines(folder))]


def test_a_restock_by_the_runners_staff_lands_and_writes_no_outcome(kept, make_voucher):
    voucher = make_voucher(stock=5)
    user = ServedUser()
    assert restock_calls.restock(user, voucher.pk, staff_token_create(prefix="restock"), 3) == "restocked"
    assert user.answers[0].marked == "success" and stock_supplied(voucher) == 8
    assert common.read_outcomes(kept) == []
    assert history(kept) == [("restock", 200, "restocked", 3)]


def test_a_restock_by_staff_without_the_permission_is_an_error(kept, make_voucher):
    voucher = make_voucher(stock=5)
    ((_, token),) = users_with_tokens_create(count=1, prefix="staff", staff=True, permissions=())
    user = ServedUser()
    assert restock_calls.restock(user, voucher.pk, token, 3) == "error"
    assert (user.answers[0].status_code, user.answers[0].marked) == (403, "failure")
    assert stock_supplied(voucher) == 5
    # Counted by the verdict, as every undocumented answer is.
    assert common.read_outcomes(kept) == [["error"]]
    assert history(kept) == [("restock", 403, "error", 3)]


def test_a_restock_of_a_voucher_not_there_is_an_error(kept, make_voucher):
    voucher = make_voucher(stock=5)
    user = ServedUser()
    assert restock_calls.restock(user, voucher.pk + 1000, staff_token_create(prefix="restock"), 3) == "error"
    assert user.answers[0].status_code == 404
    assert common.read_outcomes(kept) == [["error"]]


def test_a_restock_past_a_rows_supply_is_refused_as_documented_and_no_error(kept, make_voucher):
    voucher = make_voucher(stock=5)
    user = ServedUser()
    assert restock_calls.restock(user, voucher.pk, staff_token_create(prefix="restock"), MAX_UNITS) == "supply_limit"
    assert (user.answers[0].status_code, user.answers[0].marked) == (409, "success")
    assert common.read_outcomes(kept) == []
    assert history(kept) == [("restock", 409, "supply_limit", MAX_UNITS)]


class Answering:
    """A Locust user whose one request gets ``answer``: the answers no test server gives at will."""

    def __init__(self, answer: FakeResponse) -> None:
        self.client = self
        self.answer = answer

    def patch(self, url: str, **_) -> FakeResponse:
        return self.answer


@pytest.mark.parametrize(
    ("status", "body", "headers", "outcome"),
    [
        (409, {"code": "busy"}, {}, "busy"),  # a redis_lua item's reservations being written
        (503, {"code": "unavailable"}, {"Retry-After": "1"}, "unavailable"),  # under the fault runner
        (503, {"code": "unavailable"}, {}, "error"),  # without Retry-After
        (500, {"code": "server_error"}, {}, "error"),
        (409, {"code": "sold_out"}, {}, "error"),  # a take's refusal
        (200, {"id": 8}, {}, "error"),  # another voucher's answer
        (502, ValueError("not JSON"), {}, "error"),
    ],
)
def test_every_other_answer_is_judged_as_documented_or_an_error(kept, monkeypatch, status, body, headers, outcome):
    monkeypatch.setenv("LOADTEST_UNAVAILABLE_OK", "1")
    answer = FakeResponse(status, body, headers)
    assert restock_calls.restock(Answering(answer), 7, "1.2.3:sig", 5) == outcome
    assert answer.marked == ("failure" if outcome == "error" else "success")
    assert common.read_outcomes(kept) == ([["error"]] if outcome == "error" else [])
