"""The request id and the structured logs: every request gets an id (the client's
``X-Request-ID`` when sane, else a fresh one), answers it, and every log line it causes
carries it: the purchase's or draw's outcome, the locks it takes, and, under ``redis_lua``,
the worker's line that writes its reservation as a row, in another process, later.

The whole path runs on real processes: gunicorn and a Celery worker, both logging JSON to
files that the test reads back.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.test import Client

from accounts.services import token_issue
from core import requestid
from core.logfilters import Json, RequestId, Text
from core.namespace import instance_key
from inventory.records import internal_of
from locking.testing import free_port
from lottery.models import Pool
from orders.models import Voucher

from .test_reservations_worker import database_url, wait_for

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
HEX_ID = re.compile(r"[0-9a-f]{32}")


class Lines:
    """The application's log lines as the settings' JSON handler writes them (the request id
    filter and the JSON format), read back as objects; root at INFO while it is attached."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.addFilter(RequestId())
        self.handler.setFormatter(Json())

    def __enter__(self) -> Lines:
        root = logging.getLogger()
        self.level = root.level
        root.addHandler(self.handler)
        root.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        root = logging.getLogger()
        root.removeHandler(self.handler)
        root.setLevel(self.level)

    def all(self) -> list[dict]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]


# --- the id of a request ------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_sane_request_id_is_kept_and_answered():
    response = Client().get("/api/vouchers", headers={"X-Request-ID": "edge-7f3a:42.b_c"})
    assert response.status_code == 200
    assert response["X-Request-ID"] == "edge-7f3a:42.b_c"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "given",
    ["", "has space", "x" * 129, "semi;colon", 'quote"d', "new\\nline", "caf\u00e9", "{json}"],
)
def test_a_request_id_that_is_not_sane_is_replaced(given):
    response = Client().get("/api/vouchers", headers={"X-Request-ID": given})
    assert HEX_ID.fullmatch(response["X-Request-ID"])
    assert response["X-Request-ID"] != given


@pytest.mark.django_db
def test_without_a_header_each_request_gets_its_own_id():
    client = Client()
    ids = {client.get("/api/vouchers")["X-Request-ID"] for _ in range(5)}
    assert len(ids) == 5 and all(HEX_ID.fullmatch(one) for one in ids)
    assert requestid.current() is None  # nothing stays bound after a request


