"""The secret key of a checkout that runs without one in its environment (``make run``).

No key known outside the machine ever signs anything: the settings have no key of their own
to fall back on. ``make run`` (scripts/serve.py) and the tools that start their own servers (the
load tests, the benchmarks) make a random key once per checkout, ``var/secret_key``, mode
0600, and hand it to every process they start; a ``manage.py`` command run by hand beside
them reads the same file (``config.settings.base``), so that a token it issues works on
their server. Imports nothing of Django: serve.py uses it before any settings exist.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

FILE_NAME = "secret_key"
# How long a start waits for another's key to be written into the file it has just made.
WAIT_SECONDS = 5.0


class LocalKeyEmpty(RuntimeError):
    """The key's file exists but stayed empty: the start that made it stopped before writing."""


def local_key_path(var_dir: Path) -> Path:
    return Path(var_dir) / FILE_NAME


def local_key_read(var_dir: Path) -> str:
    """The checkout's key, or "" when there is none yet."""
    try:
        return local_key_path(var_dir).read_text().strip()
    except FileNotFoundError:
        return ""


def local_key_ensure(var_dir: Path) -> str:
    """The checkout's key, made first if there is none: 64 random bytes, urlsafe, in a file
    only its owner may read. Created with O_EXCL, so that two processes starting at once keep
    the same key (the second reads the first's)."""
    path = local_key_path(var_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = local_key_read(var_dir)
    if key:
        return key
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # Another process is writing it: wait (a few ms at most) for its line.
        give_up = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < give_up:
            key = local_key_read(var_dir)
            if key:
                return key
            time.sleep(0.01)
        # Not rewritten here: two starts doing so at once could each keep a key of its own,
        # and the tokens one signs would not work on the other's servers.
        raise LocalKeyEmpty(
            f"{path} exists but is empty: the start that made it stopped before writing the key. "
            "Delete it and start again (no key was ever in it, so nothing signed is lost)."
        ) from None
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(64) + "\n")
    return local_key_read(var_dir)


def local_key_provide(env: dict | None = None) -> str:
    """Put the checkout's key in ``env`` (``os.environ`` by default) as ``DJANGO_SECRET_KEY``
    unless it has one, and return the key that is there: what a tool that starts servers of
    its own calls before it starts any (they inherit the environment)."""
    env = os.environ if env is None else env
    if not env.get("DJANGO_SECRET_KEY"):
        base = Path(__file__).resolve().parent.parent
        env["DJANGO_SECRET_KEY"] = local_key_ensure(Path(env.get("VAR_DIR") or base / "var"))
    return env["DJANGO_SECRET_KEY"]
