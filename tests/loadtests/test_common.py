"""The locustfiles' calls on their own: every documented answer accepted and logged for the
audit, anything else a failure (a fake Locust client, no server)."""

from __future__ import annotations

import pytest

from loadtests import common

from .conftest import FakeResponse


class FakeUser:
    def __init__(self, response: FakeResponse) -> None:
        self.client = self
        self.response = response
        self.calls: list[tuple[str, str]] = []

    def post(self, url: str, *, headers: dict, name: str, catch_response: bool) -> FakeResponse:
        assert headers == {"Authorization": "Bearer t0k3n"} and catch_response
        self.calls.append((url, name))
        return self.response


@pytest.mark.parametrize(
    ("status", "body", "outcome", "logged"),
    [
        (
            201,
            {"draw_id": 7, "prize": {"id": 3, "name": "A mug"}, "draws_left": 2, "status": "confirmed"},
            "won",
            "won 7 3",
        ),
        (201, {"draw_id": 8, "prize": None, "draws_left": 0, "status": "confirmed"}, "no_prize", "no_prize 8"),
        # A pool with a claim window: the prize held until claim_by, taken all the same.
        (
            201,
            {"draw_id": 9, "prize": {"id": 3, "name": "A mug"}, "draws_left": 1, "status": "held"},
            "won",
            "won 9 3",
        ),
        # redis_lua: accepted, written later by a worker, under the reservation's id.
        (
            202,
            {"draw_id": 2**62 + 9, "prize": None, "draws_left": 1, "status": "pending"},
            "no_prize",
            f"no_prize {2**62 + 9} pending",
        ),
        (
            202,
            {"draw_id": 2**62 + 10, "prize": {"id": 3, "name": "A mug"}, "draws_left": 0, "status": "pending"},
            "won",
            f"won {2**62 + 10} 3 pending",
        ),
        (409, {"code": "draw_limit", "message": "..."}, "draw_limit", "draw_limit"),
        (409, {"code": "pool_empty", "message": "..."}, "pool_empty", "pool_empty"),
        (409, {"code": "busy", "message": "..."}, "busy", "busy"),
        (403, {"code": "not_started", "message": "..."}, "not_started", "not_started"),
        (403, {"code": "ended", "message": "..."}, "ended", "ended"),
    ],
)
def test_every_documented_answer_to_a_draw_is_accepted_and_logged(outcomes_dir, status, body, outcome, logged):
    user = FakeUser(FakeResponse(status, body))
    assert common.draw(user, 5, "t0k3n") == outcome
    assert user.response.marked == "success"
    assert user.calls == [("/api/pools/5/draw", "/api/pools/[id]/draw")]
    assert common.read_outcomes(outcomes_dir) == [logged.split()]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (409, {"code": "sold_out"}),  # a purchase's refusal, not a draw's
        (403, {"code": "draw_limit"}),  # a documented code with the wrong status
        (500, {"code": "server_error"}),
        (201, {"prize": None, "draws_left": 1, "status": "confirmed"}),  # no draw id
        (201, {"draw_id": 7, "prize": {"id": "3", "name": "A mug"}, "draws_left": 1, "status": "confirmed"}),
        (201, {"draw_id": 7, "prize": {"id": 3}, "draws_left": 1, "status": "confirmed"}),
        (201, {"draw_id": 7, "prize": None, "draws_left": -1, "status": "confirmed"}),
        (201, {"draw_id": 7, "prize": None, "status": "confirmed"}),
        (201, {"draw_id": 7, "prize": None, "draws_left": 1}),  # no status
        (201, {"draw_id": 7, "prize": None, "draws_left": 1, "status": "pending"}),  # written, yet pending?
        (202, {"draw_id": 7, "prize": None, "draws_left": 1, "status": "confirmed"}),  # accepted, yet written?
        (503, {"code": "unavailable"}),  # the state went missing under load
        (201, ["not", "an", "object"]),
        (502, ValueError("not JSON")),
    ],
)
def test_any_other_answer_to_a_draw_fails(outcomes_dir, status, body):
    user = FakeUser(FakeResponse(status, body))
    assert common.draw(user, 5, "t0k3n") == "error"
    assert user.response.marked == "failure"
    assert common.read_outcomes(outcomes_dir) == [["error"]]


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (201, {"order_id": 41, "status": "confirmed"}, "confirmed 41"),
        (201, {"order_id": 42, "status": "held", "pay_by": "2030-01-01T00:00:00Z"}, "confirmed 42"),
        (202, {"order_id": 43, "status": "held"}, "error"),  # held, yet not written?
        (202, {"order_id": 2**62 + 41, "status": "pending"}, f"confirmed {2**62 + 41} pending"),
        (409, {"code": "sold_out"}, "sold_out"),
        (409, {"code": "already_purchased"}, "already_purchased"),
        (409, {"code": "draw_limit"}, "error"),
        (201, {"status": "confirmed"}, "error"),
        (202, {"order_id": 41, "status": "confirmed"}, "error"),
        (201, {"order_id": 41}, "error"),
        (503, {"code": "unavailable"}, "error"),
    ],
)
def test_a_purchase_is_validated_the_same_way(outcomes_dir, status, body, outcome):
    user = FakeUser(FakeResponse(status, body))
    assert common.purchase(user, 2, "t0k3n") == outcome.split()[0]
    assert user.response.marked == ("failure" if outcome == "error" else "success")
    logged = common.read_outcomes(outcomes_dir)
    assert logged == [outcome.split()]
    assert common.accepted(logged[0]) == (status == 202 and outcome != "error")


