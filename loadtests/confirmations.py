"""The confirmations a run's crowd heard, against the records the database holds: the
verdict's "every confirmation the API gave exists in the database once, as it was
announced" (``loadtests.verdict``). Pure, as the verdict's rules are."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

_MISSING = object()


def lost_confirmations(announced: Iterable[tuple[int, int | None]], recorded: Mapping[int, int | None]) -> int:
    """How many confirmations the database does not bear out.

    ``announced`` is every (record id, detail) the API confirmed, the detail being the
    prize a draw announced (None for an order, or a draw without a prize); the id is the
    one the API answered with, a reservation's for a 202. ``recorded`` maps the ids
    found in the database, for this product, to their detail (a value equal to no
    detail when one id matched several records). A confirmation counts as lost when its id is missing, when its detail
    differs, or when the same id was confirmed more than once (each extra counts).
    """
    announced = list(announced)
    repeated = len(announced) - len({record_id for record_id, _ in announced})
    unmatched = sum(1 for record_id, detail in set(announced) if recorded.get(record_id, _MISSING) != detail)
    return repeated + unmatched
