"""A body sent with ``Transfer-Encoding: chunked`` (no Content-Length), straight to
gunicorn, is read as the body it is: Django reads a request body by its Content-Length,
and without one read it as empty (a login answered 422)."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from .live import database_url, running_gunicorn

pytestmark = pytest.mark.live

PASSWORD = "right-pass-2026"


@pytest.fixture
def server(transactional_db, django_user_model) -> Iterator[str]:
    hasher = PBKDF2PasswordHasher()
    django_user_model.objects.create(
        username="chunky", password=hasher.encode(PASSWORD, hasher.salt(), iterations=1000)
    )
    env = {
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
    }
    with running_gunicorn(env, workers=1) as base:
        yield base


def post_chunked(base: str, path: str, pieces: list[bytes]) -> tuple[int, bytes]:
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request(
            "POST", path, body=iter(pieces), headers={"Content-Type": "application/json"}, encode_chunked=True
        )
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_a_chunked_login_body_is_read(server):
    body = json.dumps({"username": "chunky", "password": PASSWORD}).encode()
    status, answer = post_chunked(server, "/api/auth/login", [body[:10], body[10:25], body[25:]])
    assert status == 200, answer
    assert json.loads(answer)["token"]


def test_a_chunked_body_over_the_limit_is_a_413(server):
    # Read on past the limit before the answer: closed with the rest unread, the connection was
    # reset while this client still sent, and it never read its 413 (a loaded machine's run).
    piece = b" " * 65536
    status, answer = post_chunked(server, "/api/auth/login", [b"{"] + [piece] * 48 + [b"}"])  # 3 MB
    assert status == 413, answer
    assert json.loads(answer)["code"] == "too_large"
