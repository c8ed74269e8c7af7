"""A deferred strategy's figures after the load: what waited to be written when the crowd
stopped, and how long the worker took to write it, from the sampler's readings."""

from __future__ import annotations

import os

from loadtests.one_run import drain_figures, last_answer_at

# (moment, reservations waiting), four readings a second around a crowd that stopped at 10.0.
WAITING = [(9.5, 30), (9.75, 42), (10.05, 40), (10.3, 12), (10.55, 0), (10.8, 0)]


def test_what_waited_at_the_end_and_the_seconds_until_nothing_did():
    assert drain_figures(WAITING, 10.0, persisted_at=11.2) == {"pending_at_end": 42, "drain_s": 10.55 - 10.0}


def test_a_drain_the_sampler_did_not_see_end_is_timed_by_the_wait_that_did():
    assert drain_figures(WAITING[:4], 10.0, persisted_at=12.5) == {"pending_at_end": 42, "drain_s": 2.5}


def test_a_worker_that_kept_up_drains_in_no_time():
    kept_up = [(9.75, 0), (10.05, 0)]
    assert drain_figures(kept_up, 10.0, persisted_at=11.0) == {"pending_at_end": 0, "drain_s": 0.0}


def test_a_wait_that_ran_out_has_no_drain_time():
    assert drain_figures(WAITING[:4], 10.0, persisted_at=None) == {"pending_at_end": 42, "drain_s": None}


def test_the_crowd_stopped_at_its_last_answer(tmp_path):
    assert last_answer_at(tmp_path) is None
    for name, moment in (("outcomes-1.txt", 1_000.0), ("outcomes-2.txt", 1_004.5), ("crowd-exhausted-1", 2_000.0)):
        (tmp_path / name).write_text("x\n")
        os.utime(tmp_path / name, (moment, moment))
    assert last_answer_at(tmp_path) == 1_004.5
