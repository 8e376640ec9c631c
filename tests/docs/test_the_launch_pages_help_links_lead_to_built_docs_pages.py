"""The platform links its pages' help to the docs site, which it serves itself under /docs/ from the built
site: every help link of the launch page (and the top bar's) opens a built page, at an anchor it has."""

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def docs_links(page: str) -> list[str]:
    return re.findall(r'href="(/docs/[^"]*)"', page)


def test_each_help_link_of_the_launch_page_opens_a_built_page_at_its_anchor(alices_client, built_site, settings):
    settings.DOCS_SITE_DIR = built_site
    page = alices_client.get(reverse("runs:new")).content.decode()
    links = docs_links(page)
    assert "/docs/guide/launching.html#the-launch-contract" in links
    assert "/docs/" in links  # the top bar's "Docs"
    for link in links:
        path, _, anchor = link.partition("#")
        response = alices_client.get(path)
        assert response.status_code == 200, link
        body = b"".join(response.streaming_content).decode()
        assert "<title>" in body, link
        if anchor:
            assert f'id="{anchor}"' in body, link


def test_the_docs_are_served_to_a_visitor_who_has_not_logged_in(client, built_site, settings):
    settings.DOCS_SITE_DIR = built_site
    response = client.get("/docs/guide/promptsets.html")
    assert response.status_code == 200


def test_a_server_without_the_built_site_says_how_to_build_it(client, tmp_path, settings):
    settings.DOCS_SITE_DIR = tmp_path / "not-built"
    settings.DEBUG = True  # the 404 page then shows the reason
    response = client.get("/docs/")
    assert response.status_code == 404
    assert "make docs" in response.content.decode()


def test_no_path_leaves_the_built_site(client, built_site, settings):
    settings.DOCS_SITE_DIR = built_site / "guide"
    assert client.get("/docs/../index.html").status_code == 404
    assert client.get("/docs/%2e%2e/index.html").status_code == 404
