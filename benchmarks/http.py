"""The redis_lua strategy over HTTP: what a purchase and a draw cost against a no-op JSON
endpoint of the same server, the crowd against db_atomic, the server's CPU per request, and
how a Celery worker keeps up persisting the reservations; one server, one run.

    .venv/bin/python -m benchmarks.http [--seconds 4] [--rounds 2] [--concurrency 50]
        [--server-processes 4] [--persist-seconds 15] [--tokens 100000] [--no-persist]
        [--database-url mysql://root:@127.0.0.1:3306/flashsale_bench]
        [--redis-url redis://127.0.0.1:6379/5] [--broker-url redis://127.0.0.1:6379/6]

(defaults from ``DATABASE_URL``, ``BENCH_HTTP_REDIS_URL`` and ``BENCH_HTTP_BROKER_URL``). The
server is started as the load tests start theirs (``loadtests.server``): gunicorn,
``--server-processes`` sync workers on 127.0.0.1, its Redlock servers, MariaDB and Redis on
127.0.0.1, and ``RACE_WINDOW_MS=0`` (no pause between check and write: throughput, not the
race, is measured). Its Celery broker is a Redis database of its own, so that the worker of
part 4 hears only this server. Buyers are bearer tokens from ``manage.py issue_tokens``, kept
in ``var/bench/`` and issued again only when the database no longer knows them.

1. Request path: ``GET /api/ping`` (the baseline), ``POST /api/vouchers/{id}/purchase`` and
   ``POST /api/pools/{id}/draw`` under ``redis_lua``, every request by a new buyer on stock
   that never runs out, so every answer is 202; requests per second, each against ping's.
2. Crowd: the load tests' ``crowd`` scenario (``loadtests/scenarios.py``: buyers who try once
   each, ``--concurrency`` at a time, on ``--crowd-stock`` units, so most hear ``sold_out``)
   under ``redis_lua`` and ``db_atomic``: requests per second, their ratio, and when the last
   unit was sold.
3. CPU per request served, for every run above: user + system CPU of gunicorn's master and
   workers (``/proc/<pid>/stat``). Beside it, to read with care: this process's (the client),
   MariaDB's and Redis' (both count whatever else uses them) and how busy the machine was.
4. Persisting, with a real Celery worker (concurrency 1, started as
   ``tests/test_reservations_worker.py`` starts one): first the reservations that parts 1 and
   2 left waiting (the beat's sweeps ask for their drains), timed until none waits; then a
   ``redis_lua`` crowd of ``--persist-seconds`` on stock that never runs out, the rows the
   worker wrote meanwhile, and the seconds from the load's end until every reservation is a
   row (``Reservations.waiting`` is 0 for the voucher), with the worker's rows per second
   and CPU per row.

Parts 1 to 3 run without a worker, so that its CPU does not take from the server being
measured. Runs alternate over the rounds so that drift in the machine's speed hits all alike;
figures are medians. Nothing is asserted: the targets are printed beside the ratios.

The load generator is a small epoll client in this process (``load``), not Locust. The load
tests run Locust as a command of its own (``loadtests/one_run.py``), not as a library, and
its gevent users, hooks and statistics cost CPU on the same two cores as the server: against
``GET /api/ping`` here, Locust's ``FastHttpUser`` (50 users, one process) spent about 0.4 ms
of CPU per request and reached half the requests per second that this client reaches at
0.08 ms, and an asyncio client (streams or protocols) spent 0.13 to 0.15 ms. Each request is
a prebuilt byte string sent on a fresh connection, its answer read until the server closes
(gunicorn's sync workers close every connection after one answer, so no client can keep one
alive); the client's own CPU per request is printed with the rest.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"

PING_TARGET = 0.55  # redis_lua purchase and draw, each against ping
CROWD_TARGET = 3.0  # redis_lua against db_atomic in the crowd
AMPLE = 10_000_000  # units that no run sells out
PRIZES = 5


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=4, help="seconds of load per run of parts 1 and 2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight (the load tests' users)")
    parser.add_argument("--crowd-stock", type=int, default=500, help="the crowd's units (the load tests' --stock)")
    parser.add_argument("--server-processes", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--race-window-ms", type=int, default=0, help="RACE_WINDOW_MS of the server")
    parser.add_argument("--persist-seconds", type=float, default=15, help="seconds of load in part 4")
    parser.add_argument("--no-persist", action="store_true", help="skip part 4 (the Celery worker)")
    parser.add_argument("--tokens", type=int, default=100_000, help="distinct buyers (at most 100,000)")
    # Redis databases nothing else here uses: the tests take 4, 7, 8, 11, 13 and 15 (and flush some),
    # the load tests 10, the other benchmarks 9 and 12. The broker is purged before and after.
    parser.add_argument(
        "--database-url", default=os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/flashsale_bench")
    )
    parser.add_argument("--redis-url", default=os.environ.get("BENCH_HTTP_REDIS_URL", "redis://127.0.0.1:6379/5"))
    parser.add_argument(
        "--broker-url",
        default=os.environ.get("BENCH_HTTP_BROKER_URL", "redis://127.0.0.1:6379/6"),
        help="the Celery broker of the server and the worker (a Redis database of their own)",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------
# The client


@dataclass
class Tally:
    """What one run's answers were."""

    answered: int = 0  # by the end of the run
    late: int = 0  # in flight at the end, answered after it (served all the same)
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    codes: Counter = field(default_factory=Counter)  # refusal codes of the answers that were not 2xx
    latencies: list[float] = field(default_factory=list)
    ran_out: bool = False  # the buyers ran out before the run's end
    last_taken: float = 0.0  # seconds from the start to the last 2xx answer

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    @property
    def served(self) -> int:
        return self.answered + self.late

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Slot:
    """One request in flight: the bytes left to send, the answer so far, when it was sent."""

    __slots__ = ("unsent", "chunks", "sent_at")

    def __init__(self, request: bytes) -> None:
        self.unsent, self.chunks, self.sent_at = request, [], time.perf_counter()


