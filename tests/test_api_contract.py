"""The JSON API keeps its OpenAPI contract against a live server, checked by schemathesis.

A gunicorn server (two workers, its own Redis and three Redlock servers, the test database,
rate limits on as in production) is run through schemathesis as a buyer
and as a member of staff, each with bearer tokens: every phase of ``schemathesis run``, in
this process. Examples and coverage (boundaries, each field missing or of the wrong type,
methods a path does not take, ...), fuzzing with valid and invalid data, then stateful
chains that follow the document's OpenAPI links (create a voucher, then read, change, buy
and audit it; buy, then read the order and buy again; draw, then read the draw; ...). Every
check schemathesis enables runs on every answer (``not_a_server_error``,
``status_code_conformance``, ``content_type_conformance``, ``response_schema_conformance``,
``response_headers_conformance``, ``negative_data_rejection``, ``positive_data_acceptance``,
``missing_required_header``, ``unsupported_method``, ``allow_header_conformance``,
``ignored_auth``, ``use_after_free``, ``ensure_resource_availability``, ...), and any
finding, or any error of the run itself, fails the test. How many cases ran, by role and
phase, is written at the end.

Two rules are the domain's and JSON Schema cannot state them: a window's end comes after its
begin, and its times fall in the range the database stores; and an ``Idempotency-Key`` is
sent with one request only (the cases share a user, and the generated keys repeat). A
request the document calls valid that breaks one is answered 422, which
``positive_data_acceptance`` takes for a refusal of valid data; exactly those answers, and
no other 422, are let through (``accepts_valid_data``).

``CONTRACT_MAX_EXAMPLES`` (per operation and phase, and the stateful scenarios; default 20)
and ``CONTRACT_SEED`` tune a run; a finding names the seed and a ``curl`` that reproduces it.
"""

from __future__ import annotations

import json
import os
import random
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlencode

import pytest
import schemathesis
from django.utils import timezone
from schemathesis.checks import positive_data_acceptance
from schemathesis.engine import Status, events, from_schema

from accounts.services import token_issue
from locking.testing import RedisServer

from .conftest import STAFF_PERMISSIONS, grant
from .live import database_url, running_gunicorn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

MAX_EXAMPLES = int(os.environ.get("CONTRACT_MAX_EXAMPLES", "20"))
SEED = int(os.environ.get("CONTRACT_SEED") or random.SystemRandom().getrandbits(64))

# gunicorn refuses a request line longer than this (config/gunicorn.py, as nginx's 8 KB
# buffers do in front of it) with a 400 of its own before the API reads it: the server's
# bound, not the API's contract, so the fuzzer's longer queries are not sent.
REQUEST_LINE_LIMIT = 8190


@schemathesis.hook
def filter_query(context, query) -> bool:
    return len(urlencode(query or {}, doseq=True)) < REQUEST_LINE_LIMIT - 512


# The window rule (core.window): a 422 for a body the document calls valid is this rule's, or a finding.
WINDOW_RULE_MESSAGES = ("end_at must be after begin_at.", "a time must fall between")


@dataclass
class Run:
    """What one role's run sent and found."""

    role: str
    seconds: float = 0.0
    cases: dict[str, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)


RUNS: list[Run] = []


@pytest.fixture(scope="module")
def live_api(django_db_setup, django_db_blocker, tmp_path_factory, request):
    """The server under test; the summary of what was sent to it once the module is done."""
    folder = tmp_path_factory.mktemp("contract")
    redis_server = RedisServer().start()
    # Staff may make any item redlock: with its servers there, every strategy sells, and a
    # 5xx is a fault (without them a redlock item answers 503, which not_a_server_error
    # would report: tests/test_api_refusals.py tests that answer).
    lock_servers = [RedisServer().start() for _ in range(3)]
    with django_db_blocker.unblock():
        env = {
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_server.url,
            "CELERY_BROKER_URL": redis_server.url,
            "LOCK_REDIS_URLS": ",".join(server.url for server in lock_servers),
            "RATE_LIMITS_ENABLED": "1",
            "PROMETHEUS_MULTIPROC_DIR": str(folder / "prometheus"),
        }
    try:
        with running_gunicorn(env, log=folder / "gunicorn.log") as base:
            yield base
    finally:
        for server in (redis_server, *lock_servers):
            server.close()
        _summary(request)


def _summary(request) -> None:
    if not RUNS:
        return
    roles = "; ".join(
        f"{run.role} {sum(run.cases.values())} in {run.seconds:.0f} s ("
        + ", ".join(f"{phase} {count}" for phase, count in run.cases.items() if count)
        + ")"
        for run in RUNS
    )
    total = sum(sum(run.cases.values()) for run in RUNS)
    line = f"API contract: {total} cases against the live server, {roles}; seed {SEED}"
    # Past pytest's capture, so that it is in the output of every run, passed or failed.
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\n{line}", flush=True)


