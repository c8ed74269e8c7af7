"""The load test's outputs: the matrix (printed, CSV, JSON, Markdown) and one HTML page
whose charts are inline SVG (no JavaScript)."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict
from datetime import datetime
from html import escape
from pathlib import Path

from core.moments import moment_text

from .columns import columns_of
from .verdict import TAKEN, Result, broken_invariants, counted_breaks, lifecycle, lifecycle_races, taken

PALETTE = ["#1f77b4", "#2ca02c", "#17becf", "#4c4c9d", "#7f7f7f", "#0b6e4f", "#5b8def", "#6a994e"]
# Red means unsafe everywhere (the lab's cards, the verdicts): the lines of the strategies
# that broke something take these, the others the cool PALETTE.
REDS = ["#d62728", "#8c1d18", "#e8575a", "#b5179e"]
BROKE = "#b3261e"
HELD = "#1b7a3a"


def bar_chart(
    title: str, bars: list[tuple[str, float, str]], unit: str, reference: tuple[str, float] | None = None
) -> str:
    """Horizontal bars: (label, value, colour); an optional labelled reference line."""
    width, row, left = 760, 26, 230
    top = 30
    height = top + row * len(bars) + 30
    peak = max([v for _, v, _ in bars] + ([reference[1]] if reference else []) + [1])
    scale = (width - left - 80) / peak
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="0" y="18" class="title">{escape(title)}</text>']  # fmt: skip
    for i, (label, value, colour) in enumerate(bars):
        y = top + i * row
        parts.append(f'<text x="{left - 8}" y="{y + 17}" text-anchor="end">{escape(label)}</text>')
        parts.append(
            f'<rect x="{left}" y="{y + 4}" width="{max(value * scale, 1):.1f}" height="{row - 8}" fill="{colour}"/>'
        )
        parts.append(f'<text x="{left + value * scale + 6:.1f}" y="{y + 17}">{value:,.0f} {escape(unit)}</text>')
    if reference:
        x = left + reference[1] * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - 24}" stroke="#555" stroke-dasharray="4 3"/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle">{escape(reference[0])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def ticks(top: float, count: int = 4) -> list[float]:
    """Round values from 0 up to at least ``top``, about ``count`` steps apart (1, 2 or 5
    times a power of ten), for an axis' intermediate ticks."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def line_chart(
    title: str,
    series: dict[str, list[tuple[float, int]]],
    dashed: dict[str, list[tuple[float, int]]] | None = None,
    *,
    width: int = 760,
    height: int = 300,
    legend: int = 170,
    colours: dict[str, str] | None = None,
    t_min: float = 0,
    marker: tuple[float, str] | None = None,
) -> str:
    """One line per series; ``dashed`` lines (references, such as the supply) take the colour
    of the series of the same name, grey otherwise, and are labelled at their end.

    ``width`` and ``height`` are the drawing's own units (it scales to its box), so a
    small drawing keeps its text readable on a phone; ``legend`` is the width kept on the
    right for the series' names (0: no legend); ``colours`` overrides the palette per
    series; the time axis spans at least ``t_min`` seconds (a run's planned duration,
    while it is still going); ``marker`` (seconds, label) draws a dotted vertical line,
    such as the moment the crowd stopped."""
    dashed = dashed or {}
    left, bottom, top = 50, 40, 30
    points = [p for values in [*series.values(), *dashed.values()] for p in values]
    if not points:
        return ""
    y_ticks = ticks(max(max(v for _, v in points), 1))
    t_ticks = ticks(max(max(t for t, _ in points), t_min, marker[0] if marker else 0) or 1, count=5)
    t_max, y_max = t_ticks[-1], y_ticks[-1]
    right = width - legend - 10 if legend else width - 10
    sx = (right - left) / t_max
    sy = (height - top - bottom) / y_max

    def x(t: float) -> str:
        return f"{left + t * sx:.1f}"

    def y(v: float) -> str:
        return f"{height - bottom - v * sy:.1f}"

    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="0" y="18" class="title">{escape(title)}</text>']  # fmt: skip
    for v in y_ticks:
        parts.append(f'<line x1="{left}" y1="{y(v)}" x2="{right}" y2="{y(v)}" stroke="#e3e3e3"/>')
        parts.append(f'<text x="{left - 6}" y="{float(y(v)) + 4:.1f}" text-anchor="end">{v:,.0f}</text>')
    for t in t_ticks:
        parts.append(f'<line x1="{x(t)}" y1="{height - bottom}" x2="{x(t)}" y2="{height - bottom + 4}" stroke="#999"/>')
        parts.append(f'<text x="{x(t)}" y="{height - bottom + 18}" text-anchor="middle">{t:,.0f}</text>')
    parts += [f'<text x="{right}" y="{height - 4}" text-anchor="end">seconds</text>',
              f'<line x1="{left}" y1="{height - bottom}" x2="{right}" y2="{height - bottom}" stroke="#999"/>',
              f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#999"/>']  # fmt: skip
    if marker:
        parts.append(
            f'<line x1="{x(marker[0])}" y1="{top}" x2="{x(marker[0])}" y2="{height - bottom}" stroke="#777"'
            ' stroke-dasharray="2 3"/>'
        )
        parts.append(
            f'<text x="{float(x(marker[0])) - 4:.1f}" y="{height - bottom - 6}" text-anchor="end"'
            f' class="marker-label">{escape(marker[1])}</text>'
        )
    palette = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(series)} | (colours or {})
    lines = [(name, values, palette[name], "") for name, values in series.items()]
    lines += [(name, values, palette.get(name, "#555"), ' stroke-dasharray="6 4"') for name, values in dashed.items()]
    for i, (name, values, colour, dash) in enumerate(lines):
        path = " ".join(f"{x(t)},{y(v)}" for t, v in values)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2"{dash} points="{path}"/>')
        if dash and name not in series:
            # A reference line says what it is where it ends, legend or not.
            # Above its line, or below it where the line runs along the top, under the title.
            end = float(y(values[-1][1]))
            label_y = end - 5 if end >= top + 15 else end + 16
            parts.append(
                f'<text x="{right - 4}" y="{label_y:.1f}" text-anchor="end" fill="{colour}"'
                f' class="dashed-label">{escape(name)}</text>'
            )
        if legend:
            label = f"{name} (dashed)" if dash and name in series else name
            parts.append(f'<text x="{right + 10}" y="{top + 14 + 16 * i}" fill="{colour}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def bucket_lines(series: list[tuple[float, list[int]]]) -> dict[str, list[tuple[float, int]]]:
    """A series of units left per bucket as one line per bucket (``bucket 0``, ...); a bucket
    added by a split mid-run starts at its first sample."""
    count = max((len(units) for _, units in series), default=0)
    return {
        f"bucket {bucket}": [(t, units[bucket]) for t, units in series if bucket < len(units)]
        for bucket in range(count)
    }


def bucket_charts(rows: list[Result]) -> str:
    """Each bucketed run's units left per bucket over time: a bucket stranding units stays
    above 0 while the others are empty."""
    return "".join(
        line_chart(f"{r.label}: units left per bucket over time", bucket_lines(r.bucket_series), legend=0)
        for r in rows
        if r.buckets > 1 and r.bucket_series
    )


def supply_lines(rows: list[Result]) -> dict[str, list[tuple[float, int]]]:
    """The supply to draw against: one line when every run had the same fixed supply, else
    each run's own (a restock raises it while the run goes on)."""
    values = {v for r in rows for _, v in r.supply_series}
    if len(values) == 1:
        (supplied,) = values
        t_max = max((t for r in rows for t, _ in r.supply_series), default=0)
        return {f"supply {supplied}": [(0.0, supplied), (t_max, supplied)]}
    return {r.label: r.supply_series for r in rows if r.supply_series}


def broke(result: Result) -> bool:
    """Whether the run broke an invariant (never the baseline, which has no product)."""
    return bool(result.product in TAKEN and broken_invariants(result))


def line_colours(rows: list[Result]) -> dict[str, str]:
    """Each strategy's line: a red for one that broke something, a cool colour otherwise."""
    reds = iter(REDS * len(rows))
    cools = iter(PALETTE * len(rows))
    return {r.label: next(reds) if broke(r) else next(cools) for r in rows}


def charted_breaks(result: Result) -> list[tuple[str, int]]:
    """What the scenario's bar chart adds up: the product's counted invariants, and a
    lifecycle scenario's races."""
    return counted_breaks(result) + (lifecycle_races(result) if lifecycle(result) else [])


def scenario_section(scenario: str, rows: list[Result], baseline: Result | None) -> str:
    labels = " + ".join(label for label, _ in charted_breaks(rows[0]))
    broken = [
        (r.label, float(count), BROKE if count else HELD)
        for r in rows
        for count in [sum(n for _, n in charted_breaks(r))]
    ]
    colours = line_colours(rows)
    speed = [(r.label, r.rps, "#1f77b4") for r in rows]
    reference = (f"no-op baseline {baseline.rps:,.0f} req/s", baseline.rps) if baseline else None
    name = TAKEN[rows[0].product]
    return (
        f"<h2>{escape(scenario)} ({escape(rows[0].product)})</h2>"
        + bar_chart(f"{labels[0].upper()}{labels[1:]} (0 is correct)", broken, "")
        + bar_chart("Throughput", speed, "req/s", reference)
        + line_chart(
            f"{name[0].upper()}{name[1:]} over time, against the supply (above it is an oversell)",
            {r.label: r.taken_series for r in rows},
            supply_lines(rows),
            colours=colours,
        )
        + line_chart("Stock left over time", {r.label: r.stock_series for r in rows}, colours=colours)
        + bucket_charts(rows)
    )


def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def matrix_text(results: list[Result]) -> str:
    """The matrix as a Markdown table."""
    columns = columns_of(results)
    lines = ["| " + " | ".join(label for _, label in columns) + " |", "|" + "---|" * len(columns)]
    for result in results:
        lines.append("| " + " | ".join(cell(getattr(result, name)) for name, _ in columns) + " |")
    return "\n".join(lines)


def summary(result: Result) -> str:
    """One line on a finished run, for the progress output."""
    name, count = taken(result)
    breaks = ", ".join(f"{label} {n}" for label, n in counted_breaks(result))
    deferred = ""
    if result.accepted is not None:
        drained = "not all written" if result.drain_s is None else f"all written {result.drain_s:.1f} s after"
        deferred = f" ({result.accepted} with 202; {result.pending_at_end} waiting when the crowd stopped, {drained})"
    held = ""
    if lifecycle(result):
        drained = "not drained" if result.holds_drain_s is None else f"drained {result.holds_drain_s:.1f} s after"
        races = ", ".join(f"{label} {n}" for label, n in lifecycle_races(result))
        held = f"; {result.settled} settled, {result.released} released, {result.resold} resold, {races} ({drained})"
    return (
        f"confirmed {result.confirmed}{deferred}, {name} {count} of {result.supplied} supplied, {breaks}, "
        f"lost {result.lost_confirmations}{held}, {result.rps:,.0f} req/s: {result.verdict}"
    )


def write_outputs(out: Path, results: list[Result], meta: dict, *, locust_href=None) -> None:
    """``matrix.csv``, ``matrix.json`` (every figure and series), ``matrix.md`` and
    ``report.html``; ``locust_href`` (a result to the link of its Locust report, from the
    report's address) is by default the report's path beside ``report.html``."""
    rows = [{name: getattr(r, name) for name, _ in columns_of(results)} | {"ok": r.ok} for r in results]
    with open(out / "matrix.csv", "w", newline="") as csv_file:
        writer = csv.DictWriter(csv_file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    document = {"meta": meta, "results": [asdict(r) for r in results]}
    (out / "matrix.json").write_text(json.dumps(document, indent=2))
    (out / "matrix.md").write_text(matrix_text(results) + "\n")
    (out / "report.html").write_text(render_report(results, meta, locust_href=locust_href))


LIFECYCLE_NOTE = """
<p>A lifecycle scenario's items hold each unit taken until its <code>pay_by</code> or
<code>claim_by</code>; its run is audited once every hold was paid, claimed or released
and every payment resolved (<em>holds drain s</em> after the crowd stopped). <em>paid/claimed</em>
and <em>released</em> count its records so, <em>resold</em> the takes beyond the supply (units
sold again after a return). A sound strategy keeps the rest at 0: <em>returned twice</em>
(units returned to the stock more than once), <em>settled+released</em> (records both paid or
claimed and released), <em>200s unsettled</em> (pays or claims answered 200 whose record is not
paid or claimed), <em>payments off</em> (provider charges that are not exactly one paid order
or one refund), <em>returns unsold</em> (units back in stock while buyers were told there was
nothing left) and <em>held left</em>.</p>"""


def setting_text(name: str, value) -> str:
    """A setting as the report shows it: the run's start (ISO 8601 in results.json, for
    machines) as every page writes a moment, with its zone; the rest as given."""
    if name == "when":
        return moment_text(datetime.fromisoformat(value))
    return str(value)


def render_report(results: list[Result], meta: dict, *, locust_href=None) -> str:
    """The HTML report. Columns that no row has a figure for (the other product's, a deferred
    strategy's without one, CPU time where it cannot be read) are left out, so that the
    table fits a laptop's screen; the rest scrolls within its box, never the page."""
    locust_href = locust_href or (lambda result: result.locust_report)
    runs = [r for r in results if r.scenario != "baseline"]
    baseline = next((r for r in results if r.scenario == "baseline"), None)
    sections = [
        scenario_section(scenario, [r for r in runs if r.scenario == scenario], baseline)
        for scenario in dict.fromkeys(r.scenario for r in runs)
    ]
    columns = [
        (name, label) for name, label in columns_of(results) if any(getattr(r, name) is not None for r in results)
    ]
    header = "".join(f"<th>{escape(label)}</th>" for _, label in columns)

    def td(result: Result, name: str) -> str:
        text = escape(cell(getattr(result, name)))
        if name == "strategy" and locust_href(result):
            return f'<td><a href="{escape(locust_href(result))}">{text}</a></td>'
        if name == "verdict":
            return f'<td class="verdict {"broke" if broke(result) or not result.ok else "held"}">{text}</td>'
        return f"<td>{text}</td>"

    body = "".join(
        f'<tr class="{"ok" if r.ok else "bad"}">' + "".join(td(r, name) for name, _ in columns) + "</tr>"
        for r in results
    )
    settings = ", ".join(f"{escape(k)}: {escape(setting_text(k, v))}" for k, v in meta.items())
    measured = [name for name, _ in columns]
    baseline_note = (
        " The dashed line in the throughput chart is a no-op JSON endpoint of the same server: what a request"
        " costs with no stock at all."
        if baseline
        else ""
    )
    cpu_note = " Its CPU ms/req includes the worker's." if "cpu_ms_per_request" in measured else ""
    lifecycle_note = LIFECYCLE_NOTE if "returned_twice" in measured else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Load test verdict</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1rem auto; max-width: 70rem; padding: 0 1rem; }}
