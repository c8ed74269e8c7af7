"""The waiting room's fairness figures of a run (loadtests.admissions): the inversions counted
in O(n log n) agree with counting every pair, on passages made up at random and on small
cases worked by hand."""

from __future__ import annotations

import random

from loadtests.admissions import Passage, admissions_figures, inversions


def by_every_pair(passages: list[Passage]) -> tuple[int, int]:
    found = pairs = 0
    for a in passages:
        for b in passages:
            if a.answered < b.sent:
                pairs += 1
                if b.serial is not None and (a.serial is None or a.serial > b.serial):
                    found += 1
    return found, pairs


def passage(sent: float, serial: int | None, took: float = 0.01) -> Passage:
    return Passage(
        sent, sent + took, serial, None if serial is None else sent + 1, "admitted" if serial else "sold_out"
    )


def test_in_order_none_and_one_overtaking_one():
    assert inversions([passage(0, 1), passage(1, 2), passage(2, 3)]) == (0, 3)
    assert inversions([passage(0, 2), passage(1, 1), passage(2, 3)]) == (1, 3)
    # The first never admitted while a later one was: an inversion; joins that overlap are no pair.
    assert inversions([passage(0, None), passage(1, 1)]) == (1, 1)
    assert inversions([passage(0, 2, took=2), passage(1, 1)]) == (0, 0)


def test_the_count_agrees_with_every_pair_on_random_passages():
    rng = random.Random(7)
    for _ in range(50):
        serials = list(range(1, 41))
        rng.shuffle(serials)
        passages = [
            passage(rng.uniform(0, 10), serial if rng.random() < 0.8 else None, took=rng.uniform(0, 1))
            for serial in serials
        ]
        assert inversions(passages) == by_every_pair(passages)


def test_the_figures_read_the_logged_passages(tmp_path):
    (tmp_path / "admissions-1.txt").write_text("0.0000 0.0100 2 1.5000 admitted\n1.0000 1.0100 - - sold_out\n")
    (tmp_path / "admissions-2.txt").write_text("0.5000 0.5100 1 0.9000 admitted\n")
    figures = admissions_figures(tmp_path)
    assert (figures["admitted"], figures["told_sold_out"]) == (2, 1)
    # Three ordered pairs; the one of admissions-2.txt, who joined after the first, was admitted first.
    assert round(figures["inversions_percent"], 3) == round(100 / 3, 3)
    assert round(figures["longest_wait_s"], 3) == 1.49
