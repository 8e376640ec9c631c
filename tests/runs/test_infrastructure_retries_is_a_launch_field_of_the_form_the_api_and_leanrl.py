"""``infrastructure_retries``, how many attempts the platform starts by itself after failures of the infrastructure,
is a launch field like the others: on the form (3 unless changed), in the API and its schema (so `leanrl runs
launch` reads it), bounded 0 to 10 with an error naming the field, and stored on the run."""

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_form_offers_it_with_3_and_stores_what_the_person_sets(alices_client, promptset_version, dispatched,
                                                                     django_capture_on_commit_callbacks):
    form = alices_client.get(reverse("runs:new")).context["form"]
    assert form.fields["infrastructure_retries"].initial == 3
    group = next(group for group in form.groups() if group["title"] == "When the infrastructure fails")
    assert [bound.name for bound, _ in group["fields"]] == ["infrastructure_retries"]
    with django_capture_on_commit_callbacks(execute=True):
        response = alices_client.post(reverse("runs:new"), {
            "name": "sturdy", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "rl",
            "infrastructure_retries": "5"})
    assert response.status_code == 302, response.context["form"].errors
    assert Run.objects.get().infrastructure_retries == 5


def test_the_api_defaults_it_to_3_and_shows_it_with_each_attempt(alices_client, promptset_version, dispatched):
    response = alices_client.post("/api/runs/", {"name": "plain", "promptset_version_id": promptset_version.pk,
                                                 "preset": "cpu-smoke"}, content_type="application/json")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert run.infrastructure_retries == 3
    detail = alices_client.get(f"/api/runs/{run.pk}").json()
    assert detail["infrastructure_retries"] == 3
    assert [attempt["number"] for attempt in detail["attempts"]] == [1]


@pytest.mark.parametrize("retries", [-1, 11])
def test_outside_0_to_10_is_an_error_on_the_field_and_nothing_is_stored(alices_client, promptset_version, dispatched,
                                                                        retries):
    response = alices_client.post("/api/runs/", {"name": "greedy", "promptset_version_id": promptset_version.pk,
                                                 "preset": "cpu-smoke", "infrastructure_retries": retries},
                                  content_type="application/json")
    assert response.status_code == 422, response.content
    errors = response.json()["field_errors"]["infrastructure_retries"]
    assert f"(got {retries})" in errors[0]
    assert not Run.objects.exists()


def test_leanrl_reads_it_from_the_schema_the_server_publishes():
    import httpx

    from config.api import api
    from leanrl.client import PlatformClient

    published = api.get_openapi_schema()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=published))  # the server's own schema
    field = PlatformClient("http://platform.test", "token", transport=transport).body_fields(
        "runs_api_launch_run")["infrastructure_retries"]
    assert (field["type"], field["minimum"], field["maximum"], field["default"]) == ("integer", 0, 10, 3)
    assert "a failure of the run's own code is never retried" in field["description"]
