"""The fault runner's runs with holds, on plain data: the lifecycle's rules once drained
(``loadtests.faults.judge``) and the hold window and stock each run gets."""

from __future__ import annotations

from argparse import Namespace

from loadtests.faults.judge import Lifecycle, lifecycle_broken, lifecycle_summary
from loadtests.faults.registry import FAULTS
from loadtests.faults.runner import DEFAULT_STOCK, run_arguments


def drained(**figures) -> Lifecycle:
    base = {
        "hold_seconds": 3, "drain_s": 1.2, "supplied": 300, "available": 280, "held": 0, "settled": 20,
        "released": 400, "returned_twice": 0, "settled_and_released": 0, "conserved": True,
    }  # fmt: skip
    return Lifecycle(**(base | figures))


def payments(**figures) -> dict:
    base = {
        "confirmations": 20, "paid": 0, "refunded": 20, "waiting": 0, "double_paid": 0, "paid_unsold": 0,
        "sold_unpaid": 0, "refunds_unrecorded": 0, "ok": True,
    }  # fmt: skip
    return base | figures


def test_a_drained_run_whose_units_add_up_holds():
    assert lifecycle_broken(drained()) == []
    assert lifecycle_broken(drained(payments=payments(), redis_state=True, redis_drift={"stock": 0})) == []


def test_a_hold_left_a_unit_returned_twice_or_one_settled_and_released_breaks_it():
    broken = lifecycle_broken(drained(drain_s=None, held=2, available=278, conserved=False))
    assert broken[0] == "2 records still held after the drain"
    assert "available + held + settled != supply (278 + 2 + 20 vs 300)" in broken
    assert lifecycle_broken(drained(returned_twice=1)) == ["1 units returned twice"]
    assert lifecycle_broken(drained(settled_and_released=3)) == ["3 records both settled and released"]


def test_a_confirmation_neither_paid_nor_refunded_breaks_it():
    assert lifecycle_broken(drained(payments=payments(waiting=1, refunded=19))) == ["1 payments never confirmed"]
    broken = lifecycle_broken(drained(payments=payments(paid=1, double_paid=1, ok=False)))
    assert len(broken) == 1 and broken[0].startswith("payments broken: 20 confirmations, 1 paid")


def test_redis_out_of_step_after_the_releases_breaks_it():
    broken = lifecycle_broken(drained(redis_state=True, redis_drift={"stock": 1, "takers": 2, "seqs_missing": 0}))
    assert broken == ["after the releases, Redis stock != database stock (1), Redis takes != records per user (2)"]
    assert lifecycle_broken(drained(redis_state=False, redis_drift={})) == ["Redis state missing after the drain"]


def test_the_summary_says_the_window_what_became_of_the_holds_and_the_payments():
    assert lifecycle_summary(drained()) == "3 s: 400 released, 20 settled, 0 held"
    said = lifecycle_summary(drained(payments=payments(), returns_repaired=2))
    assert said == "3 s: 400 released, 20 settled, 0 held; 0 paid, 20 refunded; 2 returns repaired"


def test_the_lifecycle_faults_bring_their_window_and_stock_and_the_others_take_the_options():
    args = Namespace(hold_seconds=0, stock=None, duration=20, fault_at=6, down=2)
    plain = run_arguments(args, FAULTS["worker-kill"]())
    assert (plain.hold_seconds, plain.stock, plain.duration) == (0, DEFAULT_STOCK, 20)
    held = run_arguments(Namespace(hold_seconds=5, stock=900, duration=20, fault_at=6, down=2), FAULTS["worker-kill"]())
    assert (held.hold_seconds, held.stock) == (5, 900)
    for name in ("celery-kill-expiry", "expiry-lost", "redis-restart-held", "late-callback"):
        fault = FAULTS[name]()
        own = run_arguments(Namespace(hold_seconds=5, stock=900, duration=20, fault_at=6, down=2), fault)
        assert (own.hold_seconds, own.stock) == (fault.hold_seconds, fault.stock)
        # Each ends well within the default run: fault at 6 s, down 2 s, 20 s of load.
        assert 6 + fault.lasts(2) < args.duration


def test_a_run_whose_recovery_waits_for_a_new_worker_is_loaded_for_its_whole_bound():
    """Redis restarted with units held stops the worker (kombu): the state is back only once a
    new one has booted, which a short run's remaining load may not see."""
    short = Namespace(hold_seconds=0, stock=None, duration=10, fault_at=2, down=1)
    fault = FAULTS["redis-restart-held"]()
    assert run_arguments(short, fault).duration >= 2 + fault.lasts(1) + fault.recover_within
    # The others keep the load asked for.
    for name in ("celery-kill-expiry", "expiry-lost", "late-callback", "redis-restart"):
        assert run_arguments(short, FAULTS[name]()).duration == 10


def test_a_late_confirmation_concerns_the_flash_sale_only_and_the_server_confirms_after_the_hold():
    fault = FAULTS["late-callback"]()
    assert fault.products == ("voucher",)
    assert int(fault.server_settings(2)["PAYMENT_PROVIDER_DELAY_MS"]) > fault.hold_seconds * 1000
