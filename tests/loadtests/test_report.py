"""The outputs: one matrix for both products, and the charts against the supply."""

from __future__ import annotations

from loadtests.report import COLUMNS, matrix_text, render_report, summary, supply_lines
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
    ]  # fmt: skip


def cells(line: str) -> dict[str, str]:
    values = [value.strip() for value in line.strip("|").split("|")]
    return {label: value for (_, label), value in zip(COLUMNS, values, strict=True)}


def test_one_matrix_shows_each_product_in_its_own_columns():
    lines = matrix_text(rows()).splitlines()
    baseline, voucher, pool = (cells(line) for line in lines[2:])
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
