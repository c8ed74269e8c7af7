"""The lifecycle's calls on their own: a pay, a cancel and a claim validated and logged for
the audit, a redis_lua record read back until written, several calls fired at once, and
the moments the crowd was told nothing was left (a fake Locust client, no server)."""

from __future__ import annotations

import time

import pytest

from loadtests import common, holds_calls
from loadtests.lifecycle import settled_answers

from .conftest import FakeResponse


class FakeUser:
    """Answers each request with the next of ``answers``, and keeps what was asked."""

    def __init__(self, *answers: FakeResponse) -> None:
        self.client = self
        self.answers = list(answers)
        self.asked: list[tuple[str, str, str]] = []

    def _next(self, method: str, url: str, headers: dict, name: str) -> FakeResponse:
        assert headers == {"Authorization": "Bearer t0k3n"}
        self.asked.append((method, url, name))
        return self.answers.pop(0)

    def post(self, url: str, *, headers: dict, name: str, catch_response: bool) -> FakeResponse:
        return self._next("POST", url, headers, name)

    def get(self, url: str, *, headers: dict, name: str, catch_response: bool) -> FakeResponse:
        return self._next("GET", url, headers, name)


@pytest.mark.parametrize(
    ("action", "status", "body", "logged"),
    [
        ("pay", 200, {"order_id": 7, "status": "paid", "payment": "paid"}, "pay paid 7"),
        ("pay", 202, {"order_id": 7, "status": "held", "payment": "pending"}, "pay accepted 7"),
        ("pay", 409, {"code": "expired"}, "pay expired 7"),
        ("pay", 409, {"code": "pending"}, "pay pending 7"),
        ("cancel", 200, {"order_id": 7, "status": "cancelled"}, "cancel cancelled 7"),
        ("cancel", 409, {"code": "already_paid"}, "cancel already_paid 7"),
        ("claim", 200, {"draw_id": 7, "status": "claimed"}, "claim claimed 7"),
        ("claim", 409, {"code": "forfeited"}, "claim forfeited 7"),
        ("claim", 409, {"code": "busy"}, "claim busy 7"),
    ],
)
def test_every_documented_answer_is_accepted_and_logged(outcomes_dir, action, status, body, logged):
    user = FakeUser(FakeResponse(status, body))
    assert holds_calls.change(user, action, 7, "t0k3n") == logged.split()[1]
    assert user.answers == [] and user.asked[0][2] in ("/api/orders/[id]/" + action, "/api/draws/[id]/claim")
    assert common.read_outcomes(outcomes_dir) == [logged.split()]


@pytest.mark.parametrize(
    ("action", "status", "body"),
    [
        ("pay", 200, {"order_id": 8, "status": "paid", "payment": "paid"}),  # another order's answer
        ("pay", 200, {"order_id": 7, "status": "held", "payment": "pending"}),  # a 200 that did not pay
        ("cancel", 202, {"order_id": 7, "status": "cancelled"}),  # only a pay is accepted for later
        ("cancel", 409, {"code": "forfeited"}),  # a claim's refusal
        ("claim", 409, {"code": "expired"}),  # a cancel's
        ("claim", 404, {"code": "not_found"}),
        ("pay", 500, {"code": "server_error"}),
    ],
)
def test_any_other_answer_fails(outcomes_dir, action, status, body):
    user = FakeUser(FakeResponse(status, body))
    assert holds_calls.change(user, action, 7, "t0k3n") == "error"
    assert user.asked and common.read_outcomes(outcomes_dir) == [["error"]]


def test_a_call_is_sent_again_while_its_record_is_not_written(outcomes_dir):
    pending = [FakeResponse(409, {"code": "pending"}) for _ in range(2)]
    user = FakeUser(*pending, FakeResponse(200, {"order_id": 7, "status": "cancelled"}))
    assert holds_calls.change_once_written(user, "cancel", 7, "t0k3n") == "cancelled"
    assert [words[1] for words in common.read_outcomes(outcomes_dir)] == ["pending", "pending", "cancelled"]


def test_the_deadline_of_a_held_record_and_none_for_a_settled_one(outcomes_dir):
    user = FakeUser()
    held = {"order_id": 7, "status": "held", "pay_by": "2030-01-01T00:00:02.500Z"}
    assert holds_calls.deadline(user, "pay", held, "t0k3n") == 1893456002.5
    assert holds_calls.deadline(user, "pay", {"order_id": 7, "status": "confirmed", "pay_by": None}, "t0k3n") is None
    assert user.asked == []


def test_a_redis_lua_record_is_read_back_until_written(outcomes_dir):
    user = FakeUser(
        FakeResponse(200, {"id": 2**62, "status": "pending", "claim_by": None}),
        FakeResponse(200, {"id": 2**62, "status": "held", "claim_by": "2030-01-01T00:00:00+00:00"}),
    )
    accepted = {"draw_id": 2**62, "status": "pending", "claim_by": None}
    assert holds_calls.deadline(user, "claim", accepted, "t0k3n") == 1893456000.0
    assert [asked[:2] for asked in user.asked] == [("GET", f"/api/draws/{2**62}")] * 2
    failed = FakeUser(FakeResponse(200, {"id": 2**62, "status": "failed", "claim_by": None}))
    assert holds_calls.deadline(failed, "claim", accepted, "t0k3n") is None
    lost = FakeUser(FakeResponse(404, {"code": "not_found"}))
    assert holds_calls.deadline(lost, "claim", accepted, "t0k3n") is None
    assert common.read_outcomes(outcomes_dir) == [["error"]]


def test_a_volley_fires_its_calls_a_stagger_apart_and_keeps_their_order():
    fired: list[float] = []

    def call(outcome: str):
        return lambda: fired.append(time.monotonic()) or outcome

    assert holds_calls.volley([call("paid"), call("cancelled"), call("expired")], 0.02) == [
        "paid",
        "cancelled",
        "expired",
    ]
    assert fired == sorted(fired) and fired[-1] - fired[0] >= 0.03


def test_a_call_of_a_volley_that_raised_is_an_error_outcome(outcomes_dir):
    # A volley's greenlets are not the Locust user's: what they raise reaches no listener.
    def raises() -> str:
        raise KeyError("order_id")

    assert holds_calls.volley([lambda: "paid", raises]) == ["paid", "error"]
    assert common.read_outcomes(outcomes_dir) == [["error"]]


def test_the_audit_reads_the_200s_to_check_and_the_last_out_of_stock(outcomes_dir):
    lines = [["pay", "paid", "7"], ["pay", "expired", "8"], ["claim", "claimed", "9"], ["confirmed", "7"]]
    assert settled_answers(lines) == {7, 9}
    assert common.last_out_of_stock(outcomes_dir) is None
    user = FakeUser(FakeResponse(409, {"code": "sold_out"}))
    before = time.time()
    assert common.purchase(user, 2, "t0k3n") == "sold_out"
    # Written to the millisecond.
    assert before - 0.001 <= common.last_out_of_stock(outcomes_dir) <= time.time() + 0.001
