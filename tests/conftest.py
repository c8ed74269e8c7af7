from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from hypothesis.database import DirectoryBasedExampleDatabase

from accounts import crowd
from accounts.services import token_issue
from accounts.tokens import revocations
from orders.models import Voucher
from orders.services import voucher_create

# What a member of staff holds unless a test says otherwise: every model permission the
# staff API, the strategy switches and the race lab ask for, as a staff group would grant.
STAFF_PERMISSIONS = (
    "orders.add_voucher",
    "orders.change_voucher",
    "orders.view_voucher",
    "lottery.add_pool",
    "lottery.change_pool",
    "lottery.view_pool",
    "lottery.add_prize",
    "lottery.change_prize",
    "lab.add_labrun",
    "lab.change_labrun",
    "lab.view_labrun",
)


def grant(user, *permissions: str) -> None:
    """Give ``user`` the permissions named ``app_label.codename``."""
    from accounts.permissions import permissions_named

    user.user_permissions.add(*permissions_named(permissions))


# The model-based tests' budgets (tests/model/): ``ci`` bounds them to about two minutes in
# ``make test``; ``explore`` (``make explore``) runs for as long as asked. Every failure either
# finds is kept under var/ and tried first on the next run, until a story test holds it.
hypothesis_settings.register_profile(
    "ci",
    max_examples=12,
    stateful_step_count=25,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=DirectoryBasedExampleDatabase(str(django_settings.VAR_DIR / "hypothesis")),
    print_blob=True,
)
hypothesis_settings.register_profile(
    "explore",
    parent=hypothesis_settings.get_profile("ci"),
    max_examples=int(os.environ.get("EXPLORE_EXAMPLES", "100")),
    stateful_step_count=50,
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def memos_by_user_id_forgotten_on_sqlite():
    """On SQLite a test's rollback takes back the ids it gave, and the next test's users get
    them again: what this process keeps by user id (the inactive users of
    ``accounts.tokens``, the load crowd of ``accounts.crowd``) would carry one test's users
    into the next. Elsewhere an id is never given twice, as on a real site."""
    yield
    if connection.vendor == "sqlite":
        revocations.forget()
        crowd.forget()


@pytest.fixture
def make_user(django_user_model) -> Callable:
    counter = iter(range(1, 1_000_000))

    def make(
        username: str | None = None,
        *,
        staff: bool = False,
        password: str = "pw-for-tests-1",
        permissions: tuple[str, ...] | None = None,
    ):
        """A user; ``staff=True`` makes a member of staff with ``STAFF_PERMISSIONS`` unless
        ``permissions`` names exactly what to hold (``()``: none, staff in name only)."""
        user = django_user_model.objects.create_user(
            username=username or f"user-{next(counter)}", password=password, is_staff=staff
        )
        if permissions is None:
            permissions = STAFF_PERMISSIONS if staff else ()
        if permissions:
            grant(user, *permissions)
        return user

    return make


@pytest.fixture
def make_voucher() -> Callable[..., Voucher]:
    def make(
        *,
        stock: int = 5,
        strategy: str = "db_atomic",
        starts_in: timedelta = -timedelta(minutes=1),
        lasts: timedelta = timedelta(hours=1),
        title: str = "Test voucher",
        **fields,
    ) -> Voucher:
        begin_at = timezone.now() + starts_in
        return voucher_create(
            title=title, stock=stock, begin_at=begin_at, end_at=begin_at + lasts, strategy=strategy, **fields
        )

    return make


@pytest.fixture
def payment_provider(settings):
    """The simulated payment provider answering a charge at once and posting no callback; a
    test sets ``PAYMENT_PROVIDER_DELAY_MS`` on what it answers for a payment on its way."""
    settings.PAYMENT_PROVIDER_DELAY_MS = 0
    settings.PAYMENT_PROVIDER_JITTER_MS = 0
    settings.PAYMENT_PROVIDER_DUPLICATE_RATE = 0
    settings.PAYMENT_PROVIDER_LOSS_RATE = 0
    settings.PAYMENT_CALLBACK_URL = ""
    return settings


@pytest.fixture
def admin_client_(client, make_user):
    """The test client, logged in to the admin as a superuser."""
    admin = make_user("boss", staff=True)
    admin.is_superuser = True
    admin.save()
    client.force_login(admin)
    return client


@pytest.fixture
def api_client(make_user) -> Callable[..., Client]:
    """A test client that authenticates every request with a fresh bearer token."""

    def make(user=None, *, staff: bool = False, permissions: tuple[str, ...] | None = None) -> Client:
        user = user or make_user(staff=staff, permissions=permissions)
        client = Client(headers={"Authorization": f"Bearer {token_issue(user=user)}"})
        client.user = user
        return client

    return make


@pytest.fixture(scope="session")
def cluster_servers():
    """A real Redis Cluster on free ports: three masters, then a replica of each."""
    from locking.testing import start_cluster

    servers = start_cluster(3, replicas=1)
    yield servers
    for server in servers:
        server.close()


@pytest.fixture(scope="session")
def redis_cluster(cluster_servers):
    """A client of the cluster above."""
    from redis.cluster import RedisCluster

    client = RedisCluster(host="127.0.0.1", port=cluster_servers[0].port)
    yield client
    client.close()


@pytest.fixture
def cluster_reservations(cluster_servers, redis_cluster, settings):
    """redis_lua's state on the cluster above (``RESERVATIONS_REDIS_CLUSTER``), with no stock
    group's keys of this instance, as ``reservations_redis`` leaves a plain Redis; yields
    the cluster's client."""
    from core.namespace import instance_key

    settings.RESERVATIONS_REDIS_URL = ",".join(server.url for server in cluster_servers)
    settings.RESERVATIONS_REDIS_CLUSTER = True
    for node in redis_cluster.get_primaries():
        primary = redis_cluster.get_redis_connection(node)
        for key in primary.scan_iter(match=instance_key("res:{group:*"), count=1000):
            primary.delete(key)
    return redis_cluster


@pytest.fixture(scope="session")
def redlock_servers():
    """Three independent Redis servers on free ports, for Redlock."""
    from locking.testing import RedisServer

    servers = [RedisServer().start() for _ in range(3)]
    yield servers
    for server in servers:
        server.close()


@pytest.fixture
def redlock_urls(redlock_servers, settings):
    """The three servers, all running and empty, set as LOCK_REDIS_URLS."""
    import redis

    for server in redlock_servers:
        if not server.running:
            server.start()
        redis.Redis.from_url(server.url).flushall()
    settings.LOCK_REDIS_URLS = [server.url for server in redlock_servers]
    return settings.LOCK_REDIS_URLS


@pytest.fixture
def make_pool():
    """A live pool with prizes ``((name, stock), ...)``, read back with its prizes and stock."""
    from lottery.selectors import pool_get
    from lottery.services import pool_create, prize_create

    def make(
        *,
        prizes=(("Gold", 1), ("Silver", 19)),
        no_prize_weight: int = 0,
        draws_per_user: int = 3,
        strategy: str = "db_atomic",
        starts_in: timedelta = -timedelta(minutes=1),
        lasts: timedelta = timedelta(hours=1),
        name: str = "Test pool",
        buckets: int = 1,
        **fields,
    ):
        begin_at = timezone.now() + starts_in
        pool = pool_create(
            name=name,
            begin_at=begin_at,
            end_at=begin_at + lasts,
            draws_per_user=draws_per_user,
            no_prize_weight=no_prize_weight,
            strategy=strategy,
            buckets=buckets,
            **fields,
        )
        for prize_name, stock in prizes:
            prize_create(pool=pool, name=prize_name, stock=stock)
        return pool_get(pool_id=pool.pk)

    return make


@pytest.fixture
def reservations_redis():
    """The redis_lua state's Redis, with no stock group's keys: the test database hands out
    the same group ids again, and a state left by an earlier test must not be taken for its
    own."""
    import redis
    from django.conf import settings

    from core.namespace import instance_key

    client = redis.Redis.from_url(settings.RESERVATIONS_REDIS_URL)
    for key in client.scan_iter(match=instance_key("res:{group:*"), count=1000):
        client.delete(key)
    yield client
    client.close()


@pytest.fixture
def idempotency_keys():
    """The idempotency keys' Redis, with no key (nor rate-limit counter) left by an earlier
    test: the test database hands out the same user ids again."""
    from core.idempotency import idempotency_client
    from core.namespace import instance_key

    client = idempotency_client()

    def clear():
        for pattern in ("idem:*", "rate:*"):
            for key in client.scan_iter(match=instance_key(pattern), count=1000):
                client.delete(key)

    clear()
    yield client
    clear()


@pytest.fixture
def rooms():
    """The waiting rooms' Redis, with no room left by an earlier test (the test database hands
    out the same item ids again), and no units read by this process of an earlier test's items."""
    from core.namespace import instance_key
    from inventory.admission.keys import room_client
    from inventory.admission.room import item_for_queue_forget, units_forget_all

    client = room_client()

    def clear():
        units_forget_all()
        item_for_queue_forget()
        for key in client.scan_iter(match=instance_key("room:*"), count=1000):
            client.delete(key)

    clear()
    yield client
    clear()
