"""The faults, one class each: what it breaks mid-sale, how it ends, and what it concerns.

A fault is injected once per run, ``--fault-at`` seconds into the load; ``inject`` breaks
something and returns at once, ``heal`` ends the fault ``--down`` seconds later (or at
once, for a process that its supervisor restarts) and returns the moment it ended.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import ClassVar

import redis

from ..verdict import Result
from .judge import Answer, answered_within, by_status
from .stage import Stage


class Fault:
    name: ClassVar[str]
    summary: ClassVar[str]
    # The strategies it runs on by default (``concerns`` says which it can run on at all).
    strategies: ClassVar[tuple[str, ...]] = ("db_atomic", "redis_lock", "redis_lua")
    # Whether requests in flight may get no answer at all (a process serving them killed).
    drops_requests: ClassVar[bool] = False
    # The /healthz key that must say "error" while the fault lasts, if any.
    health_names: ClassVar[str | None] = None
    # Seconds after the fault's end within which answers must be normal again.
    recover_within: ClassVar[float] = 10.0
    # Seconds of load its run keeps after the fault's end at least (``--duration`` is
    # stretched to give them): a recovery only answers can show is seen only while the
    # crowd still asks, and one slower than the load left to run would read as none.
    watched_after: ClassVar[float] = 0.0
    # Whether the runner must serve from a MariaDB server of its own (it restarts it).
    needs_own_mariadb: ClassVar[bool] = False
    # Whether its runs keep redis_lua's reservations on the runner's own Redis Cluster, on a
    # server of their own (their settings merged with no other fault's).
    reservations_cluster: ClassVar[bool] = False
    # The hold window of its items and their stock, when it needs its own (the lifecycle's
    # faults: a crowd that sells out and buys again what comes back); None: the runner's
    # ``--hold-seconds`` and ``--stock``.
    hold_seconds: ClassVar[int | None] = None
    stock: ClassVar[int | None] = None
    # The products it has anything to show on (``loadtests.verdict``).
    products: ClassVar[tuple[str, ...]] = ("voucher", "pool")
    # Whether it may kill a release between its commit and its units' return to Redis,
    # which reconciliation repairs (the runner's beat does not reconcile: it does so once
    # the run has drained, and says how many units it put back).
    repairs_returns: ClassVar[bool] = False

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        """Whether ``strategy`` (deferred or not) has anything to show under this fault."""
        return True

    def lasts(self, down: float) -> float:
        """Seconds from the strike to the fault's end, at least (``--down`` by default)."""
        return down

    def checked(self, answers: list[Answer], lock_events: dict[str, float]) -> tuple[list[str], list[str]]:
        """What this fault must show beyond every fault's rules, from the run's answers and
        the lock events the server counted during it (``lock_events``: ``stale_fences``,
        ``leases_lost``): (broken rules, notes for the verdict)."""
        return [], []

    def inject(self, stage: Stage, group_id: int) -> None:
        raise NotImplementedError

    def heal(self, stage: Stage, down: float) -> float:
        """End the fault after ``down`` seconds; return when it ended (``time.time()``)."""
        time.sleep(down)
        return time.time()

    def pending_lost(self) -> set[int]:
        """Reservation ids the fault took away by design (none, but for a Redis restart)."""
        return set()

    def reported(self, result: Result, outcomes: list[list[str]]) -> tuple[Result, int, list[str]]:
        """The run's result as it is judged, the acknowledged takes it lost by design (set
        aside from the result, and reported), and notes for the verdict, from the result and
        the crowd's outcome lines."""
        return result, 0, []

    def server_settings(self, down: float) -> dict[str, str]:
        """Settings the server's processes need for this fault (the whole plan's, merged)."""
        return {}

    def drained(self, product: str, target) -> tuple[list[str], list[str]]:
        """What it must show once a run with holds has drained, read from the database:
        (broken rules, notes for the verdict)."""
        return [], []


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def worker_kill(stage: Stage) -> None:
    """SIGKILL the Celery worker and its pool, unsupervised until the fault restarts it."""
    pid = stage.worker_pid
    if pid is None:
        raise RuntimeError("no Celery worker runs beside the server")
    stage.supervising.clear()
    for victim in [pid, *children(pid)]:
        try:
            os.kill(victim, signal.SIGKILL)
        except ProcessLookupError:
            pass


class WorkerKill(Fault):
    """SIGKILL of one gunicorn worker process mid-request; gunicorn starts another."""

    name = "worker-kill"
    summary = "SIGKILL of a gunicorn worker during purchases and draws; gunicorn restarts it"
    drops_requests = True
    # A killed holder of a redis_lock lock leaves it until its lease (5 s) ends.
    recover_within = 10.0

    def inject(self, stage: Stage, group_id: int) -> None:
        self.before = set(children(stage.server.pid))
        victim = min(self.before)
        os.kill(victim, signal.SIGKILL)
        self.victim = victim

    def heal(self, stage: Stage, down: float) -> float:
        # gunicorn's arbiter notices within a second and forks a replacement.
        give_up = time.monotonic() + 30
        while time.monotonic() < give_up:
            now = set(children(stage.server.pid))
            if self.victim not in now and len(now) >= len(self.before):
                return time.time()
            time.sleep(0.05)
        raise RuntimeError("gunicorn did not replace the killed worker within 30 s")


