"""Bearer tokens end (docs/security.md, "Identity and tokens"): they expire, logging out
revokes the one used, a password change or a deactivation revokes them all, a user lists
and revokes their own, and each user holds a bounded number. They are checked without a
query (``accounts.tokens``): signed, and every revocation recorded for every process."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import tokens
from accounts.models import ActiveChange, ApiToken, TokenCutoff
from accounts.selectors import user_for_token
from accounts.services import (
    LoginOutdated,
    token_hash,
    token_issue,
    token_revoke_raw,
    tokens_revoke,
    users_with_tokens_create,
)
from accounts.tokens import Revocations, RevocationsUnknown, revocations, token_claims
from accounts.triggers import database_now
from locking.testing import free_port
from tests.clocks import Clock

from .buyers import act_concurrently
from .http import assert_error, post_json

pytestmark = pytest.mark.django_db


def bearer(raw: str) -> Client:
    return Client(headers={"Authorization": f"Bearer {raw}"})


def works(raw: str) -> bool:
    status = bearer(raw).get("/api/orders").status_code
    assert status in (200, 401)
    return status == 200


def about(moment, expected, slack=timedelta(seconds=30)) -> bool:
    return abs(moment - expected) < slack


# --- expiry ---------------------------------------------------------------------------------------


def test_a_token_expires_after_api_token_ttl_seconds(settings, make_user):
    settings.API_TOKEN_TTL_SECONDS = 3600
    raw = token_issue(user=make_user())
    token = ApiToken.objects.get(key_hash=token_hash(raw))
    assert about(token.expires_at, timezone.now() + timedelta(hours=1))
    assert works(raw)
    # The end is in the token, signed: the clock of one hour later refuses it.
    assert token_claims(raw, now=time.time() + 3590) is not None
    assert token_claims(raw, now=time.time() + 3601) is None


def test_an_ended_token_is_refused(make_user, monkeypatch):
    raw = token_issue(user=make_user(), ttl=timedelta(seconds=2))
    clock = Clock(token_claims(raw).expires_at - 0.01)
    monkeypatch.setattr(tokens, "wall_clock", clock)
    assert works(raw)
    clock.now += 0.01
    assert not works(raw)
    assert_error(bearer(raw).get("/api/orders"), 401, "unauthorized")


def test_a_token_is_checked_without_a_query_and_its_user_read_only_when_asked(make_user, django_assert_num_queries):
    user = make_user()
    raw = token_issue(user=user)
    user_for_token(raw=raw)  # the revocations read once, as after any revocation of this process
    with django_assert_num_queries(0):
        holder = user_for_token(raw=raw)
        assert (holder.pk, holder.id, holder.is_authenticated) == (user.pk, user.pk, True)
    with django_assert_num_queries(1):
        assert holder.username == user.username
    assert holder == user


@pytest.mark.parametrize(
    "tamper",
    [
        lambda raw: raw[:-2] + ("AA" if raw[-2:] != "AA" else "BB"),  # the signature
        lambda raw: "9" + raw,  # the user
        lambda raw: raw.replace(".", ".9", 1),  # the end
        lambda raw: raw.split(":")[0],  # no signature
        lambda raw: raw + "x" * 200,  # far too long
        lambda raw: "",
    ],
)
def test_a_tampered_token_is_refused(tamper, make_user):
    raw = token_issue(user=make_user())
    assert user_for_token(raw=tamper(raw)) is None
    assert_error(bearer(tamper(raw)).get("/api/orders"), 401, "unauthorized")


def test_a_token_signed_with_another_key_is_refused_and_a_rotated_key_keeps_tokens(settings, make_user):
    raw = token_issue(user=make_user())
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY = "another-key-" + "x" * 50
    assert user_for_token(raw=raw) is None
    settings.SECRET_KEY_FALLBACKS = [old_key]
    assert user_for_token(raw=raw) is not None


def test_a_deactivated_user_loses_every_token(make_user):
    user, other = make_user(), make_user()
    raws = [token_issue(user=user) for _ in range(2)]
    others = token_issue(user=other)
    user.is_active = False
    user.save()
    assert not any(works(raw) for raw in raws)
    cutoff = TokenCutoff.objects.get(user_id=user.pk)
    assert (cutoff.stamp, cutoff.spared) == (2, "")  # both refused, none spared
    assert works(others)


def test_a_deleted_user_loses_every_token(make_user):
    user = make_user()
    raw = token_issue(user=user)
    user_id = user.pk
    user.delete()
    assert TokenCutoff.objects.filter(user_id=user_id).exists()  # outlives its user
    assert user_for_token(raw=raw) is None


def test_a_token_of_a_user_deactivated_behind_the_signals_back_is_refused_where_its_user_is_read(
    make_user, make_voucher
):
    user = make_user(staff=True)
    raw = token_issue(user=user)
    voucher = make_voucher()
    assert bearer(raw).get(f"/api/admin/vouchers/{voucher.pk}/audit").status_code == 200
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)  # no signal: not revoked
    # A staff call reads the user to check its permissions: refused there.
    assert_error(bearer(raw).get(f"/api/admin/vouchers/{voucher.pk}/audit"), 401, "unauthorized")


@pytest.mark.django_db(transaction=True)
def test_a_user_deactivated_by_an_update_loses_every_token_within_the_refresh_interval(
    settings, make_user, make_voucher, make_pool, reservations_redis, monkeypatch
):
    # Under redis_lua a purchase and a draw read nothing of the user: only the revocations
    # the process reads every API_TOKEN_REVOCATIONS_REFRESH_SECONDS can refuse them.
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 1
    clock = Clock(100.0)
    monkeypatch.setattr(revocations, "clock", clock)
    revocations.read_soon()
    voucher, pool = make_voucher(strategy="redis_lua", stock=10), make_pool(strategy="redis_lua")
    user, other = make_user(), make_user()
    raw, others = token_issue(user=user), token_issue(user=other)
    assert works(raw)  # read at 100.0
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)  # no signal: nothing revoked
    clock.now += 1
    assert_error(bearer(raw).post(f"/api/vouchers/{voucher.pk}/purchase"), 401, "unauthorized")
    assert_error(bearer(raw).post(f"/api/pools/{pool.pk}/draw"), 401, "unauthorized")
    assert_error(bearer(raw).get("/api/orders"), 401, "unauthorized")
    assert bearer(others).post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202
    # Reactivated the same way, the user has its tokens back at the next read, as Django's
    # sessions do; a deactivation by save() revokes them for good.
    get_user_model().objects.filter(pk=user.pk).update(is_active=True)
    clock.now += 1
    assert works(raw)


def test_a_revocation_reaches_another_process_within_the_refresh_interval(transactional_db, settings, make_user):
    # Another process: its own Revocations, which read before the token was revoked.
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 0.5
    clock = Clock(100.0)
    elsewhere = Revocations(clock=clock)
    raw = token_issue(user=make_user())
    claims = token_claims(raw)
    assert not elsewhere.revoked(claims)
    ApiToken.objects.filter(key_hash=claims.key_hash).delete()
    assert revocations.revoked(claims)  # at once in the process that revoked it
    assert not elsewhere.revoked(claims)  # the other has not read since
    clock.now += 0.49
    assert not elsewhere.revoked(claims)
    clock.now += 0.01
    assert elsewhere.revoked(claims)


def test_a_process_that_cannot_read_the_revocations_refuses_tokens_once_its_copy_is_stale(
    transactional_db, settings, make_user
):
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 0
    settings.API_TOKEN_REVOCATIONS_STALE_SECONDS = 0.3
    clock = Clock(100.0)
    elsewhere = Revocations(clock=clock)
    raw = token_issue(user=make_user())
    claims = token_claims(raw)
    assert not elsewhere.revoked(claims)
    connection.close()
    port = connection.settings_dict["PORT"]
    connection.settings_dict["PORT"] = free_port()  # nothing listens there: refused
    try:
        clock.now += 0.29
        assert not elsewhere.revoked(claims)  # a recent copy is trusted for a moment
        clock.now += 0.01
        with pytest.raises(RevocationsUnknown):
            elsewhere.revoked(claims)
    finally:
        connection.close()
        connection.settings_dict["PORT"] = port
    assert not elsewhere.revoked(claims)


# --- deactivations however made: what a read of the revocations costs ------------------------------


def users_update(*users, **fields) -> None:
    """A ``QuerySet.update``: no signal, nothing revoked, only the database's triggers see it."""
    get_user_model().objects.filter(pk__in=[user.pk for user in users]).update(**fields)


