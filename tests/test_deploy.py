"""The production settings and the compose file, checked the way CI can check them."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def production_env(**overrides: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_URL", "REDIS_URL", "PYTEST"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="sale.example.com",
        DATABASE_URL="mysql://root:@127.0.0.1:3306/test",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    env.update(overrides)
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_under_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_refuse_to_start_without_a_secret_key():
    result = manage("check", env=production_env(DJANGO_SECRET_KEY=""))
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    assert legacy, "neither 'docker compose' nor 'docker-compose' is installed (make test installs docker-compose)"
    return [legacy]


@pytest.fixture(scope="module")
def compose() -> dict:
    result = subprocess.run(
        [*compose_command(), "-f", str(ROOT / "docker-compose.yml"), "config"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_runs_mysql_redis_migrations_two_web_replicas_and_nginx(compose):
    services = compose["services"]
    assert {"mysql", "redis", "migrate", "web", "nginx"} <= set(services)
    assert services["mysql"]["image"].startswith("mysql:8")
    assert services["web"]["deploy"]["replicas"] == 2
    assert "gunicorn" in services["web"]["command"]
    assert services["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["migrate"]["depends_on"]["mysql"]["condition"] == "service_healthy"
    assert services["nginx"]["depends_on"]["web"]["condition"] == "service_healthy"
    for name in ("mysql", "redis", "web", "nginx"):
        assert services[name]["healthcheck"]["test"], name
    assert services["web"]["environment"]["DATABASE_URL"].startswith("mysql://")


def mounts(service: dict) -> set[tuple[str, str]]:
    """(volume, path) of a service: ``docker compose config`` writes mappings, docker-compose v1 strings."""
    return {(v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2]) for v in service["volumes"]}


def test_compose_runs_the_race_labs_celery_worker_beside_the_web_and_shares_its_reports(compose):
    services = compose["services"]
    worker = services["worker"]
    assert worker["command"][:4] == ["celery", "-A", "config", "worker"]
    assert worker["environment"]["DATABASE_URL"] == services["web"]["environment"]["DATABASE_URL"]
    assert worker["environment"]["LAB_TARGET_URL"] == "http://nginx"
    # The worker writes a run's report and the web serves it: the same volume at the same path.
    assert mounts(worker) <= mounts(services["web"])
    assert worker["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_runs_celery_beat_and_a_worker_that_takes_the_lab_and_the_drains(compose):
    """A lab run holds a worker process for minutes: the worker takes both queues with a
    process to spare for redis_lua's drains, and one beat sends the sweeps."""
    services = compose["services"]
    worker, beat = services["worker"]["command"], services["beat"]["command"]
    assert worker[worker.index("-Q") + 1] == "celery,lab"
    assert int(worker[worker.index("--concurrency") + 1]) >= 2
    assert beat[:4] == ["celery", "-A", "config", "beat"]
    assert "replicas" not in services["beat"].get("deploy", {})
    assert services["beat"]["environment"]["REDIS_URL"] == services["web"]["environment"]["REDIS_URL"]


def test_compose_redis_keeps_reservations_it_has_not_persisted(compose):
    """redis_lua's stock and waiting reservations live in Redis: never evicted, and written
    to the append-only file so that a restart keeps them."""
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(target == "/data" for _, target in mounts(compose["services"]["redis"]))


def test_compose_runs_locust_master_and_workers_on_the_repository_locustfiles(compose):
    services = compose["services"]
    assert "--master" in services["locust-master"]["command"]
    assert "--worker" in services["locust-worker"]["command"]
    for name in ("locust-master", "locust-worker"):
        assert any("loadtests/locustfiles/" in part for part in services[name]["command"])
    assert (ROOT / "loadtests" / "locustfiles" / "crowd.py").exists()