def _note(tally: Tally, answer: bytes) -> None:
    status = int(answer[9:12]) if answer[:5] == b"HTTP/" else 0
    tally.statuses[status] += 1
    if not 200 <= status < 300:
        try:
            tally.codes[json.loads(answer.split(b"\r\n\r\n", 1)[1]).get("code", "?")] += 1
        except (ValueError, IndexError, AttributeError):
            tally.codes["not JSON" if status else "no answer"] += 1


def load(port: int, requests: Iterator[bytes], concurrency: int, seconds: float) -> Tally:
    """Keep ``concurrency`` requests in flight for ``seconds``, each on a connection of its own
    read until the server closes it; those in flight at the end are still read."""
    selector = selectors.DefaultSelector()
    tally = Tally()
    started = time.perf_counter()
    end = started + seconds
    last_answer = started
    in_flight = 0

    def send(sock: socket.socket, slot: _Slot) -> None:
        slot.unsent = slot.unsent[sock.send(slot.unsent) :]
        selector.modify(sock, selectors.EVENT_WRITE if slot.unsent else selectors.EVENT_READ, slot)

    def open_next() -> None:
        nonlocal in_flight
        request = next(requests, None)
        if request is None:
            tally.ran_out = True
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        slot = _Slot(request)
        # On loopback the handshake is usually over when connect returns: then send at once
        # rather than wait a turn of the loop.
        connected = sock.connect_ex(("127.0.0.1", port)) == 0
        selector.register(sock, selectors.EVENT_WRITE, slot)
        in_flight += 1
        if connected:
            send(sock, slot)

    def finish(sock: socket.socket, slot: _Slot) -> None:
        nonlocal in_flight, last_answer
        selector.unregister(sock)
        sock.close()
        in_flight -= 1
        now = time.perf_counter()
        _note(tally, b"".join(slot.chunks))
        if now > end:
            tally.late += 1
            return
        tally.answered += 1
        tally.latencies.append(now - slot.sent_at)
        last_answer = now
        if slot.chunks and slot.chunks[0][9:10] == b"2":
            tally.last_taken = now - started
        open_next()

    for _ in range(concurrency):
        open_next()
    while in_flight:
        for key, events in selector.select(timeout=5):
            sock, slot = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    send(sock, slot)
                    continue
                data = sock.recv(65536)
            except OSError:  # refused or reset: no answer
                slot.chunks.clear()
                data = b""
            if data:
                slot.chunks.append(data)
            else:
                finish(sock, slot)
    selector.close()
    tally.seconds = (last_answer if tally.ran_out else end) - started
    return tally


