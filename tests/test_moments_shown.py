"""Every moment a page shows is written the one way, with its zone (``core.moments``): the lab
run's parameters, the admin's order page and the full report had none."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib import admin
from django.db import models
from django.urls import reverse
from django.utils import timezone

from accounts.models import ApiToken
from accounts.services import token_issue
from core.moments import moment_text
from loadtests.report import render_report
from orders.services import order_purchase
from tests.lab.fakeruns import fake_run

pytestmark = pytest.mark.django_db


def test_a_lab_runs_parameters_give_its_start_and_end_with_their_zone(client, make_user):
    staff = make_user("lab-staff", staff=True)
    run = fake_run(staff, strategies=["none"], finished_ago=timedelta(minutes=5))
    client.force_login(staff)
    page = client.get(reverse("lab:run", args=[run.pk])).content.decode()
    for moment in (run.started_at, run.finished_at):
        assert f'<time datetime="{moment.isoformat()}">{moment_text(moment)}</time>' in page


def test_the_admins_order_page_gives_its_creation_with_its_zone(admin_client_, make_user, make_voucher):
    order = order_purchase(user=make_user("ana"), voucher=make_voucher())
    page = admin_client_.get(reverse("admin:orders_order_change", args=[order.pk])).content.decode()
    assert moment_text(order.created_at) in page


def test_the_full_report_gives_the_runs_start_with_its_zone():
    started = timezone.now() - timedelta(hours=3)
    html = render_report([], {"when": started.isoformat(timespec="seconds")})
    assert f"when: {moment_text(started)}" in html


ROOT = Path(__file__).resolve().parent.parent
# A moment a template prints: a variable named as the models name their moments.
PRINTED_MOMENT = re.compile(r"{{\s*([\w.]*(?:_at|hold_until|_by))\s*(\|[^}]*)?}}")


def test_no_template_prints_a_moment_but_through_the_one_format():
    """The admin's and Django's own formats ("Nov. 23, 2026, 11:31 a.m.", no zone) stay out of
    the pages: a moment is printed with ``|moment``, or given to a script as ISO 8601."""
    raw = []
    for template in sorted((ROOT / "templates").rglob("*.html")):
        for name, filters in PRINTED_MOMENT.findall(template.read_text()):
            if "moment" not in re.findall(r"\|\s*(\w+)", filters):
                raw.append(f"{template.relative_to(ROOT)}: {{{{ {name}{filters} }}}}")
    assert not raw, "\n".join(raw)


def test_no_admin_of_the_project_shows_a_moment_in_the_admins_own_format():
    """Each moment column or read-only field is a display method writing ``core.moments``
    (``core.admin.CreatedColumn``): the token admin once showed its moments as Django does."""
    raw = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label in {"auth", "admin", "contenttypes", "sessions"}:
            continue  # Django's own pages (users, groups), whose dates Django writes
        moments = {f.name for f in model._meta.get_fields() if isinstance(f, models.DateTimeField)}
        shown = {*model_admin.list_display, *model_admin.readonly_fields}
        raw += [f"{model.__name__}: {name}" for name in sorted(moments & shown)]
    assert not raw, raw


def test_the_token_admin_gives_its_moments_with_their_zone(admin_client_, make_user):
    token_issue(user=make_user("ana"))
    token = ApiToken.objects.get(user__username="ana")
    page = admin_client_.get(reverse("admin:accounts_apitoken_changelist")).content.decode()
    assert moment_text(token.created_at) in page and moment_text(token.expires_at) in page
