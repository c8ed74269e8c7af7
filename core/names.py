"""What a title or a name may be (a voucher's title, a pool's or a prize's name), for the API,
the admin and the services alike: ``name_clean``, and ``NAME_PATTERN``, the same rule as the
regular expression that the OpenAPI document gives its clients.

A name is stripped (Python's ``str.strip``), then needs one character that shows: not a space,
a control, a format character (U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER, U+FEFF), a lone
combining mark, nor one of the fillers that fonts draw as nothing.
A title of U+200B alone read as an empty row in every list. It may hold no control character
other than whitespace: NUL, and the like, are never typed, only sent, and they cut the name
short or garble it in logs, terminals and exports. Nor a bidirectional control (the embeddings,
overrides and isolates, U+202A to U+202E and U+2066 to U+2069, and the marks U+200E, U+200F
and U+061C) anywhere, even beside characters that show: they reorder how the text around
them is drawn, so that a title reads on the page as something it is not.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from itertools import chain

from .errors import InvalidInput

# Drawn as nothing although their category is a letter or a symbol.
_FILLERS = frozenset("\u115f\u1160\u2800\u3164\uffa0")
_UNSEEN_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me"})
# Every character Python strips lies below U+3001.
_WHITESPACE = frozenset(chr(code) for code in range(0x3001) if chr(code).isspace())
# The planes that hold every control, format, space and combining character: the Basic
# Multilingual Plane, the Supplementary Multilingual Plane and the Supplementary Special-purpose
# Plane (tags, variation selectors). The others hold only ideographs, private use and unassigned
# code points; scanning only these three builds the pattern in a tenth of a second at every
# start (the whole range took over a second). tests/test_names.py checks every
# code point against the pattern, so a Unicode release that breaks this shows there.
_PLANES_WITH_UNSEEN = (range(0x0, 0x20000), range(0xE0000, 0xF0000))


def _unseen(char: str) -> bool:
    return char in _FILLERS or char in _WHITESPACE or unicodedata.category(char) in _UNSEEN_CATEGORIES


# Bidirectional controls: a right-to-left override turns "Gift\u202egnp.exe" into what reads
# as "Giftexe.png", and the other embeddings, isolates and marks reorder text as well.
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _control(char: str) -> bool:
    return char not in _WHITESPACE and unicodedata.category(char) == "Cc"


def _refused(char: str) -> bool:
    return _control(char) or char in _BIDI_CONTROLS


def name_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a name once stripped, in words; ``None`` when nothing is."""
    if any(map(_control, value)):
        return "must not hold a control character such as NUL."
    if any(char in _BIDI_CONTROLS for char in value):
        return "must not hold a bidirectional control character such as U+202E RIGHT-TO-LEFT OVERRIDE."
    if all(map(_unseen, value)):
        return "needs a character that shows: not only spaces or invisible characters."
    return None


# Every character a name may not hold: the controls lie below U+0100.
NAME_REFUSED = frozenset(chr(code) for code in range(0x100) if _control(chr(code))) | _BIDI_CONTROLS


def name_scrubbed(value: str) -> str:
    """``value`` without the characters a name may not hold, stripped: a name stored before
    the rule refused them, made what the rule takes (or empty, when nothing showed)."""
    kept = "".join(char for char in value if char not in NAME_REFUSED).strip()
    return "" if all(map(_unseen, kept)) else kept


def name_clean(value: str, *, field: str = "name") -> str:
    """``value`` stripped; ``InvalidInput`` naming ``field`` when it is not a name."""
    value = value.strip()
    problem = name_problem(value)
    if problem:
        raise InvalidInput(f"{field} {problem}")
    return value


def _ranges(chars: Iterable[str]) -> str:
    """A character class's body for ``chars``: BMP characters escaped as ``\\uXXXX`` and the
    others written as themselves, which Python's ``re``, the Rust regex crate (pydantic's) and
    ECMA-262's ``u`` mode all read alike (ECMA-262 has no ``\\U`` escape)."""

    def one(code: int) -> str:
        return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)

    codes = sorted(ord(char) for char in chars)
    parts, start = [], None
    for index, code in enumerate(codes):
        if start is None:
            start = code
        if index + 1 == len(codes) or codes[index + 1] != code + 1:
            parts.append(one(start) if start == code else f"{one(start)}-{one(code)}")
            start = None
    return "".join(parts)


def _pattern() -> str:
    refused, unseen = [], []
    category = unicodedata.category
    for code in chain(*_PLANES_WITH_UNSEEN):
        # Surrogates are not characters a request can hold (JSON text is UTF-8): left out of
        # the classes, as the escapes of lone surrogates mean something else to each engine.
        if 0xD800 <= code <= 0xDFFF:
            continue
        char = chr(code)
        kind = category(char)
        if kind in _UNSEEN_CATEGORIES or char in _WHITESPACE or char in _FILLERS:
            unseen.append(char)
        if _refused(char):
            refused.append(char)
    # No refused character anywhere (each of them is also unseen), and one that shows. JSON
    # Schema's pattern searches, so the anchors are spelled out.
    return f"^[^{_ranges(refused)}]*[^{_ranges(unseen)}][^{_ranges(refused)}]*$"


# A name as the document says it: the same rule as ``name_problem``, strip aside (a name
# with spaces around a character that shows matches, and is stored stripped).
NAME_PATTERN = _pattern()