def _post(path: str, port: int, tokens: list[str]) -> Iterator[bytes]:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n"
    return (f"{head}Authorization: Bearer {token}\r\n\r\n".encode() for token in tokens)


def _get(path: str, port: int) -> Iterator[bytes]:
    return itertools.repeat(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())


# ---------------------------------------------------------------------------------------
# CPU


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _mariadb_pid() -> int | None:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("mariadbd", "mysqld"):
                    return int(entry.name)
            except OSError:
                continue
    return None


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


@dataclass(frozen=True)
class CpuSample:
    server: float
    client: float
    mariadb: float
    redis: float
    busy: int
    total: int


class CpuMeter:
    """CPU seconds of the server's processes, this process, MariaDB and Redis, and how busy
    the machine is."""

    def __init__(self, server_pid: int, redis_client) -> None:
        from loadtests.server import process_tree_cpu

        self._tree = process_tree_cpu
        self.server_pid = server_pid
        self.redis = redis_client
        self.mariadb_pid = _mariadb_pid()

    def sample(self) -> CpuSample:
        info = self.redis.info("cpu")
        busy, total = _machine_ticks()
        return CpuSample(
            server=self._tree(self.server_pid),
            client=time.process_time(),
            mariadb=_proc_cpu(self.mariadb_pid) if self.mariadb_pid else 0.0,
            redis=float(info["used_cpu_user"]) + float(info["used_cpu_sys"]),
            busy=busy,
            total=total,
        )


@dataclass(frozen=True)
class Run:
    """One timed run: its answers and the CPU spent serving them."""

    tally: Tally
    before: CpuSample
    after: CpuSample

    def ms_per_request(self, part: str) -> float:
        used = getattr(self.after, part) - getattr(self.before, part)
        return 1000 * used / max(self.tally.served, 1)

    @property
    def machine_busy(self) -> float:
        total = self.after.total - self.before.total
        return (self.after.busy - self.before.busy) / total if total else 0.0


# ---------------------------------------------------------------------------------------
# The server, the worker, the data


def setup_django(args) -> None:
    """As the load tests' runner does (the database created if missing, migrated)."""
    from loadtests.run import setup_django as loadtests_setup_django

    loadtests_setup_django(args)