class RedisRestart(Fault):
    """The server's Redis killed and started again empty on the same port after ``--down``
    seconds: locks, fences, the broker's queues and redis_lua's state are gone."""

    name = "redis-restart"
    summary = "Redis killed mid-sale and restarted empty: locks, fences, queues and redis_lua state gone"
    health_names = "redis"
    # redis_lua answers 503 until a worker rebuilt the state (asked by the first refusal);
    # the lock strategies sell again at once, or within a lease.
    recover_within = 10.0

    def __init__(self) -> None:
        self.snapshot: set[int] = set()

    def inject(self, stage: Stage, group_id: int) -> None:
        self.snapshot = self._waiting(stage.redis.url, group_id)
        stage.redis.stop()

    @staticmethod
    def _waiting(url: str, group_id: int) -> set[int]:
        """The reservations of the group waiting in Redis, read with every write paused, so
        that none is made between this read and the kill that follows it."""
        from inventory.records import public_of
        from inventory.redis_lua.values import GroupKeys, reservation_id

        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            client.execute_command("CLIENT", "PAUSE", 5000, "WRITE")
            entries = client.xrange(GroupKeys.of(group_id).pending)
        finally:
            client.close()
        # As the answers name them (``Record.public_id``).
        return {public_of(reservation_id(group_id, int(entry_id.split(b"-")[0]))) for entry_id, _ in entries}

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        stage.redis.start()
        return time.time()

    def pending_lost(self) -> set[int]:
        return set(self.snapshot)


class CeleryKill(Fault):
    """The Celery worker (its main process and its pool) SIGKILLed while it writes a
    batch, and started again as it was after ``--down`` seconds."""

    name = "celery-kill"
    summary = "the Celery worker SIGKILLed mid-batch and restarted: every reservation written once"
    strategies = ("redis_lua",)

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        return deferred  # only a deferred strategy has a worker write its records

    # The new worker boots, and the dead one's entries are taken over under the group's
    # lock once its lease (5 s) ends.
    recover_within = 15.0

    def inject(self, stage: Stage, group_id: int) -> None:
        worker_kill(stage)

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        stage.restart_worker()
        stage.supervising.set()
        return time.time()


# The strategies that must hold: each takes its stock through the database.
SAFE = ("db_pessimistic", "db_optimistic", "db_atomic", "redis_lock", "redlock", "redis_lua")
# The strategies whose stock writes carry a lock's fencing token.
FENCED = ("redis_lock", "redlock")


class MariaDBRestart(Fault):
    """The server's own MariaDB killed (SIGKILL, as a crash) mid-sale and started again on
    its data after ``--down`` seconds; InnoDB recovers every transaction whose COMMIT it
    answered (and some whose answer the kill cut off: the retried request finds those by
    their unique keys)."""

    name = "mariadb-restart"
    summary = "MariaDB killed mid-sale as a crash and started again on its data: 503 meanwhile, nothing confirmed lost"
    strategies = SAFE
    health_names = "database"
    needs_own_mariadb = True
    # Each process finds its connection dead at its next query and connects again; the
    # Celery worker retries its drain, backing off.
    recover_within = 10.0

    def inject(self, stage: Stage, group_id: int) -> None:
        if stage.mariadb is None:
            raise RuntimeError("the server does not run on a MariaDB of the runner's own")
        stage.mariadb.stop()

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        stage.mariadb.start()
        return time.time()


def process_state(pid: int) -> str:
    """The state letter of ``pid`` in /proc (``T``: stopped), or ``""`` when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def group_fences(group_id: int) -> dict[int, int]:
    """{stock id: the fence that last wrote it} of the group's rows that still have stock."""
    from django.db import connection

    from inventory.models import Stock

    try:
        return dict(Stock.objects.filter(group_id=group_id, quantity__gte=1).values_list("id", "fence"))
    finally:
        connection.close()  # this thread's own, gone with it


