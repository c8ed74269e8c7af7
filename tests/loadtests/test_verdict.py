"""The verdict rules on their own: plain results in, verdicts out (no database, no server)."""

from __future__ import annotations

import pytest

from loadtests.confirmations import lost_confirmations
from loadtests.verdict import (
    POOL,
    VOUCHER,
    Result,
    broken_invariants,
    expected_to_break,
    judge,
)


def voucher_row(strategy: str = "db_atomic", **figures) -> Result:
    """A voucher run that held: 500 supplied, 500 sold, every confirmation found."""
    values = dict(
        requests=800,
        confirmed=500,
        orders=500,
        supplied=500,
        oversold=0,
        duplicates=0,
        lost_confirmations=0,
        stock_left=0,
    )
    return Result(scenario="crowd", strategy=strategy, product=VOUCHER, **(values | figures))


def pool_row(strategy: str = "db_atomic", **figures) -> Result:
    """A pool run that held: 500 supplied over its prizes, all awarded, nobody over the limit."""
    values = dict(
        requests=800, confirmed=500, awarded=500, draws=500, no_prize_draws=0, supplied=500, over_awarded=0,
        users_over_limit=0, draws_over_limit=0, lost_confirmations=0, stock_left=0,
    )  # fmt: skip
    return Result(scenario="draw-crowd", strategy=strategy, product=POOL, **(values | figures))


def test_a_safe_strategy_that_held_holds():
    verdict = judge(voucher_row(), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok, verdict.expected_to_break) == ("holds", True, False)


def test_a_safe_strategy_that_oversold_is_broken():
    row = voucher_row(orders=512, oversold=12, conserved=False)
    verdict = judge(row, breaks=None, server_processes=4)
    assert not verdict.ok
    assert verdict.verdict == "BROKEN: oversold, stock + orders != supplied"


