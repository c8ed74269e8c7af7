"""Security headers on every answer: a Content-Security-Policy (core.csp), nosniff, a
Referrer-Policy and X-Frame-Options DENY, on a page, an API answer and the admin's login,
under the local and the production settings; and in a real browser, nothing the pages, the
admin or /api/docs need is blocked by the policy."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
PATHS = ["/", "/api/vouchers", "/admin/login/", "/no-such-page/", "/api/no-such-call"]


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        if part.strip():
            name, *values = part.split()
            parsed[name] = values
    return parsed


def assert_strict(headers) -> None:
    policy = directives(headers["Content-Security-Policy"])
    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]  # no inline script, no eval
    assert policy["style-src"] == ["'self'"]  # no inline style
    assert policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'self'"]
    assert policy["form-action"] == ["'self'"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
@pytest.mark.parametrize("path", PATHS)
def test_every_answer_carries_the_policy_and_the_other_headers(path):
    response = Client().get(path)
    assert response.status_code in (200, 404), response.status_code
    assert_strict(response.headers)


@pytest.mark.django_db
def test_a_refused_api_call_and_a_write_carry_them_too(api_client):
    assert_strict(api_client().post("/api/vouchers/999999/purchase").headers)
    assert_strict(Client().post("/api/auth/login", data="{}", content_type="application/json").headers)


@pytest.mark.django_db
def test_the_api_docs_get_only_what_swagger_ui_needs():
    """Swagger UI (served by ninja from our static files) draws icons from data: URIs; scripts
    and styles stay 'self' only."""
    response = Client().get("/api/docs")
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert response["X-Frame-Options"] == "DENY"


def test_the_production_settings_send_the_same_headers():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST"))}
    env.update(
        DJANGO_SETTINGS_MODULE="config.settings.production",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64),
        DJANGO_ALLOWED_HOSTS="sale.example.com",
        DATABASE_URL=os.environ.get("DATABASE_URL", "mysql://root:@127.0.0.1:3306/test"),
        TRUSTED_PROXIES="127.0.0.1",
    )
    code = (
        "import json; from django.test import Client; "
        "r = Client().get('/api/ping', secure=True, HTTP_HOST='sale.example.com'); "
        "print(json.dumps({'status': r.status_code, **dict(r.headers)}))"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    headers = json.loads(result.stdout.strip().splitlines()[-1])
    assert headers["status"] == 200
    assert_strict(headers)
    assert "max-age=" in headers["Strict-Transport-Security"]


def test_no_template_has_an_inline_script_style_or_event_handler():
    """What the policy would block: inline <script>, <style>, style="" and on...="" in our templates."""
    import re

    pattern = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)|<style|\sstyle=|\son[a-z]+=", re.I)
    found = [
        f"{path.relative_to(ROOT)}: {match.group(0)!r}"
        for path in (ROOT / "templates").rglob("*.html")
        for match in pattern.finditer(path.read_text())
    ]
    assert not found, found


@pytest.mark.django_db
def test_a_lab_reports_own_policy_lets_its_inline_stylesheet_and_nothing_else(client, make_user, settings, tmp_path):
    """The load-test report is a file with its stylesheet inline and no script."""
    from django.urls import reverse

    from lab.execute import lab_dir
    from lab.models import LabRun

    settings.VAR_DIR = tmp_path
    staff = make_user(staff=True)
    run = LabRun.objects.create(
        product="voucher", scenario="crowd", stock=5, crowd=50, users=5, duration=3, target_url="http://x",
        status=LabRun.Status.DONE, created_by=staff, folder="csp-report",
    )  # fmt: skip
    lab_dir(run).mkdir(parents=True)
    (lab_dir(run) / "report.html").write_text("<style>body { color: #000 }</style><h1>Verdict</h1>")
    client.force_login(staff)
    response = client.get(reverse("lab:run_report", args=[run.pk]))
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert policy["default-src"] == ["'none'"]
    assert policy["script-src"] == ["'none'"]
    assert policy["style-src"] == ["'unsafe-inline'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert response["X-Frame-Options"] == "DENY"
