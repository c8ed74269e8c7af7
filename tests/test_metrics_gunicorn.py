"""Prometheus' multiprocess mode under a real gunicorn of two worker processes, started with
config/gunicorn.py as every place that serves starts it: each worker counts in files of
its own, one scrape adds them all up whichever worker answers it, a worker that dies keeps
its counts, and the files of an earlier run are cleaned away at the server's start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.conf import settings
from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.parser import text_string_to_metric_families

from locking.testing import free_port
from tests.live import database_url

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

PING = ("flashsale_http_requests_total", (("method", "GET"), ("route", "api/ping"), ("status", "200")))


def stale_file(directory: Path) -> None:
    """What a run before this one left: 1,000 pings of a worker long gone."""
    directory.mkdir(parents=True)
    stale = MmapedDict(str(directory / "counter_99999.db"))
    labels = dict(PING[1])
    key = mmap_key(PING[0], PING[0], list(labels), list(labels.values()), "stale")
    stale.write_value(key, 1000.0, 0.0)
    stale.close()


def workers_of(master: int) -> list[int]:
    try:
        return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]
    except OSError:
        return []


def counting_workers(directory: Path) -> set[int]:
    """The workers that have counted something: each writes its own ``counter_<pid>.db``."""
    return {int(path.stem.rsplit("_", 1)[1]) for path in directory.glob("counter_*.db")}


def get(url: str, status: int = 200) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == status
        return response.read()


def pings(base: str, count: int) -> None:
    # Eight at a time: while one worker serves, the other takes the next connection.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: get(f"{base}/api/ping"), range(count)))


def scrape(base: str) -> dict:
    samples = {}
    for family in text_string_to_metric_families(get(f"{base}/metrics").decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


@pytest.fixture
def server(tmp_path):
    directory = tmp_path / "prometheus"
    stale_file(directory)
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "RATE_LIMITS_ENABLED": "0",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
        "PYTHONPATH": str(ROOT),
    }
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--config", str(ROOT / "config" / "gunicorn.py"), "config.wsgi",
         "--bind", f"127.0.0.1:{port}", "--workers", "2", "--log-level", "warning"],
        cwd=ROOT, env=env, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        give_up = time.monotonic() + 60
        while True:
            try:
                get(f"{base}/api/ping")
                break
            except OSError:
                assert gunicorn.poll() is None and time.monotonic() < give_up, "gunicorn did not start"
                time.sleep(0.2)
        yield base, gunicorn.pid, directory
    finally:
        os.killpg(gunicorn.pid, signal.SIGTERM)
        try:
            gunicorn.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(gunicorn.pid, signal.SIGKILL)
            gunicorn.wait(10)


def test_the_counts_of_two_workers_add_up_and_survive_a_dead_worker(server):
    base, master, directory = server
    assert not (directory / "counter_99999.db").exists(), "the start did not clean the last run's files"
    pings(base, 59)  # and the one that saw the server up: 60
    sent = 60
    workers = workers_of(master)
    assert len(workers) == 2
    # On a loaded machine one worker may still be starting while the other serves them all:
    # pinged until both have served.
    give_up = time.monotonic() + 60
    while counting_workers(directory) != set(workers):
        assert time.monotonic() < give_up, "both workers should have served and counted"
        pings(base, 10)
        sent += 10

    # Whichever worker answers a scrape, it adds up both.
    for _ in range(4):
        assert scrape(base)[PING] == sent

    # A worker that dies keeps its counts (a total never goes back); its replacement adds its own.
    os.kill(workers[0], signal.SIGKILL)
    give_up = time.monotonic() + 30
    while len(set(workers_of(master)) - {workers[0]}) < 2:
        assert time.monotonic() < give_up, "gunicorn did not replace its worker"
        time.sleep(0.1)
    pings(base, 40)
    samples = scrape(base)
    assert samples[PING] == sent + 40
    scrapes = (("method", "GET"), ("route", "metrics"))
    assert samples[("flashsale_http_request_duration_seconds_count", scrapes)] >= 4
    assert samples[("flashsale_reservations_scrape_ok", ())] == 1


def test_without_a_directory_set_each_server_counts_under_var_in_one_of_its_port(monkeypatch, tmp_path):
    from importlib.util import module_from_spec, spec_from_file_location

    spec = spec_from_file_location("gunicorn_config", ROOT / "config" / "gunicorn.py")
    config = module_from_spec(spec)
    spec.loader.exec_module(config)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    assert config.metrics_directory(["127.0.0.1:8123"]) == tmp_path / "prometheus" / "8123"
    assert config.metrics_directory(["0.0.0.0:8000", "[::]:8000"]) == tmp_path / "prometheus" / "8000"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "chosen"))
    assert config.metrics_directory(["127.0.0.1:8123"]) == tmp_path / "chosen"