def test_a_user_deactivated_by_an_update_is_refused_by_every_process_within_the_bound_and_gets_its_tokens_back(
    settings, make_user
):
    settings.API_TOKEN_REVOCATIONS_REFRESH_SECONDS = 1
    clock = Clock(100.0)
    elsewhere = Revocations(clock=clock)  # another process, which read before the update
    user, other = make_user(), make_user()
    mine, others = token_claims(token_issue(user=user)), token_claims(token_issue(user=other))
    assert not elsewhere.revoked(mine)
    users_update(user, is_active=False)
    clock.now += 0.99
    assert not elsewhere.revoked(mine)  # the refresh interval has not passed
    clock.now += 0.01
    assert elsewhere.revoked(mine)
    assert not elsewhere.revoked(others)
    assert Revocations().revoked(mine)  # a process started since learns it at its first read
    users_update(user, is_active=True)
    clock.now += 1
    assert not elsewhere.revoked(mine)
    assert not Revocations().revoked(mine)


def test_every_user_of_a_bulk_deactivation_is_refused_and_one_holding_no_token_costs_nothing(make_user):
    pairs = users_with_tokens_create(count=3, prefix="bulk", crowd=False)
    idle = make_user()
    get_user_model().objects.filter(username__startswith="bulk-").update(is_active=False)
    users_update(idle, is_active=False)
    process = Revocations()
    assert all(process.revoked(token_claims(raw)) for _, raw in pairs)
    # A change is recorded only for the users whose tokens it refuses.
    assert ActiveChange.objects.count() == 3
    assert not ActiveChange.objects.filter(user=idle).exists()


