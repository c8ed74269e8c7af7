"""The fault runner: one fault at a time, mid-sale, under a Locust crowd, then the audit.

    .venv/bin/python -m loadtests.faults [--faults all] [--strategies default]
        [--scenario crowd,draw-crowd] [--duration 20] [--fault-at 6] [--down 2]

It starts the server as the load-test runner does (``loadtests.server``: gunicorn with
several worker processes, a Celery worker and beat for ``redis_lua``), but on a Redis
server of its own (``redis-server --save "" --appendonly no`` on a free port, from
``locking.testing``), so that it can kill it and start it again empty. For every fault,
scenario and strategy it runs the matrix's run (``loadtests.one_run``: a fresh voucher or
pool, Locust headless with a crowd scenario, the wait until every reservation is
written, the audit) and injects the fault once, ``--fault-at`` seconds into the load;
the fault ends ``--down`` seconds later. Then it judges (``judge``): the matrix's
invariants, every answer documented (503 ``unavailable`` with Retry-After included) and
none slower than 5 s, the server selling again on its own within the fault's bound, and
``/healthz`` naming what was down.

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

Not there yet: MariaDB restarted mid-sale; a lock holder SIGSTOPped past its lease; one,
then two, of three Redlock servers stopped.

Prints a table (fault, scenario, strategy, requests, answers by status, oversold,
duplicates, lost confirmations, seconds to recover, verdict), writes ``faults.json`` and
``faults.md`` and each run's Locust files under ``--out``, and exits 1 when a run broke
an invariant or did not recover.

The modules: ``kinds`` (the faults), ``judge`` (the verdict, pure), ``runner`` (the
command line and the runs).
"""
