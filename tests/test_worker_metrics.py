"""The Celery worker serves its own counts where it runs apart from the web
(``config.worker_metrics``, docker-compose's ``worker``): a real worker reconciles a
``redis_lua`` voucher whose Redis state was lost, and its ``/metrics`` shows the drift."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from inventory.redis_lua.values import GroupKeys
from inventory.tasks import reservations_reconcile
from locking.testing import free_port

from .live import instance_keys_emptied
from .test_reservations_worker import BROKER, Worker, send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def drift_counted(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as response:
            text = response.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith('flashsale_reconcile_drift_total{kind="voucher"}'):
            return float(line.split()[-1])
    return 0.0


def test_the_worker_serves_the_drift_its_reconciliation_found(make_voucher, reservations_redis, tmp_path):
    voucher = make_voucher(strategy="redis_lua", stock=5)
    reservations_redis.delete(*GroupKeys.of(voucher.group_id).all())  # Redis lost the state
    directory = tmp_path / "prometheus"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"a file of an earlier run, not a counter file")
    instance_keys_emptied(BROKER)
    port = free_port()
    worker = Worker(
        CELERY_METRICS_PORT=str(port), CELERY_METRICS_ADDRESS="127.0.0.1", PROMETHEUS_MULTIPROC_DIR=str(directory)
    )
    worker.start()
    try:
        give_up = time.monotonic() + 60
        while drift_counted(port) is None:  # serving once ready, its directory emptied first
            assert time.monotonic() < give_up, "the worker's /metrics never answered"
            time.sleep(0.3)
        assert drift_counted(port) == 0
        send(reservations_reconcile, "voucher")
        while drift_counted(port) != 1:
            assert time.monotonic() < give_up, f"drift counted: {drift_counted(port)}"
            time.sleep(0.3)
    finally:
        worker.stop()
    assert reservations_redis.exists(GroupKeys.of(voucher.group_id).state)  # and rebuilt it


def test_without_a_port_the_worker_serves_nothing_and_leaves_its_directory(tmp_path, monkeypatch):
    from config import worker_metrics

    kept = tmp_path / "counter_1.db"
    kept.write_bytes(b"")
    # make run's worker counts in a directory of the web's, which the web empties itself.
    monkeypatch.delenv("CELERY_METRICS_PORT", raising=False)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    worker_metrics.directory_empty()
    worker_metrics.metrics_serve()
    assert kept.exists()


def test_with_a_port_and_no_address_the_worker_serves_this_machine_alone(tmp_path, monkeypatch):
    """The worker's server asks no token: without ``CELERY_METRICS_ADDRESS`` it listens on the
    loopback only (docker-compose names its own network's address). Read from the kernel's
    table of listening sockets (its daemon thread serves on until this process ends)."""
    from config import worker_metrics

    port = free_port()
    monkeypatch.setenv("CELERY_METRICS_PORT", str(port))
    monkeypatch.delenv("CELERY_METRICS_ADDRESS", raising=False)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    worker_metrics.metrics_serve()
    listening = [
        fields[1]
        for fields in (line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:])
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port
    ]
    assert listening == [f"0100007F:{port:04X}"]  # 127.0.0.1, little-endian, and nowhere else
