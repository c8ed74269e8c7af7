"""Settings for the test suite: real MariaDB/MySQL and Redis on 127.0.0.1.

The suite runs on MariaDB, the database the project runs on: the concurrency claims
only mean something there. The race tests (marker ``race``) also run on SQLite, the
database of the zero-setup ``make run``, when ``DATABASE_URL`` is a ``sqlite://`` URL
(``make test`` does so in a second pass). The SQLite test database is then a file
under ``var/``: the race tests fork processes that must all open the same database,
which an in-memory one cannot be.
"""

import os
import secrets
from pathlib import Path

os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/test")
# A key of this run's own, in the environment, so that every server and command a test starts
# (they inherit it) checks the tokens this process signs.
os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(64))
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from .base import *  # noqa: E402,F403
from .base import CACHES, CELERY_BROKER_TRANSPORT_OPTIONS, DATABASES, INSTANCE_NAMESPACE, VAR_DIR  # noqa: E402

# Under pytest-xdist (make test-fast) each worker has a test database of its own, which
# pytest-django names after the worker once these settings are read: its Redis keys and queues
# get a namespace of their own likewise, or one worker's fixtures would empty another's state.
# (A worker inherits the namespace its controller derived; what a worker starts inherits the
# worker's, suffixed already.)
if (_worker := os.environ.get("PYTEST_XDIST_WORKER")) and not INSTANCE_NAMESPACE.endswith(f"-{_worker}"):
    INSTANCE_NAMESPACE = f"{INSTANCE_NAMESPACE}-{_worker}"
    CACHES["default"]["KEY_PREFIX"] = f"{INSTANCE_NAMESPACE}:cache"
    CELERY_BROKER_TRANSPORT_OPTIONS = {**CELERY_BROKER_TRANSPORT_OPTIONS, "global_keyprefix": f"{INSTANCE_NAMESPACE}:"}

# The servers and workers a test starts open the test database, whose name differs from the
# one the namespace was derived from: they inherit this process's namespace instead, so that
# they find the keys and queues the test writes (tests of separate instances unset it).
os.environ["INSTANCE_NAMESPACE"] = INSTANCE_NAMESPACE

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The suite's clients all come from one address, in quick succession: the tests of the
# limits switch them on (tests/test_ratelimit.py, tests/test_login_throttle.py).
RATE_LIMITS_ENABLED = False
# The login throttle is always on, and the suite fails logins on purpose from one address:
# its own tests set these back (tests/test_login_throttle.py).
LOGIN_FAILURES_PER_ACCOUNT_AND_ADDRESS = LOGIN_FAILURES_PER_ACCOUNT = LOGIN_FAILURES_PER_ADDRESS = 10_000

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    _name = Path(DATABASES["default"]["NAME"]).name.replace(":", "") or "db.sqlite3"
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test_{_name}")}
