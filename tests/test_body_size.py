"""A request body over DATA_UPLOAD_MAX_MEMORY_SIZE: 413, in the error shape under /api/ and as
a page elsewhere, logged on one line without a traceback; nothing is written.

Django raises RequestDataTooBig where ``request.body`` (or ``request.POST``) is read: inside
ninja's operation for the API (it was answered as a server error, 500 with a traceback), and in
a view or a middleware for the pages (Django's bare HTML 400, logged with a traceback).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.test import Client

from orders.models import Voucher

from .http import post_json

pytestmark = pytest.mark.django_db

LIMIT = 4096
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = LIMIT


def too_big() -> dict:
    return {"title": "x" * (LIMIT + 1), "stock": 1, "strategy": "db_atomic"}


def assert_too_large_json(response) -> None:
    assert response.status_code == 413, response.content
    assert response["Content-Type"].startswith("application/json")
    body = json.loads(response.content)
    assert body["code"] == "too_large"
    assert str(LIMIT) in body["message"]


def assert_logged_on_one_line(caplog) -> None:
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert records, "the refusal is logged"
    for record in records:
        assert record.exc_info is None and not record.exc_text, record.getMessage()
        assert "\n" not in record.getMessage()
        assert record.levelno == logging.WARNING


def test_an_api_body_over_the_limit_is_a_json_413_logged_on_one_line(api_client, caplog):
    response = post_json(api_client(staff=True), "/api/admin/vouchers", too_big())
    assert_too_large_json(response)
    assert_logged_on_one_line(caplog)
    assert not Voucher.objects.exists()


def test_a_login_body_over_the_limit_is_a_json_413(caplog):
    response = post_json(Client(), "/api/auth/login", {"username": "a" * (LIMIT + 1), "password": "x"})
    assert_too_large_json(response)
    assert_logged_on_one_line(caplog)


def test_a_session_clients_body_over_the_limit_is_a_json_413(make_user, caplog):
    """A session's POST passes the CSRF check first, which reads the form: the same answer."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(staff=True))
    client.get("/")
    token = client.cookies["csrftoken"].value
    response = client.post(
        "/api/admin/vouchers",
        data=json.dumps(too_big()),
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )
    assert_too_large_json(response)
    assert_logged_on_one_line(caplog)
    assert not Voucher.objects.exists()


def test_a_form_body_over_the_limit_under_api_is_a_json_413(caplog):
    response = Client().post("/api/auth/login", data={"username": "a" * (LIMIT + 1)})
    assert_too_large_json(response)
    assert_logged_on_one_line(caplog)


def test_a_page_body_over_the_limit_is_a_413_page_logged_on_one_line(caplog):
    response = Client().post("/login/", data={"username": "a" * (LIMIT + 1), "password": "x"})
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    assert b"too large" in response.content.lower()
    assert_logged_on_one_line(caplog)


def test_too_many_form_fields_under_api_is_a_json_400_logged_on_one_line(make_user, caplog, settings):
    """The same family of refusal (SuspiciousOperation, raised where the form is read by the
    session's CSRF check) was a 500 too."""
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user(staff=True))
    client.get("/")
    fields = {f"f{i}": "1" for i in range(10)}
    response = client.post(
        "/api/admin/vouchers", data=fields, headers={"X-CSRFToken": client.cookies["csrftoken"].value}
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "bad_request"
    assert_logged_on_one_line(caplog)


def test_nginx_lets_django_answer_bodies_up_to_its_limit():
    """nginx refuses bodies over 1 MB by default with its own HTML 413, below Django's 2.5 MB."""
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "client_max_body_size 3m;" in conf


def test_django_400_hook_answers_json_under_api_whatever_raised_it(rf):
    """A middleware that reads the body before the API does reaches Django's 400 hook."""
    from config.views import bad_request

    response = bad_request(rf.post("/api/vouchers/1/purchase"), RequestDataTooBig("too big"))
    assert_too_large_json(response)
    other = bad_request(rf.post("/api/vouchers/1/purchase"), TooManyFieldsSent("too many"))
    assert (other.status_code, json.loads(other.content)["code"]) == (400, "bad_request")
