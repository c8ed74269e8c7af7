"""The load crowd: the users that load runs (the race lab, ``make loadtest``, the fault
runner, the benchmarks) create in bulk to buy and draw their own unlisted items.

An unlisted voucher is not for sale to anyone else, even by its id: it exists to be
measured, and an outsider's order would be counted by its audit. Membership is a Django
group, kept per process as the set of its members' ids: a take by the crowd under
``redis_lua`` reads nothing of the database.

What a process learns, and when:

- A member it does not know yet is asked of the database once, with every member added
  since its last read: a run's crowd is made of new users (``users_with_tokens_create``),
  whose ids lie above every id read before, so the first of them brings the rest, and a
  new crowd costs what it adds, never the members of earlier runs again.
- An outsider is asked once, then refused from memory for ``OUTSIDER_SECONDS``: a flood of
  takes on an unlisted item costs a query a second, not one each. A user already known as an
  outsider who joins the crowd in another process waits that long; a load run's users are
  new, never outsiders first, and this process's own ``crowd_join`` forgets them as outsiders at once.
- The whole crowd is read again at the first check a minute (``MEMBERS_SECONDS``) after
  the last such read, replacing the set: the members who left since (a run retired, in
  whichever process) are forgotten, and what a process holds, and that read's cost, is the
  crowd now, never every member of every run the site had. Until then a retired member may
  stay in the set: it has no token left and cannot log in (``users_retire``), so it buys
  nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Q

from core.memo import ProcessMemo

GROUP = "load crowd"
OUTSIDER_SECONDS = 1.0
OUTSIDERS_KEPT = 10_000
MEMBERS_SECONDS = 60.0


class _Members:
    """The crowd's ids as this process last read them, and the outsiders it met lately."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        self.ids: set[int] = set()  # changed in place: adding a crowd copies nothing
        self.top = 0  # the highest member id read: members added since lie above it
        self.read_at: float | None = None  # by ``time.monotonic``: the last read of the whole crowd
        self.outsiders: ProcessMemo[int, bool] = ProcessMemo(ttl=OUTSIDER_SECONDS, max_size=OUTSIDERS_KEPT)

    def __contains__(self, user_id: int) -> bool:
        whole = self.read_at is None or time.monotonic() - self.read_at >= MEMBERS_SECONDS
        if not whole:
            if user_id in self.ids:
                return True
            if self.outsiders.get(user_id):
                return False
        members = get_user_model().groups.through.objects.filter(group__name=GROUP)
        if whole:
            self.ids = added = set(members.values_list("user_id", flat=True))
            self.read_at = time.monotonic()
        else:
            added = set(members.filter(Q(user_id__gt=self.top) | Q(user_id=user_id)).values_list("user_id", flat=True))
            self.ids.update(added)
        if added:
            self.top = max(self.top, max(added))
        if user_id in added:
            return True
        self.outsiders.put(user_id, True)
        return False

    def joined(self, user_ids: Iterable[int]) -> None:
        for user_id in user_ids:
            self.outsiders.forget(user_id)


_members = _Members()


def crowd_member(*, user_id: int | None) -> bool:
    """Whether the user belongs to a load run's crowd (may buy and draw unlisted items)."""
    return user_id is not None and user_id in _members


def crowd_join(*, user_ids: Iterable[int]) -> None:
    user_ids = list(user_ids)
    group, _ = Group.objects.get_or_create(name=GROUP)
    Through = get_user_model().groups.through
    Through.objects.bulk_create(
        [Through(user_id=pk, group=group) for pk in user_ids], batch_size=1000, ignore_conflicts=True
    )
    # A member found outside before does not wait for that to lapse here (at worst, if this
    # rolls back, an outsider is asked again).
    _members.joined(user_ids)


def crowd_leave(*, user_ids: Iterable[int]) -> None:
    get_user_model().groups.through.objects.filter(group__name=GROUP, user_id__in=list(user_ids)).delete()
    _members.forget()


def forget() -> None:
    """Forget the members and outsiders read: the next check asks the database again."""
    _members.forget()
