"""A login that finds its user's hash made by an outdated hasher rewrites it with today's
(``accounts.backends.hash_upgraded``): as a compare-and-set of the hash it checked, not a
save. The same password, so the user's tokens stay good; and logins upgrading one hash at
once, each with a salt of its own, all get their tokens."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import PBKDF2PasswordHasher, check_password, make_password
from django.test import Client

from accounts.backends import hash_upgraded
from accounts.models import ApiToken
from accounts.services import LoginOutdated, token_issue

from .buyers import act_concurrently
from .http import post_json

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-for-tests-1"


class TodaysHasher(PBKDF2PasswordHasher):
    """A hasher the site moved to, after the suite's MD5 (fast: few iterations)."""

    algorithm = "pbkdf2_today"
    iterations = 1_000


@pytest.fixture
def outdated(make_user, settings):
    """A user whose hash MD5 made, on a site whose first hasher is now ``TodaysHasher``."""
    user = make_user(password=PASSWORD)
    assert user.password.startswith("md5$")
    settings.PASSWORD_HASHERS = [f"{__name__}.TodaysHasher", "django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.API_TOKENS_PER_USER = 50
    return user


def stored_hash(user) -> str:
    return get_user_model().objects.values_list("password", flat=True).get(pk=user.pk)


def works(raw: str) -> bool:
    return Client(headers={"Authorization": f"Bearer {raw}"}).get("/api/orders").status_code == 200


def test_logins_upgrading_one_outdated_hash_at_once_each_get_a_working_token_and_revoke_none(outdated):
    """12 logins in 4 processes, released together: each checked the MD5 hash and upgrades it.
    Saved, each upgrade revoked the tokens issued before it (the token of an earlier login
    among them), and a login whose hash another had overwritten was refused its token."""
    earlier = token_issue(user=outdated)

    def login(_slot: int) -> tuple[int, str]:
        response = post_json(Client(), "/api/auth/login", {"username": outdated.username, "password": PASSWORD})
        return response.status_code, response.json().get("token", "")

    outcome = act_concurrently(act=login, plan=[[n * 3 + t for t in range(3)] for n in range(4)], race_ms=0)
    assert not outcome.unexpected, outcome.unexpected
    assert sorted(status for status, _ in outcome.confirmed) == [200] * 12
    assert all(works(raw) for _, raw in outcome.confirmed)
    assert works(earlier)
    assert ApiToken.objects.filter(user=outdated).count() == 13
    stored = stored_hash(outdated)
    assert stored.startswith("pbkdf2_today$") and check_password(PASSWORD, stored)


def test_a_login_whose_hash_another_upgraded_first_takes_the_stored_one_and_gets_its_token(outdated):
    checked = get_user_model().objects.get(pk=outdated.pk)  # the login's read: the MD5 hash
    other = make_password(PASSWORD)  # another login's upgrade, written first
    get_user_model().objects.filter(pk=outdated.pk).update(password=other)
    hash_upgraded(checked, PASSWORD)
    assert checked.password == other == stored_hash(outdated)
    assert works(token_issue(user=checked))


def test_a_login_whose_password_changed_before_its_upgrade_is_refused_its_token(outdated):
    checked = get_user_model().objects.get(pk=outdated.pk)
    changed = get_user_model().objects.get(pk=outdated.pk)
    changed.set_password("the-new-secret-99")
    changed.save()
    hash_upgraded(checked, PASSWORD)
    assert check_password("the-new-secret-99", stored_hash(outdated))  # not overwritten
    with pytest.raises(LoginOutdated):
        token_issue(user=checked)
    assert not ApiToken.objects.filter(user=outdated).exists()
