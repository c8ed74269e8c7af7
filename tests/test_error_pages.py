"""The pages a lost visitor meets: the 404 and 500 pages, and the favicon."""

from __future__ import annotations

import pytest
from django.template import loader
from django.test import Client
from django.urls import path

from config import urls as site_urls

pytestmark = pytest.mark.django_db


def assert_site_page_with_a_way_home(page: str) -> None:
    assert "/static/css/site.css" in page  # styled like every other page
    assert 'rel="icon"' in page
    assert 'href="/">Back to the sales</a>' in page


@pytest.mark.parametrize("path", ["/no-such-page", "/vouchers/999999/", "/pools/999999/"])
def test_a_missing_page_is_the_sites_404(path):
    response = Client().get(path)
    assert response.status_code == 404
    assert "404.html" in [template.name for template in response.templates]
    page = response.content.decode()
    assert "Page not found" in page
    assert_site_page_with_a_way_home(page)


def test_the_404_page_knows_the_visitor(make_user):
    client = Client()
    client.force_login(make_user("ann"))
    assert "Log out ann" in client.get("/no-such-page").content.decode()


def broken_page(request):
    raise RuntimeError("the database went away")


# The site's URLs and one page that fails, for the 500 test (pytest.mark.urls).
urlpatterns = [path("broken/", broken_page), *site_urls.urlpatterns]


@pytest.mark.urls(__name__)
def test_a_server_error_is_the_sites_500():
    response = Client(raise_request_exception=False).get("/broken/")
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong" in page
    assert "the database went away" not in page
    assert_site_page_with_a_way_home(page)


def test_the_500_page_renders_without_a_request_or_a_database(django_assert_num_queries):
    # Django's server_error renders it with an empty context and no request: it must not
    # need the user, the session or a context processor, any of which may be what failed.
    with django_assert_num_queries(0):
        page = loader.get_template("500.html").render()
    assert "Something went wrong" in page
    assert_site_page_with_a_way_home(page)


def test_favicon_ico_leads_to_the_svg_icon():
    response = Client().get("/favicon.ico", follow=True)
    assert response.redirect_chain == [("/static/img/favicon.svg", 302)]
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(response.streaming_content)
