"""Settings shared by every environment, read from the environment.

The defaults give a zero-setup local run: SQLite under ``var/`` and Redis on
127.0.0.1:6379. Every shared setting (CI, docker-compose, production) sets
``DATABASE_URL`` to MySQL 8 or MariaDB.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.logs import logging_config
from core.local_key import local_key_path, local_key_read

from .cluster import *  # noqa: F403  (redis_lua's reservations on a Redis Cluster, with replicas)
from .environment import env_bool, env_int, env_list
from .limits import *  # noqa: F403  (the rate limits and the idempotency keys)
from .payments import *  # noqa: F403  (the payment provider's settings)
from .payments import PAYMENT_PROVIDER_RESEND_SECONDS
from .strategies import *  # noqa: F403  (the strategies' knobs)

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var"))


DEBUG = env_bool("DJANGO_DEBUG", False)
# No key known outside this machine signs anything: the environment's, else the one `make run`
# made for this checkout (core.local_key), which a manage.py command run by hand
# beside it must share for its tokens to work there. Neither: no start at all.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or local_key_read(VAR_DIR)
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. Set it to a random string of at least 50 characters, or start the site "
        f"with `make run`, which makes one for this checkout in {local_key_path(VAR_DIR)}."
    )
# A rotation's old keys, comma-separated: what they signed (sessions, tokens, tickets) still
# checks while they are listed; nothing new is signed with them.
SECRET_KEY_FALLBACKS = env_list("DJANGO_SECRET_KEY_FALLBACKS", "")
# The test client's `testserver` is added by Django's test set-up, never here.
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "ninja",
    "locking",
    "accounts",
    "inventory",
    "orders",
    "lottery",
    "payments",
    "lab",
    # Last: the project's own commands that span both products (seed_demo, audit).
    "config",
]

MIDDLEWARE = [
    # Outermost, so that the time it measures includes every other middleware.
    "config.metrics.MetricsMiddleware",
    # Next, so that every other middleware's log lines carry the request's id (core.requestid).
    "core.requestid.RequestIdMiddleware",
    # Outside Django's own, so that every response gets the policy, whichever middleware answered.
    "core.csp.ContentSecurityPolicyMiddleware",
    "core.proxied.ProxiedSchemeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

# The headers every response carries, local and in production alike (the values are
# Django's defaults, stated so that nobody wonders): no MIME sniffing, the Referer only to
# this site, no framing (X-Frame-Options for older browsers; the Content-Security-Policy of
# core.csp says frame-ancestors 'none').
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def database_from_url(url: str) -> dict:
    """One database connection from a URL, tuned for the hot purchase path.

    Persistent connections with health checks: reconnecting per request cost about
    30% of purchase throughput. MySQL gets READ COMMITTED (Django's default, stated
    so nobody wonders) and utf8mb4.
    """
    config = dj_database_url.parse(url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60), conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.mysql":
        # A database that is down answers 503 within seconds (core.outage) instead of
        # holding the request for the client library's default connect timeout.
        config.setdefault("OPTIONS", {}).update(
            {
                "charset": "utf8mb4",
                "isolation_level": "read committed",
                "connect_timeout": env_int("DB_CONNECT_TIMEOUT", 3),
            }
        )
        config.setdefault("TEST", {}).update({"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_unicode_ci"})
    elif config["ENGINE"] == "django.db.backends.sqlite3":
        # SQLite serialises writers; wait for the lock instead of failing at once.
        config.setdefault("OPTIONS", {}).update({"timeout": 20, "transaction_mode": "IMMEDIATE"})
        config["CONN_MAX_AGE"] = 0
    return config


DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {"default": database_from_url(DATABASE_URL)}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def database_namespace(config: dict) -> str:
    """A namespace that names ``config``'s database: a hash of its engine, host, port and name
    (an SQLite file's absolute path), so that instances on different databases differ, and
    every process of one instance (web, worker, beat) agrees without being told."""
    name = str(config["NAME"])
    if config["ENGINE"] == "django.db.backends.sqlite3":
        name = str(Path(name).resolve())
    identity = "\0".join([config["ENGINE"], config.get("HOST") or "", str(config.get("PORT") or ""), name])
    return "db-" + hashlib.sha256(identity.encode()).hexdigest()[:12]


# Every Redis key and Celery queue of this instance lies under "<INSTANCE_NAMESPACE>:" (one
# prefix, core.namespace), so that instances with different databases share a Redis without
# taking each other's reservations, counters, locks or tasks.
INSTANCE_NAMESPACE = os.environ.get("INSTANCE_NAMESPACE") or database_namespace(DATABASES["default"])
if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", INSTANCE_NAMESPACE):
    raise ImproperlyConfigured(f"INSTANCE_NAMESPACE must be 1 to 64 of A-Z a-z 0-9 _ . -, got {INSTANCE_NAMESPACE!r}")

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# Locks get their own connection that never swallows errors: a cache may degrade
# silently, a lock must not.
LOCK_REDIS_URL = os.environ.get("LOCK_REDIS_URL", REDIS_URL)
LOCK_REDIS_URLS = env_list("LOCK_REDIS_URLS", "")

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": f"{INSTANCE_NAMESPACE}:cache",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            # cache.lock() then hands out locking.compat.Lock instead of redis-py's.
            "REDIS_CLIENT_CLASS": "locking.compat.Redis",
            # Bounded, as the lock client is: a Redis that is down or hangs fails the call in
            # seconds (the health check says so) instead of holding the request.
            "SOCKET_CONNECT_TIMEOUT": 2,
            "SOCKET_TIMEOUT": 2,
        },
    },
    # The shop's list rows, rendered once per process for all they show (docs/design.md, "The pages").
    "fragments": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "fragments", "TIMEOUT": 60},
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL)
# Acknowledge a message after its task ran, and give it back when the worker died under
# it (acks_late alone still acknowledges a task whose worker was killed).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One message at a time per worker process: a prefetched message waits behind a long task.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Messages are data, never code: JSON only (tasks take ids).
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# The Redis broker delivers an unacknowledged message again after this many seconds; it
# must exceed the longest task (a race lab run: under 20 minutes), or a running task
# would be delivered twice. Every broker key (the queues, the unacknowledged messages, the
# bindings, the control channels) lies under the instance's namespace: the queues keep their
# names ("celery", "lab"), and a worker of another instance on the same Redis never sees them.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "global_keyprefix": f"{INSTANCE_NAMESPACE}:"}
# A race lab run holds its worker process for minutes; redis_lua's drains and the beat's
# sweeps take well under a second and must not wait behind it. The lab's task has a queue
# of its own ("lab"), everything else the default ("celery"), and every worker consumes
# both with one process more than the one a lab run holds (make run, docker-compose).
CELERY_TASK_ROUTES = {"lab.tasks.*": {"queue": "lab"}}

# redis_lua: where the reservations live (one Redis; every key of a voucher or pool shares
# a hash tag, so a Cluster works too: .cluster). Keep it on `noeviction`: an evicted stock key would
# answer 503 until rebuilt, never sell from nothing.
RESERVATIONS_REDIS_URL = os.environ.get("RESERVATIONS_REDIS_URL", REDIS_URL)
# A reservation handed to a persisting worker that has not acknowledged it this long is
# taken over by another (the first died or hangs); one that could not be persisted for
# this many seconds while the database was unreachable is undone and its user told.
RESERVATIONS_CLAIM_IDLE_MS = env_int("RESERVATIONS_CLAIM_IDLE_MS", 30_000)
RESERVATIONS_GIVE_UP_SECONDS = env_int("RESERVATIONS_GIVE_UP_SECONDS", 300)
# How many drains may write one item's reservations at once (inventory.redis_lua.drain).
RESERVATIONS_PERSIST_CONSUMERS = env_int("RESERVATIONS_PERSIST_CONSUMERS", 2)
# One reservation in this many ms asks a worker to persist its item's reservations (the
# rest of a crowd does not enqueue a task each); the beat's sweep catches any ask that
# was lost, every RESERVATIONS_SWEEP_SECONDS.
RESERVATIONS_KICK_MS = env_int("RESERVATIONS_KICK_MS", 200)
RESERVATIONS_SWEEP_SECONDS = env_int("RESERVATIONS_SWEEP_SECONDS", 2)
# The sweep goes on this long after a sale's end: reservations made just before it whose ask
# was lost, or left by a database out of reach at the end, are still written.
RESERVATIONS_SWEEP_AFTER_END_SECONDS = env_int("RESERVATIONS_SWEEP_AFTER_END_SECONDS", 24 * 3600)
# This long after a sale's end its Redis keys are removed, once whatever still waited is
# persisted (inventory.tasks.reservations_close, every RESERVATIONS_CLOSE_EVERY_SECONDS): a
# failed reservation is found by its id until then. At least the sweep's time after the end.
RESERVATIONS_CLOSE_AFTER_END_SECONDS = env_int("RESERVATIONS_CLOSE_AFTER_END_SECONDS", 7 * 24 * 3600)
RESERVATIONS_CLOSE_EVERY_SECONDS = env_int("RESERVATIONS_CLOSE_EVERY_SECONDS", 3600)
# How often the beat compares every redis_lua item's Redis state with the database,
# repairs drift and rebuilds a missing state (a buyer who finds one missing also asks for
# its rebuild at once).
RESERVATIONS_RECONCILE_SECONDS = env_int("RESERVATIONS_RECONCILE_SECONDS", 15)
# It compares totals first (cheap whatever the records), and each user's takes on a
# difference, or once this long after the last such comparison found the item whole: a drift
# that keeps the totals is found within it (inventory.redis_lua.reconcile).
RESERVATIONS_RECONCILE_FULL_SECONDS = env_int("RESERVATIONS_RECONCILE_FULL_SECONDS", 300)

# Holds (inventory.holds): a worker releases each item's holds at their deadline; the beat
# sweeps every HOLDS_SWEEP_SECONDS for those whose task was lost or never sent: a hold
# longer than HOLD_TASK_HORIZON_SECONDS, whose task would outlive the broker's
# visibility_timeout above and be delivered again and again while it waited.
HOLDS_SWEEP_SECONDS = env_int("HOLDS_SWEEP_SECONDS", 5)
HOLD_TASK_HORIZON_SECONDS = env_int(
    "HOLD_TASK_HORIZON_SECONDS", CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] // 2
)
# What `celery beat` runs (make run and docker-compose start one beside the worker): per
# kind of item, redis_lua's sweep and reconciliation, and the holds' sweep (inventory.tasks,
# the kind their argument).
CELERY_BEAT_SCHEDULE = {
    # A periodic task that waited longer than its period is superseded by the next.
    f"{kind}s-{task.replace('_', '-')}": {
        "task": f"inventory.tasks.{task}",
        "args": (kind,),
        "schedule": period,
        "options": {"expires": period},
    }
    for kind in ("voucher", "pool")
    for task, period in (
        ("reservations_sweep", RESERVATIONS_SWEEP_SECONDS),
        ("reservations_reconcile", RESERVATIONS_RECONCILE_SECONDS),
        ("reservations_close", RESERVATIONS_CLOSE_EVERY_SECONDS),
        ("holds_sweep", HOLDS_SWEEP_SECONDS),
    )
}
# The payment provider sends again the confirmations nobody acknowledged; with no callback
# URL, the site confirms itself the pays whose confirmation met a busy lock (payments.tasks).
for _task in ("provider_resend", "unapplied_confirm"):
    CELERY_BEAT_SCHEDULE[f"payments-{_task.replace('_', '-')}"] = {
        "task": f"payments.tasks.{_task}",
        "schedule": PAYMENT_PROVIDER_RESEND_SECONDS,
        "options": {"expires": PAYMENT_PROVIDER_RESEND_SECONDS},
    }

# The proxies whose X-Forwarded-For names the client (comma-separated addresses or
# networks): the rate limits and the login throttle count a request from one of them under
# the address it forwarded for, and anyone else's header is ignored (core.ratelimit). Empty:
# every request is its peer's. Trust only a proxy that overwrites or appends to the header.
TRUSTED_PROXIES = env_list("TRUSTED_PROXIES", "")
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(f"TRUSTED_PROXIES: {_proxy!r} is not an address or a network") from None

# The login throttle (accounts.throttle), checked before the password is hashed and on
# whatever RATE_LIMITS_ENABLED says. After LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS failures
# an account is refused from that address for LOGIN_BACKOFF_SECONDS, doubled at each further
# failure up to the window; elsewhere its owner still logs in. An account (from anywhere) or
# an address (for any account) over its ceiling is refused for the rest of the window.
LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS = env_int("LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS", 5)
LOGIN_BACKOFF_SECONDS = env_int("LOGIN_BACKOFF_SECONDS", 30)
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 50)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 30)
LOGIN_FAILURE_WINDOW_SECONDS = env_int("LOGIN_FAILURE_WINDOW_SECONDS", 900)
# The addresses an account logged in from (accounts.known_addresses) are not held to the
# account's ceiling, so guesses from elsewhere cannot lock its owner out: the most recent
# LOGIN_KNOWN_ADDRESSES per account, each for LOGIN_KNOWN_ADDRESS_SECONDS after its last login.
LOGIN_KNOWN_ADDRESSES = env_int("LOGIN_KNOWN_ADDRESSES", 5)
LOGIN_KNOWN_ADDRESS_SECONDS = env_int("LOGIN_KNOWN_ADDRESS_SECONDS", 30 * 24 * 3600)
AUTHENTICATION_BACKENDS = ["accounts.backends.ThrottledModelBackend"]

# A bearer token works this long after it was issued (issue_tokens may choose another
# time); each user keeps at most API_TOKENS_PER_USER, the oldest dropped to make room, so
# that logging in over and over does not pile up tokens that all still work.
API_TOKEN_TTL_SECONDS = env_int("API_TOKEN_TTL_SECONDS", 30 * 24 * 3600)
API_TOKENS_PER_USER = env_int("API_TOKENS_PER_USER", 10)
# Tokens are checked without a query (accounts.tokens): each process reads the revocations
# at most this often, so a revoked token stops working everywhere within it; a process that
# could not read them for the second bound refuses every token (503) until it can.
API_TOKEN_REVOCATIONS_REFRESH_SECONDS = float(os.environ.get("API_TOKEN_REVOCATIONS_REFRESH_SECONDS", "1"))
API_TOKEN_REVOCATIONS_STALE_SECONDS = float(os.environ.get("API_TOKEN_REVOCATIONS_STALE_SECONDS", "5"))

# Prometheus metrics (core.metrics, inventory.metrics) at /metrics. Off only to measure what
# they cost. Readable from METRICS_ALLOWED_NETWORKS (loopback and private by default) by a
# request that did not come through a proxy, or, with METRICS_TOKEN set, only with
# "Authorization: Bearer <METRICS_TOKEN>". Under gunicorn the worker processes count in
# files under PROMETHEUS_MULTIPROC_DIR (config/gunicorn.py chooses and cleans it).
METRICS_ENABLED = env_bool("METRICS_ENABLED", True)
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = env_list(
    "METRICS_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"
)

# The race lab (/lab/): Locust drives this same server at LAB_TARGET_URL (make run sets it to
# its own address; behind a proxy, the proxy's). Never the address a request names: its Host
# would send the crowd and its tokens anywhere. Unset, the lab starts no run.
# LAB_SERVER_PROCESSES is how many processes serve it,
# which decides whether `local` is expected to break (across processes) or to hold (in one).
LAB_TARGET_URL = os.environ.get("LAB_TARGET_URL", "")
LAB_SERVER_PROCESSES = env_int("WEB_CONCURRENCY", 1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "pages:voucher_list"
LOGOUT_REDIRECT_URL = "pages:voucher_list"

LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# No STATIC_ROOT here: a local run serves straight from the static folders (below), and
# WhiteNoise warned "No directory at: .../var/static/" at every start about the one that
# collectstatic had never filled. production.py collects into one.
STATIC_ROOT = None
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve straight from the apps' static folders, so a local run needs no collectstatic;
# production.py switches to collected, compressed, hashed files.
WHITENOISE_USE_FINDERS = True


# Text at WARNING here: the load tests, the benchmarks and the test suite serve with these
# settings and print nothing per request. make run asks for INFO (scripts/serve.py); the
# production settings log JSON at INFO.
LOG_FORMAT = os.environ.get("LOG_FORMAT") or "text"
LOG_LEVEL = os.environ.get("LOG_LEVEL") or "WARNING"
LOGGING = logging_config(log_format=LOG_FORMAT, level=LOG_LEVEL)
