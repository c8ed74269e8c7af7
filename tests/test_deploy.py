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
        TRUSTED_PROXIES="127.0.0.1",
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


def test_a_rotations_old_keys_are_read_from_the_environment_each_of_50_characters_or_more():
    """docs/operations.md told operators that a rotation keeps tokens working through
    SECRET_KEY_FALLBACKS, which nothing in the environment could set."""
    old = [secrets.token_urlsafe(64) for _ in range(2)]
    show = (
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(','.join(settings.SECRET_KEY_FALLBACKS))",
    )
    result = manage(*show, env=production_env(DJANGO_SECRET_KEY_FALLBACKS=f"{old[0]}, {old[1]}"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ",".join(old)
    assert manage(*show, env=production_env()).stdout.strip() == ""
    result = manage("check", env=production_env(DJANGO_SECRET_KEY_FALLBACKS=f"{old[0]},short"))
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY_FALLBACKS" in result.stderr


def test_production_refuses_to_redirect_to_https_with_no_proxy_to_believe():
    """X-Forwarded-Proto is believed from a trusted proxy alone: with none named and the
    redirect on, every request read as plain HTTP and was sent to HTTPS for ever."""
    result = manage("check", env=production_env(TRUSTED_PROXIES=""))
    assert result.returncode != 0
    assert "TRUSTED_PROXIES" in result.stderr
    assert manage("check", env=production_env(TRUSTED_PROXIES="", DJANGO_SECURE_SSL_REDIRECT="false")).returncode == 0


def test_production_allows_no_test_host_by_default():
    env = production_env()
    del env["DJANGO_ALLOWED_HOSTS"]
    result = manage("shell", "-c", "from django.conf import settings; print(settings.ALLOWED_HOSTS)", env=env)
    assert result.returncode == 0, result.stderr
    assert "testserver" not in result.stdout and "127.0.0.1" in result.stdout


def compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    assert legacy, "neither 'docker compose' nor 'docker-compose' is installed (make test installs docker-compose)"
    return [legacy]


COMPOSE_SECRET = secrets.token_urlsafe(64)
COMPOSE_SECRETS = {"DJANGO_SECRET_KEY": COMPOSE_SECRET, "GRAFANA_ADMIN_PASSWORD": secrets.token_urlsafe(16)}


def compose_config(*profiles: str, **env: str) -> subprocess.CompletedProcess:
    """``config`` of the compose file with the environment given here and nothing the
    developer happens to have exported that the file reads; every service, those of the load
    tests' and the Redis Cluster's profiles included, unless ``profiles`` names others."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in COMPOSE_SECRETS
        and not k.startswith(("DJANGO_", "BIND_", "LOCUST_", "RESERVATIONS_", "REDIS_MAXMEMORY"))
    }
    chosen = [part for profile in profiles or ("loadtest", "cluster") for part in ("--profile", profile)]
    return subprocess.run(
        [*compose_command(), "-f", str(ROOT / "docker-compose.yml"), *chosen, "config"],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def compose() -> dict:
    result = compose_config(**COMPOSE_SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


@pytest.mark.parametrize("name", sorted(COMPOSE_SECRETS))
def test_compose_needs_each_secret_from_the_environment(name):
    """No fallback key or password in the file: a stack started without one refuses to start,
    saying which."""
    result = compose_config(**{key: value for key, value in COMPOSE_SECRETS.items() if key != name})
    assert result.returncode != 0
    assert f"set {name}" in result.stderr
    assert f"{name}:-" not in (ROOT / "docker-compose.yml").read_text()


def test_compose_runs_every_django_service_with_the_environments_secret_key(compose):
    for name, service in compose["services"].items():
        environment = service.get("environment") or {}
        if "DJANGO_SETTINGS_MODULE" in environment:
            assert environment["DJANGO_SETTINGS_MODULE"] == "config.settings.production", name
            assert environment["DJANGO_SECRET_KEY"] == COMPOSE_SECRET, name


def published(compose: dict) -> dict[str, list[tuple[str, str]]]:
    """(host address, host port) of each service's published ports: ``docker compose config``
    writes mappings, docker-compose v1 strings or mappings."""
    found = {}
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                address, host_port = port.get("host_ip", ""), str(port.get("published", ""))
            else:
                parts = str(port).split("/")[0].split(":")
                address, host_port = (parts[0], parts[1]) if len(parts) == 3 else ("", parts[0])
            found.setdefault(name, []).append((address, host_port))
    return found


def test_compose_publishes_its_ports_on_the_loopback_only(compose):
    ports = published(compose)
    assert ("127.0.0.1", "8080") in ports["nginx"]
    assert ("127.0.0.1", "8089") in ports["locust-master"]
    for name, bindings in ports.items():
        for address, port in bindings:
            assert address == "127.0.0.1", f"{name} publishes {port} on every interface"


def test_compose_publishes_the_site_on_another_address_when_told():
    result = compose_config(**COMPOSE_SECRETS, BIND_ADDRESS="0.0.0.0")
    assert result.returncode == 0, result.stderr
    ports = published(yaml.safe_load(result.stdout))
    assert ("0.0.0.0", "8080") in ports["nginx"]
    assert ("127.0.0.1", "8089") in ports["locust-master"]  # the load tests' UI stays on the loopback


def test_compose_publishes_the_locust_ui_on_its_own_bind_address():
    result = compose_config(**COMPOSE_SECRETS, LOCUST_BIND_ADDRESS="0.0.0.0")
    assert result.returncode == 0, result.stderr
    ports = published(yaml.safe_load(result.stdout))
    assert ("0.0.0.0", "8089") in ports["locust-master"] and ("127.0.0.1", "8080") in ports["nginx"]


def test_compose_runs_locust_only_when_asked_and_behind_a_login(compose):
    services = compose["services"]
    for name in ("locust-master", "locust-worker"):
        assert services[name]["profiles"] == ["loadtest"], name  # off by default
    master = services["locust-master"]
    assert "--web-login" in master["command"]
    assert any("loadtests/web_login.py" in part for part in master["command"])
    assert not master["environment"]["LOCUST_WEB_PASSWORD"]  # no default: it refuses to start without one


def test_compose_creates_no_login_with_a_known_password(compose):
    """The demo's buyer and staff passwords are in the README: the stack seeds the demo's sales
    without them, and makes no superuser; docs/operations.md says how to create one."""
    for name, service in compose["services"].items():
        command = " ".join(service.get("command") or [])
        if "seed_demo" in command:
            assert "seed_demo --no-logins" in command, name
        assert "createsuperuser" not in command, name
        assert not {"DJANGO_SUPERUSER_PASSWORD", "DJANGO_SUPERUSER_USERNAME"} & set(service.get("environment") or {})
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "docker compose run --rm web python manage.py createsuperuser" in operations


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
    # A worker whose broker restarted may exit rather than reconnect: it is started again.
    assert {services[name]["restart"] for name in ("web", "worker", "beat")} == {"unless-stopped"}


def test_compose_redis_keeps_reservations_it_has_not_persisted(compose):
    """redis_lua's stock and waiting reservations live in Redis: never evicted, and written
    to the append-only file so that a restart keeps them."""
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--maxmemory-policy") + 1] == "noeviction"
    assert command[command.index("--appendonly") + 1] == "yes"
    assert any(target == "/data" for _, target in mounts(compose["services"]["redis"]))


def test_compose_redis_refuses_writes_at_a_bound_rather_than_grow_until_the_host_kills_it():
    """A maxmemory with noeviction: full, writes are refused (503) and nothing is evicted;
    without one, Redis grows until the kernel kills it. REDIS_MAXMEMORY sets the bound."""
    nodes = ["redis", *(f"redis-node-{n}" for n in range(1, 7))]
    for env, bound in (({}, "1gb"), ({"REDIS_MAXMEMORY": "256mb"}, "256mb")):
        result = compose_config(**COMPOSE_SECRETS, **env)
        assert result.returncode == 0, result.stderr
        services = yaml.safe_load(result.stdout)["services"]
        for name in nodes:
            command = services[name]["command"]
            assert command[command.index("--maxmemory") + 1] == bound, name
            assert command[command.index("--maxmemory-policy") + 1] == "noeviction", name


def test_compose_runs_locust_master_and_workers_on_the_repository_locustfiles(compose):
    services = compose["services"]
    assert "--master" in services["locust-master"]["command"]
    assert "--worker" in services["locust-worker"]["command"]
    for name in ("locust-master", "locust-worker"):
        assert any("loadtests/locustfiles/" in part for part in services[name]["command"])
    assert (ROOT / "loadtests" / "locustfiles" / "crowd.py").exists()


def test_compose_gives_the_worker_a_process_for_a_lab_run_beside_those_a_load_runs_worker_has(compose):
    """As ``make run``'s worker: a lab run holds one process, and the holds' releases, the
    drains and the callbacks have as many beside it as a load run's worker, so that two
    releases of one hold can meet in the lab as in ``make loadtest``."""
    from harness.server import WORKER_PROCESSES

    command = compose["services"]["worker"]["command"]
    assert command[command.index("--concurrency") + 1] == str(WORKER_PROCESSES + 1), command


def test_compose_runs_a_redis_cluster_with_replicas_only_when_asked(compose):
    """The "cluster" profile: six nodes that a one-shot service makes three masters with a
    replica each; the app keeps its reservations on plain `redis` unless told otherwise."""
    services = compose["services"]
    nodes = [f"redis-node-{n}" for n in range(1, 7)]
    for name in [*nodes, "redis-cluster"]:
        assert services[name]["profiles"] == ["cluster"], name
    for name in nodes:
        command = services[name]["command"]
        assert command[command.index("--cluster-enabled") + 1] == "yes", name
        assert command[command.index("--maxmemory-policy") + 1] == "noeviction", name
        assert command[command.index("--appendonly") + 1] == "yes", name
    assert len({next(iter(mounts(services[name]))) for name in nodes}) == 6  # a volume each
    create = " ".join(services["redis-cluster"]["command"])
    assert "--cluster create" in create and "--cluster-replicas 1" in create
    assert set(services["redis-cluster"]["depends_on"]) == set(nodes)
    web = services["web"]["environment"]
    assert (web["RESERVATIONS_REDIS_CLUSTER"], web["RESERVATIONS_REDIS_URL"]) == ("false", web["REDIS_URL"])


def test_compose_uses_the_cluster_when_told():
    nodes = "redis://redis-node-1:6379,redis://redis-node-2:6379,redis://redis-node-3:6379"
    told = {"RESERVATIONS_REDIS_CLUSTER": "1", "RESERVATIONS_REDIS_URL": nodes, "RESERVATIONS_WAIT_REPLICAS": "1"}
    result = compose_config("cluster", **COMPOSE_SECRETS, **told)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    for name in ("web", "worker", "beat"):
        environment = services[name]["environment"]
        assert {key: environment[key] for key in told} == told, name
