"""The history's checker on hand-made histories (no database, no server): each rule broken
on its own, the margins that keep a clean run clean, and the verdict and the matrix it
feeds."""

from __future__ import annotations

import json

import pytest

from loadtests import common, history_log, holds_calls
from loadtests.columns import columns_of
from loadtests.faults.table import history_set_aside
from loadtests.history import (
    CONTRADICTED,
    LOST,
    SOLD_OUT_WITH_STOCK,
    Call,
    Record,
    check_history,
    counted,
    free_units,
    parse_history,
)
from loadtests.history_log import HistoryLog, token_user
from loadtests.verdict import POOL, VOUCHER, Result, judge

from .conftest import FakeResponse

# A voucher of one unit, bought by user 1 at 10 s; user 2 refused sold_out.
SUPPLY = {0: 1}


def take(user: int, start: float, status: int = 201, code: str = "confirmed", record: int | None = None, **more):
    return Call(start=start, end=start + 0.05, user=user, action="take", kind=VOUCHER, item=7, status=status,
                code=code, record=record, **more)  # fmt: skip


def change(action: str, record: int, status: int, code: str, at: float = 20.0, user: int = 1) -> Call:
    return Call(start=at, end=at + 0.05, user=user, action=action, kind=VOUCHER, item=7, status=status, code=code,
                record=record)  # fmt: skip


def sold_out(user: int, start: float) -> Call:
    return take(user, start, status=409, code="sold_out")


def rules(violations) -> list[str]:
    return [violation.rule for violation in violations]


def test_a_clean_sale_shows_nothing():
    calls = [take(1, 10.0, record=100), sold_out(2, 11.0), change("pay", 100, 200, "paid")]
    records = [Record(id=100, user=1, status="paid", created=10.02)]
    assert check_history(calls, records, SUPPLY) == []


def test_an_acknowledged_take_with_no_record_is_lost():
    assert rules(check_history([take(1, 10.0, record=100)], [], SUPPLY)) == [LOST]


def test_a_202_whose_reservation_was_undone_with_a_reason_is_not_lost():
    calls = [take(1, 10.0, status=202, code="pending", record=9_000_001)]
    assert check_history(calls, [], SUPPLY, failed={9_000_001}) == []
    # A 201 is written when answered: nothing undoes it.
    assert rules(check_history([take(1, 10.0, record=100)], [], SUPPLY, failed={100})) == [LOST]


def test_a_redis_lua_202_found_by_its_reservation_written_later_holds():
    calls = [take(1, 10.0, status=202, code="pending", record=9_000_001), sold_out(2, 10.2)]
    # The worker wrote the row two seconds after the answer: the reservation held the unit from the answer on.
    records = [Record(id=9_000_001, user=1, status="confirmed", created=12.0)]
    assert check_history(calls, records, SUPPLY) == []


@pytest.mark.parametrize(("action", "ended"), [("pay", "expired"), ("claim", "forfeited")])
def test_a_pay_or_claim_answered_200_whose_record_did_not_settle_is_lost(action, ended):
    calls = [change(action, 100, 200, "paid" if action == "pay" else "claimed")]
    records = [Record(id=100, user=1, status=ended, created=10.0, released=15.0)]
    assert rules(check_history(calls, records, SUPPLY)) == [LOST]


def test_a_sold_out_while_a_unit_was_free_throughout_is_reported():
    # Nobody took the unit: the refusal at 11 s had it free the whole time.
    assert rules(check_history([sold_out(2, 11.0)], [], SUPPLY)) == [SOLD_OUT_WITH_STOCK]


def test_a_unit_released_long_before_a_sold_out_and_never_taken_again_makes_it_wrong():
    calls = [take(1, 10.0, record=100), sold_out(2, 14.0)]
    records = [Record(id=100, user=1, status="expired", created=10.02, released=12.0)]
    assert rules(check_history(calls, records, SUPPLY)) == [SOLD_OUT_WITH_STOCK]


