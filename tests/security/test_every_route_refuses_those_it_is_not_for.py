"""Every route, generated from the URL conf and the ninja router, as a stranger, an anonymous visitor,
a read-only token and an expired token: each gets the right refusal and learns nothing of alice's."""

import pytest
from django.contrib import admin
from django.urls import reverse

from accounts.models import TokenScope
from tests.security.conftest import SECRET_PROMPTSET_NAME, SECRET_RUN_NAME, bearer
from tests.security.routes import PUBLIC, all_routes, private_routes

pytestmark = pytest.mark.django_db


def request(client, method, url, **extra):
    if method == "GET":
        return client.get(url, **extra)
    return client.generic(method, url, data="{}", content_type="application/json", **extra)


def test_the_walk_covers_every_kind_of_route():
    patterns = {route.pattern for route in all_routes()}
    assert {"runs/<int:pk>/", "api/runs/<run_id>", "api/proofs/attempts/<attempt_id>/code",
            "promptsets/<int:pk>/problems/<int:problem_pk>/"} <= patterns
    assert len(patterns) >= 35


def test_a_stranger_gets_404_from_every_route_that_names_alices_things(client, world, charlie):
    client.force_login(charlie)
    for route in private_routes():
        if not route.names_an_object:
            continue
        statuses = {method: request(client, method, route.url(world)).status_code for method in route.methods}
        # 405 (wrong method) is the same for every id, so it tells nothing; anything else must be 404.
        assert set(statuses.values()) <= {404, 405} and 404 in statuses.values(), (route.pattern, statuses)


def test_a_stranger_sees_nothing_of_alices_on_the_routes_that_name_nothing(client, world, charlie):
    client.force_login(charlie)
    for route in private_routes():
        if route.names_an_object or "GET" not in route.methods:
            continue
        response = client.get(route.url(world))
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert response.status_code < 500, route.pattern
        assert SECRET_RUN_NAME.encode() not in body and SECRET_PROMPTSET_NAME.encode() not in body, route.pattern


def test_an_anonymous_visitor_is_sent_to_the_login_page_or_gets_401(client, world):
    for route in private_routes():
        for method in route.methods:
            response = request(client, method, route.url(world))
            if route.is_api:
                assert response.status_code == 401, (route.pattern, method, response.status_code)
            else:
                assert response.status_code in (302, 405), (route.pattern, method, response.status_code)
                if response.status_code == 302:
                    assert response.url.startswith(reverse("login")), (route.pattern, response.url)


def test_the_public_routes_are_the_ones_listed_with_a_reason():
    assert set(PUBLIC) <= {route.pattern for route in all_routes()}


def test_an_expired_token_is_refused_everywhere_with_401(client, world, alice, token_of):
    raw = token_of(alice, TokenScope.LAUNCH, expired=True)
    for route in all_routes():
        if not route.is_api:
            continue
        for method in route.methods:
            response = request(client, method, route.url(world), **bearer(raw))
            assert response.status_code == 401, (route.pattern, method, response.status_code)


def test_a_read_only_token_reads_its_owners_things_and_changes_nothing(client, world, alice, token_of):
    raw = token_of(alice, TokenScope.READ)
    for route in all_routes():
        if not route.is_api:
            continue
        for method in route.methods:
            response = request(client, method, route.url(world), **bearer(raw))
            if method == "GET":
                assert response.status_code == 200, (route.pattern, response.status_code, response.content[:200])
            else:
                assert response.status_code == 403, (route.pattern, method, response.status_code)
                assert "read-only" in response.json()["detail"]
    world["run"].refresh_from_db()
    assert world["run"].state == "running"


def test_a_strangers_tokens_get_404_or_403_and_never_alices_things(client, world, charlie, token_of):
    read_only, launch = token_of(charlie, TokenScope.READ), token_of(charlie, TokenScope.LAUNCH)
    for route in all_routes():
        if not (route.is_api and route.names_an_object):
            continue
        for method in route.methods:
            assert request(client, method, route.url(world), **bearer(launch)).status_code == 404, (route.pattern, method)
            expected = 404 if method == "GET" else 403
            assert request(client, method, route.url(world), **bearer(read_only)).status_code == expected, route.pattern


def test_the_admin_is_for_staff_only(client, world, charlie):
    client.force_login(charlie)
    urls = [reverse("admin:index")]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls += [reverse("admin:%s_%s_changelist" % info), reverse("admin:%s_%s_change" % info, args=[1])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(reverse("admin:login")), url


def test_the_api_schema_is_read_with_a_login_or_a_token_and_a_bad_token_gets_401(client, alice, token_of):
    assert client.get("/api/openapi.json").status_code == 302
    assert client.get("/api/openapi.json", **bearer("lrl_wrong")).status_code == 401
    assert client.get("/api/openapi.json", **bearer(token_of(alice, expired=True))).status_code == 401
    assert client.get("/api/openapi.json", **bearer(token_of(alice))).json()["info"]["title"] == "Lean RL platform"
