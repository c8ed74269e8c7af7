"""gunicorn's configuration wherever this project serves (``make run``, the load tests, the
image): ``gunicorn -c config/gunicorn.py config.wsgi --bind ... --workers ...``.

Prometheus' multiprocess mode: every worker process counts in files of its own under
``PROMETHEUS_MULTIPROC_DIR`` and ``/metrics`` adds them up, whichever worker answers the
scrape. The directory is the environment's, else ``var/prometheus/<port>`` (a directory of
each server's own, so that two servers side by side never add up each other's counts).
It must be known before the workers import prometheus_client, which picks its mode at
import: the master sets it as it starts, before it forks any worker, and empties it,
since files of an earlier run would be counted again.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
multiprocess = None  # prometheus_client.multiprocess, imported by on_starting

# The longest request line served (gunicorn's most): a longer one is refused with a 400 before
# Django reads it, as nginx's 8 KB header buffers refuse it in front (deploy/nginx.conf).
limit_request_line = 8190


def metrics_directory(bind: list[str]) -> Path:
    """``PROMETHEUS_MULTIPROC_DIR``, else ``<VAR_DIR>/prometheus/<port of the first bind>``."""
    chosen = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if chosen:
        return Path(chosen)
    address = bind[0] if bind else "default"
    name = address.rsplit(":", 1)[-1] if not address.startswith("unix:") else address
    var = Path(os.environ.get("VAR_DIR") or ROOT / "var")
    return var / "prometheus" / re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")


def on_starting(server) -> None:
    directory = metrics_directory(server.cfg.bind)
    directory.mkdir(parents=True, exist_ok=True)
    # Only this server's own files: a subdirectory is another process's of the same run
    # (make run's Celery worker), which cleans its own as it starts.
    for stale in directory.glob("*.db"):
        stale.unlink(missing_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    # Imported here, once the directory is set, not in child_exit: that runs in the master's
    # SIGCHLD handler, which a second worker's exit re-enters mid-import at shutdown.
    global multiprocess
    from prometheus_client import multiprocess


def child_exit(server, worker) -> None:
    # A dead worker's counters stay (totals never go back); its live gauges must not.
    multiprocess.mark_process_dead(worker.pid)
