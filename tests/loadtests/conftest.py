"""What the load tests' own tests share: a buyer of a run's crowd, a fake Locust answer, and
a folder the locustfiles' calls log their outcomes to."""

from __future__ import annotations

import pytest

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
