"""The metrics' deployment, checked the way CI can check it: every place that starts gunicorn
uses config/gunicorn.py, the compose file runs Prometheus and Grafana on the loopback only,
nginx keeps /metrics from the outside, and every series the dashboard asks for is one the
application serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.test import Client

from tests.test_deploy import COMPOSE_SECRETS, compose_config

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict:
    result = compose_config(**COMPOSE_SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def published(service: dict) -> list[str]:
    """Host addresses of a service's ports: ``docker compose config`` writes mappings, v1 strings."""
    return [port["host_ip"] if isinstance(port, dict) else port.split(":")[0] for port in service.get("ports", [])]


def test_every_place_that_starts_gunicorn_uses_its_configuration(compose):
    command = compose["services"]["web"]["command"]
    assert command[command.index("--config") + 1] == "config/gunicorn.py"
    assert '"--config", "config/gunicorn.py"' in (ROOT / "Dockerfile").read_text()
    for starter in ("scripts/serve.py", "harness/server.py"):
        text = (ROOT / starter).read_text()
        assert '"gunicorn.py"' in text and '"--config"' in text, starter


def test_prometheus_and_grafana_listen_on_the_loopback_only(compose):
    services = compose["services"]
    for name in ("prometheus", "grafana"):
        assert published(services[name]) and set(published(services[name])) == {"127.0.0.1"}, name
    scrape = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["scrape_configs"][0]
    assert scrape["metrics_path"] == "/metrics"
    assert scrape["dns_sd_configs"][0]["names"] == ["web"] and scrape["dns_sd_configs"][0]["port"] == 8000
    sources = {(v["source"], v["target"]) if isinstance(v, dict) else tuple(v.split(":")[:2])
               for v in services["grafana"]["volumes"]}  # fmt: skip
    assert (str(ROOT / "deploy" / "grafana" / "dashboards"), "/var/lib/grafana/dashboards") in sources


def test_prometheus_scrapes_the_workers_own_metrics_where_the_worker_serves_them(compose):
    worker = compose["services"]["worker"]["environment"]
    assert worker["PROMETHEUS_MULTIPROC_DIR"] and worker["DJANGO_SECRET_KEY"]  # the app's settings, and its own
    scrapes = {
        s["job_name"]: s for s in yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())["scrape_configs"]
    }
    found = scrapes["flashsale-worker"]["dns_sd_configs"][0]
    assert found["names"] == ["worker"] and found["port"] == int(worker["CELERY_METRICS_PORT"])
    assert not compose["services"]["worker"].get("ports"), "the worker's metrics stay on the compose network"


def test_nginx_answers_nothing_at_metrics():
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert re.search(r"location = /metrics \{\s*return 404;", conf)


@pytest.mark.django_db
def test_every_series_the_dashboard_asks_for_is_served():
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "flashsale.json").read_text())
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"flashsale_[a-z_]+", target["expr"])
    }
    assert len(asked) >= 10
    served = Client().get("/metrics").content.decode()
    # A family shows once a process has counted it; its HELP line is there from the start.
    helped = set(re.findall(r"^# HELP (flashsale_[a-z_]+)", served, re.MULTILINE))
    bases = {re.sub(r"_(bucket|count|sum|total)$", "", name) for name in helped} | helped
    missing = {name for name in asked if name not in helped and re.sub(r"_(bucket|count|sum)$", "", name) not in bases}
    assert not missing, missing
    datasource = yaml.safe_load((ROOT / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())
    uids = {panel["datasource"]["uid"] for panel in dashboard["panels"] if "datasource" in panel}
    assert uids == {datasource["datasources"][0]["uid"]}
