"""A Locust user's exception is an ``error`` outcome (loadtests.task_errors), which the verdict
counts: a task that raised once left a line in Locust's log alone, and its buyer left the run
without a trace in its figures. Run by a short Locust of its own (no server: the task raises
before it sends anything); and every locustfile that writes outcomes listens."""

from __future__ import annotations

import ast
import os
from argparse import Namespace
from pathlib import Path

from loadtests.common import crowd_exhausted, read_outcomes
from loadtests.locust_process import run_locust

LOCUSTFILES = Path(__file__).resolve().parent.parent.parent / "loadtests" / "locustfiles"

RAISING = """
import loadtests.task_errors  # noqa: F401
from locust import User, constant, task


class Buyer(User):
    wait_time = constant(0.5)

    @task
    def reads_a_ticket_of_another_form(self):
        int("voucher.3.17".split(".")[3])
"""


# A till that deals its one buyer and then finds the crowd has all come.
IDLING = """
import loadtests.task_errors  # noqa: F401
from locust import task
from loadtests.tills import Till


class Buyer(Till):
    @task
    def next_buyer(self):
        self.next_token()
"""


def run(tmp_path, locustfile: str, **env: str) -> Path:
    """Run ``locustfile`` for two seconds, one user, against nothing; the outcomes' folder."""
    path = tmp_path / "locustfile.py"
    path.write_text(locustfile)
    outcomes = tmp_path / "outcomes"
    args = Namespace(spawn_rate=1, duration=2, locust_processes=1)
    run_locust(
        args,
        path,
        "http://127.0.0.1:9",
        tmp_path / "locust",
        dict(os.environ, LOADTEST_OUTCOMES=str(outcomes), **env),
        1,
    )
    return outcomes


def test_a_task_that_raised_is_an_error_outcome(tmp_path):
    outcomes = read_outcomes(run(tmp_path, RAISING))
    assert outcomes and all(outcome == ["error"] for outcome in outcomes), outcomes


def test_a_till_whose_crowd_has_all_come_idles_without_an_exception(tmp_path):
    # Its wait, once set on the till itself, raised at every wait: seen once exceptions counted.
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("buyer-1 t0k3n\n")
    outcomes = run(tmp_path, IDLING, LOADTEST_TOKENS=str(tokens))
    assert crowd_exhausted(outcomes)
    assert read_outcomes(outcomes) == []


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}


def test_every_locustfile_that_writes_outcomes_listens():
    # The baseline writes none: its failures are Locust's own.
    deaf = [
        path.name
        for path in sorted(LOCUSTFILES.glob("*.py"))
        if path.name not in ("__init__.py", "baseline.py") and "loadtests.task_errors" not in imports(path)
    ]
    assert deaf == []
