"""The load crowd: the users that load runs (the race lab, ``make loadtest``, the fault
runner, the benchmarks) create in bulk to buy and draw their own unlisted items.

An unlisted voucher is not for sale to anyone else, even by its id: it exists to be
measured, and an outsider's order would be counted by its audit. Membership is a Django
group, read here as the set of its members' ids, kept per process: a purchase by the
crowd under ``redis_lua`` still reads nothing of the database (but for the first of a new
crowd in each process), and an outsider costs one indexed query. A retired member may
stay in a process's set: it has no token left and cannot log in, so it buys nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

GROUP = "load crowd"


class _Members:
    """The crowd's ids as last read by this process. An id not among them is asked of the
    database alone (one indexed query: an outsider costs that much); when it turns out to
    be a member, of a crowd created since, the whole set is read again, so that the rest
    of that crowd is found here."""

    def __init__(self) -> None:
        self.ids: frozenset[int] = frozenset()

    def __contains__(self, user_id: int) -> bool:
        if user_id in self.ids:
            return True
        members = get_user_model().groups.through.objects.filter(group__name=GROUP)
        if not members.filter(user_id=user_id).exists():
            return False
        self.ids = frozenset(members.values_list("user_id", flat=True))
        return True

    def forget(self) -> None:
        self.ids = frozenset()


_members = _Members()


def crowd_member(*, user_id: int | None) -> bool:
    """Whether the user belongs to a load run's crowd (may buy and draw unlisted items)."""
    return user_id is not None and user_id in _members


def crowd_join(*, user_ids: Iterable[int]) -> None:
    group, _ = Group.objects.get_or_create(name=GROUP)
    Through = get_user_model().groups.through
    Through.objects.bulk_create(
        [Through(user_id=pk, group=group) for pk in user_ids], batch_size=1000, ignore_conflicts=True
    )


def crowd_leave(*, user_ids: Iterable[int]) -> None:
    get_user_model().groups.through.objects.filter(group__name=GROUP, user_id__in=list(user_ids)).delete()
    _members.forget()
