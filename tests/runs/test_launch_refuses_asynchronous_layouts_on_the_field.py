"""The form and the API refuse an asynchronous run that cannot run, on the field to change, saying why.

η (``max_staleness``) and the rollout pool (``rollout_gpus``) are launch fields, bounded per preset
by trainer/staleness.py; which combinations may run is the trainer's launch check's
(trainer/memory/memory_fit.py), so the form, the API and ``python -m trainer run`` refuse with one sentence.
"""

import pytest
from django.urls import reverse

from runs.launch_contract import bounds, describe_field
from runs.models import Run
from trainer.config import RunConfig
from trainer.staleness import asynchronous_layout_problem

pytestmark = pytest.mark.django_db


def api_launch(client, version, preset, **fields):
    return client.post("/api/runs/", {"name": "async run", "promptset_version_id": version.pk, "preset": preset,
                                      **fields}, content_type="application/json")


def test_eta_and_the_rollout_pool_are_bounded_per_preset():
    assert (bounds("h100x8")["max_staleness"].describe(), bounds("h100x8")["rollout_gpus"].describe()) == (
        "0 to 2", "0 to 7")
    assert (bounds("cpu-smoke")["max_staleness"].describe(), bounds("cpu-smoke")["rollout_gpus"].describe()) == (
        "0 to 2", "0 to 0")
    assert "h100x8 0 to 2" in describe_field("max_staleness")


def test_the_api_refuses_eta_above_the_presets_bound_on_its_field(alices_client, promptset_version, dispatched):
    response = api_launch(alices_client, promptset_version, "cpu-smoke", max_staleness=3)
    assert response.status_code == 422
    assert response.json()["field_errors"] == {
        "max_staleness": ["must be from 0 to 2 for the cpu-smoke preset (got 3)"]}
    assert Run.objects.count() == 0 and dispatched == []


def test_the_api_refuses_a_gpu_run_with_no_rollout_pool_on_the_pools_field(alices_client, promptset_version,
                                                                          dispatched):
    response = api_launch(alices_client, promptset_version, "h100x8", max_staleness=1)
    assert response.status_code == 422
    expected = asynchronous_layout_problem(RunConfig.from_preset("h100x8", {"rollout": {"max_staleness": 1}}))
    assert response.json()["field_errors"] == {"rollout_gpus": [expected]}
    assert Run.objects.count() == 0 and dispatched == []


def test_the_form_shows_why_an_idle_rollout_pool_is_refused_on_its_field(alices_client, promptset_version, dispatched):
    response = alices_client.post(reverse("runs:new"), {
        "name": "async run", "promptset_version": promptset_version.pk, "preset": "h100x8", "kind": "rl",
        "rollout_gpus": 2})
    assert response.status_code == 200
    [message] = response.context["form"].errors["rollout_gpus"]
    assert message == asynchronous_layout_problem(RunConfig.from_preset("h100x8", {"cluster": {"rollout_gpus": 2}}))
    assert "would sit idle" in message
    assert Run.objects.count() == 0 and dispatched == []


def test_an_asynchronous_cpu_run_within_its_bound_is_launched_with_its_eta(alices_client, promptset_version,
                                                                           dispatched):
    response = api_launch(alices_client, promptset_version, "cpu-smoke", max_staleness=2)
    assert response.status_code == 201, response.json()
    assert Run.objects.get().config["rollout"]["max_staleness"] == 2


# 2 is verl's own 6 + 2 layout: the recipe's 32-prompt mini-batch splits unevenly over 6 learner ranks, which is
# exact (tests/learning/test_uneven_rank_shares_train_as_one_process.py); 4 splits it evenly.
@pytest.mark.parametrize("rollout_gpus", [2, 4])
def test_a_well_laid_out_asynchronous_gpu_run_is_launched_with_its_pool(alices_client, promptset_version, dispatched,
                                                                        rollout_gpus):
    response = api_launch(alices_client, promptset_version, "h100x8", max_staleness=1, rollout_gpus=rollout_gpus)
    assert response.status_code == 201, response.json()
    cluster = Run.objects.get().config["cluster"]
    assert (cluster["num_gpus"], cluster["rollout_gpus"]) == (8, rollout_gpus)