def test_the_formats_carry_the_id_and_the_fields():
    record = logging.LogRecord("orders.purchase", logging.INFO, __file__, 1, "bought %s", ("it",), None)
    record.__dict__.update({"outcome": "confirmed", "item_id": 3})
    token = requestid.bind("rid-1")
    try:
        RequestId().filter(record)
    finally:
        requestid.unbind(token)
    line = json.loads(Json().format(record))
    assert {k: line[k] for k in ("level", "logger", "message", "request_id", "outcome", "item_id")} == {
        "level": "INFO",
        "logger": "orders.purchase",
        "message": "bought it",
        "request_id": "rid-1",
        "outcome": "confirmed",
        "item_id": 3,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
    assert " INFO orders.purchase [rid-1] bought it" in Text().format(record)
    # A line given an id of its own keeps it (the worker's line per reservation).
    own = logging.LogRecord("inventory.redis_lua.persist", logging.INFO, __file__, 1, "written", (), None)
    own.request_id = "the-reservations-own"
    RequestId().filter(own)
    assert json.loads(Json().format(own))["request_id"] == "the-reservations-own"


# --- through the lock -----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("product", ["purchase", "draw"])
def test_under_redis_lock_the_outcome_and_every_lock_line_carry_the_request_id(
    product, api_client, make_voucher, make_pool
):
    buyer = api_client()
    if product == "purchase":
        item = make_voucher(stock=3, strategy="redis_lock")
        url, logger, kind, group = (
            f"/api/vouchers/{item.pk}/purchase",
            "orders.purchase",
            "voucher",
            item.group_id,
        )
    else:
        item = make_pool(prizes=(("Gold", 3),), strategy="redis_lock")
        url, logger, kind, group = f"/api/pools/{item.pk}/draw", "lottery.draw", "pool", item.group_id
    with Lines() as lines:
        response = buyer.post(url, headers={"X-Request-ID": f"lock-{product}-1"})
    assert response.status_code == 201 and response["X-Request-ID"] == f"lock-{product}-1"
    logged = lines.all()
    locks = [(line["event"], line["lock"]) for line in logged if line["logger"] == "locking"]
    user_lock, group_lock = f"{kind}:{item.pk}:user:{buyer.user.pk}", f"stock-group:{group}"
    assert locks == [
        ("lock.acquired", user_lock),
        ("lock.acquired", group_lock),
        ("lock.released", group_lock),
        ("lock.released", user_lock),
    ]
    assert {line["request_id"] for line in logged} == {f"lock-{product}-1"}
    (outcome,) = [line for line in logged if line["logger"] == logger]
    id_field = "draw_id" if product == "draw" else "order_id"
    assert {k: outcome[k] for k in ("event", "strategy", "kind", "item_id", "user_id", "outcome")} == {
        "event": product,
        "strategy": "redis_lock",
        "kind": kind,
        "item_id": item.pk,
        "user_id": buyer.user.pk,
        "outcome": "confirmed",
    }
    assert outcome[id_field] == response.json()[id_field] and outcome["ms"] > 0


@pytest.mark.django_db
@pytest.mark.parametrize("change", ["cancel", "claim"])
def test_under_redis_lock_a_change_locks_the_name_its_take_locked(change, api_client, make_voucher, make_pool):
    buyer = api_client()
    if change == "cancel":
        item = make_voucher(stock=3, strategy="redis_lock")
        Voucher.objects.filter(pk=item.pk).update(hold_seconds=600)
        take, changed = f"/api/vouchers/{item.pk}/purchase", "/api/orders/{}/cancel"
    else:
        item = make_pool(prizes=(("Gold", 3),), strategy="redis_lock")
        Pool.objects.filter(pk=item.pk).update(hold_seconds=600)
        take, changed = f"/api/pools/{item.pk}/draw", "/api/draws/{}/claim"
    with Lines() as lines:
        record_id = buyer.post(take).json()["draw_id" if change == "claim" else "order_id"]
        assert buyer.post(changed.format(record_id)).status_code == 200
    acquired = [line["lock"] for line in lines.all() if line.get("event") == "lock.acquired"]
    user_locks = [name for name in acquired if ":user:" in name]
    assert len(user_locks) == 2 and user_locks[0] == user_locks[1], acquired


@pytest.mark.django_db
def test_a_refusal_is_one_outcome_line_with_its_code(api_client, make_voucher):
    voucher = make_voucher(stock=0, strategy="db_atomic")
    with Lines() as lines:
        response = api_client().post(f"/api/vouchers/{voucher.pk}/purchase", headers={"X-Request-ID": "refused-1"})
    assert response.status_code == 409
    (outcome,) = [line for line in lines.all() if line["logger"] == "orders.purchase"]
    assert (outcome["outcome"], outcome["request_id"], outcome["order_id"]) == ("sold_out", "refused-1", None)


# --- through Celery: gunicorn and a worker, each logging JSON to a file ------------------------------


def json_lines(path: Path) -> list[dict]:
    """The JSON lines of a process's output (gunicorn's own start-up lines are not ours)."""
    found = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


@pytest.fixture
def json_processes(tmp_path, reservations_redis):
    """``start()`` serves the test database with gunicorn and starts a Celery worker on the
    test's broker, both with ``LOG_FORMAT=json`` and ``LOG_LEVEL=INFO``, their output in
    ``web.log`` and ``worker.log``; returns the server's address. The worker comes later
    (``worker()``), so that the drain tasks wait for it in the order they were sent."""
    broker = settings.CELERY_BROKER_URL
    redis.Redis.from_url(broker).delete(instance_key("celery"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "RESERVATIONS_REDIS_URL": settings.RESERVATIONS_REDIS_URL,
        "CELERY_BROKER_URL": broker,
        "RATE_LIMITS_ENABLED": "0",
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
        "PYTHONPATH": str(ROOT),
        "LOG_FORMAT": "json",
        "LOG_LEVEL": "INFO",
    }
    started: list[subprocess.Popen] = []

    def run(command: list[str], log: str) -> None:
        with open(tmp_path / log, "w") as output:
            started.append(
                subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output, start_new_session=True)
            )

    def start() -> str:
        port = free_port()
        run(
            [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "config" / "gunicorn.py"), "config.wsgi",
             "--bind", f"127.0.0.1:{port}", "--workers", "1"],
            "web.log",
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"

        def up() -> bool:
            try:
                with urllib.request.urlopen(f"{base}/api/ping", timeout=5):
                    return True
            except OSError:
                assert started[0].poll() is None, (tmp_path / "web.log").read_text()
                return False

        wait_for(up, timeout=60)
        return base

    def worker() -> None:
        run(
            [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "--concurrency", "1",
             "--without-gossip", "--without-mingle", "--without-heartbeat"],
            "worker.log",
        )  # fmt: skip

    yield start, worker, tmp_path
    for process in started:  # the master and the worker's main process stop their children
        process.terminate()
    for process in started:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def post(base: str, path: str, token: str, request_id: str) -> tuple[int, dict, str]:
    request = urllib.request.Request(
        base + path, method="POST", headers={"Authorization": f"Bearer {token}", "X-Request-ID": request_id}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read()), response.headers["X-Request-ID"]


@pytest.mark.django_db(transaction=True)
def test_under_redis_lua_the_worker_line_that_writes_a_reservation_carries_its_request_id(
    json_processes, make_voucher, make_pool, make_user
):
    """Two purchases (ids A and B) and a draw (id C) answered 202 by gunicorn; then a worker
    writes them. The web's outcome lines and the worker's line for each reservation carry the
    id of the request that made it, as JSON; the batch's line carries the id of the request
    whose drain task it runs (A's: it asked first), which came in the task's headers."""
    start, worker, folder = json_processes
    voucher = make_voucher(stock=5, strategy="redis_lua")
    pool = make_pool(prizes=(("Gold", 5),), strategy="redis_lua")
    ann, bob = make_user(), make_user()
    base = start()

    asked = {"A": "purchase-A-" + os.urandom(4).hex(), "B": "purchase-B-" + os.urandom(4).hex()}
    asked["C"] = "draw-C-" + os.urandom(4).hex()
    answers = {
        "A": post(base, f"/api/vouchers/{voucher.pk}/purchase", token_issue(user=ann), asked["A"]),
        "B": post(base, f"/api/vouchers/{voucher.pk}/purchase", token_issue(user=bob), asked["B"]),
        "C": post(base, f"/api/pools/{pool.pk}/draw", token_issue(user=ann), asked["C"]),
    }
    for key, (status, body, echoed) in answers.items():
        assert status == 202 and body["status"] == "pending", body
        assert echoed == asked[key]
    reservation = {
        "A": answers["A"][1]["order_id"],
        "B": answers["B"][1]["order_id"],
        "C": answers["C"][1]["draw_id"],
    }

    # The web's line for each outcome, from gunicorn's output.
    web = json_lines(folder / "web.log")
    for key, logger, kind, item in (
        ("A", "orders.purchase", "voucher", voucher.pk),
        ("B", "orders.purchase", "voucher", voucher.pk),
        ("C", "lottery.draw", "pool", pool.pk),
    ):
        (line,) = [one for one in web if one["logger"] == logger and one["request_id"] == asked[key]]
        assert (line["strategy"], line["kind"], line["item_id"], line["outcome"]) == (
            "redis_lua",
            kind,
            item,
            "pending",
        )
        assert line["draw_id" if key == "C" else "order_id"] == reservation[key]

    worker()

    def written() -> list[dict]:
        return [one for one in json_lines(folder / "worker.log") if one.get("event") == "reservation"]

    wait_for(lambda: len(written()) >= 3, timeout=60)
    lines = {line["reservation_id"]: line for line in written()}
    for key, kind, item, user in (
        ("A", "voucher", voucher.pk, ann.pk),
        ("B", "voucher", voucher.pk, bob.pk),
        ("C", "pool", pool.pk, ann.pk),
    ):
        line = lines[internal_of(reservation[key])]  # the worker's line names the reservation's own id
        assert line["request_id"] == asked[key], line
        assert (line["logger"], line["level"], line["outcome"]) == ("inventory.redis_lua.persist", "INFO", "written")
        assert (line["kind"], line["item_id"], line["user_id"]) == (kind, item, user)
        assert line["time"] and line["record_id"] == reservation[key]
        assert f"(shown as {reservation[key]})" in line["message"]

    # The voucher's batch ran under the drain task A's purchase sent: its id came in the headers.
    batches = [one for one in json_lines(folder / "worker.log") if one.get("event") == "reservations.batch"]
    (voucher_batch,) = [one for one in batches if one["kind"] == "voucher"]
    assert voucher_batch["request_id"] == asked["A"] and voucher_batch["written"] == 2
    (pool_batch,) = [one for one in batches if one["kind"] == "pool"]
    assert pool_batch["request_id"] == asked["C"]


@pytest.mark.django_db
def test_a_server_errors_lines_all_carry_the_id(monkeypatch):
    """The API logs the error with its traceback, and Django logs the 500 once more after
    every middleware has returned: the id is still bound then, until the response closes."""

    def broken():
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr("orders.api.voucher_list", broken)
    with Lines() as lines:
        response = Client(raise_request_exception=False).get("/api/vouchers", headers={"X-Request-ID": "err-1"})
    assert response.status_code == 500 and response["X-Request-ID"] == "err-1"
    errors = [line for line in lines.all() if line["logger"] == "django.request"]
    assert errors and {line["request_id"] for line in errors} == {"err-1"}
    assert any("broken on purpose" in line.get("exc_info", "") for line in errors)
    assert requestid.current() is None
