"""The lifecycle's verdict rules on their own: plain results in, verdicts out (no database,
no server). A lifecycle scenario's row is judged on its holds too, and a strategy expected
to break must break one of the lifecycle's races there, not only oversell by its takes."""

from __future__ import annotations

from loadtests.lifecycle import resold
from loadtests.verdict import (
    POOL,
    VOUCHER,
    Result,
    broken_invariants,
    judge,
    lifecycle,
    lifecycle_broken,
    lifecycle_races,
)

HELD = dict(
    held_left=0, settled=40, released=60, resold=60, returned_twice=0, settled_and_released=0,
    unsettled_200s=0, returns_unsold=0, holds_drain_s=1.8,
)  # fmt: skip


def abandon_row(strategy: str = "db_atomic", **figures) -> Result:
    """An abandon run that held: 100 supplied, 160 taken, 60 released and sold again, the 40
    paid each with one charge, nothing left held."""
    values = dict(
        requests=300, confirmed=160, orders=160, supplied=100, oversold=0, duplicates=0, lost_confirmations=0,
        stock_left=60, charges=40, refunds=0, payments_off=0, **HELD,
    )  # fmt: skip
    return Result(scenario="abandon", strategy=strategy, product=VOUCHER, **(values | figures))


def claim_race_row(strategy: str = "db_atomic", **figures) -> Result:
    values = dict(
        requests=300, confirmed=60, awarded=40, draws=100, no_prize_draws=0, supplied=100, over_awarded=0,
        users_over_limit=0, draws_over_limit=0, lost_confirmations=0, stock_left=60, **HELD,
    )  # fmt: skip
    return Result(scenario="claim-race", strategy=strategy, product=POOL, **(values | figures))


def test_a_lifecycle_row_that_drained_with_every_unit_once_holds():
    for row in (abandon_row(), claim_race_row()):
        assert lifecycle(row) and lifecycle_broken(row) == []
        verdict = judge(row, breaks=None, server_processes=4)
        assert (verdict.verdict, verdict.ok) == ("holds", True)


def test_another_scenarios_row_is_no_lifecycle_row():
    row = Result(scenario="crowd", strategy="db_atomic", product=VOUCHER, orders=5, supplied=5, stock_left=0)
    assert not lifecycle(row)
    assert lifecycle_broken(row) == []


def test_each_race_is_named_in_the_products_words():
    voucher = abandon_row(returned_twice=3, settled_and_released=2, unsettled_200s=1, payments_off=1)
    assert lifecycle_broken(voucher) == [
        "units returned twice",
        "paid and released",
        "200s not paid",
        "payments unresolved or unbalanced",
    ]
    pool = claim_race_row(settled_and_released=1, unsettled_200s=1)
    assert lifecycle_broken(pool) == ["claimed and forfeited", "200s not claimed"]
    assert dict(lifecycle_races(pool))["claimed and forfeited"] == 1


def test_a_safe_strategy_that_returned_a_unit_twice_is_broken():
    row = abandon_row(returned_twice=1, conserved=False)
    verdict = judge(row, breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: stock + orders != supplied, units returned twice", False)


def test_a_safe_strategy_with_a_200_whose_order_is_not_paid_is_broken():
    verdict = judge(abandon_row(unsettled_200s=1), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: 200s not paid", False)


def test_payments_unresolved_or_off_balance_break_a_safe_strategy():
    verdict = judge(abandon_row(payments_off=2), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: payments unresolved or unbalanced", False)


def test_units_back_in_stock_while_buyers_were_refused_break_a_safe_strategy():
    verdict = judge(abandon_row(returns_unsold=4), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: returns left unsold", False)


def test_holds_left_or_a_drain_that_ran_out_break_a_safe_strategy():
    assert broken_invariants(abandon_row(held_left=3)) == ["holds not drained"]
    assert broken_invariants(claim_race_row(holds_drain_s=None)) == ["holds not drained"]


def test_none_that_raced_in_the_lifecycle_broke_as_expected():
    row = abandon_row("none", oversold=12, conserved=False, returned_twice=20)
    verdict = judge(row, breaks="always", server_processes=4)
    assert (verdict.ok, verdict.expected_to_break) == (True, True)
    assert verdict.verdict == "broke as expected: oversold, stock + orders != supplied, units returned twice"


def test_none_that_only_oversold_by_its_takes_failed_to_reproduce_the_lifecycles_race():
    row = abandon_row("none", oversold=12, conserved=False)
    verdict = judge(row, breaks="always", server_processes=4)
    assert (verdict.ok, verdict.expected_to_break) == (False, True)
    assert verdict.verdict == (
        "FAILED TO REPRODUCE the lifecycle's race (broke only: oversold, stock + orders != supplied)"
    )
    untouched = judge(claim_race_row("none"), breaks="always", server_processes=4)
    assert untouched.verdict == "FAILED TO REPRODUCE the lifecycle's race"


def test_local_must_race_across_processes_and_holds_in_one():
    raced = claim_race_row("local", settled_and_released=1, unsettled_200s=1)
    assert judge(raced, breaks="across_processes", server_processes=4).ok
    assert not judge(claim_race_row("local"), breaks="across_processes", server_processes=4).ok
    one = judge(claim_race_row("local"), breaks="across_processes", server_processes=1)
    assert (one.verdict, one.ok) == ("holds", True)


def test_a_pool_row_has_no_payments_to_judge():
    row = claim_race_row()
    assert (row.charges, row.refunds, row.payments_off) == (None, None, None)
    assert dict(lifecycle_races(row))["payments unresolved or unbalanced"] == 0


def test_units_sold_beyond_the_supply_with_no_release_behind_them_are_no_resales():
    # local's abandon run of the docs' table: 254 taken of 100, 132 released, 22 oversold.
    assert resold(254, 100, {"oversold": 22}, released=132) == 132
    assert resold(150, 100, {"oversold": 22}, released=132) == 28
    assert resold(160, 100, {"over_awarded": 0}, released=60) == 60
    assert resold(90, 100, {}, released=10) == 0
