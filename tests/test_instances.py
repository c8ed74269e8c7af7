"""Two instances on one Redis: each with its own database (holding the same voucher and pool
ids), its own gunicorn and its own Celery worker and beat, hammered at once under redis_lua
and redis_lock. Neither takes the other's reservations, stock, locks or tasks: every order
and draw answered 201 or 202 is confirmed in its own database, and both audits hold.

The instances leave ``INSTANCE_NAMESPACE`` unset, as ``make run`` does: each derives its
namespace from its database."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import dj_database_url
import pytest
import redis
from django.conf import settings

from config.settings.base import database_from_url, database_namespace
from harness.server import running_server, server_env

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parent.parent
STRATEGIES = ("redis_lua", "redis_lock")
BUYERS = 60  # per instance; each buys every voucher once and draws DRAWS times from every pool
VOUCHER_STOCK = 40
PRIZE_STOCK = 20  # two prizes per pool: 40 units for 120 draws
DRAWS = 2
EXPECTED_REFUSALS = {"sold_out", "already_purchased", "busy", "draw_limit", "pool_empty"}

# The same items and buyers in each fresh database, so that their ids agree.
SEED = f"""
import json
from datetime import timedelta
from django.utils import timezone
from accounts.services import users_with_tokens_create
from lottery.services import pool_create, prize_create
from orders.services import voucher_create

begin = timezone.now() - timedelta(minutes=1)
end = begin + timedelta(hours=1)
items = {{}}
for strategy in {STRATEGIES!r}:
    items["voucher", strategy] = voucher_create(
        title="Shared ids " + strategy, stock={VOUCHER_STOCK}, begin_at=begin, end_at=end, strategy=strategy
    ).pk
    pool = pool_create(name="Shared ids " + strategy, begin_at=begin, end_at=end, draws_per_user={DRAWS},
                       no_prize_weight=0, strategy=strategy)
    for name in ("Gold", "Silver"):
        prize_create(pool=pool, name=name, stock={PRIZE_STOCK})
    items["pool", strategy] = pool.pk
tokens = [token for _, token in users_with_tokens_create(count={BUYERS}, prefix="crowd")]
print(json.dumps({{"items": [[*key, pk] for key, pk in items.items()], "tokens": tokens}}))
"""


def database_urls() -> list[str]:
    """Two fresh databases beside the test's, created empty (MariaDB) or as new files (SQLite)."""
    config = settings.DATABASES["default"]
    if config["ENGINE"] == "django.db.backends.sqlite3":
        folder = Path(settings.VAR_DIR)
        urls = [f"sqlite:///{folder / f'instance_{name}.sqlite3'}" for name in "ab"]
        for url in urls:
            Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
        return urls
    import MySQLdb

    host, port = config["HOST"] or "127.0.0.1", int(config["PORT"] or 3306)
    names = [f"{config['NAME']}_instance_{name}" for name in "ab"]
    connection = MySQLdb.connect(host=host, port=port, user=config["USER"], passwd=config["PASSWORD"] or "")
    for name in names:
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
        connection.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    connection.close()
    return [f"mysql://{config['USER']}:{config['PASSWORD']}@{host}:{port}/{name}" for name in names]


def drop_databases(urls: list[str]) -> None:
    for url in urls:
        parts = dj_database_url.parse(url)
        if parts["ENGINE"] == "django.db.backends.sqlite3":
            Path(parts["NAME"]).unlink(missing_ok=True)
            continue
        import MySQLdb

        connection = MySQLdb.connect(
            host=parts["HOST"], port=int(parts["PORT"]), user=parts["USER"], passwd=parts["PASSWORD"] or ""
        )
        connection.cursor().execute(f"DROP DATABASE IF EXISTS `{parts['NAME']}`")
        connection.close()


def forget(namespace: str) -> None:
    """Drop whatever an earlier run of this test left under ``namespace`` in the shared Redis."""
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=f"{namespace}:*", count=1000):
        client.delete(key)
    client.close()


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def call(base: str, token: str, method: str, path: str) -> tuple[int, dict]:
    request = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read() or b"{}")


