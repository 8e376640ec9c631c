"""/readyz checks each dependency for real and, when one is down, says which and why (503);
/healthz stays a cheap liveness check."""

import pytest

from deploy.services import free_port

pytestmark = pytest.mark.django_db


def test_healthz_answers_while_the_database_does(client):
    assert client.get("/healthz").json() == {"status": "ok"}


def test_every_dependency_is_ready_when_the_services_run(client, settings, ray_head, lean_standin):
    settings.RAY_ADDRESS, settings.LEAN_SERVER_URL = ray_head.address, lean_standin.url
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "redis", "ray", "lean-server"}
    assert body["checks"]["ray"]["detail"].startswith("job API answers (Ray 2.")
    assert body["checks"]["lean-server"]["detail"] == "answers (stand-in)"


def test_a_dependency_that_is_down_makes_the_platform_not_ready_and_is_named(client, settings):
    settings.LEAN_SERVER_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    response = client.get("/readyz/lean-server")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "not ready"
    assert body["checks"]["lean-server"]["ok"] is False
    assert "ConnectError" in body["checks"]["lean-server"]["detail"]
    assert client.get("/readyz/database").status_code == 200


def test_an_unknown_dependency_is_a_404_that_lists_the_known_ones(client):
    response = client.get("/readyz/kafka")
    assert response.status_code == 404
    assert "database, redis, ray, lean-server" in response.json()["error"]