def test_a_sold_out_within_the_clock_margin_of_a_take_or_release_is_borne_out():
    # Released at 12.0 and refused at 12.3: within the margin, the refusal may have read the row before.
    calls = [take(1, 10.0, record=100), sold_out(2, 12.3)]
    records = [Record(id=100, user=1, status="cancelled", created=10.02, released=12.0)]
    assert check_history(calls, records, SUPPLY) == []
    # Taken by a request still in flight when the refusal came: its unit counts from the request's creation.
    calls = [sold_out(2, 9.9), take(1, 10.0, record=100)]
    assert check_history(calls, [Record(id=100, user=1, status="confirmed", created=10.3)], SUPPLY) == []


def test_a_release_counts_from_its_cancels_answer_when_that_came_after_its_stamp():
    # The cancel came at 12.0 (the release's stamp) and waited on a lock until its answer at
    # 14.0: its commit freed the unit somewhere in between, so a refusal at 13.0 is borne out.
    calls = [take(1, 10.0, record=100), change("cancel", 100, 200, "cancelled", at=12.0), sold_out(2, 13.0)]
    calls[1] = Call(**{**calls[1].__dict__, "end": 14.0})
    records = [Record(id=100, user=1, status="cancelled", created=10.02, released=12.0)]
    assert check_history(calls, records, SUPPLY) == []
    # Refused well after the cancel's answer, with the unit still free: wrong.
    assert rules(check_history([*calls, sold_out(3, 15.0)], records, SUPPLY)) == [SOLD_OUT_WITH_STOCK]
    # A cancel refused (or unanswered) says nothing of when the unit came back: the stamp stands.
    refused = Call(**{**calls[1].__dict__, "status": 409, "code": "cancelled"})
    assert rules(check_history([calls[0], refused, calls[2]], records, SUPPLY)) == [SOLD_OUT_WITH_STOCK]


def test_a_record_no_answer_named_holds_its_unit_from_its_users_unanswered_take():
    # User 1's take got no answer (status 0) but was written at 13 s; user 2 was refused at 11 s.
    calls = [take(1, 10.0, status=0, code="error"), sold_out(2, 11.0)]
    records = [Record(id=100, user=1, status="confirmed", created=13.0)]
    assert check_history(calls, records, SUPPLY) == []
    # Without the unanswered take, the record counts from its creation only.
    assert rules(check_history([sold_out(2, 11.0)], records, SUPPLY)) == [SOLD_OUT_WITH_STOCK]


def test_a_restock_counts_from_its_answer():
    restock = Call(start=11.0, end=11.1, user=9, action="restock", kind=VOUCHER, item=7, status=200,
                   code="restocked", units=5)  # fmt: skip
    calls = [take(1, 10.0, record=100), sold_out(2, 10.5), restock, sold_out(3, 13.0)]
    records = [Record(id=100, user=1, status="confirmed", created=10.02)]
    # Supplied 6 by the end: 1 at first, 5 more at 11.1 s, none of which anyone took.
    violations = check_history(calls, records, {0: 6})
    assert [(v.rule, v.call.user) for v in violations] == [(SOLD_OUT_WITH_STOCK, 3)]
    moments, values = free_units(calls, {100: records[0]}, {0: 6})
    assert values == [1, 0, 5]


def test_a_pool_is_empty_only_when_every_prize_is():
    draw = Call(start=10.0, end=10.05, user=1, action="take", kind=POOL, item=3, status=201, code="confirmed",
                record=100, prize=11)  # fmt: skip
    empty = Call(start=11.0, end=11.05, user=2, action="take", kind=POOL, item=3, status=409, code="pool_empty")
    records = [Record(id=100, user=1, status="confirmed", created=10.02, unit=11)]
    assert check_history([draw, empty], records, {11: 1, 12: 0}) == []
    assert rules(check_history([draw, empty], records, {11: 1, 12: 1})) == [SOLD_OUT_WITH_STOCK]
    # An over-awarded prize frees no unit of another.
    over = [*records, Record(id=101, user=3, status="confirmed", created=10.02, unit=11)]
    assert check_history([draw, empty], over, {11: 1, 12: 0}) == []


def test_a_take_naming_another_users_record_or_another_prize_is_contradicted():
    records = [Record(id=100, user=5, status="confirmed", created=10.02)]
    violations = check_history([take(1, 10.0, record=100)], records, SUPPLY)
    assert rules(violations) == [CONTRADICTED] and "user 5" in violations[0].why
    draw = Call(start=10.0, end=10.05, user=1, action="take", kind=POOL, item=3, status=201, code="confirmed",
                record=100, prize=11)  # fmt: skip
    records = [Record(id=100, user=1, status="confirmed", created=10.02, unit=12)]
    assert rules(check_history([draw], records, {11: 1, 12: 1})) == [CONTRADICTED]


