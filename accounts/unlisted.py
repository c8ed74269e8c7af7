"""Who may see an unlisted item (a load run's own voucher or pool) at all: staff, and the load
crowd that buys and draws it. To anyone else it is not there: reading it by its id answers as
a missing id does (404), so that nobody outside can find the runs' items by trying ids, by
reading them or by buying and drawing."""

from __future__ import annotations

from typing import NoReturn

from django.contrib.auth import get_user_model
from django.http import Http404

from .crowd import crowd_member


def unlisted_visible(user) -> bool:
    """Whether ``user`` (a request's, anonymous or not) may see unlisted items."""
    if not user.is_authenticated:
        return False
    # The crowd first: known from memory (accounts.crowd), where staff is a read of the user.
    return crowd_member(user_id=user.pk) or (user.is_active and user.is_staff)


def item_shown(item, *, user):
    """``item`` when it is listed or ``user`` may see unlisted items; otherwise ``Http404``,
    the answer to an id of nothing."""
    if item.listed or unlisted_visible(user):
        return item
    raise Http404


def unlisted_take_refuse(*, user_id: int | None, refusal: Exception) -> NoReturn:
    """Refuse a purchase or draw of an unlisted item by a user outside the load crowd: staff,
    who see the item, hear ``refusal`` (``not_for_sale``, ``not_open``); anyone else hears
    what an id of nothing answers (``Http404``)."""
    staff = get_user_model().objects.filter(pk=user_id, is_active=True, is_staff=True)
    if user_id is not None and staff.exists():
        raise refusal
    raise Http404
