"""The colours of static/css/site.css meet WCAG 2.1 AA.

Each pair names the rules its foreground and background come from, so a colour changed
in the stylesheet is measured here as it is; and every colour the stylesheet declares
must belong to a pair, so a new one cannot slip in unmeasured.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SITE_CSS = Path(__file__).resolve().parent.parent / "static" / "css" / "site.css"

TEXT = 4.5  # 1.4.3, normal-size text
NON_TEXT = 3.0  # 1.4.11, graphics that carry meaning

BODY_TEXT = ("body", "color")
# A strategy's explanation, why a button is off, a window's time.
MUTED = (".explain, .reason, .state .when, .window .when", "color")
# (what, foreground (selector, property), background (selector, property), minimum)
PAIRS = [
    ("body text on the page", BODY_TEXT, ("body", "background"), TEXT),
    ("header links on the header", (".bar a, .bar .link", "color"), (".bar", "background"), TEXT),
    (
        "button label on the buy and log-in buttons",
        ("button.buy, .login button", "color"),
        ("button.buy, .login button", "background"),
        TEXT,
    ),
    ("text on the sales table", BODY_TEXT, ("table.sales", "background"), TEXT),
    ("text on the pools table", BODY_TEXT, ("table.pools", "background"), TEXT),
    ("text on a voucher and the log-in card", BODY_TEXT, (".voucher, .login", "background"), TEXT),
    ("text on a pool card", BODY_TEXT, (".pool", "background"), TEXT),
    ("text on the orders card", BODY_TEXT, (".orders", "background"), TEXT),
    ("text on an error page", BODY_TEXT, (".error-page", "background"), TEXT),
    ("text on a tag", BODY_TEXT, (".tag", "background"), TEXT),
    ("text on a live tag", BODY_TEXT, (".tag.live", "background"), TEXT),
    ("text on an upcoming tag", BODY_TEXT, (".tag.soon", "background"), TEXT),
    ("text on a sold-out or ended tag", BODY_TEXT, (".tag.sold, .tag.ended", "background"), TEXT),
    ("text on a good outcome", BODY_TEXT, (".outcome.ok", "background"), TEXT),
    ("text on a refusal", BODY_TEXT, (".outcome.bad", "background"), TEXT),
    ("text on a notice", BODY_TEXT, (".outcome.info", "background"), TEXT),
    ("a prize's odds bar on its track", (".odds-bar > rect", "fill"), (".odds-bar", "background"), NON_TEXT),
    (
        "the no-prize bar on its track",
        (".no-prize .odds-bar > rect", "fill"),
        (".odds-bar", "background"),
        NON_TEXT,
    ),
    ("muted text on a voucher card", MUTED, (".voucher, .login", "background"), TEXT),
    ("muted text on a pool card", MUTED, (".pool", "background"), TEXT),
    ("muted text on the sales table", MUTED, ("table.sales", "background"), TEXT),
    ("muted text on the pools table", MUTED, ("table.pools", "background"), TEXT),
    ("an unsafe strategy's tag", (".tag.unsafe", "color"), (".tag.unsafe", "background"), TEXT),
    ("an audit's red mark", (".tag.flag", "color"), (".tag.flag", "background"), TEXT),
    (
        "the label of a disabled buy or draw button",
        ("button.buy[disabled]", "color"),
        ("button.buy[disabled]", "background"),
        TEXT,
    ),
]
# Colours that carry nothing to read: the rules between table rows.
DECORATIVE = {("border-bottom", "#e3e6ea")}


def parse(css: str) -> dict[str, dict[str, str]]:
    """``{selector: {property: value}}`` of the innermost rules (those inside @media too)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    rules: dict[str, dict[str, str]] = {}
    for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        declarations = rules.setdefault(" ".join(selector.split()), {})
        for declaration in body.split(";"):
            if ":" in declaration:
                name, value = declaration.split(":", 1)
                declarations[name.strip()] = value.strip()
    return rules


def hex_colour(value: str) -> str | None:
    found = re.search(r"#(?:[0-9a-fA-F]{6}|[0-9a-fA-F]{3})\b", value)
    if found is None:
        return None
    digits = found.group()[1:].lower()
    return "#" + ("".join(c * 2 for c in digits) if len(digits) == 3 else digits)


def luminance(colour: str) -> float:
    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    colour = hex_colour(colour)
    r, g, b = (channel(int(colour[i : i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def ratio(a: str, b: str) -> float:
    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.fixture(scope="module")
def rules():
    return parse(SITE_CSS.read_text())


def colour_of(rules, selector: str, prop: str) -> str:
    assert selector in rules, f"site.css has no rule {selector!r}"
    colour = hex_colour(rules[selector].get(prop, ""))
    assert colour is not None, f"{selector} declares no hex {prop}"
    return colour


def test_the_ratio_matches_wcags_own_examples():
    assert ratio("#000", "#fff") == pytest.approx(21)
    assert ratio("#777", "#fff") == pytest.approx(4.48, abs=0.01)
    assert ratio("#d9480f", "#fff") == pytest.approx(4.30, abs=0.01)  # the old orange buttons, short of 4.5


@pytest.mark.parametrize(("what", "fg", "bg", "minimum"), PAIRS, ids=[pair[0] for pair in PAIRS])
def test_each_pair_meets_aa(rules, what, fg, bg, minimum):
    fg_colour, bg_colour = colour_of(rules, *fg), colour_of(rules, *bg)
    measured = ratio(fg_colour, bg_colour)
    assert measured >= minimum, f"{what}: {fg_colour} on {bg_colour} is {measured:.2f}:1, under {minimum}:1"


def test_every_colour_in_the_stylesheet_is_in_a_pair(rules):
    paired = {(selector, prop) for _, fg, bg, _ in PAIRS for selector, prop in (fg, bg)}
    unmeasured = [
        f"{selector} {{ {prop}: {value} }}"
        for selector, declarations in rules.items()
        for prop, value in declarations.items()
        if hex_colour(value) and (selector, prop) not in paired and (prop, hex_colour(value)) not in DECORATIVE
    ]
    assert not unmeasured, f"colours no pair measures: {unmeasured}"