def buyer_tokens(args) -> list[str]:
    """``--tokens`` bearer tokens, those of an earlier run when the database still knows them."""
    from django.db import connections

    from accounts.selectors import user_for_token

    VAR.mkdir(parents=True, exist_ok=True)
    name = args.database_url.rsplit("/", 1)[-1]
    path = VAR / f"http-tokens-{name}.txt"
    tokens = [line.split()[1] for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    if len(tokens) < args.tokens or user_for_token(raw=tokens[0]) is None or user_for_token(raw=tokens[-1]) is None:
        _say(f"issuing {args.tokens:,} tokens (manage.py issue_tokens) ...")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [sys.executable, "manage.py", "issue_tokens", "--count", str(args.tokens), "--out", str(path),
             "--prefix", "bench-http"],
            cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        tokens = [line.split()[1] for line in path.read_text().splitlines() if line.strip()]
    connections.close_all()
    return tokens[: args.tokens]


@dataclass(frozen=True)
class Serving:
    port: int
    pid: int
    env: dict[str, str]


@contextmanager
def gunicorn_serving(args, **settings: str) -> Iterator[Serving]:
    """gunicorn as ``loadtests.server.running_server`` starts it, with its Celery broker set to
    ``--broker-url`` (the load tests give it ``REDIS_URL``) and ``settings`` in its environment."""
    import shutil
    import tempfile

    from loadtests.server import REDLOCK_SERVERS, server_env, wait_healthy
    from locking.testing import RedisServer, free_port

    lock_servers = [RedisServer().start() for _ in range(REDLOCK_SERVERS)]
    metrics = tempfile.mkdtemp(prefix="bench-metrics-")
    try:
        port = free_port()
        env = server_env(
            database_url=args.database_url,
            redis_url=args.redis_url,
            lock_urls=[server.url for server in lock_servers],
            race_window_ms=args.race_window_ms,
            processes=args.server_processes,
        )
        env["CELERY_BROKER_URL"] = args.broker_url
        env["PROMETHEUS_MULTIPROC_DIR"] = metrics
        env.update(settings)
        gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "config" / "gunicorn.py"), "config.wsgi",
             "--bind", f"127.0.0.1:{port}", "--workers", str(args.server_processes), "--log-level", "warning"],
            cwd=ROOT, env=env,
        )  # fmt: skip
        try:
            wait_healthy(f"http://127.0.0.1:{port}")
            yield Serving(port=port, pid=gunicorn.pid, env=env)
        finally:
            gunicorn.terminate()
            gunicorn.wait(30)
    finally:
        for lock_server in lock_servers:
            lock_server.close()
        shutil.rmtree(metrics, ignore_errors=True)


def broker_app(broker_url: str):
    """A Celery app on ``broker_url`` under this instance's broker options (its namespace, which
    the worker started on the same database shares), to ping, purge and send to that worker."""
    from celery import Celery
    from django.conf import settings

    return Celery(broker=broker_url, broker_transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS)


