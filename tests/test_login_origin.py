"""Login CSRF at ``POST /api/auth/login`` (docs/security.md, "Identity and tokens").

A session is created only for a login whose Origin (or, without one, Referer) is this
site or one of ``CSRF_TRUSTED_ORIGINS``; a foreign origin is refused; a client that sends
neither (curl, a script, a load test) gets its bearer token and no session. The body must
be ``application/json``, which a cross-site form cannot send and a cross-site script
cannot send without a CORS preflight this site never answers.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import Client

from accounts.models import ApiToken

from .http import assert_error

pytestmark = pytest.mark.django_db

CREDENTIALS = {"username": "ann", "password": "ann-secret-77"}


@pytest.fixture
def ann(make_user):
    return make_user("ann", password=CREDENTIALS["password"])


def login(client: Client, *, body=None, content_type="application/json", **headers):
    data = json.dumps(CREDENTIALS) if body is None else body
    return client.post("/api/auth/login", data=data, content_type=content_type, headers=headers)


def has_session(client: Client, response) -> bool:
    return settings.SESSION_COOKIE_NAME in response.cookies or "_auth_user_id" in client.session


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "null"},  # a sandboxed frame or a page with no-referrer
        {"Origin": "https://testserver"},  # the right host on another scheme is another origin
        {"Referer": "https://evil.example/form.html"},
    ],
)
def test_a_login_from_a_foreign_origin_is_refused_without_a_session_or_a_token(ann, headers):
    client = Client()
    response = login(client, **headers)
    assert_error(response, 403, "csrf_failed")
    assert not has_session(client, response)
    assert not ApiToken.objects.filter(user=ann).exists()


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        # What a cross-site <form enctype="text/plain"> sends: JSON with a "=" tucked in.
        ('{"username": "ann", "password": "ann-secret-77", "x": "="}', "text/plain"),
        ('{"username": "ann", "password": "ann-secret-77"}', "text/plain"),
        ("username=ann&password=ann-secret-77", "application/x-www-form-urlencoded"),
        ("username=ann&password=ann-secret-77", "multipart/form-data; boundary=x"),
    ],
)
def test_a_cross_site_form_cannot_log_a_browser_in(ann, body, content_type):
    client = Client()
    response = login(client, body=body, content_type=content_type, Origin="https://evil.example")
    assert_error(response, 415, "unsupported_media_type")
    assert not has_session(client, response)
    assert not ApiToken.objects.filter(user=ann).exists()


def test_login_takes_only_application_json(ann):
    # Other JSON types are fine elsewhere in the API; a login is the one call a browser
    # could be tricked into, so it takes exactly one type.
    client = Client()
    response = login(client, content_type="application/vnd.api+json")
    assert_error(response, 415, "unsupported_media_type")
    assert not ApiToken.objects.filter(user=ann).exists()


def test_an_api_client_without_origin_gets_a_token_and_no_session(ann):
    client = Client()
    response = login(client)
    assert response.status_code == 200
    assert not has_session(client, response)
    token = response.json()["token"]
    assert Client().get("/api/orders", headers={"Authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://testserver"},
        {"Referer": "http://testserver/vouchers/"},  # a browser that sent no Origin
    ],
)
def test_a_same_origin_login_gets_a_session_and_a_token(ann, headers):
    client = Client()
    response = login(client, **headers)
    assert response.status_code == 200
    assert response.json()["token"]
    assert has_session(client, response)
    assert client.get("/api/orders").status_code == 200


@pytest.mark.parametrize("trusted", ["https://shop.example", "https://*.example"])
def test_a_login_from_a_trusted_origin_gets_a_session(ann, settings, trusted):
    settings.CSRF_TRUSTED_ORIGINS = [trusted]
    client = Client()
    response = login(client, Origin="https://shop.example")
    assert response.status_code == 200
    assert has_session(client, response)
    assert_error(login(Client(), Origin="http://shop.example"), 403, "csrf_failed")


def test_a_foreign_origin_is_refused_before_the_password_is_checked(ann):
    response = login(Client(), body=json.dumps({"username": "ann", "password": "wrong"}), Origin="https://evil.example")
    assert_error(response, 403, "csrf_failed")


def test_the_login_page_is_djangos_form_with_its_csrf_token(ann):
    # The site's own login page posts to /login/ (Django's LoginView), not to the API:
    # it needs the CSRF token of the page it was served with.
    client = Client(enforce_csrf_checks=True)
    page = client.get("/login/")
    assert b'action="/api/' not in page.content
    refused = client.post("/login/", CREDENTIALS)
    assert refused.status_code == 403
    accepted = client.post("/login/", {**CREDENTIALS, "csrfmiddlewaretoken": page.context["csrf_token"]})
    assert accepted.status_code == 302
    assert "_auth_user_id" in client.session


def test_openapi_declares_the_login_refusals():
    responses = Client().get("/api/openapi.json").json()["paths"]["/api/auth/login"]["post"]["responses"]
    assert {"200", "400", "401", "403", "415", "422"} <= set(responses)
