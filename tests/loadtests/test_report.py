"""The outputs: one matrix for both products, and the charts against the supply."""

from __future__ import annotations

from loadtests.columns import COLUMNS, LIFECYCLE_COLUMNS, columns_of
from loadtests.report import (
    matrix_text,
    render_report,
    summary,
    supply_lines,
)
from loadtests.verdict import POOL, VOUCHER, Result


def rows() -> list[Result]:
    return [
        Result(scenario="baseline", strategy="no-op JSON", requests=100, rps=50.0, verdict="baseline", ok=True),
        Result(
            scenario="crowd", strategy="none", product=VOUCHER, requests=900, confirmed=620, orders=620,
            supplied=500, oversold=120, duplicates=0, lost_confirmations=0, stock_left=0, conserved=False,
            verdict="broke as expected: oversold", expected_to_break=True, ok=True,
            taken_series=[(0.0, 0), (1.0, 620)], supply_series=[(0.0, 500), (1.0, 500)],
        ),
        Result(
            scenario="draw-crowd", strategy="db_atomic", product=POOL, requests=800, confirmed=500, awarded=500,
            draws=500, supplied=500, over_awarded=0, users_over_limit=0, lost_confirmations=0, stock_left=0,
            verdict="holds", ok=True, taken_series=[(0.0, 0), (2.0, 500)], supply_series=[(0.0, 500), (2.0, 500)],
        ),
        Result(
            scenario="crowd", strategy="redis_lua", product=VOUCHER, requests=1900, confirmed=500, accepted=500,
            orders=500, supplied=500, oversold=0, duplicates=0, lost_confirmations=0, stock_left=0,
            pending_at_end=37, drain_s=1.26, unpersisted=0, redis_state=True,
            redis_drift={"stock": 0, "takers": 0, "seqs_missing": 0}, verdict="holds", ok=True,
        ),
    ]  # fmt: skip


def cells(line: str) -> dict[str, str]:
    values = [value.strip() for value in line.strip("|").split("|")]
    return {label: value for (_, label), value in zip(COLUMNS, values, strict=True)}


def test_one_matrix_shows_each_product_in_its_own_columns():
    lines = matrix_text(rows()).splitlines()
    baseline, voucher, pool, _ = (cells(line) for line in lines[2:])
    assert (voucher["orders"], voucher["oversold"], voucher["dup orders"]) == ("620", "120", "0")
    assert (voucher["awarded"], voucher["over-awarded"], voucher["users over limit"]) == ("-", "-", "-")
    assert (pool["awarded"], pool["over-awarded"], pool["users over limit"]) == ("500", "0", "0")
    assert (pool["orders"], pool["oversold"], pool["dup orders"]) == ("-", "-", "-")
    assert (baseline["confirmed"], baseline["supplied"], baseline["lost"]) == ("-", "-", "-")


def test_the_report_charts_what_was_taken_against_the_supply():
    html = render_report(rows(), {"stock": 500})
    assert "<h2>crowd (voucher)</h2>" in html and "<h2>draw-crowd (pool)</h2>" in html
    assert "Orders over time, against the supply" in html
    assert "Awarded over time, against the supply" in html
    assert "Over-awarded + users over the limit (0 is correct)" in html
    assert "supply 500" in html


def test_a_supply_that_moved_is_drawn_per_run():
    restocked = [
        Result(scenario="restock", strategy="a", product=VOUCHER, supply_series=[(0.0, 500), (1.0, 510)]),
        Result(scenario="restock", strategy="b", product=VOUCHER, supply_series=[(0.0, 500), (1.0, 505)]),
    ]
    assert set(supply_lines(restocked)) == {"a", "b"}


def test_the_progress_line_names_the_products_own_figures():
    assert summary(rows()[2]).startswith("confirmed 500, awarded 500 of 500 supplied, over-awarded 0, users over")


def test_a_deferred_strategys_row_shows_its_202s_what_waited_and_how_long_it_took():
    lines = matrix_text(rows()).splitlines()
    _, voucher, pool, deferred = (cells(line) for line in lines[2:])
    assert (deferred["202s"], deferred["pending at end"], deferred["drain s"]) == ("500", "37", "1.3")
    for other in (voucher, pool):
        assert (other["202s"], other["pending at end"], other["drain s"]) == ("-", "-", "-")
    assert summary(rows()[3]).startswith(
        "confirmed 500 (500 with 202; 37 waiting when the crowd stopped, all written 1.3 s after), orders 500"
    )
    html = render_report(rows(), {"stock": 500})
    assert "<th>202s</th>" in html and "<th>pending at end</th>" in html and "<th>drain s</th>" in html


def lifecycle_rows() -> list[Result]:
    return [
        *rows()[1:3],
        Result(
            scenario="pay-race", strategy="none", product=VOUCHER, requests=300, confirmed=60, orders=60,
            supplied=40, oversold=0, duplicates=0, lost_confirmations=0, stock_left=70, conserved=False,
            held_left=0, settled=20, released=40, resold=20, returned_twice=45, settled_and_released=2,
            unsettled_200s=2, charges=22, refunds=0, payments_off=2, returns_unsold=0, holds_drain_s=2.7,
            verdict="broke as expected: units returned twice", expected_to_break=True, ok=True,
        ),
        Result(
            scenario="claim-race", strategy="db_atomic", product=POOL, requests=160, confirmed=40, awarded=17,
            draws=40, supplied=60, over_awarded=0, users_over_limit=0, lost_confirmations=0, stock_left=43,
            held_left=0, settled=17, released=23, resold=0, returned_twice=0, settled_and_released=0,
            unsettled_200s=0, returns_unsold=0, holds_drain_s=0.0, verdict="holds", ok=True,
        ),
    ]  # fmt: skip


def test_the_lifecycle_columns_come_before_the_verdict_only_with_a_lifecycle_row():
    assert columns_of(rows()) == COLUMNS
    columns = columns_of(lifecycle_rows())
    assert columns == COLUMNS[:-1] + LIFECYCLE_COLUMNS + COLUMNS[-1:]
    lines = matrix_text(lifecycle_rows()).splitlines()
    assert lines[0].split(" | ")[-1] == "verdict |"
    crowd, pool, race, claims = (
        dict(zip([label for _, label in columns], [v.strip() for v in line.strip("|").split("|")], strict=True))
        for line in lines[2:]
    )
    assert (race["returned twice"], race["settled+released"], race["200s unsettled"]) == ("45", "2", "2")
    assert (race["charges"], race["payments off"], race["holds drain s"]) == ("22", "2", "2.7")
    assert (claims["charges"], claims["refunds"], claims["payments off"]) == ("-", "-", "-")
    assert (crowd["returned twice"], pool["held left"]) == ("-", "-")


def test_a_lifecycle_rows_progress_line_counts_its_holds_and_races():
    line = summary(lifecycle_rows()[2])
    assert "; 20 settled, 40 released, 20 resold, units returned twice 45, paid and released 2" in line
    assert "200s not paid 2, payments unresolved or unbalanced 2 (drained 2.7 s after)" in line
    html = render_report(lifecycle_rows(), {"stock": 40})
    assert "<th>returned twice</th>" in html and "<th>charges</th>" in html