@contextmanager
def celery_worker(env: dict[str, str], broker_url: str) -> Iterator[subprocess.Popen]:
    """A Celery worker of concurrency 1 on the server's settings and broker, ready to take tasks."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "--quiet", "worker", "--concurrency", "1",
         "--without-gossip", "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env={**env, "CELERY_BROKER_URL": broker_url}, start_new_session=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with broker_app(broker_url) as app:
            give_up = time.monotonic() + 60
            while not app.control.ping(timeout=0.5):
                if worker.poll() is not None or time.monotonic() > give_up:
                    raise SystemExit("[bench] the Celery worker did not start")
        yield worker
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(10)


def broker_purge(broker_url: str) -> None:
    """Drop the drain tasks the server queued while no worker ran."""
    with broker_app(broker_url) as app:
        app.control.purge()


class Items:
    """Fresh vouchers and pools, one per run, so that the same buyers buy once in each; the
    Redis state of the ``redis_lua`` ones (``groups``) is dropped at the end."""

    def __init__(self) -> None:
        self.groups: list[int] = []

    @staticmethod
    def _window() -> dict:
        from django.utils import timezone

        now = timezone.now()
        return {"begin_at": now - timedelta(minutes=1), "end_at": now + timedelta(hours=2)}

    def voucher(self, strategy: str, stock: int) -> tuple[int, int]:
        """(voucher id, stock group id)."""
        from orders.services import voucher_create

        voucher = voucher_create(
            title=f"bench http {strategy}", stock=stock, strategy=strategy, listed=False, **self._window()
        )
        if strategy == "redis_lua":
            self.groups.append(voucher.stock.group_id)
        return voucher.pk, voucher.stock.group_id

    def pool(self, strategy: str) -> int:
        from lottery.services import pool_create, prize_create

        pool = pool_create(
            name=f"bench http {strategy}", draws_per_user=1, no_prize_weight=0, strategy=strategy, listed=False,
            **self._window(),
        )  # fmt: skip
        for n in range(1, PRIZES + 1):
            prize_create(pool=pool, name=f"prize {n}", stock=AMPLE // PRIZES)
        if strategy == "redis_lua":
            self.groups.append(pool.group_id)
        return pool.pk

    def drop(self) -> None:
        from inventory.persist import reservations_client

        reservations = reservations_client()
        for group_id in self.groups:
            reservations.drop(group_id=group_id)
        self.groups.clear()


# ---------------------------------------------------------------------------------------
# The parts


PING, PURCHASE, DRAW = "GET /api/ping", "POST purchase, redis_lua", "POST draw, redis_lua"
PATH_RUNS = [PING, PURCHASE, DRAW]
CROWD_STRATEGIES = ["redis_lua", "db_atomic"]


def path_run(name: str, context: Context, seconds: float) -> Run:
    port = context.serving.port
    if name == PING:
        requests = _get("/api/ping", port)
    elif name == PURCHASE:
        voucher_id, _ = context.items.voucher("redis_lua", AMPLE)
        requests = _post(f"/api/vouchers/{voucher_id}/purchase", port, context.tokens)
    else:
        requests = _post(f"/api/pools/{context.items.pool('redis_lua')}/draw", port, context.tokens)
    return context.measure(requests, seconds)


def crowd_run(strategy: str, context: Context, seconds: float) -> Run:
    voucher_id, _ = context.items.voucher(strategy, context.args.crowd_stock)
    return context.measure(_post(f"/api/vouchers/{voucher_id}/purchase", context.serving.port, context.tokens), seconds)


def rounds(names: list[str], count: int, run) -> dict[str, list[Run]]:
    """Every name run once per round, in turns: forwards, then backwards."""
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for round_number in range(count):
        for name in names if round_number % 2 == 0 else reversed(names):
            _say(f"round {round_number + 1}: {name} ...")
            runs[name].append(run(name))
    return runs


@dataclass(frozen=True)
class Backlog:
    """The reservations the runs before left waiting, persisted by the worker at full speed."""

    reservations: int
    seconds: float | None  # None: not persisted within DRAIN_TIMEOUT
    worker_cpu: float
    states_gone: int  # items whose Redis state vanished before (the database flushed by another process)


@dataclass(frozen=True)
class Persistence:
    backlog: Backlog
    run: Run  # the load beside the worker
    rows_at_stop: int
    waiting_at_stop: int
    drain_seconds: float | None  # None: not persisted within DRAIN_TIMEOUT
    rows: int
    worker_cpu_load: float
    worker_cpu_drain: float
    tasks: int | None  # tasks the worker ran from the load's start until every reservation was a row


DRAIN_TIMEOUT = 60
# The beat's tasks that ask for a drain of every redis_lua item with reservations waiting.
SWEEPS = ("orders.tasks.vouchers_reservations_sweep", "lottery.tasks.pools_reservations_sweep")


def _until_persisted(reservations, group_ids: list[int], since: float) -> float | None:
    """Seconds from ``since`` until no reservation of the groups waits, or None at the timeout."""
    while time.perf_counter() < since + DRAIN_TIMEOUT:
        if not any(reservations.waiting(group_id=group_id) for group_id in group_ids):
            return time.perf_counter() - since
        time.sleep(0.02)
    return None


def persistence_run(context: Context) -> Persistence:
    from django.db import connections

    from inventory.persist import reservations_client
    from loadtests.server import process_tree_cpu
    from orders.models import Order

    args = context.args
    reservations = reservations_client()
    broker_purge(args.broker_url)  # the asks of the runs above: the sweeps ask again, all at once
    with celery_worker(context.serving.env, args.broker_url) as worker, broker_app(args.broker_url) as app:
        groups = list(context.items.groups)
        gone = sum(1 for group_id in groups if reservations.stock(group_id=group_id) is None)
        waiting = sum(reservations.waiting(group_id=group_id) for group_id in groups)
        _say(f"persistence: the {waiting:,} reservations the runs above left waiting ...")
        cpu_start, started = process_tree_cpu(worker.pid), time.perf_counter()
        for sweep in SWEEPS:
            app.send_task(sweep)
        persisted = _until_persisted(reservations, groups, started)
        backlog = Backlog(waiting, persisted, process_tree_cpu(worker.pid) - cpu_start, gone)
        context.items.drop()

        voucher_id, group_id = context.items.voucher("redis_lua", AMPLE)
        requests = _post(f"/api/vouchers/{voucher_id}/purchase", context.serving.port, context.tokens)
        _say(f"persistence: a redis_lua crowd for {args.persist_seconds:g} s beside the worker ...")
        tasks_start, cpu_start = _tasks_run(app), process_tree_cpu(worker.pid)
        run = context.measure(requests, args.persist_seconds)
        stopped = time.perf_counter()
        cpu_stop = process_tree_cpu(worker.pid)
        rows_at_stop = Order.objects.filter(voucher_id=voucher_id).count()
        waiting_at_stop = reservations.waiting(group_id=group_id)
        drain_seconds = _until_persisted(reservations, [group_id], stopped)
        cpu_drained = process_tree_cpu(worker.pid)
        rows = Order.objects.filter(voucher_id=voucher_id).count()
        tasks_end = _tasks_run(app)
        tasks = None if tasks_start is None or tasks_end is None else tasks_end - tasks_start
    connections.close_all()
    return Persistence(
        backlog=backlog,
        run=run,
        rows_at_stop=rows_at_stop,
        waiting_at_stop=waiting_at_stop,
        drain_seconds=drain_seconds,
        rows=rows,
        worker_cpu_load=cpu_stop - cpu_start,
        worker_cpu_drain=cpu_drained - cpu_stop,
        tasks=tasks,
    )


def _tasks_run(app) -> int | None:
    """The tasks the worker has run since it started (its own count, asked over the broker);
    None when it did not answer."""
    try:
        stats = app.control.inspect(timeout=2).stats()
    except Exception:  # noqa: BLE001  (a broker connection cut by another process: the count is only shown)
        return None
    return sum(sum(one.get("total", {}).values()) for one in stats.values()) if stats else None


@dataclass
class Context:
    """What every run needs: the options, the server, the meter, the items and the buyers."""

    args: argparse.Namespace
    serving: Serving
    meter: CpuMeter
    items: Items
    tokens: list[str]

    def measure(self, requests: Iterator[bytes], seconds: float) -> Run:
        before = self.meter.sample()
        tally = load(self.serving.port, requests, self.args.concurrency, seconds)
        return Run(tally, before, self.meter.sample())


# ---------------------------------------------------------------------------------------
# The report


def _say(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _answers(runs: list[Run]) -> str:
    statuses, codes = Counter(), Counter()
    for run in runs:
        statuses += run.tally.statuses
        codes += run.tally.codes
    text = ", ".join(f"{status or 'none'} x {n:,}" for status, n in sorted(statuses.items()))
    if codes:
        text += " (" + ", ".join(f"{code} {n:,}" for code, n in codes.most_common()) + ")"
    if any(run.tally.ran_out for run in runs):
        text += "; the buyers ran out: raise --tokens"
    return text


def _median(runs: list[Run], value) -> float:
    return statistics.median(value(run) for run in runs)


def _rate(run: Run) -> float:
    return run.tally.rate


def report_rates(title: str, runs: dict[str, list[Run]], base: str, target: float, stock: int = 0) -> None:
    """Requests per second (median, and each round's), the ratio to ``base``, latencies, answers;
    with ``stock``, also when the last unit was sold."""
    base_rate = _median(runs[base], _rate)
    print(title)
    sold_out = f"{'sold out':>10}" if stock else ""
    print(
        f"{'':<26}{'req/s':>8}  {'rounds':<18}{'ratio':>7}  {'target':<8}{'p50 ms':>7}{'p99 ms':>8}{sold_out}  answers"
    )
    for name, one in runs.items():
        rate = _median(one, _rate)
        each = ", ".join(f"{_rate(run):,.0f}" for run in one)
        ratio = f"{rate / base_rate:.2f}x" if base_rate else "-"
        wanted = "" if name == base else f">= {target:g}x"
        p50 = _median(one, lambda run: run.tally.percentile(0.50))
        p99 = _median(one, lambda run: run.tally.percentile(0.99))
        line = f"{name:<26}{rate:>8,.0f}  {each:<18}{ratio:>7}  {wanted:<8}{p50:>7.1f}{p99:>8.1f}"
        if stock:
            sold_all = all(
                sum(n for status, n in r.tally.statuses.items() if 200 <= status < 300) >= stock for r in one
            )
            line += f"{_median(one, lambda run: run.tally.last_taken):>8.2f} s" if sold_all else f"{'not yet':>10}"
        print(f"{line}  {_answers(one)}")
    print()


def report_cpu(runs: dict[str, list[Run]]) -> None:
    print("CPU ms per request served (medians of the rounds). server: gunicorn's master and workers;")
    print("client: this process; MariaDB and Redis: also whatever else uses them; busy: the whole machine")
    parts = ("server", "client", "mariadb", "redis")
    ping = _median(runs[PING], lambda run: run.ms_per_request("server"))
    print(f"{'':<26}{'server':>8}{'x ping':>8}{'client':>8}{'MariaDB':>9}{'Redis':>7}{'busy':>7}")
    for name, one in runs.items():
        server, client, mariadb, redis_ = (_median(one, lambda run, p=p: run.ms_per_request(p)) for p in parts)
        busy = _median(one, lambda run: run.machine_busy)
        print(f"{name:<26}{server:>8.2f}{server / ping:>7.1f}x{client:>8.2f}{mariadb:>9.2f}{redis_:>7.2f}{busy:>7.0%}")
    print()


def report_persistence(args, result: Persistence, alone: float) -> None:
    print("Persisting: a Celery worker, concurrency 1")
    backlog = result.backlog
    if backlog.states_gone:
        print(f"  the Redis state of {backlog.states_gone} items above was gone: something flushed {args.redis_url}")
    if backlog.seconds is None:
        print(
            f"  backlog: {backlog.reservations:,} reservations left waiting above, not persisted in {DRAIN_TIMEOUT} s"
        )
    elif backlog.reservations:
        print(
            f"  backlog: the {backlog.reservations:,} reservations left waiting above, persisted in "
            f"{backlog.seconds:.2f} s ({backlog.reservations / backlog.seconds:,.0f} rows/s, "
            f"{1000 * backlog.worker_cpu / backlog.reservations:.2f} ms of worker CPU per row)"
        )
    tally = result.run.tally
    accepted = tally.statuses[202]
    print(
        f"  beside a redis_lua crowd ({args.concurrency} at a time, each buyer once) of {args.persist_seconds:g} s "
        f"on {AMPLE:,} units:"
    )
    others = ", ".join(f"{status or 'none'} x {n:,}" for status, n in sorted(tally.statuses.items()) if status != 202)
    print(
        f"    reserved (202)                 {accepted:,} at {tally.rate:,.0f} req/s"
        + (f"; {others}" if others else "")
    )
    if tally.ran_out:
        print("    the buyers ran out before the end: raise --tokens")
    load_rate = result.rows_at_stop / tally.seconds if tally.seconds else 0.0
    print(f"    rows written during the load   {result.rows_at_stop:,} ({load_rate:,.0f} rows/s)")
    print(f"    waiting when the load stopped  {result.waiting_at_stop:,}")
    drained = result.rows - result.rows_at_stop
    # A drain of a few rows after the load says nothing of the worker's pace: it kept up.
    kept_up = result.drain_seconds is not None and result.drain_seconds < 0.5
    if result.drain_seconds is None:
        print(f"    not all persisted within {DRAIN_TIMEOUT} s ({drained:,} rows written meanwhile)")
    else:
        rate = "the worker kept up" if kept_up else f"{drained / result.drain_seconds:,.0f} rows/s"
        print(f"    all persisted after the load   {result.drain_seconds:.2f} s ({drained:,} rows, {rate})")
    print(f"    one row per reservation        {'yes' if result.rows == accepted else f'no: {result.rows:,} rows'}")
    cpu = f"during the load {1000 * result.worker_cpu_load / max(result.rows_at_stop, 1):.2f}"
    if drained and not kept_up:
        cpu += f"; after it {1000 * result.worker_cpu_drain / drained:.2f}"
    print(f"    worker CPU ms per row          {cpu}")
    if result.tasks:
        print(f"    drain tasks run                {result.tasks:,} ({result.rows / result.tasks:,.1f} rows each)")
    print(
        f"    server CPU ms per request      {result.run.ms_per_request('server'):.2f} (without a worker: {alone:.2f})"
    )
    print()


def main(argv=None) -> int:
    args = parse_args(argv)
    setup_django(args)
    import redis
    from django.db import connection, connections

    from .machine import describe

    tokens = buyer_tokens(args)
    redis_client = redis.Redis.from_url(args.redis_url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT VERSION()")
        mariadb = cursor.fetchone()[0]
    connections.close_all()
    load_average = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print("# HTTP: the redis_lua request path, the crowd, CPU per request, persisting\n")
    print(f"machine: {describe(redis_client)}; MariaDB {mariadb}")
    print(
        f"server: gunicorn, {args.server_processes} sync workers on 127.0.0.1, RACE_WINDOW_MS={args.race_window_ms}; "
        f"database {args.database_url.rsplit('/', 1)[-1]}, Redis {args.redis_url}, broker {args.broker_url}"
    )
    print(
        f"client: epoll in this process, {args.concurrency} requests in flight, a connection each; "
        f"{args.seconds:g} s per run, {args.rounds} rounds; load average before: {load_average}\n"
    )
    items = Items()
    try:
        with gunicorn_serving(args) as serving:
            context = Context(args, serving, CpuMeter(serving.pid, redis_client), items, tokens)
            _say("warming up every path ...")
            for name in PATH_RUNS:
                path_run(name, context, 0.5)
            for strategy in CROWD_STRATEGIES:
                crowd_run(strategy, context, 0.5)
            path = rounds(PATH_RUNS, args.rounds, lambda name: path_run(name, context, args.seconds))
            crowd = rounds(CROWD_STRATEGIES, args.rounds, lambda name: crowd_run(name, context, args.seconds))
            persisted = None if args.no_persist else persistence_run(context)
    finally:
        items.drop()
        broker_purge(args.broker_url)

    crowd = {f"crowd, {strategy}": runs for strategy, runs in crowd.items()}
    report_rates("Request path: every buyer new, stock never runs out (ratio to ping)", path, PING, PING_TARGET)
    report_rates(
        f"Crowd: {args.concurrency} at a time, each buyer once, {args.crowd_stock:,} units (ratio to db_atomic)",
        crowd,
        "crowd, db_atomic",
        CROWD_TARGET,
        stock=args.crowd_stock,
    )
    report_cpu({**path, **crowd})
    if persisted is not None:
        alone = _median(path[PURCHASE], lambda run: run.ms_per_request("server"))
        report_persistence(args, persisted, alone)
    return 0


if __name__ == "__main__":
    sys.exit(main())
