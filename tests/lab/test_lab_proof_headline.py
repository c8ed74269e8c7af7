"""The proof page's opening sentence, built from the run it shows, and its glossary."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from inventory.strategies import strategy_names
from inventory.texts import TEXTS
from tests.lab.fakeruns import OVERSOLD, fake_run

pytestmark = pytest.mark.django_db


def opening(client) -> str:
    page = client.get(reverse("lab:proof")).content.decode()
    found = re.search(r'<p class="headline" data-testid="headline">(.*?)</p>', page)
    assert found, "no opening sentence"
    assert page.index('data-testid="headline"') < page.index('class="lede"')
    return found.group(1)


def test_the_proof_opens_with_what_the_unsafe_and_the_safe_strategies_took(client, make_user):
    run = fake_run(make_user(staff=True))
    assert opening(client) == (
        f"Without a working guard, {100 + OVERSOLD} orders were taken for 100 units; "
        "with every safe strategy, exactly 100."
    )
    # The numbers are the run's: the worst unsafe lane's take, and the safe lanes' as they are.
    run.lanes.filter(strategy="none").update(taken=173)
    run.lanes.filter(strategy="local").update(taken=151)
    run.lanes.filter(strategy="db_optimistic").update(taken=97)
    assert opening(client) == (
        "Without a working guard, 173 orders were taken for 100 units; with the safe strategies, 97 to 100."
    )


def test_a_prize_draw_alone_is_told_in_draws_and_prizes(client, make_user):
    fake_run(make_user(staff=True), product="pool", scenario="draw-crowd")
    assert opening(client) == (
        f"Without a working guard, draws won {100 + OVERSOLD} prizes from a pool of 100; "
        "with every safe strategy, exactly 100."
    )


def test_a_run_of_safe_strategies_only_says_what_they_took(client, make_user):
    staff = make_user(staff=True)
    run = fake_run(staff, strategies=["db_atomic", "redis_lua"], duration=3)
    client.force_login(make_user(staff=True, permissions=("lab.change_labrun",)))
    assert client.post(reverse("lab:run_publish", args=[run.pk])).status_code == 302
    client.logout()
    assert opening(client) == "With every safe strategy, exactly 100 orders were taken for 100 units."


def test_without_a_run_the_proof_renders_without_a_sentence_and_with_its_glossary(client):
    response = client.get(reverse("lab:proof"))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="headline"' not in page
    start = page.index('data-testid="glossary"')
    glossary = page[start : page.index("</section>", start)]
    for name in strategy_names():
        assert f"<dt><code>{name}</code></dt><dd>{escape(TEXTS[name].explanation)}</dd>" in glossary
    for term in ("holds", "broke as expected", "after the take", "not tried"):
        assert f"<dt>{term}</dt>" in glossary
