"""A run on buckets, on its own: units stranded while sold out, sales per second, the
report's bucket columns and charts, and ``--buckets`` (no database, no server)."""

from __future__ import annotations

import argparse

import pytest

from loadtests.report import bucket_lines, columns_of, render_report
from loadtests.run import _bucket_counts
from loadtests.sales import sales_per_second, stranded_units
from loadtests.verdict import VOUCHER, Result, judge

SUPPLY = [(0.0, 100), (1.0, 100), (2.0, 100), (3.0, 100)]


def bucketed_row(buckets: int = 8, **figures) -> Result:
    """A voucher run that sold 97 of 100 and ended with 3 units in some bucket."""
    values = dict(
        requests=1000, confirmed=97, orders=97, supplied=100, oversold=0, duplicates=0, lost_confirmations=0,
        stock_left=3, stranded=3,
    )  # fmt: skip
    return Result(scenario="crowd", strategy="db_atomic", product=VOUCHER, buckets=buckets, **(values | figures))


def test_units_left_while_the_crowd_was_told_sold_out_are_stranded():
    assert stranded_units(3, SUPPLY, refused_at=2.5) == 3


def test_nobody_told_sold_out_strands_nothing_whatever_is_left():
    assert stranded_units(40, SUPPLY, refused_at=None) == 0


def test_units_restocked_after_the_last_refusal_are_not_stranded():
    restocked = [(0.0, 100), (1.0, 100), (2.0, 150), (3.0, 150)]
    # Refused at 1.5 s: the 50 units supplied at 2 s came later, and 10 left are theirs.
    assert stranded_units(10, restocked, refused_at=1.5) == 0
    # Refused at 3.5 s, after the restock: 60 left are 60 stranded.
    assert stranded_units(60, restocked, refused_at=3.5) == 60


def test_a_safe_strategys_bucketed_run_with_units_stranded_is_broken():
    verdict = judge(bucketed_row(), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("BROKEN: units stranded while sold out", False)


def test_a_bucketed_run_that_sold_everything_holds():
    verdict = judge(bucketed_row(orders=100, confirmed=100, stock_left=0, stranded=0), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("holds", True)


def test_a_run_on_one_row_reports_its_stranded_units_and_is_judged_as_before():
    verdict = judge(bucketed_row(buckets=1), breaks=None, server_processes=4)
    assert (verdict.verdict, verdict.ok) == ("holds", True)


def test_sales_per_second_count_until_the_last_sale_not_the_refusals_after():
    taken = [(0.0, 0), (0.5, 40), (1.0, 80), (1.25, 100), (5.0, 100), (10.0, 100)]
    assert sales_per_second(taken) == 80.0
    assert sales_per_second([(0.0, 0), (10.0, 0)]) == 0.0
    assert sales_per_second([]) == 0.0


def test_the_report_adds_the_bucket_columns_and_a_chart_per_bucketed_run():
    one_row = bucketed_row(buckets=1, stranded=0, stock_left=0, orders=100, verdict="holds", ok=True)
    split = bucketed_row(bucket_series=[(0.0, [50, 50]), (1.0, [3, 0])], verdict="BROKEN", ok=False)
    split.buckets = 2
    assert columns_of([one_row])[:3] == [("scenario", "scenario"), ("strategy", "strategy"), ("requests", "requests")]
    names = [name for name, _ in columns_of([one_row, split])]
    assert names[:5] == ["scenario", "strategy", "buckets", "sales_per_second", "stranded"]
    page = render_report([one_row, split], {})
    assert "db_atomic-2-buckets: units left per bucket over time" in page
    assert "db_atomic: units left" not in page  # the run on one row has none
    assert bucket_lines(split.bucket_series) == {"bucket 0": [(0.0, 50), (1.0, 3)], "bucket 1": [(0.0, 50), (1.0, 0)]}


def test_buckets_on_the_command_line():
    assert _bucket_counts("1,8") == [1, 8]
    assert _bucket_counts("8,8") == [8]
    for wrong in ("0", "65", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            _bucket_counts(wrong)