def test_the_dealer_marks_when_the_crowd_has_run_out(outcomes_dir, tmp_path, monkeypatch):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("u1 a\nu2 b\n")
    monkeypatch.setenv("LOADTEST_TOKENS", str(tokens))

    class Environment:
        runner = None

    dealer = common.TokenDealer()
    assert [dealer.deal(Environment()) for _ in range(2)] == ["a", "b"]
    assert not common.crowd_exhausted(outcomes_dir)
    assert dealer.deal(Environment()) is None
    assert common.crowd_exhausted(outcomes_dir)


def test_a_hammers_users_share_the_first_tokens_in_blocks(tmp_path, monkeypatch):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("u1 a\nu2 b\nu3 c\nu4 d\n")
    monkeypatch.setenv("LOADTEST_TOKENS", str(tokens))
    monkeypatch.setenv("LOADTEST_BUYERS", "3")

    class Runner:
        target_user_count = 7

    class Environment:
        runner = Runner()

    assert [common.hammer_token(Environment(), seat) for seat in range(7)] == list("aaabbbc")


def test_a_take_hands_its_answer_on_and_a_refusal_none(outcomes_dir):
    held = {"order_id": 42, "status": "held", "pay_by": "2030-01-01T00:00:00Z"}
    assert common.purchase_answer(FakeUser(FakeResponse(201, held)), 2, "t0k3n") == ("confirmed", held)
    assert common.purchase_answer(FakeUser(FakeResponse(409, {"code": "sold_out"})), 2, "t0k3n") == ("sold_out", None)
    drawn = {"draw_id": 9, "prize": None, "draws_left": 0, "status": "confirmed"}
    assert common.draw_answer(FakeUser(FakeResponse(201, drawn)), 5, "t0k3n") == ("no_prize", drawn)


def test_only_nothing_left_marks_the_moment_and_at_most_every_quarter_second(outcomes_dir):
    common.purchase(FakeUser(FakeResponse(409, {"code": "already_purchased"})), 2, "t0k3n")
    assert common.last_out_of_stock(outcomes_dir) is None
    common.draw(FakeUser(FakeResponse(409, {"code": "pool_empty"})), 5, "t0k3n")
    first = common.last_out_of_stock(outcomes_dir)
    common.draw(FakeUser(FakeResponse(409, {"code": "pool_empty"})), 5, "t0k3n")
    assert first is not None and common.last_out_of_stock(outcomes_dir) == first


@pytest.mark.parametrize(
    ("body", "headers", "outcome", "logged"),
    [
        ({"code": "unavailable", "message": "down"}, {"Retry-After": "2"}, "unavailable", ["unavailable"]),
        (
            {"code": "unconfirmed", "message": "Reserved as 4611686018427387905, but not yet confirmed..."},
            {"Retry-After": "2"},
            "unconfirmed",
            ["unconfirmed", "4611686018427387905"],
        ),
        ({"code": "unconfirmed", "message": "Reserved as 46, ..."}, {}, "error", ["error"]),  # no Retry-After
        ({"code": "unconfirmed", "message": "no reservation named"}, {"Retry-After": "2"}, "error", ["error"]),
    ],
)
def test_under_the_fault_runner_a_503_to_come_back_is_documented_and_unconfirmed_names_its_reservation(
    outcomes_dir, monkeypatch, body, headers, outcome, logged
):
    monkeypatch.setenv("LOADTEST_UNAVAILABLE_OK", "1")
    user = FakeUser(FakeResponse(503, body, headers))
    assert common.purchase(user, 5, "t0k3n") == outcome
    assert user.response.marked == ("failure" if outcome == "error" else "success")
    assert common.read_outcomes(outcomes_dir) == [logged]
