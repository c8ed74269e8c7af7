"""The registries the runner is driven by: scenarios, products, the command line's defaults."""

from __future__ import annotations

import ast

import pytest

from loadtests.run import parse_args
from loadtests.scenarios import ALL, DEFAULT, LIFECYCLE, SCENARIOS, scenarios_named


def test_all_runs_both_products_scenarios_and_the_default_stays_the_crowd():
    assert [s.name for s in scenarios_named("all")] == [
        "crowd", "hammer", "restock", "watched", "surge", "surge-queue", "draw-crowd", "draw-hammer",
        "abandon", "pay-race", "cancel-storm", "hoarding", "draw-abandon", "claim-race",
    ]  # fmt: skip
    assert {s.product for s in scenarios_named("all")} == {"voucher", "pool"}
    assert DEFAULT == "crowd" and parse_args([]).scenario == "crowd"


def test_the_lifecycles_scenarios_are_named_together_and_kept_from_the_race_lab():
    lifecycle = scenarios_named("lifecycle")
    assert [s.name for s in lifecycle] == [
        "abandon", "pay-race", "cancel-storm", "hoarding", "draw-abandon", "claim-race",
    ]  # fmt: skip
    assert all(s.lifecycle for s in lifecycle) and not any(s.lifecycle for s in SCENARIOS.values())
    assert {s.product for s in lifecycle} == {"voucher", "pool"}
    # The race lab offers SCENARIOS, the site it drives configured as it is.
    assert not set(LIFECYCLE) & set(SCENARIOS) and ALL == SCENARIOS | LIFECYCLE
    with pytest.raises(KeyError, match="abandon"):
        scenarios_named("crowd,abandon", among=SCENARIOS)


def test_names_are_taken_in_the_order_given_and_unknown_ones_are_named():
    assert [s.name for s in scenarios_named("draw-crowd,crowd")] == ["draw-crowd", "crowd"]
    with pytest.raises(KeyError, match="draw-mob, nope"):
        scenarios_named("crowd,draw-mob,nope")


def test_every_scenario_has_a_locustfile_that_says_what_it_shows_and_a_product():
    from loadtests.products import PRODUCTS

    for scenario in ALL.values():
        docstring = ast.get_docstring(ast.parse(scenario.path.read_text()))
        assert docstring and "What it shows:" in docstring, scenario.locustfile
        assert scenario.product in PRODUCTS
        assert scenario.proves


def test_the_command_line_keeps_its_defaults_and_shapes_the_pools():
    args = parse_args([])
    assert (args.strategies, args.users, args.buyers, args.spawn_rate, args.duration) == ("all", 50, 20000, 50, 15)
    assert (args.stock, args.server_processes, args.locust_processes, args.race_window_ms) == (500, 4, 1, 20)
    assert (args.repeat, args.hammer_buyers, args.baseline_users, args.port, args.out) == (1, 3, 20, 0, None)
    assert (args.prizes, args.draws_per_user, args.no_prize_weight) == (5, 3, 0)
    assert (args.hold_seconds, args.payment_delay_ms, args.no_baseline, args.runs) == (2, 0, False, None)


def test_runs_name_exactly_the_pairs_to_run_in_their_order(monkeypatch, tmp_path):
    from loadtests import run

    seen = {}

    def run_matrix(args, pairs, tokens, staff_token):
        seen["pairs"] = [(scenario.name, strategy) for scenario, strategy in pairs]
        raise SystemExit(0)

    monkeypatch.setattr(run, "setup_django", lambda args: None)
    monkeypatch.setattr(run, "run_matrix", run_matrix)
    monkeypatch.setattr("accounts.services.users_with_tokens_create", lambda count, prefix: [("u", "t")])
    monkeypatch.setattr("loadtests.staff.staff_token_create", lambda prefix: "s")
    with pytest.raises(SystemExit):
        run.main(["--runs", "pay-race:none,crowd:db_atomic", "--out", str(tmp_path)])
    assert seen["pairs"] == [("pay-race", "none"), ("crowd", "db_atomic")]
    with pytest.raises(SystemExit, match="unknown: nope"):
        run.main(["--runs", "nope:none"])
    with pytest.raises(SystemExit, match="unknown: sometimes"):
        run.main(["--runs", "abandon:sometimes"])
