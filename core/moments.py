"""How every page and the admin write a moment: one format, with its zone.

"Nov 25, 10:59 UTC" (the year too when it is not this year's: "Nov 25 2027, 10:59 UTC"), in
the server's ``TIME_ZONE``, whose abbreviation it names. Four formats were in use ("Nov 25,
10:59", "Nov 25, 10:59:07", "2026-11-25 10:59", "25 Nov 10:59"), none with a zone, so a
viewer could not tell whose 10:59 it was.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone
from django.utils.formats import date_format

FORMAT = "M j, H:i T"
FORMAT_OTHER_YEAR = "M j Y, H:i T"


def moment_text(moment: datetime, *, now: datetime | None = None) -> str:
    """``moment`` in the server's zone, as every page writes it."""
    local = timezone.localtime(moment)
    this_year = timezone.localtime(now).year if now is not None else timezone.localtime().year
    return date_format(local, FORMAT if local.year == this_year else FORMAT_OTHER_YEAR)
