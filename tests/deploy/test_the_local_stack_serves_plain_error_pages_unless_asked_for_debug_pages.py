"""``make run`` serves what production serves on an unknown address, a plain 404 page, and never Django's debug
page (which lists every route, settings and source); ``--debug`` asks for the debug pages. Both ways the pages'
static files are served and the local host names are allowed.

The stack's own web process is started here (uvicorn on the ASGI app, with the stack's environment); an unknown
address and a static file touch no database, so nothing else of the stack is needed."""

from __future__ import annotations

import httpx
import pytest

from deploy.services import free_port
from deploy.stack import Stack, parse_args

DJANGO_DEBUG_404 = "Using the URLconf defined in"


@pytest.fixture
def start_web(tmp_path):
    started = []

    def start(*args: str) -> str:
        port = free_port()
        stack = Stack(parse_args(["--web-port", str(port), "--data-dir", str(tmp_path), *args]))
        stack.web.start()
        started.append(stack.web)
        return f"http://127.0.0.1:{port}"

    yield start
    for web in started:
        web.stop()


def test_an_unknown_address_gets_a_plain_404_page_by_default(start_web):
    url = start_web()
    response = httpx.get(f"{url}/no/such/page/")
    assert response.status_code == 404
    assert "Page not found" in response.text and "/no/such/page/" in response.text
    assert DJANGO_DEBUG_404 not in response.text and "promptsets/&lt;int:pk&gt;" not in response.text
    assert httpx.get(f"{url}/static/app.css").status_code == 200  # static files do not depend on DEBUG here


def test_debug_pages_are_served_only_when_asked_for(start_web):
    url = start_web("--debug")
    response = httpx.get(f"{url}/no/such/page/")
    assert response.status_code == 404 and DJANGO_DEBUG_404 in response.text
    assert httpx.get(f"{url}/static/app.css").status_code == 200
