"""/readyz/ray speaks to Ray as the job and state calls do (runs.cluster.ray_request): with the cluster's
token, so a production cluster with token authentication on reads as ready, and a missing token is named."""

import pytest

pytestmark = pytest.mark.django_db


def test_a_cluster_with_token_authentication_is_ready_when_the_platform_has_its_token(
        client, settings, local_ray_head, monkeypatch):
    settings.RAY_ADDRESS = local_ray_head.dashboard_url
    monkeypatch.setenv("RAY_AUTH_TOKEN", local_ray_head.auth_token)
    response = client.get("/readyz/ray")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["ray"]["detail"].startswith("job API answers (Ray 2.")


def test_a_missing_token_makes_ray_not_ready_and_says_which_variable_to_set(client, settings, local_ray_head,
                                                                            monkeypatch):
    settings.RAY_ADDRESS = local_ray_head.dashboard_url
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    response = client.get("/readyz/ray")
    assert response.status_code == 503
    assert "token missing" in response.json()["checks"]["ray"]["detail"]
    assert "RAY_AUTH_TOKEN" in response.json()["checks"]["ray"]["detail"]