def test_a_202_whose_reservation_id_went_to_another_user_is_lost_and_the_owner_s_take_holds():
    """Redis lost the first reservation (a failover with no WAIT) and gave its id again."""
    calls = [
        take(1, 10.0, status=202, code="pending", record=100),
        take(2, 12.0, status=202, code="pending", record=100),
    ]
    records = [Record(id=100, user=2, status="confirmed", created=12.5)]
    violations = check_history(calls, records, SUPPLY)
    assert rules(violations) == [LOST] and violations[0].call.user == 1 and "user 2" in violations[0].why


def test_two_takes_naming_one_record_are_contradicted():
    calls = [take(1, 10.0, record=100), take(1, 10.01, record=100)]
    records = [Record(id=100, user=1, status="confirmed", created=10.02)]
    assert rules(check_history(calls, records, SUPPLY)) == [CONTRADICTED]


@pytest.mark.parametrize(
    ("call", "ended"),
    [
        (change("cancel", 100, 200, "cancelled"), "paid"),
        (change("pay", 100, 409, "already_paid"), "cancelled"),
        (change("cancel", 100, 409, "expired"), "paid"),
        (change("pay", 100, 409, "cancelled"), "expired"),
        (change("claim", 100, 409, "forfeited"), "claimed"),
        (change("claim", 100, 409, "already_claimed"), "forfeited"),
    ],
)
def test_an_answer_the_final_status_contradicts(call, ended):
    records = [Record(id=100, user=1, status=ended, created=10.0, released=15.0 if ended != "paid" else None)]
    assert rules(check_history([call], records, SUPPLY)) == [CONTRADICTED]


def test_a_deadline_refusal_racing_a_settle_that_went_through_is_not_judged():
    # A volley at the deadline: the pay sent before it settled, the one sent after it heard expired.
    calls = [change("pay", 100, 200, "paid", at=20.0), change("pay", 100, 409, "expired", at=20.01)]
    records = [Record(id=100, user=1, status="paid", created=10.0)]
    assert check_history(calls, records, SUPPLY) == []
    # Not once that pay's answer had come: the order was paid by then.
    calls = [change("pay", 100, 200, "paid", at=20.0), change("pay", 100, 409, "expired", at=21.0)]
    assert rules(check_history(calls, records, SUPPLY)) == [CONTRADICTED]


def test_a_change_of_a_reservation_undone_for_good_is_refused_as_cancelled():
    reservation = 9_000_001
    calls = [
        take(1, 10.0, status=202, code="pending", record=reservation),
        change("pay", reservation, 409, "cancelled"),
    ]
    assert check_history(calls, [], SUPPLY, failed={reservation}) == []
    assert rules(check_history(calls, [], SUPPLY)) == [LOST, CONTRADICTED]


def test_refusals_that_prove_nothing_of_the_end_are_not_judged():
    calls = [change("pay", 100, 409, "pending"), change("pay", 100, 409, "busy"), change("pay", 100, 202, "accepted")]
    records = [Record(id=100, user=1, status="expired", created=10.0, released=15.0)]
    assert check_history(calls, records, SUPPLY) == []


def test_the_log_writes_a_line_per_answer_and_the_checker_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADTEST_OUTCOMES", str(tmp_path))
    log = HistoryLog()
    log.took(VOUCHER, 7, "42.1900000000.nonce:sig", 10.0, 201, "confirmed", {"order_id": 100, "status": "held"})
    log.took(POOL, 3, "43.1900000000.nonce:sig", 10.5, 202, "won", {"draw_id": 9, "status": "pending",
                                                                      "prize": {"id": 11, "name": "a"}})  # fmt: skip
    log.took(VOUCHER, 7, "44.1900000000.nonce:sig", 11.0, 409, "sold_out", None)
    log.add(start=12.0, action="pay", kind=VOUCHER, item=7, token="42.1.n:s", status=200, code="paid", record=100)
    lines = list(history_log.history_lines(tmp_path))
    assert len(lines) == 4 and json.loads(lines[0])["user"] == 42
    calls = parse_history(lines)
    assert [(c.action, c.user, c.status, c.code, c.record, c.prize) for c in calls] == [
        ("take", 42, 201, "held", 100, None),
        ("take", 43, 202, "pending", 9, 11),
        ("take", 44, 409, "sold_out", None, None),
        ("pay", 42, 200, "paid", 100, None),
    ]
    assert all(c.start < c.end for c in calls)


