"""The fault runner's verdict rules (``loadtests.faults.judge``), on plain data."""

from __future__ import annotations

from loadtests.faults.failover import FailoverNoWait, FailoverWait
from loadtests.faults.judge import (
    Answer,
    Recovery,
    answered_within,
    by_status,
    fault_verdict,
    parse_answers,
    recovery,
    writes_recovery,
)
from loadtests.faults.kinds import LockHolderStopped, RedlockServersStopped
from loadtests.verdict import VOUCHER, Result


def answers(*triples) -> list[Answer]:
    return [Answer(at=at, status=status, seconds=seconds) for at, status, seconds in triples]


def held(**figures) -> Result:
    base = {"orders": 10, "supplied": 100, "oversold": 0, "duplicates": 0, "lost_confirmations": 0, "stock_left": 90}
    return Result(scenario="crowd", strategy="redis_lock", product=VOUCHER, **(base | figures))


def test_answer_lines_parse_in_time_order_and_count_by_status():
    parsed = parse_answers(["12.5 201 0.010", "", "11.0 503 0.002", "13.0 0 0.500"])
    assert [a.at for a in parsed] == [11.0, 12.5, 13.0]
    assert by_status(parsed) == {0: 1, 201: 1, 503: 1}


def test_recovery_counts_from_the_faults_end_to_the_last_degraded_answer():
    seen = answers((9, 201, 0.01), (10.5, 503, 0.01), (12.5, 503, 0.01), (13, 201, 0.01), (14, 409, 0.01))
    assert recovery(seen, injected_at=10, healed_at=12) == 0.5
    # 503s only while it was down: recovered at its end.
    assert recovery(seen[:2] + seen[3:], injected_at=10, healed_at=12) == 0.0
    # Nothing degraded at all.
    assert recovery(answers((11, 201, 0.01)), injected_at=10, healed_at=12) == 0.0
    # Degraded to the last answer: never recovered.
    assert recovery(seen[:3], injected_at=10, healed_at=12) is None


def test_writes_recover_when_the_records_grow_after_the_faults_end():
    taken = [(10.0, 5), (11.0, 5), (12.0, 5), (13.5, 5), (14.0, 9)]
    assert writes_recovery(taken, healed_at=11.5) == 2.5
    assert writes_recovery(taken[:4], healed_at=11.5) is None


def test_a_run_that_answered_503_quickly_and_recovered_holds():
    seen = answers((10, 201, 0.01), (11, 503, 0.01), (13, 201, 0.02))
    assert fault_verdict(held(), seen, Recovery(0.0), drops_requests=False, recover_within=10, deferred=False) == (
        "holds",
        True,
    )


def test_a_500_or_a_dropped_request_breaks_a_run_unless_the_fault_kills_a_server_process():
    seen = answers((10, 201, 0.01), (11, 500, 0.01), (11.5, 0, 0.2), (13, 201, 0.02))
    verdict, ok = fault_verdict(
        held(failures=2), seen, Recovery(0.0), drops_requests=False, recover_within=10, deferred=False
    )
    assert not ok and "1 x 500" in verdict and "1 x no answer" in verdict
    verdict, ok = fault_verdict(
        held(failures=2), seen, Recovery(0.0), drops_requests=True, recover_within=10, deferred=False
    )
    assert not ok and "1 x 500" in verdict and "no answer" not in verdict


def test_a_slow_503_a_slow_recovery_or_none_breaks_the_run():
    slow = answers((10, 503, 6.0), (13, 201, 0.02))
    assert (
        "503 after more than 5 s"
        in fault_verdict(held(), slow, Recovery(0.0), drops_requests=False, recover_within=10, deferred=False)[0]
    )
    fine = answers((13, 201, 0.02))
    assert (
        "over 10 s"
        in fault_verdict(held(), fine, Recovery(12.0), drops_requests=False, recover_within=10, deferred=False)[0]
    )
    assert (
        "did not recover"
        in fault_verdict(held(), fine, Recovery(None), drops_requests=False, recover_within=10, deferred=False)[0]
    )
    assert (
        "wrote nothing"
        in fault_verdict(
            held(), fine, Recovery(0.0, writes_seconds=None), drops_requests=False, recover_within=10, deferred=True
        )[0]
    )


def test_the_matrixs_invariants_still_break_a_fault_run():
    fine = answers((13, 201, 0.02))
    verdict, ok = fault_verdict(
        held(oversold=2, lost_confirmations=1),
        fine,
        Recovery(0.0),
        drops_requests=False,
        recover_within=10,
        deferred=False,
    )
    assert not ok and "oversold" in verdict and "confirmations lost" in verdict