def test_a_token_issued_to_an_inactive_user_is_refused(make_user):
    user = make_user()
    users_update(user, is_active=False)  # holding no token: nothing recorded
    user.refresh_from_db()  # as a login reads it
    raw = token_issue(user=user)
    assert Revocations().revoked(token_claims(raw))
    revocations.read_soon()
    assert not works(raw)


def test_a_process_that_has_not_read_for_long_reads_every_change_again(settings, make_user, monkeypatch):
    # The changes a process missed may be deleted meanwhile (CHANGES_KEPT after their end):
    # after a long pause it reads those that have not ended, not those since its last read.
    later = timedelta()
    monkeypatch.setattr(tokens, "revocations_clock", lambda: database_now() + later)
    clock = Clock(100.0)
    elsewhere = Revocations(clock=clock)
    user = make_user()
    mine = token_claims(token_issue(user=user))
    users_update(user, is_active=False)
    assert elsewhere.revoked(mine)
    users_update(user, is_active=True)
    ActiveChange.objects.all().delete()  # the reactivation's change, deleted once old enough
    clock.now += 1
    later = tokens.CHANGES_KEPT / 2 + timedelta(seconds=1)
    assert not elsewhere.revoked(mine)


def test_issuing_a_token_deletes_the_changes_no_process_needs(make_user):
    user, other = make_user(), make_user()
    token_issue(user=user)
    users_update(user, is_active=False)
    users_update(user, is_active=True)
    ended, live = ActiveChange.objects.order_by("pk")
    ActiveChange.objects.filter(pk=ended.pk).update(expires_at=timezone.now() - tokens.CHANGES_KEPT)
    token_issue(user=other)
    assert list(ActiveChange.objects.values_list("pk", flat=True)) == [live.pk]


