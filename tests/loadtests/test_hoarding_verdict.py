"""The hoarding scenario's verdict on its own (``loadtests.verdict``): plain results in,
verdicts out. With the item's cap on abandoned holds or its cooldown on, an honest buyer who
got no unit breaks the run; with both off the run demonstrates the hoarding, and passes when
the honest buyer heard sold_out ask after ask. And the items' rules a run asks for
(``loadtests.one_run.abandon_rules``)."""

from __future__ import annotations

from argparse import Namespace
from dataclasses import replace

from loadtests.one_run import abandon_rules
from loadtests.scenarios import ALL
from loadtests.verdict import HOARDED_ASKS, VOUCHER, Result, judge

HELD = dict(
    held_left=0, settled=1, released=6, resold=4, returned_twice=0, settled_and_released=0,
    unsettled_200s=0, returns_unsold=0, holds_drain_s=0.0, charges=1, refunds=0, payments_off=0,
)  # fmt: skip


def hoarding_row(*, capped: bool, asks: int, sold_out: int, bought: bool, **figures) -> Result:
    values = dict(
        requests=40, confirmed=7, orders=7, supplied=3, oversold=0, duplicates=0, lost_confirmations=0, stock_left=2,
        honest_asks=asks, honest_sold_out=sold_out, honest_bought=bought, abandon_capped=capped, **HELD,
    )  # fmt: skip
    return Result(scenario="hoarding", strategy="db_atomic", product=VOUCHER, **(values | figures))


def test_with_the_cap_on_an_honest_buyer_who_bought_holds_and_one_who_did_not_is_broken():
    fair = judge(hoarding_row(capped=True, asks=13, sold_out=12, bought=True), breaks=None, server_processes=2)
    assert (fair.verdict, fair.ok, fair.expected_to_break) == ("holds", True, False)
    hoarded = judge(hoarding_row(capped=True, asks=18, sold_out=18, bought=False), breaks=None, server_processes=2)
    assert (hoarded.verdict, hoarded.ok) == ("BROKEN: hoarded: the honest buyer got no unit", False)


def test_with_the_cap_off_the_run_passes_when_the_honest_buyer_heard_sold_out_ask_after_ask():
    row = hoarding_row(capped=False, asks=18, sold_out=18, bought=False, orders=10, confirmed=10, stock_left=3)
    verdict = judge(row, breaks=None, server_processes=2)
    assert verdict.ok and verdict.expected_to_break
    assert verdict.verdict == "hoarded as expected, no cap: the honest buyer heard sold_out 18 of 18 asks"

    lucky = hoarding_row(capped=False, asks=2, sold_out=HOARDED_ASKS - 3, bought=True)
    missed = judge(lucky, breaks=None, server_processes=2)
    assert not missed.ok and missed.verdict.startswith("FAILED TO REPRODUCE the hoarding")


def test_with_the_cap_off_a_broken_invariant_still_fails_the_run():
    row = hoarding_row(capped=False, asks=18, sold_out=18, bought=False, returned_twice=1)
    verdict = judge(row, breaks=None, server_processes=2)
    assert (verdict.ok, verdict.verdict) == (False, "BROKEN: units returned twice")


def test_a_run_asks_for_the_items_rules_it_was_given_and_cancel_storm_for_none():
    given = Namespace(abandon_limit=0, abandon_cooldown_seconds=0)
    assert abandon_rules(given, ALL["hoarding"]) == {"abandon_limit": 0, "abandon_cooldown_seconds": 0}
    # Not given (the race lab's runs name neither): the item's defaults.
    assert abandon_rules(Namespace(), ALL["hoarding"]) == {}
    assert abandon_rules(Namespace(abandon_limit=None, abandon_cooldown_seconds=5), ALL["abandon"]) == {
        "abandon_cooldown_seconds": 5
    }
    assert abandon_rules(Namespace(), ALL["cancel-storm"]) == {"abandon_limit": 0, "abandon_cooldown_seconds": 0}


def test_under_an_unsafe_strategy_a_hoarding_run_is_judged_on_what_broke_not_on_a_lifecycle_race():
    """``--scenario lifecycle`` runs hoarding under ``none`` and ``local`` too: it is no
    demonstration of the lifecycle's races (nobody races a release there), and a run whose
    stock lost track broke as expected, as a crowd's does. It failed every such run."""
    row = hoarding_row(capped=True, asks=18, sold_out=0, bought=True, stock_left=120, orders=30, conserved=False)
    verdict = judge(replace(row, strategy="none"), breaks="always", server_processes=2)
    assert (verdict.ok, verdict.verdict) == (True, "broke as expected: stock + orders != supplied")
