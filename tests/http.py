"""Calls and checks that the API tests of both products share."""

from __future__ import annotations

import json

from django.test import Client


def post_json(client: Client, url: str, body, **kwargs):
    """POST ``body`` as JSON; a ``str`` or ``bytes`` body is sent as it is (for malformed input)."""
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(url, data=data, content_type="application/json", **kwargs)


def patch_json(client: Client, url: str, body):
    return client.patch(url, data=json.dumps(body), content_type="application/json")


def assert_error(response, status: int, code: str) -> None:
    """The documented error shape: ``{"code", "message"}`` with ``status``."""
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code
    assert body["message"]
