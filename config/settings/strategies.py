"""The concurrency strategies' knobs, read from the environment (docs/design.md, "Strategies")."""

from __future__ import annotations

import os

from .environment import env_int

# Checked against inventory.models.Strategy by a system check (inventory.checks).
DEFAULT_STRATEGY = os.environ.get("DEFAULT_STRATEGY", "db_atomic")
# A pause between the check and the write inside every strategy, the same for all,
# so that a small machine reproduces the race reliably. Reported with every result.
RACE_WINDOW_MS = env_int("RACE_WINDOW_MS", 0)
# redis_lock: a lock's lease (renewed by the watchdog while held) and how long a buyer
# waits for the item lock before being told "busy".
LOCK_LEASE_SECONDS = float(os.environ.get("LOCK_LEASE_SECONDS", "5"))
LOCK_WAIT_SECONDS = float(os.environ.get("LOCK_WAIT_SECONDS", "5"))
# The lock and reservations client's bounds (locking.integration.locks_redis): seconds to
# connect, and to wait for a reply (by default a second past the lease, so that a waiter's
# BLPOP, which never waits longer than a lease, is not cut short).
LOCK_CONNECT_TIMEOUT = float(os.environ.get("LOCK_CONNECT_TIMEOUT") or "2")
LOCK_SOCKET_TIMEOUT = float(os.environ.get("LOCK_SOCKET_TIMEOUT") or LOCK_LEASE_SECONDS + 1)
# How often db_optimistic retries a lost compare-and-set before answering "busy".
OPTIMISTIC_MAX_ATTEMPTS = env_int("OPTIMISTIC_MAX_ATTEMPTS", 8)
# How often db_atomic reads and chooses again after its conditional UPDATE missed
# (the chosen prize ran out meanwhile) before answering "busy".
ATOMIC_MAX_ATTEMPTS = env_int("ATOMIC_MAX_ATTEMPTS", 3)
# Benchmarks only: a pause inside every strategy's guard, right after its stock write, so
# that the guard (a row lock, a lock's lease) is held this long, as a database or a lock
# server across a network holds it. Unlike RACE_WINDOW_MS, which sleeps before the write,
# outside db_atomic's row lock and redis_lock's item lock. 0 outside benchmarks.
GUARD_HOLD_MS = env_int("GUARD_HOLD_MS", 0)