def test_a_safe_strategy_with_a_duplicate_order_is_broken():
    verdict = judge(voucher_row(duplicates=1), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: duplicate orders", False)


def test_none_that_held_failed_to_reproduce():
    verdict = judge(voucher_row("none"), breaks="always", server_processes=4)
    assert (verdict.verdict, verdict.ok, verdict.expected_to_break) == ("FAILED TO REPRODUCE", False, True)


def test_none_that_oversold_broke_as_expected():
    verdict = judge(voucher_row("none", oversold=900, conserved=False), breaks="always", server_processes=4)
    assert verdict.ok and verdict.expected_to_break
    assert verdict.verdict == "broke as expected: oversold, stock + orders != supplied"


def test_none_must_break_even_in_one_server_process():
    verdict = judge(voucher_row("none"), breaks="always", server_processes=1)
    assert verdict.verdict == "FAILED TO REPRODUCE"


def test_local_with_one_server_process_is_judged_as_safe():
    held = judge(voucher_row("local"), breaks="across_processes", server_processes=1)
    assert (held.verdict, held.ok, held.expected_to_break) == ("holds", True, False)
    oversold = judge(voucher_row("local", oversold=3), breaks="across_processes", server_processes=1)
    assert (oversold.verdict, oversold.ok) == ("BROKEN: oversold", False)


def test_local_across_several_server_processes_must_break():
    held = judge(voucher_row("local"), breaks="across_processes", server_processes=4)
    assert (held.verdict, held.ok) == ("FAILED TO REPRODUCE", False)
    broke = judge(pool_row("local", over_awarded=40), breaks="across_processes", server_processes=2)
    assert (broke.verdict, broke.ok) == ("broke as expected: over-awarded", True)


def test_expectations_come_from_the_way_a_strategy_breaks():
    assert [expected_to_break(None, n) for n in (1, 4)] == [False, False]
    assert [expected_to_break("always", n) for n in (1, 4)] == [True, True]
    assert [expected_to_break("across_processes", n) for n in (1, 2)] == [False, True]
    with pytest.raises(ValueError, match="unknown way to break"):
        expected_to_break("on_tuesdays", 4)


def test_every_registered_strategy_breaks_in_a_way_the_verdict_knows():
    from inventory.strategies import STRATEGIES, strategy_names

    for strategy in STRATEGIES.values():
        expected_to_break(strategy.breaks, 4)  # no ValueError
    assert strategy_names(breaks="always") == ["none"]
    assert strategy_names(breaks="across_processes") == ["local"]


def test_a_pool_row_is_judged_on_its_own_columns():
    assert broken_invariants(pool_row()) == []
    over = pool_row(awarded=530, over_awarded=30, conserved=False)
    assert broken_invariants(over) == ["over-awarded", "stock + awarded != supplied (per prize)"]
    limit = pool_row(users_over_limit=2, draws_over_limit=5)
    assert broken_invariants(limit) == ["users over the limit"]
    # The voucher's columns mean nothing on a pool's row.
    assert broken_invariants(pool_row(oversold=7, duplicates=7)) == []
    assert broken_invariants(voucher_row(over_awarded=7, users_over_limit=7)) == []


def test_a_safe_strategy_over_the_draw_limit_is_broken():
    verdict = judge(pool_row(users_over_limit=1, draws_over_limit=1), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: users over the limit", False)


def test_none_over_the_draw_limit_broke_as_expected():
    verdict = judge(pool_row("none", users_over_limit=3), breaks="always", server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("broke as expected: users over the limit", True)


def test_lost_confirmations_break_a_safe_strategy():
    for row in (voucher_row(lost_confirmations=2), pool_row(lost_confirmations=1)):
        verdict = judge(row, breaks=None, server_processes=4)
        assert (verdict.verdict, verdict.ok) == ("BROKEN: confirmations lost", False)


def test_stock_below_zero_breaks_a_safe_strategy():
    assert judge(voucher_row(stock_left=-1), breaks=None, server_processes=4).verdict == "BROKEN: stock below zero"
    # One prize below zero, hidden in the pool's total.
    assert broken_invariants(pool_row(stock_left=3, stock_not_negative=False)) == ["stock below zero"]


def test_an_audit_that_failed_on_its_own_breaks_the_run():
    verdict = judge(voucher_row(), breaks=None, server_processes=4, audit_ok=False)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: audit failed", False)


def test_undocumented_answers_fail_a_safe_strategy_that_held():
    verdict = judge(pool_row(failures=4), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("UNEXPECTED ANSWERS (4)", False)


def test_a_broken_invariant_is_named_before_undocumented_answers():
    verdict = judge(voucher_row(oversold=1, failures=4), breaks=None, server_processes=4)
    assert verdict.verdict == "BROKEN: oversold"


def test_the_baseline_is_not_a_product_to_judge():
    with pytest.raises(ValueError, match="not a product's result"):
        judge(Result(scenario="baseline", strategy="no-op JSON"), breaks=None, server_processes=4)


def test_every_confirmation_found_as_announced_loses_nothing():
    announced = [(1, None), (2, 11), (3, None)]
    assert lost_confirmations(announced, {1: None, 2: 11, 3: None, 4: 12}) == 0


def test_a_confirmation_missing_from_the_database_is_lost():
    assert lost_confirmations([(1, None), (2, None)], {1: None}) == 1


def test_a_draw_recorded_with_another_prize_than_announced_is_lost():
    assert lost_confirmations([(5, 11), (6, None)], {5: 12, 6: None}) == 1
    assert lost_confirmations([(6, 11)], {6: None}) == 1  # announced a prize, recorded "no prize"


def test_an_id_confirmed_twice_is_lost_once_per_extra():
    assert lost_confirmations([(1, None), (1, None), (1, None)], {1: None}) == 2


def deferred_row(**figures) -> Result:
    """A redis_lua voucher run that held: every 202 persisted, Redis in step with the database."""
    values = dict(accepted=500, pending_at_end=120, drain_s=1.4, unpersisted=0, redis_state=True,
                  redis_drift={"stock": 0, "takers": 0, "seqs_missing": 0})  # fmt: skip
    return voucher_row("redis_lua", **(values | figures))


def test_a_deferred_strategy_persisted_and_in_step_with_redis_holds():
    verdict = judge(deferred_row(), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("holds", True)


def test_reservations_left_unwritten_break_a_deferred_strategy():
    row = deferred_row(drain_s=None, unpersisted=7, lost_confirmations=7)
    assert broken_invariants(row) == ["confirmations lost", "reservations not persisted"]
    assert not judge(row, breaks=None, server_processes=4).ok


def test_a_redis_state_that_disagrees_with_the_database_breaks_a_deferred_strategy():
    assert broken_invariants(deferred_row(redis_state=False)) == ["Redis state missing"]
    drifted = deferred_row(redis_drift={"stock": 1, "takers": 3, "seqs_missing": 0})
    assert broken_invariants(drifted) == ["Redis stock != database stock", "Redis takes != records per user"]
    assert judge(drifted, breaks=None, server_processes=4).verdict.startswith("BROKEN: Redis stock")


def test_the_other_strategies_rows_carry_no_redis_figures():
    row = voucher_row()
    assert (row.accepted, row.pending_at_end, row.drain_s, row.redis_state, row.redis_drift) == (None,) * 5
    assert broken_invariants(row) == []


@pytest.mark.parametrize(("strategy", "breaks"), [("db_atomic", None), ("none", "always")])
def test_a_run_that_answered_nothing_neither_holds_nor_breaks(strategy, breaks):
    """A lane stopped before its crowd sent anything, or whose answers were never written:
    the audit finds the stock untouched, which would pass for holding."""
    row = voucher_row(strategy, requests=0, confirmed=0, orders=0, stock_left=500)
    verdict = judge(row, breaks=breaks, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("NO REQUESTS: nothing was measured", False)


def test_a_run_audited_while_still_changing_is_not_proven_to_hold():
    """The wait until quiet gave up with writes still landing: what was audited then may yet
    break, so it is no proof that the strategy holds."""
    verdict = judge(voucher_row(audit_incomplete=True), breaks=None, server_processes=4)
    assert verdict.verdict.startswith("NOT PROVEN") and "audit incomplete" in verdict.verdict
    assert not verdict.ok and not verdict.expected_to_break
    # What it broke by then it broke all the same.
    assert judge(voucher_row(audit_incomplete=True, oversold=1), breaks=None, server_processes=4).verdict == (
        "BROKEN: oversold"
    )


def test_a_safe_strategy_that_took_nothing_is_not_proven():
    """Every take refused in a documented word (a guard answering busy to everyone, a sale
    not open): nothing broke because nothing raced, which shows nothing to hold."""
    for row in (
        voucher_row(requests=2000, confirmed=0, orders=0, stock_left=500),
        pool_row(requests=2000, confirmed=0, awarded=0, draws=0, stock_left=500),
        voucher_row("redis_lua", requests=2000, confirmed=0, accepted=0, orders=0, stock_left=500),
    ):
        verdict = judge(row, breaks=None, server_processes=4)
        assert (verdict.verdict, verdict.ok) == ("NOT PROVEN: nothing was taken", False), row
    # One take accepted (written later) or one record is something taken.
    accepted = voucher_row("redis_lua", requests=2000, confirmed=0, accepted=1, orders=1, stock_left=499)
    assert judge(accepted, breaks=None, server_processes=4).verdict == "holds"


def test_an_unsafe_strategy_that_broke_only_what_the_race_does_not_break_failed_to_reproduce():
    """A confirmation lost or a unit stranded in a bucket is not the race: without a unit
    taken twice or lost, the demonstration did not happen."""
    for row, besides in (
        (voucher_row("none", lost_confirmations=1), "confirmations lost"),
        (
            voucher_row("none", buckets=8, stranded=3, stock_left=3, orders=497, confirmed=497),
            "units stranded while sold out",
        ),
    ):
        verdict = judge(row, breaks="always", server_processes=4)
        assert (verdict.verdict, verdict.ok) == (f"FAILED TO REPRODUCE (broke only: {besides})", False)
    raced = voucher_row("none", buckets=8, stranded=3, oversold=2, orders=502, conserved=False)
    assert judge(raced, breaks="always", server_processes=4).ok
