"""Settings for the test suite: real MariaDB/MySQL and Redis on 127.0.0.1.

A test never falls back to SQLite: the concurrency claims only mean something on
the database the project runs on.
"""

import os

os.environ.setdefault("DATABASE_URL", "mysql://root:@127.0.0.1:3306/test")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from .base import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