def _call(base: str, method: str, path: str, token: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    call = urllib.request.Request(f"{base}{path}", data=data, method=method, headers=headers)
    with urllib.request.urlopen(call, timeout=30) as response:
        return json.loads(response.read())


# The seeded items' hold window: past the expiry tasks' horizon, so that none waits in the broker.
HOLD = 3600


def _seed(base: str, staff_token: str) -> None:
    """What a run finds on the server, made through the API itself: vouchers and pools live,
    sold out, ended and upcoming, under a database strategy, a lock and redis_lua, some with a
    hold window (a purchase or a prize held, to cancel or claim). The lists are in order of
    begin, and their links lead to the first item: a live one with stock and a window."""
    now = timezone.now()
    live, ended, upcoming = (-3, 1), (-2, -1), (1, 2)
    vouchers = [
        (live, 1000, "db_atomic", HOLD),
        (live, 1000, "redis_lock", 0),
        (live, 1000, "redis_lua", HOLD),
        (live, 0, "db_pessimistic", 0),
        (ended, 10, "db_atomic", 0),
        (upcoming, 10, "db_optimistic", HOLD),
    ]
    pools = [
        (live, 1000, "db_atomic", HOLD),
        (live, 1000, "redis_lua", HOLD),
        (live, 0, "db_pessimistic", 0),
        (ended, 5, "db_atomic", 0),
    ]
    for n, ((begin, end), stock, strategy, hold) in enumerate(vouchers):
        _call(base, "POST", "/api/admin/vouchers", staff_token, {
            "title": f"Contract voucher {n}", "stock": stock, "strategy": strategy, "payment_window_seconds": hold,
            "begin_at": (now + timedelta(days=begin, minutes=n)).isoformat(),
            "end_at": (now + timedelta(days=end)).isoformat(),
        })  # fmt: skip
    for n, ((begin, end), stock, strategy, hold) in enumerate(pools):
        pool = _call(base, "POST", "/api/admin/pools", staff_token, {
            "name": f"Contract pool {n}", "strategy": strategy, "draws_per_user": 3, "no_prize_weight": 10,
            "claim_window_seconds": hold,
            "begin_at": (now + timedelta(days=begin, minutes=n)).isoformat(),
            "end_at": (now + timedelta(days=end)).isoformat(),
        })  # fmt: skip
        for prize in ("Gold", "Silver"):
            _call(base, "POST", f"/api/admin/pools/{pool['id']}/prizes", staff_token, {"name": prize, "stock": stock})


def _bearer_for(user) -> type:
    """A schemathesis auth provider for ``user``: a token of its own for every case, issued as
    ``issue_tokens`` issues them, since a case may log out or revoke the one it is sent with."""

    class Bearer:
        def get(self, case, context):
            return token_issue(user=user)

        def set(self, case, data, context):
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {data}"}

    return Bearer


def _breaks_a_domain_rule(response) -> bool:
    if response.status_code != 422:
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    if body.get("code") == "idempotency_key_reused":
        return True
    return body.get("code") == "invalid" and any(rule in body.get("message", "") for rule in WINDOW_RULE_MESSAGES)


@schemathesis.check
def accepts_valid_data(ctx, response, case):
    """``positive_data_acceptance``, but for the window rule and a reused idempotency key,
    which the document cannot state."""
    if _breaks_a_domain_rule(response):
        return None
    return positive_data_acceptance(ctx, response, case)


def _config():
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            # No shrinking: against a live server whose state moves on, a replay is not the
            # same case, and the first failure is the one to report.
            "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "database": "none", "no-shrink": True},
            "phases": {"stateful": {"max-steps": 12}},
            # Every check; accepts_valid_data stands for positive_data_acceptance.
            "checks": {"enabled": True, "positive_data_acceptance": {"enabled": False}},
            "continue-on-failure": True,
        }
    )


def _run(schema, run: Run) -> None:
    started = time.monotonic()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            phase = event.phase.value
            run.cases[phase] = run.cases.get(phase, 0) + len(event.recorder.cases)
            for checks in event.recorder.checks.values():
                for check in checks:
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        failure = check.failure_info.failure
                        run.findings.append(
                            f"[{phase}] {failure.operation}: {failure.title} ({check.name})\n"
                            f"{failure.message}\n{check.failure_info.code_sample}"
                        )
        elif isinstance(event, events.NonFatalError):
            run.findings.append(f"[{event.phase}] {event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            run.findings.append(f"the run failed: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            run.findings += [f"{failure.operation}: {failure.title}\n{failure.message}" for failure in event.failures]
    run.seconds = time.monotonic() - started


@pytest.mark.parametrize("role", ["buyer", "staff"])
def test_the_api_keeps_its_contract(role, live_api, django_user_model):
    staff = django_user_model.objects.create_user(username="contract-staff", password=None, is_staff=True)
    grant(staff, *STAFF_PERMISSIONS)
    _seed(live_api, token_issue(user=staff))
    user = staff if role == "staff" else django_user_model.objects.create_user(username="contract-buyer", password=None)
    schema = schemathesis.openapi.from_url(f"{live_api}/api/openapi.json", config=_config())
    schema.auth(refresh_interval=None)(_bearer_for(user))

    run = Run(role)
    RUNS.append(run)
    _run(schema, run)

    assert sum(run.cases.values()) > 0
    assert not run.findings, f"{len(run.findings)} findings as {role} (seed {SEED}):\n\n" + "\n\n".join(
        dict.fromkeys(run.findings)
    )