def test_reservations_lost_with_redis_are_reported_not_counted():
    fine = answers((13, 202, 0.02))
    verdict, ok = fault_verdict(
        held(), fine, Recovery(0.0, 1.0), drops_requests=False, recover_within=10, deferred=True, documented_losses=3
    )
    assert ok and "3 pending 202s lost" in verdict


def test_a_state_of_a_fault_is_judged_by_the_requests_sent_and_answered_within_it():
    seen = answers((10.0, 201, 0.5), (10.4, 201, 0.2), (11.9, 503, 0.1), (12.5, 503, 0.1))
    # Sent at 9.5 (before the state began) and answered at 12.5 (after it ended): left out.
    assert [a.at for a in answered_within(seen, 10.0, 12.0)] == [10.4, 11.9]


def test_a_faults_own_rules_break_the_run_and_its_notes_follow_the_verdict():
    fine = answers((13, 201, 0.02))
    common = {"drops_requests": False, "recover_within": 10, "deferred": False}
    assert fault_verdict(held(), fine, Recovery(0.0), notes=["1 stale write refused"], **common) == (
        "holds; 1 stale write refused",
        True,
    )
    verdict, ok = fault_verdict(
        held(), fine, Recovery(0.0), fault_broken=["no 503 while two servers of three were down"], **common
    )
    assert not ok and verdict == "BROKEN: no 503 while two servers of three were down"


def test_redlock_servers_stopped_wants_sales_with_one_down_and_503s_only_with_two():
    fault = RedlockServersStopped()
    fault.one_down_at, fault.two_down_at, fault.restarting_at = 10.0, 12.0, 14.0
    held_up = answers((11.0, 201, 0.1), (11.5, 409, 0.1), (13.0, 503, 0.01), (13.5, 503, 0.01))
    broken, notes = fault.checked(held_up, {})
    assert broken == [] and notes == ["one down: 201: 1 409: 1; two down: 503: 2"]

    # Sold while no majority was up, refused while one was: both broken.
    wrong = answers((11.0, 503, 0.01), (13.0, 201, 0.1))
    broken, _ = fault.checked(wrong, {})
    assert broken == [
        "nothing sold while one server of three was down",
        "1 x 503 while a majority was up",
        "1 sold while two servers of three were down",
        "no 503 while two servers of three were down",
    ]


def test_lock_holder_stopped_wants_its_stale_write_refused():
    fault = LockHolderStopped()
    fault.overtaken, fault.stopped_s = True, 6.1
    assert fault.checked([], {"stale_fences": 1, "leases_lost": 1}) == (
        [],
        ["holder stopped 6.1 s, 1 stale write(s) refused, 1 lease(s) lost"],
    )
    broken, _ = fault.checked([], {"stale_fences": 0, "leases_lost": 1})
    assert broken == ["the stopped holder's write was not refused as stale"]
    fault.overtaken = False
    broken, _ = fault.checked([], {"stale_fences": 0})
    assert broken[0].startswith("no newer holder wrote")


def test_a_failover_without_wait_sets_its_lost_202s_and_redis_behind_aside_and_reports_them():
    drift = {"stock": 0, "takers": 3, "seqs_missing": 1}
    lost = held(lost_confirmations=7, accepted=100, redis_drift=drift)
    judged, set_aside, notes = FailoverNoWait().reported(lost, [["confirmed", "1", "pending"], ["unconfirmed", "2"]])
    assert (judged.lost_confirmations, judged.redis_drift, set_aside) == (0, None, 7)
    assert "7 of 100 202s lost" in notes[0] and "Redis takes != records per user (3)" in notes[1]
    verdict, ok = fault_verdict(judged, [], Recovery(0.0, 1.0), drops_requests=False, recover_within=5, deferred=True)
    assert ok, verdict
    # With WAIT, a lost 202 stays in the result: it breaks the run.
    judged, set_aside, notes = FailoverWait().reported(lost, [["unconfirmed", "2"]])
    assert (judged.lost_confirmations, set_aside) == (7, 0) and "1 unconfirmed" in notes[0]
    verdict, ok = fault_verdict(judged, [], Recovery(0.0, 1.0), drops_requests=False, recover_within=5, deferred=True)
    assert not ok and "confirmations lost" in verdict


def test_a_fault_run_whose_running_totals_disagree_is_broken():
    seen = answers((9, 201, 0.01), (13, 201, 0.01))
    verdict, ok = fault_verdict(
        held(totals_agree=False), seen, Recovery(seconds=0.0), drops_requests=False, recover_within=5, deferred=False
    )
    assert not ok and "the running totals disagree with the records" in verdict
