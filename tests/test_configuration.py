"""The configuration table (docs/configuration.md) and the environment the application reads, in step.

Every variable the server's code reads (``os.environ``, ``os.getenv``, the settings'
``env_*`` helpers) is named in the table, and every variable the table lists in its first
column is read. A variable may be named in the meaning of the row it qualifies
(``RATE_LIMIT_PER_USER_PER_SECOND`` under ``RATE_LIMITS_ENABLED``). The load tests and
benchmarks read their own variables, set by their runners: they are not the server's
configuration.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What runs the server: its settings, its entry points, and the applications.
SERVER_CODE = ["config", "scripts", "core", "accounts", "inventory", "orders", "lottery", "payments", "lab", "locking"]
NAME = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def _env_name(node: ast.AST) -> str | None:
    """The variable's name when ``node`` reads one from the environment."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        target, key = node.value, node.slice
    elif isinstance(node, ast.Call) and node.args:
        function, key = node.func, node.args[0]
        if isinstance(function, ast.Name) and function.id.startswith("env_"):
            target = None  # the settings' helpers: env_bool, env_int, env_list, ...
        elif isinstance(function, ast.Attribute) and function.attr in ("get", "getenv"):
            target = function.value
        else:
            return None
    else:
        return None
    if target is not None and ast.unparse(target) not in ("os.environ", "os"):
        return None
    return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None


def read_from_the_environment() -> dict[str, str]:
    """Each variable the server's code reads, with the first file that reads it."""
    found: dict[str, str] = {}
    for package in SERVER_CODE:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                name = _env_name(node)
                if name is not None:
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def configuration_table() -> tuple[set[str], set[str]]:
    """The table's variables (its first column), and every variable its rows name."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    listed: set[str] = set()
    named: set[str] = set()
    for line in page.splitlines():
        if not line.startswith("| `"):
            continue
        variable, _default, meaning = (line.strip("|").split(" | ") + ["", ""])[:3]
        listed |= set(NAME.findall(variable))
        named |= set(NAME.findall(variable)) | set(NAME.findall(meaning))
    return listed, named


def test_the_scan_finds_the_ways_settings_read_the_environment():
    found = read_from_the_environment()
    # One of each form: os.environ.get, float(os.environ.get(...)), env_int, env_list,
    # env_bool, os.environ.get outside the settings.
    for name in ("REDIS_URL", "LOCK_LEASE_SECONDS", "RESERVATIONS_KICK_MS", "LOCK_REDIS_URLS", "DJANGO_DEBUG"):
        assert found[name].startswith("config/settings/"), name
    assert found["FAULT_POINTS_DIR"] == "core/faultpoints.py"
    assert "DJANGO_SETTINGS_MODULE" not in found  # set by the entry points, not read


def test_every_variable_the_server_reads_is_in_the_configuration_table():
    _, named = configuration_table()
    missing = {name: where for name, where in read_from_the_environment().items() if name not in named}
    assert not missing, "add to the configuration table (docs/configuration.md): " + ", ".join(
        f"{name} (read in {where})" for name, where in sorted(missing.items())
    )


def test_every_variable_in_the_configuration_table_is_read():
    listed, _ = configuration_table()
    unread = sorted(listed - set(read_from_the_environment()))
    assert not unread, (
        f"the configuration table (docs/configuration.md) lists variables nothing reads: {', '.join(unread)}"
    )


def test_the_timeouts_of_locks_redis_are_read_from_the_environment():
    code = "import django; django.setup(); from locking.integration import locks_redis_options as o; " + (
        "import json; print(json.dumps([o()['socket_connect_timeout'], o()['socket_timeout']]))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "LOCK_LEASE_SECONDS": "7"}

    def timeouts(**variables: str) -> list[float]:
        answer = subprocess.run(
            [sys.executable, "-c", code], env=env | variables, cwd=ROOT, capture_output=True, text=True, check=True
        )
        return json.loads(answer.stdout)

    assert timeouts(LOCK_CONNECT_TIMEOUT="", LOCK_SOCKET_TIMEOUT="") == [2.0, 8.0]  # a second past the lease
    assert timeouts(LOCK_CONNECT_TIMEOUT="0.5", LOCK_SOCKET_TIMEOUT="3.25") == [0.5, 3.25]