.table {{ overflow-x: auto; max-width: 100%; }}
table {{ border-collapse: collapse; font-size: 12px; }} td, th {{ border: 1px solid #ddd; padding: 3px 6px; }}
td.verdict.held {{ color: {HELD}; }} td.verdict.broke {{ color: {BROKE}; font-weight: 600; }}
tr.bad td {{ background: #fde2e2; }}
svg {{ max-width: 100%; font-size: 12px; margin: .5rem 0 1.5rem; }} .title {{ font-weight: 600; font-size: 14px; }}
</style></head><body>
<h1>Load test verdict</h1>
<p>{settings}</p>
<p>Red is a strategy that broke something (expected of <code>none</code>, and of <code>local</code> across
processes: the demonstration), green one that held. In the charts over time, the orders or awarded
prizes of a strategy that oversells climb above the dashed supply.{baseline_note} Each strategy's name in
the table links to its Locust report.</p>
<p>A deferred strategy (<code>redis_lua</code>) answers 202 and a Celery worker writes the
records afterwards: <em>202s</em> counts those answers, <em>pending at end</em> the
reservations still waiting to be written when the crowd stopped, and <em>drain s</em> the
seconds from then until every one was. Its run is audited only then: each 202 must have
become exactly one record, found by its reservation, and Redis' stock and takes must agree
with the database. Its charts follow the records in the database, which catch up during
the drain.{cpu_note}</p>
<p><em>history</em> counts the answers a run's history shows wrong against its records: a take, pay or
claim acknowledged and lost, a refusal for want of stock while a unit was free, an answer its record
contradicts (0 is correct; docs/loadtests.md, "Histories").</p>{lifecycle_note}
<div class="table"><table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table></div>
{"".join(sections)}
</body></html>"""
