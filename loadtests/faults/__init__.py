"""The fault runner: one fault at a time, mid-sale, under a Locust crowd, then the audit.

    .venv/bin/python -m loadtests.faults [--faults all] [--strategies default]
        [--runs fault:strategy,...] [--scenario crowd,draw-crowd] [--duration 20]
        [--fault-at 6] [--down 2] [--lock-lease 5] [--hold-seconds 0] [--sweep-seconds 5]
        [--replica-lag 0.3] [--own-mariadb]

It starts the server as the load-test runner does (``harness.server``: gunicorn with
several worker processes, three Redis servers for Redlock, a Celery worker and beat for
``redis_lua``), but on a Redis server of its own (``redis-server --save "" --appendonly
no`` on a free port, from ``locking.testing``), so that it can kill it and start it again
empty, and, when ``mariadb-restart`` runs (or ``--own-mariadb``), on a MariaDB server of
its own (``mariadb``: ``mariadb-install-db`` into a temporary folder, ``mariadbd`` on a
free port and socket; only the database's name is taken from ``--database-url``), so that
it never touches a server anyone else uses. The server's processes have
``FAULT_POINTS_DIR`` set to a folder of the run's (``core.faultpoints``). For every fault,
scenario and strategy it runs the matrix's run (``loadtests.one_run``: a fresh voucher or
pool, Locust headless with a crowd scenario, the wait until every reservation is written,
the audit) and injects the fault once, ``--fault-at`` seconds into the load; the fault
ends ``--down`` seconds later (or when it has shown what it is there for). Then it judges
(``judge``): the matrix's invariants, every answer documented (503 ``unavailable`` with
Retry-After included) and none slower than 5 s, the server selling again on its own
within the fault's bound, ``/healthz`` naming what was down, and what the fault itself
must show.

Faults (``kinds``):

- ``worker-kill``: SIGKILL of a gunicorn worker during purchases and draws; gunicorn
  starts another. Every confirmed answer exists once, nothing oversold; requests that
  worker was serving get no answer.
- ``redis-restart``: the Redis server killed and started again empty: locks, fences,
  the broker's queues and ``redis_lua``'s state are gone. Requests answer 503 while it
  is down; ``redis_lua`` answers 503 until a worker rebuilt the state from the database
  (asked by the first refusal), the lock strategies sell again at once, their fences
  moved above the database's (``locking.integration.FencedUpdate``). ``redis_lua``'s
  reservations that waited only in the lost Redis are gone with it, as documented: they
  are reported, not counted as lost confirmations.
- ``celery-kill`` (``redis_lua``): the Celery worker SIGKILLed while it writes and
  started again; every reservation is written once.
- ``mariadb-restart`` (every safe strategy): the runner's own MariaDB SIGKILLed, as a
  crash, and started again on its data after ``--down`` seconds. Requests answer 503 while
  it is down, ``/healthz`` names the database, every process connects again on its own,
  and every confirmed answer survives the crash (commits are durable).
- ``lock-holder-stopped`` (``redis_lock``, ``redlock``): a gunicorn worker stops itself
  (SIGSTOP) at the fault point ``group-lock-held``, holding its stock group's lock before
  its fenced write; the runner waits past the lease until newer holders have written every
  row with stock left, then resumes it (SIGCONT). Its write must be refused as stale: the
  server's ``/metrics`` must count the stale fence.
- ``redlock-servers-stopped`` (``redlock``): one of the three Redlock servers killed (sales
  go on), ``--down`` seconds later a second one (every request answers 503, none sells),
  ``--down`` seconds later both started again empty (sales resume, fences moved above the
  database's).

- ``failover-wait``, ``failover-no-wait`` (``redis_lua``): its reservations on the runner's own
  Redis Cluster (three masters, a replica each), the master of the run's item SIGKILLed
  once its replica has fallen ``--replica-lag`` seconds behind, and the replica promoted by
  the cluster. With ``WAIT`` no 202 may be lost (the lag answers 503 ``unconfirmed``);
  without, the 202s lost with the master are counted and reported (``failover``).

The lifecycle's faults (``expiry``, ``callbacks``) run on items of their own whose takes are
held (a 3 s window, a stock of 300 that the crowd sells out); ``--hold-seconds`` holds the
other faults' takes too. A run with holds has the Celery worker and beat beside the server
whatever its strategy (they release the holds), is audited again once drained (``lifecycle``:
nothing held, no payment waiting) and judged on the lifecycle's invariants besides
(``judge.lifecycle_broken``): available + held + settled == supply, no unit returned twice,
none both settled and released, every confirmation one paid order or one refund, Redis in
step with the database.

- ``celery-kill-expiry`` (``db_atomic``, ``redis_lua``): the Celery worker SIGKILLed inside a
  release of holds (the runner holds the stock rows so that the release waits, uncommitted,
  where it can see it), started again; the release rolled back, its holds' tasks dead with
  the worker: the sweep releases each once.
- ``expiry-lost`` (``db_atomic``, ``redis_lua``): the broker's queues and unacknowledged
  messages deleted and the worker's consuming connections cut while units are held: the
  expiry tasks gone, the beat's sweep releases each hold within ``HOLDS_SWEEP_SECONDS`` and
  a margin of its deadline.
- ``redis-restart-held`` (``db_atomic``, ``redis_lock``, ``redis_lua``): ``redis-restart``
  with units held: ``redis_lua``'s rebuilt state keeps them taken, each returned once at
  its expiry.
- ``late-callback`` (the voucher's, ``db_atomic``, ``redis_lock``, ``redis_lua``): pays of
  held orders on a provider that confirms after the hold has ended: every confirmation
  refunded, none paid, no unit sold twice although the crowd bought the returned ones.

Prints a table (fault, scenario, strategy, requests, answers by status, oversold,
duplicates, lost confirmations, seconds to recover, what became of the holds, verdict with
what the fault saw), writes ``faults.json`` and ``faults.md`` and each run's Locust files
under ``--out``, and exits 1 when a run broke an invariant or did not recover.

The modules: ``kinds`` (the faults), ``stage`` (what they act on, and the supervised
Celery worker), ``strike`` (a fault struck on time, and the server's ``/healthz`` and lock
events), ``judge`` (the verdict, pure), ``table`` (a run's row and the table), ``mariadb``
(the runner's own MariaDB server), ``runner`` (the command line and the runs), ``expiry`` and
``callbacks`` (the lifecycle's faults), ``lifecycle`` (a run with holds drained and read),
``failover`` (a Redis Cluster's master killed), ``registry`` (every fault by name).
"""
