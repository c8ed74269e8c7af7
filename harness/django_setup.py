"""Django for a command that drives the project from outside (the load tests, the fault
runner, the HTTP benchmarks): its database created if missing and migrated."""

from __future__ import annotations

import os
import sys

from .server import ROOT


def setup_django(args) -> None:
    """Settings from ``args.database_url``, ``args.redis_url`` and ``args.broker_url`` (the
    Redis URL when None), the database created if missing, Django set up and migrated."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.base"
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["REDIS_URL"] = args.redis_url
    # Whatever this process sends to Celery reaches the runner's own worker.
    os.environ["CELERY_BROKER_URL"] = args.broker_url or args.redis_url
    sys.path.insert(0, str(ROOT))
    from core.local_key import local_key_provide

    # The checkout's own key (as make run's), unless one is set: the servers started here
    # inherit it and check the tokens this process issues.
    local_key_provide()
    if args.database_url.startswith("mysql"):
        import dj_database_url
        import MySQLdb

        parts = dj_database_url.parse(args.database_url)
        connection = MySQLdb.connect(
            host=parts["HOST"] or "127.0.0.1", port=int(parts["PORT"] or 3306), user=parts["USER"],
            passwd=parts["PASSWORD"] or "",
        )  # fmt: skip
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{parts['NAME']}` CHARACTER SET utf8mb4")
        connection.close()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def setup_django_without_database() -> None:
    """Django with the base settings (those the environment sets kept) and the checkout's key,
    no database touched: for a benchmark that talks to Redis alone."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    sys.path.insert(0, str(ROOT))
    from core.local_key import local_key_provide

    local_key_provide()
    import django

    django.setup()