class LockHolderStopped(Fault):
    """A gunicorn worker stopped (SIGSTOP) while it holds its stock group's lock, right before
    its fenced write (the fault point ``group-lock-held``, ``core.faultpoints``), until its
    lease has run out and newer holders have written every row that still has stock; then
    resumed (SIGCONT). It wakes up believing it holds the lock: its write must be refused as
    stale (``locking.integration.FencedUpdate``), and the take answered ``busy``."""

    name = "lock-holder-stopped"
    summary = "a lock holder SIGSTOPped past its lease, then resumed: its stale write refused by the fence"
    strategies = FENCED
    point = "group-lock-held"
    # Buyers queued behind the stopped holder wait until its lease ends (up to
    # LOCK_WAIT_SECONDS, then busy); the others are served at once.
    recover_within = 10.0
    # How long the newer holders get to write every row with stock once the lease is over.
    overtake_within = 20.0

    def __init__(self) -> None:
        self.pid: int | None = None
        self.stopped_s: float | None = None
        self.overtaken = False

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        return strategy in FENCED

    @staticmethod
    def lease() -> float:
        return float(os.environ.get("LOCK_LEASE_SECONDS", "5"))

    def lasts(self, down: float) -> float:
        return self.lease() + 2

    def inject(self, stage: Stage, group_id: int) -> None:
        if stage.fault_points is None:
            raise RuntimeError("the server runs without fault points (FAULT_POINTS_DIR)")
        self.pid, self.stopped_s, self.overtaken, self.group_id = None, None, False, group_id
        for old in stage.fault_points.glob(f"{self.point}*"):
            old.unlink()
        (stage.fault_points / self.point).touch()
        give_up = time.monotonic() + 10
        while True:
            marks = list(stage.fault_points.glob(f"{self.point}.*"))
            if marks and process_state(int(marks[0].suffix[1:])) == "T":
                break
            if time.monotonic() > give_up:
                (stage.fault_points / self.point).unlink(missing_ok=True)
                raise RuntimeError(f"no worker stopped at the fault point {self.point} within 10 s")
            time.sleep(0.005)
        self.pid = int(marks[0].suffix[1:])
        marks[0].unlink()
        self.stopped_at = time.monotonic()
        # Every write before the stop came from an earlier holder, and committed before the
        # stopped one acquired: a row with a higher fence was written by a newer holder.
        try:
            self.fences_at_stop = group_fences(group_id)
        except BaseException:
            os.kill(self.pid, signal.SIGCONT)
            raise

    def heal(self, stage: Stage, down: float) -> float:
        try:
            time.sleep(max(0.0, self.stopped_at + self.lease() + 0.5 - time.monotonic()))
            floor = max(self.fences_at_stop.values(), default=0)
            give_up = time.monotonic() + self.overtake_within
            while time.monotonic() < give_up:
                fences = group_fences(self.group_id)
                if all(fence > floor for fence in fences.values()):
                    # Whichever row it chose, a newer holder has written it (or it ran out).
                    self.overtaken = True
                    break
                time.sleep(0.1)
        finally:
            # Whatever happened meanwhile: a worker left stopped would hold its request for good.
            os.kill(self.pid, signal.SIGCONT)
            self.stopped_s = time.monotonic() - self.stopped_at
        return time.time()

    def checked(self, answers: list[Answer], lock_events: dict[str, float]) -> tuple[list[str], list[str]]:
        stale, lost = int(lock_events.get("stale_fences", 0)), int(lock_events.get("leases_lost", 0))
        broken = []
        if not self.overtaken:
            broken.append(f"no newer holder wrote within {self.overtake_within:.0f} s of the stopped one's lease")
        if stale < 1:
            broken.append("the stopped holder's write was not refused as stale")
        stopped = "?" if self.stopped_s is None else f"{self.stopped_s:.1f}"
        return broken, [f"holder stopped {stopped} s, {stale} stale write(s) refused, {lost} lease(s) lost"]


class RedlockServersStopped(Fault):
    """One of the three Redlock servers killed; ``--down`` seconds later a second one;
    ``--down`` seconds after that both started again, empty (their fence counters lost)."""

    name = "redlock-servers-stopped"
    summary = "one Redlock server of three stopped (sales go on), then two (503), then both restarted empty"
    strategies = ("redlock",)
    # Requests in flight when a phase changes are left out of its checks: this long.
    margin = 0.3

    def concerns(self, strategy: str, *, deferred: bool) -> bool:
        return strategy == "redlock"

    def lasts(self, down: float) -> float:
        return 2 * down

    def inject(self, stage: Stage, group_id: int) -> None:
        self.servers = stage.server.lock_servers
        if len(self.servers) < 3:
            raise RuntimeError("the server has fewer than three Redlock servers")
        self.one_down_at = time.time()
        self.servers[0].stop()

    def heal(self, stage: Stage, down: float) -> float:
        time.sleep(down)
        self.two_down_at = time.time()
        self.servers[1].stop()
        time.sleep(down)
        self.restarting_at = time.time()
        self.servers[0].start()
        self.servers[1].start()
        return time.time()

    def checked(self, answers: list[Answer], lock_events: dict[str, float]) -> tuple[list[str], list[str]]:
        one = by_status(answered_within(answers, self.one_down_at + self.margin, self.two_down_at))
        two = by_status(answered_within(answers, self.two_down_at + self.margin, self.restarting_at))
        broken = []
        if not one.get(201):
            broken.append("nothing sold while one server of three was down")
        if one.get(503):
            broken.append(f"{one[503]} x 503 while a majority was up")
        if two.get(201):
            broken.append(f"{two[201]} sold while two servers of three were down")
        if not two.get(503):
            broken.append("no 503 while two servers of three were down")
        return broken, [f"one down: {statuses(one)}; two down: {statuses(two)}"]


def statuses(counted: dict[int, int]) -> str:
    return " ".join(f"{status or 'none'}: {n}" for status, n in counted.items()) or "no answer"