@pytest.fixture
def two_instances(monkeypatch):
    """Two databases, seeded alike, and two live instances on the test's one Redis, each as
    `make run` would start it: no namespace set."""
    monkeypatch.delenv("INSTANCE_NAMESPACE", raising=False)
    urls = database_urls()
    namespaces = [database_namespace(database_from_url(url)) for url in urls]
    assert namespaces[0] != namespaces[1]
    for namespace in namespaces:
        forget(namespace)
    envs = [server_env(database_url=url, redis_url=settings.REDIS_URL, lock_urls=[], race_window_ms=0) for url in urls]
    seeded = []
    for env in envs:
        migrated = manage(env, "migrate", "--noinput", "-v0")
        assert migrated.returncode == 0, migrated.stderr
        seed = manage(env, "shell", "-c", SEED)
        assert seed.returncode == 0, seed.stderr
        seeded.append(json.loads(seed.stdout.strip().splitlines()[-1]))
    assert seeded[0]["items"] == seeded[1]["items"]  # the same ids in both databases
    try:
        with ExitStack() as stack:
            servers = [
                stack.enter_context(
                    running_server(
                        database_url=url, redis_url=settings.REDIS_URL, processes=2, race_window_ms=0, celery=True
                    )
                )
                for url in urls
            ]
            yield [
                {"base": server.host, "env": env, "tokens": seed["tokens"], "items": seed["items"]}
                for server, env, seed in zip(servers, envs, seeded, strict=True)
            ]
    finally:
        for namespace in namespaces:
            forget(namespace)
        drop_databases(urls)


def test_two_instances_on_one_redis_keep_to_their_own_orders(two_instances):
    jobs = []
    for index, instance in enumerate(two_instances):
        for token in instance["tokens"]:
            for kind, strategy, pk in instance["items"]:
                path = f"/api/vouchers/{pk}/purchase" if kind == "voucher" else f"/api/pools/{pk}/draw"
                repeats = 1 if kind == "voucher" else DRAWS
                jobs += [(index, kind, strategy, token, path)] * repeats
    random.Random(19).shuffle(jobs)  # both instances, every item, interleaved

    def attempt(job):
        index, kind, strategy, token, path = job
        return job, *call(two_instances[index]["base"], token, "POST", path)

    with ThreadPoolExecutor(max_workers=48) as crowd:
        answers = list(crowd.map(attempt, jobs))

    taken: dict[tuple[int, str, str], list[tuple[str, int]]] = {}
    statuses = Counter()
    for (index, kind, strategy, token, _), status, body in answers:
        statuses[status] += 1
        if status in (201, 202):
            record = body["order_id"] if kind == "voucher" else body["draw_id"]
            taken.setdefault((index, kind, strategy), []).append((token, record))
        else:
            assert status == 409 and body["code"] in EXPECTED_REFUSALS, (status, body)

    # Every reservation answered 202 ends confirmed in its own instance: none failed.
    outcomes = Counter()
    give_up = time.monotonic() + 180
    for (index, kind, _), records in taken.items():
        base = two_instances[index]["base"]
        for token, record in records:
            path = f"/api/orders/{record}" if kind == "voucher" else f"/api/draws/{record}"
            while True:
                status, body = call(base, token, "GET", path)
                outcome = body["status"] if status == 200 else f"answered {status}"  # 404: in another's database
                if outcome != "pending" or time.monotonic() > give_up:
                    break
                time.sleep(0.2)
            outcomes[index, outcome] += 1
    print(f"\nanswers {dict(statuses)}; outcomes {dict(outcomes)}")
    assert {outcome for _, outcome in outcomes} == {"confirmed"}, outcomes

    figures = {}
    for index, instance in enumerate(two_instances):
        audited = manage(instance["env"], "audit", "--json")
        assert audited.returncode == 0, audited.stdout + audited.stderr
        audit = json.loads(audited.stdout)
        assert audit["ok"]
        for strategy in STRATEGIES:
            (voucher,) = [v for v in audit["vouchers"] if v["strategy"] == strategy]
            (pool,) = [p for p in audit["pools"] if p["strategy"] == strategy]
            assert voucher["orders"] == len(taken.get((index, "voucher", strategy), []))
            assert pool["awarded"] == len(taken.get((index, "pool", strategy), []))
            figures[index, strategy] = (voucher["orders"], pool["awarded"])
        # redis_lua's crowd outnumbers its stock: each instance sold all of its own, no more.
        assert figures[index, "redis_lua"] == (VOUCHER_STOCK, 2 * PRIZE_STOCK)
    print(f"(orders, prizes won) by instance and strategy: {figures}")
