"""The load-test report: one HTML page, charts drawn as inline SVG (no JavaScript)."""

from __future__ import annotations

from html import escape

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


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


def line_chart(title: str, series: dict[str, list[tuple[float, int]]]) -> str:
    width, height, left, bottom, top = 760, 300, 50, 40, 30
    points = [p for values in series.values() for p in values]
    if not points:
        return ""
    t_max = max(t for t, _ in points) or 1
    y_max = max(max(v for _, v in points), 1)
    sx = (width - left - 170) / t_max
    sy = (height - top - bottom) / y_max
    parts = [f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="0" y="18" class="title">{escape(title)}</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - 170}" y2="{height - bottom}" stroke="#999"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#999"/>',
             f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{y_max}</text>',
             f'<text x="{left - 6}" y="{height - bottom + 4}" text-anchor="end">0</text>',
             f'<text x="{width - 170}" y="{height - bottom + 18}" text-anchor="end">{t_max:.0f} s</text>']  # fmt: skip
    for i, (name, values) in enumerate(series.items()):
        colour = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{left + t * sx:.1f},{height - bottom - v * sy:.1f}" for t, v in values)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        parts.append(f'<text x="{width - 160}" y="{top + 14 + 16 * i}" fill="{colour}">{escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render_report(results, meta: dict) -> str:
    runs = [r for r in results if r.scenario != "baseline"]
    baseline = next((r for r in results if r.scenario == "baseline"), None)
    sections = []
    for scenario in dict.fromkeys(r.scenario for r in runs):
        rows = [r for r in runs if r.scenario == scenario]
        broken = [
            (r.strategy, float(r.oversold + r.duplicates), "#d62728" if r.expected_to_break else "#2ca02c")
            for r in rows
        ]
        speed = [(r.strategy, r.rps, "#1f77b4") for r in rows]
        reference = (f"no-op baseline {baseline.rps:,.0f} req/s", baseline.rps) if baseline else None
        sections.append(
            f"<h2>{escape(scenario)}</h2>"
            + bar_chart("Oversold + duplicate orders (0 is correct)", broken, "")
            + bar_chart("Throughput", speed, "req/s", reference)
            + line_chart("Stock left over time", {r.strategy: r.stock_series for r in rows})
        )
    header = "".join(f"<th>{escape(label)}</th>" for label in (
        "scenario", "strategy", "requests", "confirmed", "orders", "supplied", "oversold", "dup orders", "lost",
        "stock left", "req/s", "p50 ms", "p95 ms", "p99 ms", "CPU ms/req", "verdict"))  # fmt: skip
    body = "".join(
        f'<tr class="{"ok" if r.ok else "bad"}">'
        + "".join(
            f"<td>{escape(str(round(v, 1) if isinstance(v, float) else v))}</td>"
            for v in (
                r.scenario,
                r.strategy,
                r.requests,
                r.confirmed,
                r.orders,
                r.supplied,
                r.oversold,
                r.duplicates,
                r.lost_confirmations,
                r.stock_left,
                r.rps,
                r.p50_ms,
                r.p95_ms,
                r.p99_ms,
                r.cpu_ms_per_request,
                r.verdict,
            )  # fmt: skip
        )
        + "</tr>"
        for r in results
    )
    settings = ", ".join(f"{escape(k)}: {escape(str(v))}" for k, v in meta.items())
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>Load test verdict</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 1rem auto; max-width: 70rem; padding: 0 1rem; }}
table {{ border-collapse: collapse; font-size: 12px; }} td, th {{ border: 1px solid #ddd; padding: 3px 6px; }}
tr.ok td:last-child {{ color: #2c7a2c; }} tr.bad td {{ background: #fde2e2; }}
svg {{ max-width: 100%; font-size: 12px; margin: .5rem 0 1.5rem; }} .title {{ font-weight: 600; font-size: 14px; }}
</style></head><body>
<h1>Load test verdict</h1>
<p>{settings}</p>
<p>Red bars are strategies expected to break (the demonstration); green bars must be 0.
Each run's Locust report sits next to this file.</p>
<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>
{"".join(sections)}
</body></html>"""