class FakeClient:
    """A Locust user whose every request gets ``answers`` in turn."""

    def __init__(self, *answers: FakeResponse) -> None:
        self.client = self
        self.answers = list(answers)

    def post(self, url: str, **_) -> FakeResponse:
        return self.answers.pop(0)


def test_the_calls_of_the_locustfiles_write_one_line_per_answer(outcomes_dir, monkeypatch):
    monkeypatch.setattr(common, "history", HistoryLog())
    monkeypatch.setattr(holds_calls, "history", common.history)
    monkeypatch.setenv("LOADTEST_VOUCHER", "7")
    token = "42.1900000000.nonce:sig"
    user = FakeClient(
        FakeResponse(201, {"order_id": 100, "status": "held"}),
        FakeResponse(409, {"code": "sold_out", "message": "..."}),
        FakeResponse(200, {"order_id": 100, "status": "paid", "payment": "paid"}),
        FakeResponse(0, ValueError("no answer")),
    )
    common.purchase(user, 7, token)
    common.purchase(user, 7, token)
    holds_calls.change(user, "pay", 100, token)
    common.purchase(user, 7, token)
    calls = parse_history(history_log.history_lines(outcomes_dir))
    assert [(c.action, c.user, c.item, c.status, c.code, c.record) for c in calls] == [
        ("take", 42, 7, 201, "held", 100),
        ("take", 42, 7, 409, "sold_out", None),
        ("pay", 42, 7, 200, "paid", 100),
        ("take", 42, 7, 0, "error", None),
    ]


def test_a_token_names_its_user_without_a_lookup():
    assert token_user("17.1900000000.abc:sig") == 17
    assert token_user("not-a-token") is None


def test_a_history_violation_breaks_a_safe_strategy_and_shows_in_its_column():
    row = Result(scenario="crowd", strategy="db_atomic", product=VOUCHER, requests=3, confirmed=1, orders=1, supplied=1,
                 oversold=0, duplicates=0, lost_confirmations=0, stock_left=0, history_violations=2,
                 history_rules={LOST: 0, SOLD_OUT_WITH_STOCK: 2, CONTRADICTED: 0})  # fmt: skip
    verdict = judge(row, breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: history: 2 sold out with stock free", False)
    assert ("history_violations", "history") in columns_of([row])
    clean = judge(Result(**{**row.__dict__, "history_violations": 0}), breaks=None, server_processes=4)
    assert (clean.verdict, clean.ok) == ("holds", True)


def test_an_unsafe_strategy_may_show_violations_but_they_alone_do_not_reproduce_its_break():
    values = dict(scenario="crowd", product=VOUCHER, requests=3, confirmed=1, orders=1, supplied=1, oversold=0,
                  duplicates=0, lost_confirmations=0, stock_left=0, history_violations=1,
                  history_rules={CONTRADICTED: 1})  # fmt: skip
    verdict = judge(Result(strategy="none", **values), breaks="always", server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("FAILED TO REPRODUCE (broke only: history: 1 contradicted)", False)
    oversold = Result(strategy="none", **(values | {"orders": 3, "oversold": 2}))
    verdict = judge(oversold, breaks="always", server_processes=4)
    assert verdict.ok and verdict.verdict == "broke as expected: oversold, history: 1 contradicted"


def test_a_fault_run_sets_aside_the_202s_it_lost_by_design():
    row = Result(scenario="crowd", strategy="redis_lua", product=VOUCHER, history_violations=3,
                 history_rules={LOST: 2, SOLD_OUT_WITH_STOCK: 1, CONTRADICTED: 0})  # fmt: skip
    aside = history_set_aside(row, 5)
    assert (aside.history_violations, aside.history_rules[LOST]) == (1, 0)
    assert history_set_aside(row, 0) is row


def test_counted_names_every_rule():
    assert counted([]) == {LOST: 0, SOLD_OUT_WITH_STOCK: 0, CONTRADICTED: 0}
