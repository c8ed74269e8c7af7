"""What the load tests' own tests share: a buyer of a run's crowd, a fake Locust answer, a
Locust user whose requests the API itself answers, and a folder the locustfiles' calls log
their outcomes to."""

from __future__ import annotations

import json as _json

import pytest
from django.test import Client

from accounts.crowd import crowd_join
from loadtests import common


@pytest.fixture
def make_buyer(make_user):
    """A user of a load run's crowd, who alone may buy and draw a run's unlisted items."""

    def make():
        user = make_user()
        crowd_join(user_ids=[user.pk])
        return user

    return make


@pytest.fixture
def outcomes_dir(tmp_path, monkeypatch):
    """Where the outcomes of this test's calls are logged, by a log of its own."""
    monkeypatch.setenv("LOADTEST_OUTCOMES", str(tmp_path))
    monkeypatch.setattr(common, "outcomes", common.OutcomeLog())
    return tmp_path


class FakeResponse:
    """An answer as Locust's ``catch_response`` hands it over, which keeps how it was marked."""

    def __init__(self, status_code: int, body, headers: dict | None = None) -> None:
        self.status_code = status_code
        self.body = body
        self.headers = headers or {}
        self.marked: str | None = None

    def json(self):
        if isinstance(self.body, Exception):
            raise self.body
        return self.body

    def success(self) -> None:
        self.marked = "success"

    def failure(self, message: str) -> None:
        self.marked = "failure"

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc) -> None:
        return None


class ServedUser:
    """A Locust user whose requests this process's Django answers (its test client): a
    locustfile's call sent to the API itself, each answer handed over as Locust's
    ``catch_response`` hands it over, and kept in ``answers``."""

    def __init__(self) -> None:
        self.client = self
        self.answers: list[FakeResponse] = []

    def request(self, method: str, url: str, *, headers: dict, name: str, catch_response: bool, json=None):
        assert catch_response, "a locustfile's call judges its answer itself"
        body = {} if json is None else {"data": _json.dumps(json), "content_type": "application/json"}
        answered = getattr(Client(), method.lower())(url, headers=headers, **body)
        try:
            content = answered.json()
        except ValueError as error:  # not JSON: a page, or an error of another shape
            content = error
        answer = FakeResponse(answered.status_code, content, dict(answered.headers))
        self.answers.append(answer)
        return answer

    def get(self, url: str, *, headers: dict | None = None, **kwargs) -> FakeResponse:
        return self.request("GET", url, headers=headers or {}, **kwargs)

    def post(self, url: str, **kwargs) -> FakeResponse:
        return self.request("POST", url, **kwargs)

    def patch(self, url: str, **kwargs) -> FakeResponse:
        return self.request("PATCH", url, **kwargs)