def test_a_bearer_call_and_a_read_of_the_revocations_cost_the_same_queries_for_10_and_1000_inactive_users(
    make_user,
):
    raw = token_issue(user=make_user())
    clock = Clock(100.0)
    costs = []
    for count in (10, 990):
        prefix = f"gone{count}"
        pairs = users_with_tokens_create(count=count, prefix=prefix, crowd=False)
        get_user_model().objects.filter(username__startswith=f"{prefix}-").update(is_active=False)
        ApiToken.objects.filter(key_hash__in=[token_hash(raw) for _, raw in pairs[: count // 2]]).delete()
        revocations.read_soon()
        with CaptureQueriesContext(connection) as call:
            assert works(raw)
        elsewhere = Revocations(clock=clock)
        with CaptureQueriesContext(connection) as first:
            elsewhere.revoked(token_claims(raw))
        clock.now += 1
        with CaptureQueriesContext(connection) as refresh:
            elsewhere.revoked(token_claims(raw))
        costs.append((len(call), len(first), len(refresh)))
    assert costs[0] == costs[1]


def test_a_read_of_the_revocations_scans_no_table_whole(make_user, monkeypatch):
    if connection.vendor != "mysql":
        pytest.skip("EXPLAIN's plan is MariaDB's or MySQL's")
    # A site with history: thousands of users and tokens, deactivations and revocations,
    # all of them hours old for the process reading (its clock moved on, rather than their
    # stamps moved back: an update leaves the index entries it replaced until InnoDB purges
    # them, and the plan would count those).
    users_with_tokens_create(count=3000, prefix="history", crowd=False)
    history = get_user_model().objects.filter(username__startswith="history-").order_by("pk")
    get_user_model().objects.filter(pk__in=list(history.values_list("pk", flat=True)[:1000])).update(is_active=False)
    ends, now = timezone.now() + timedelta(days=1), timezone.now()
    TokenCutoff.objects.bulk_create(
        [TokenCutoff(user_id=10**9 + n, stamp=5, spared="3", changed_at=now, expires_at=ends) for n in range(3000)]
    )
    claims = token_claims(token_issue(user=make_user()))
    monkeypatch.setattr(tokens, "revocations_clock", lambda: database_now() + timedelta(hours=2))
    clock = Clock(100.0)
    process = Revocations(clock=clock)
    process.revoked(claims)
    clock.now += 1
    with CaptureQueriesContext(connection) as refresh:
        assert not process.revoked(claims)
    assert len(refresh.captured_queries) == 3  # the database's clock, the cutoffs, the changes
    for query in refresh.captured_queries:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + query["sql"])
            columns = [column[0] for column in cursor.description]
            plan = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        assert not [step for step in plan if step["type"] == "ALL"], (query["sql"], plan)


@pytest.mark.django_db(transaction=True)
def test_a_redis_lua_purchase_reads_nothing_of_the_database(
    make_voucher, make_user, reservations_redis, django_assert_num_queries
):
    voucher = make_voucher(strategy="redis_lua", stock=10)
    first, second = (bearer(token_issue(user=make_user())) for _ in range(2))
    assert first.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202  # reads the voucher, kept 1 s
    with django_assert_num_queries(0):
        assert second.post(f"/api/vouchers/{voucher.pk}/purchase").status_code == 202


def test_a_token_may_be_issued_for_a_shorter_or_longer_time(make_user):
    raw = token_issue(user=make_user(), ttl=timedelta(days=400))
    assert about(ApiToken.objects.get(key_hash=token_hash(raw)).expires_at, timezone.now() + timedelta(days=400))
    pairs = users_with_tokens_create(count=3, prefix="short", ttl=timedelta(minutes=5))
    for _, raw in pairs:
        assert about(ApiToken.objects.get(key_hash=token_hash(raw)).expires_at, timezone.now() + timedelta(minutes=5))
        assert works(raw)


def test_issue_tokens_takes_a_ttl(tmp_path):
    out = tmp_path / "tokens.txt"
    call_command("issue_tokens", count=2, out=out, prefix="ttl", ttl=120)
    for line in out.read_text().splitlines():
        _, raw = line.split()
        expires_at = ApiToken.objects.get(key_hash=token_hash(raw)).expires_at
        assert about(expires_at, timezone.now() + timedelta(seconds=120))


def test_issuing_drops_the_users_expired_tokens_and_keeps_at_most_api_tokens_per_user(settings, make_user):
    settings.API_TOKENS_PER_USER = 3
    user, other = make_user(), make_user()
    others = token_issue(user=other)
    expired = token_issue(user=user, ttl=timedelta(seconds=1))
    # Ended, as the clock of two seconds later sees it: what issuing compares is the row's end.
    ApiToken.objects.filter(key_hash=token_hash(expired)).update(expires_at=timezone.now() - timedelta(seconds=1))
    raws = [token_issue(user=user) for _ in range(5)]
    assert not ApiToken.objects.filter(key_hash=token_hash(expired)).exists()
    assert ApiToken.objects.filter(user=user).count() == 3
    assert [works(raw) for raw in raws] == [False, False, True, True, True]  # the oldest make room
    # One cutoff for the user, at the newest dropped (the ended one was not revoked: it ended).
    assert TokenCutoff.objects.get(user_id=user.pk).stamp == token_claims(raws[1]).stamp
    assert works(others)


def test_logging_in_again_leaves_the_earlier_token_working(make_user):
    make_user("ann", password="ann-secret-77")
    credentials = {"username": "ann", "password": "ann-secret-77"}
    first = post_json(Client(), "/api/auth/login", credentials).json()["token"]
    second = post_json(Client(), "/api/auth/login", credentials).json()["token"]
    assert works(first) and works(second)


def test_existing_tokens_get_the_ttl_from_the_migration_and_unsigned_ones_go(transactional_db, settings):
    settings.API_TOKEN_TTL_SECONDS = 7200
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0001_initial")])
    old_apps = executor.loader.project_state([("accounts", "0001_initial")]).apps
    user = get_user_model().objects.create_user("old-timer")
    old_apps.get_model("accounts", "ApiToken").objects.create(user_id=user.pk, key_hash="a" * 64)
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0002_token_expires_at")])
    expires_at = (
        executor.loader.project_state([("accounts", "0002_token_expires_at")])
        .apps.get_model("accounts", "ApiToken")
        .objects.get(key_hash="a" * 64)
        .expires_at
    )
    assert about(expires_at, timezone.now() + timedelta(hours=2))
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    # A token of before the signatures cannot be checked: its holder logs in again.
    assert not ApiToken.objects.filter(key_hash="a" * 64).exists()


# --- logout ---------------------------------------------------------------------------------------


def test_logout_revokes_the_token_it_was_sent_with_and_no_other(make_user):
    user = make_user()
    used, kept = token_issue(user=user), token_issue(user=user)
    response = bearer(used).post("/api/auth/logout")
    assert response.status_code == 204
    assert not works(used)
    assert works(kept)
    assert_error(bearer(used).post("/api/auth/logout"), 401, "unauthorized")


def test_logout_ends_the_session_and_needs_its_csrf_token(make_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user())
    client.get("/")  # sets the csrftoken cookie, as the pages do
    assert_error(client.post("/api/auth/logout"), 403, "csrf_failed")
    assert client.get("/api/orders").status_code == 200
    response = client.post("/api/auth/logout", headers={"X-CSRFToken": client.cookies["csrftoken"].value})
    assert response.status_code == 204
    assert_error(client.get("/api/orders"), 401, "unauthorized")


def test_logout_takes_no_body_and_needs_a_login(make_user):
    raw = token_issue(user=make_user())
    assert_error(post_json(bearer(raw), "/api/auth/logout", {"everywhere": True}), 400, "bad_request")
    assert works(raw)
    assert_error(Client().post("/api/auth/logout"), 401, "unauthorized")


# --- password changes -----------------------------------------------------------------------------


def test_set_password_and_save_revokes_every_token_of_the_user(make_user):
    user, other = make_user(), make_user()
    raws = [token_issue(user=user) for _ in range(2)]
    others = token_issue(user=other)
    user.set_password("a-new-secret-99")
    user.save()
    assert not any(works(raw) for raw in raws)
    assert works(others)
    assert works(token_issue(user=user))  # a token issued after the change works


def test_an_unusable_password_revokes_every_token_too(make_user):
    user = make_user()
    raw = token_issue(user=user)
    user.set_unusable_password()
    user.save()
    assert not works(raw)


def test_saving_a_user_without_changing_the_password_keeps_the_tokens(make_user):
    user = make_user()
    raw = token_issue(user=user)
    user.first_name = "Ann"
    user.save()
    user.refresh_from_db()
    user.save(update_fields=["last_login"])
    assert works(raw)


def test_the_admins_password_change_revokes_every_token_of_the_user(admin_client_, make_user):
    user = make_user()
    raw = token_issue(user=user)
    response = admin_client_.post(
        f"/admin/auth/user/{user.pk}/password/",
        {"password1": "a-new-secret-99", "password2": "a-new-secret-99", "usable_password": "true"},
    )
    assert response.status_code == 302, response.content
    user.refresh_from_db()
    assert user.check_password("a-new-secret-99")
    assert not works(raw)


# --- a user's own tokens --------------------------------------------------------------------------


def test_a_user_lists_their_own_live_tokens(make_user):
    user, other = make_user(), make_user()
    first = token_issue(user=user)
    current = token_issue(user=user)
    expired = token_issue(user=user)
    ApiToken.objects.filter(key_hash=token_hash(expired)).update(expires_at=timezone.now())
    token_issue(user=other)
    response = bearer(current).get("/api/auth/tokens")
    assert response.status_code == 200
    listed = response.json()
    mine = {t.pk: t for t in ApiToken.objects.filter(key_hash__in=[token_hash(r) for r in (first, current)])}
    assert {item["id"] for item in listed} == set(mine)
    for item in listed:
        assert set(item) == {"id", "created_at", "expires_at", "current"}
        assert item["current"] == (mine[item["id"]].key_hash == token_hash(current))
    assert_error(Client().get("/api/auth/tokens"), 401, "unauthorized")


def test_a_user_revokes_one_of_their_tokens_and_not_anothers(make_user):
    user, other = make_user(), make_user()
    mine, spare = token_issue(user=user), token_issue(user=user)
    theirs = token_issue(user=other)
    spare_id = ApiToken.objects.get(key_hash=token_hash(spare)).pk
    theirs_id = ApiToken.objects.get(key_hash=token_hash(theirs)).pk
    assert_error(bearer(mine).delete(f"/api/auth/tokens/{theirs_id}"), 404, "not_found")
    assert works(theirs)
    assert bearer(mine).delete(f"/api/auth/tokens/{spare_id}").status_code == 204
    assert not works(spare)
    assert works(mine)
    assert_error(bearer(mine).delete(f"/api/auth/tokens/{spare_id}"), 404, "not_found")


def test_openapi_declares_the_token_calls():
    paths = Client().get("/api/openapi.json").json()["paths"]
    assert {"204", "400", "401", "403"} <= set(paths["/api/auth/logout"]["post"]["responses"])
    assert {"200", "401"} <= set(paths["/api/auth/tokens"]["get"]["responses"])
    assert {"204", "401", "403", "404"} <= set(paths["/api/auth/tokens/{token_id}"]["delete"]["responses"])


# --- one cutoff per user ----------------------------------------------------------------------------


def test_logging_in_and_out_over_and_over_costs_one_row_and_one_entry_per_user(make_user, django_assert_num_queries):
    user, other = make_user(), make_user()
    kept = token_issue(user=user)
    others = token_issue(user=other)
    gone = []
    for _ in range(40):
        raw = token_issue(user=user)
        assert token_revoke_raw(user=user, raw=raw)
        gone.append(raw)
    assert TokenCutoff.objects.filter(user_id=user.pk).count() == 1
    cutoff = TokenCutoff.objects.get(user_id=user.pk)
    assert cutoff.spared == str(token_claims(kept).stamp)  # the one still held, below the cutoff
    process = Revocations(clock=Clock(100.0))
    assert not process.revoked(token_claims(kept))
    assert [process.revoked(token_claims(raw)) for raw in gone] == [True] * 40
    assert len(process._cutoffs) == 1  # what a process holds: one entry, not forty
    assert works(kept) and works(others) and works(token_issue(user=user))


def test_a_token_issued_after_a_cutoff_works_in_a_process_that_read_the_cutoff(make_user):
    user = make_user()
    clock = Clock(100.0)
    elsewhere = Revocations(clock=clock)
    old = token_issue(user=user)
    user.set_password("another-secret-88")
    user.save()  # every token revoked: the cutoff names them all
    assert elsewhere.revoked(token_claims(old))
    new = token_issue(user=user)  # stamped above the cutoff that process holds
    assert not elsewhere.revoked(token_claims(new))
    assert token_claims(new).stamp > TokenCutoff.objects.get(user_id=user.pk).stamp


def test_revoking_a_newer_token_spares_an_older_one_and_every_one_issued_after(make_user):
    user = make_user()
    older, newer = token_issue(user=user), token_issue(user=user)
    token_revoke_raw(user=user, raw=newer)
    later = token_issue(user=user)
    process = Revocations(clock=Clock(100.0))
    assert [process.revoked(token_claims(raw)) for raw in (older, newer, later)] == [False, True, False]
    token_revoke_raw(user=user, raw=older)
    process.read_soon()
    assert [process.revoked(token_claims(raw)) for raw in (older, newer, later)] == [True, True, False]


def test_a_load_runs_tokens_are_revoked_in_the_same_queries_whatever_their_number():
    costs = []
    for count in (5, 300):
        pairs = users_with_tokens_create(count=count, prefix=f"run{count}", crowd=False)
        with CaptureQueriesContext(connection) as revoking:
            assert tokens_revoke(username_prefix=f"run{count}-") == count
        costs.append(len(revoking))
        assert TokenCutoff.objects.filter(user_id__in=[token_claims(raw).user_id for _, raw in pairs]).count() == count
        assert not any(works(raw) for _, raw in pairs[:5])
    # A query or two more for 300 where a database caps a statement's parameters (SQLite).
    assert costs[0] <= 11 and costs[1] <= costs[0] + 2, costs


def test_a_token_of_before_stamps_is_refused(make_user):
    # Signed by this key, but in the form issued before stamps: user, end, random part.
    user = make_user()
    end = int(time.time()) + 3600
    raw = tokens._signer().sign(f"{user.pk}.{end}.abcdefghijklmnop")
    assert token_claims(raw) is None
    assert not works(raw)


@pytest.mark.django_db(transaction=True)
def test_logins_and_logouts_of_one_user_in_many_processes_spare_no_revoked_token(settings, make_user):
    settings.API_TOKENS_PER_USER = 100  # the cap drops nothing here: each kept token must work
    user_id = make_user().pk

    def log_in_and_out(_slot) -> tuple[list[str], list[str]]:
        holder = get_user_model().objects.get(pk=user_id)  # as a login reads it
        kept, gone = [], []
        for n in range(4):
            raw = token_issue(user=holder)
            if n % 2:
                kept.append(raw)
            else:
                assert token_revoke_raw(user=holder, raw=raw)
                gone.append(raw)
        return kept, gone

    outcome = act_concurrently(act=log_in_and_out, plan=[[0, 1, 2]] * 4, race_ms=0)
    assert not outcome.unexpected, outcome.unexpected
    kept = [raw for held, _ in outcome.confirmed for raw in held]
    gone = [raw for _, revoked in outcome.confirmed for raw in revoked]
    assert (len(kept), len(gone)) == (24, 24)
    process = Revocations(clock=Clock(100.0))
    assert [process.revoked(token_claims(raw)) for raw in gone] == [True] * 24
    assert [process.revoked(token_claims(raw)) for raw in kept] == [False] * 24
    assert len({token_claims(raw).stamp for raw in kept + gone}) == 48  # each its own stamp
    assert TokenCutoff.objects.filter(user_id=user_id).count() == 1


def test_a_login_checked_before_a_password_change_gets_no_token_after_it(make_user):
    """The login read the user and checked the old password; the change committed, revoking
    every token, before the login issued its own: it must not spare the old password one."""
    user = make_user()
    checked = get_user_model().objects.get(pk=user.pk)  # the login's read, the old password
    user.set_password("the-new-secret-99")
    user.save()
    with pytest.raises(LoginOutdated):
        token_issue(user=checked)
    assert not ApiToken.objects.filter(user=user).exists()
    assert works(token_issue(user=get_user_model().objects.get(pk=user.pk)))  # a login after it does


def test_a_revocation_made_by_a_process_whose_clock_is_slow_reaches_a_process_already_reading(make_user, monkeypatch):
    """Stamped by its own clock, a revocation made on a host 90 s slow was older than the
    window of a process that had read since (60 s back): that process accepted the token
    until it ended. Stamped and read by the database's clock, it is refused at once."""
    user = make_user()
    raw = token_issue(user=user)
    clock = Clock(100.0)
    process = Revocations(clock=clock)
    assert not process.revoked(token_claims(raw))  # read once: later reads look back from then
    slow = timezone.now() - timedelta(seconds=90)
    monkeypatch.setattr(timezone, "now", lambda: slow)
    token_revoke_raw(user=user, raw=raw)
    monkeypatch.undo()
    clock.now += 1  # its next read
    assert process.revoked(token_claims(raw))


def test_a_revoked_token_stays_refused_on_a_host_whose_clock_is_behind_the_databases(make_user, monkeypatch):
    """Its end is judged by the host's clock, its cutoff kept by the database's: a cutoff dropped
    at its end by the database's clock left the token good on a host 40 s behind, for 40 s."""
    user = make_user()
    raw = token_issue(user=user, ttl=timedelta(seconds=30))
    token_revoke_raw(user=user, raw=raw)
    monkeypatch.setattr(tokens, "revocations_clock", lambda: database_now() + timedelta(seconds=40))
    claims = token_claims(raw)
    assert claims is not None  # still live by this host's clock
    assert Revocations(clock=Clock(100.0)).revoked(claims)
